"""Parse nccl-tests output (``all_reduce_perf`` and friends) into typed runs.

Formats handled, all seen in real logs (tests/data/nccl-tests/SOURCES.md):

- the text table of every nccl-tests version since 2019: the ``error`` column (float max error)
  of the old format and the ``#wrong`` count of the new one; with or without ``redop``/``root``
  columns; several runs in one file; per-iteration columns (``-I``) and timestamps (``-S``);
- noise around it: ``kubectl``/ssh/shell-trace lines, ``NCCL INFO`` lines from every rank, and
  Open MPI ``--tag-output`` prefixes (``[1,0]<stdout>:``), which mpirun also re-inserts inside a
  row at every separate write;
- runs that stop early: a CUDA/NCCL failure in the middle of a row, a missing footer;
- the JSON file of ``-J/--output_file`` (nccl-tests >= 2.16, ``"version": 2`` in
  src/util.cu).

Anything that looks like a data row but does not parse is an :class:`InputError` naming the file
and line; a file with no table at all is one too.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gpuscale import files
from gpuscale.errors import InputError, require
from gpuscale.measure.results import CollectiveSample

# Program name fragments (normalised: lowercase, no '_' or '-'), longest first so that
# "allreduce" wins over "reduce".
_OP_NAMES: tuple[tuple[str, str], ...] = (
    ("reducescatter", "reduce_scatter"),
    ("allreduce", "all_reduce"),
    ("allgather", "all_gather"),
    ("hypercube", "hypercube"),
    ("broadcast", "broadcast"),
    ("alltoall", "all_to_all"),
    ("sendrecv", "send_recv"),
    ("scatter", "scatter"),
    ("gather", "gather"),
    ("reduce", "reduce"),
)

# Old-format validation (nccl-tests common.cu before 2022, CheckData/DeltaMaxValue): a row failed
# when its max error exceeded DeltaMaxValue(type) * (nranks - 1).
_DELTA_MAX = {
    "half": 1e-2,
    "float16": 1e-2,
    "bfloat16": 1e-2,
    "float": 1e-5,
    "float32": 1e-5,
    "double": 1e-12,
    "float64": 1e-12,
}

_TAG = re.compile(r"\[\d+,\d+\]<std(?:out|err)>:")
_FAILURE = re.compile(r"\S*\s*Test (?:\w+ )?(?:failure|timeout)\b.*")
_NCCL_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+\S*)")
_TESTS_VERSION = re.compile(r"^#\s*nccl-tests version (\S+)")
_PROGRAM = re.compile(r"(?:Collective test starting:\s*|\b)(\w+)_perf\b")
_DEVICE = re.compile(
    r"^#\s+Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+\s+\[[^\]]*\]\s+(.+?)\s*$"
)
_INT = re.compile(r"^\d+$")
_NUMBER = re.compile(r"^-?(\d+\.?\d*(e[-+]?\d+)?|N/A)$", re.IGNORECASE)


@dataclass(frozen=True, kw_only=True, slots=True)
class Timing:
    """One half (out-of-place or in-place) of a row."""

    time_us: float
    algbw_gb_per_s: float
    busbw_gb_per_s: float
    wrong: int | None
    """Wrong elements (``#wrong``, or 1 where an old-format ``error`` exceeded its bound);
    ``None`` where the run did not check (``N/A``)."""
    p99_us: float | None = None
    cv: float | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Row:
    line: int
    size_bytes: int
    count: int
    dtype: str
    redop: str | None
    root: int | None
    out_of_place: Timing | None
    in_place: Timing | None


@dataclass(frozen=True, kw_only=True, slots=True)
class NcclTestsRun:
    """One nccl-tests invocation: its header, device list, rows and footer."""

    path: str
    line: int
    """Line of the run's ``# nThread`` header (1-based)."""
    op: str
    op_source: str
    """How ``op`` was found: ``program name``, ``file name``, ``bus-bandwidth factor``, ``--op``."""
    hosts: tuple[str, ...]
    """Host of each rank, in rank order."""
    device_names: tuple[str, ...]
    rows: tuple[Row, ...]
    tests_version: str | None = None
    nccl_version: str | None = None
    iters: int | None = None
    warmup_iters: int | None = None
    out_of_bounds: int | None = None
    avg_busbw_gb_per_s: float | None = None
    aborted: str | None = None
    """The failure message, where the run stopped early."""
    complete: bool = False
    """The footer (``Out of bounds values``/``Avg bus bandwidth``) was seen."""
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ranks(self) -> int:
        return len(self.hosts)

    @property
    def nodes(self) -> int:
        return len(set(self.hosts))

    @property
    def ranks_per_node(self) -> int:
        return max(self.hosts.count(h) for h in set(self.hosts))

    @property
    def level(self) -> str:
        return "intra" if self.nodes == 1 else "inter"

    @property
    def dtype(self) -> str:
        return self.rows[0].dtype if self.rows else ""

    @property
    def wrong_rows(self) -> tuple[Row, ...]:
        return tuple(
            r
            for r in self.rows
            if any(t is not None and t.wrong for t in (r.out_of_place, r.in_place))
        )

    def warnings(self) -> list[str]:
        """What a reader of this run must know before trusting its numbers."""
        where = f"{self.path}:{self.line}"
        out = list(self.notes)
        if self.aborted:
            out.append(f"{where}: run aborted after {len(self.rows)} rows: {self.aborted}")
        elif not self.complete:
            out.append(
                f"{where}: no footer (log ends after {len(self.rows)} rows); kept the rows it has"
            )
        bad = self.wrong_rows
        if bad:
            sizes = ", ".join(_size_text(r.size_bytes) for r in bad)
            out.append(
                f"{where}: wrong values at {len(bad)} sizes ({sizes}); those rows are "
                "flagged and left out of the fit"
            )
        if self.out_of_bounds:
            out.append(
                f"{where}: nccl-tests reports {self.out_of_bounds} out-of-bounds values (FAILED)"
            )
        return out

    def samples(self, *, in_place: bool = False) -> tuple[CollectiveSample, ...]:
        """Rows as :class:`CollectiveSample` (out-of-place by default, as published tables are)."""
        out = []
        for row in self.rows:
            t = row.in_place if in_place else row.out_of_place
            if t is None or row.size_bytes == 0:
                continue
            out.append(
                CollectiveSample(
                    op=self.op,
                    level=self.level,
                    ranks=self.ranks,
                    ranks_per_node=self.ranks_per_node,
                    size_bytes=row.size_bytes,
                    count=row.count,
                    dtype=row.dtype,
                    time_us=t.time_us,
                    algbw_gb_per_s=t.algbw_gb_per_s,
                    busbw_gb_per_s=t.busbw_gb_per_s,
                    p99_us=t.p99_us,
                    cv=t.cv,
                    wrong=t.wrong,
                    in_place=in_place,
                )
            )
        return tuple(out)


def _size_text(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def op_from_name(name: str) -> str | None:
    """The collective a program or file name refers to (``all_reduce_perf`` -> ``all_reduce``)."""
    key = re.sub(r"[-_\s]", "", Path(name).name.lower())
    for fragment, op in _OP_NAMES:
        if fragment in key:
            return op
    return None


# --------------------------------------------------------------------------------------------
# text format


@dataclass(kw_only=True)
class _Table:
    """Column layout of one table, from its ``# size count type ...`` header line."""

    prefix: list[str]
    group: list[str]
    groups: int
    timestamp: bool

    @classmethod
    def from_header(cls, tokens: list[str], where: str) -> _Table:
        timestamp = tokens[-1] == "timestamp"
        if timestamp:
            tokens = tokens[:-1]
        starts = [i for i, t in enumerate(tokens) if t in ("time", "cputime")]
        if not starts or tokens[:2] != ["size", "count"]:
            raise InputError(f"{where}: column header without size/count/time columns")
        prefix = tokens[: starts[0]]
        width = (starts[1] - starts[0]) if len(starts) > 1 else len(tokens) - starts[0]
        group = tokens[starts[0] : starts[0] + width]
        return cls(prefix=prefix, group=group, groups=len(starts), timestamp=timestamp)

    @property
    def width(self) -> int:
        return len(self.prefix) + self.groups * len(self.group) + (2 if self.timestamp else 0)


@dataclass(kw_only=True)
class _Builder:
    path: str
    line: int
    program: str | None
    tests_version: str | None
    nccl_version: str | None
    iters: int | None = None
    warmup_iters: int | None = None
    hosts: list[str] = field(default_factory=list)
    device_names: list[str] = field(default_factory=list)
    table: _Table | None = None
    rows: list[Row] = field(default_factory=list)
    out_of_bounds: int | None = None
    avg_busbw: float | None = None
    aborted: str | None = None
    complete: bool = False


def _number(text: str, where: str, what: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InputError(f"{where}: '{text}' is not a number ({what} column)") from None


def _timing(names: list[str], values: list[str], dtype: str, ranks: int, where: str) -> Timing:
    got = dict(zip(names, values, strict=True))
    wrong: int | None = None
    if "#wrong" in got and got["#wrong"] != "N/A":
        wrong = int(_number(got["#wrong"], where, "#wrong"))
    elif "error" in got and got["error"] != "N/A":
        bound = _DELTA_MAX.get(dtype, 0.0) * max(ranks - 1, 1)
        wrong = int(_number(got["error"], where, "error") > bound)
    time_key = "time" if "time" in got else "cputime"
    cv = got.get("i_cv%")
    return Timing(
        time_us=_number(got[time_key], where, "time"),
        algbw_gb_per_s=_number(got["algbw"], where, "algbw"),
        busbw_gb_per_s=_number(got["busbw"], where, "busbw"),
        wrong=wrong,
        p99_us=_number(got["i_p99"], where, "i_p99") if "i_p99" in got else None,
        cv=_number(cv, where, "i_cv%") / 100.0 if cv is not None else None,
    )


def _row(b: _Builder, tokens: list[str], number: int) -> Row:
    where = f"{b.path}:{number}"
    table = b.table
    if table is None:
        raise RuntimeError("data row outside a table")
    width, group, halves = table.width, len(table.group), table.groups
    if len(tokens) != width:
        raise InputError(
            f"{where}: data row has {len(tokens)} fields, the header has {width} "
            "(truncated or corrupted line?)"
        )
    head = dict(zip(table.prefix, tokens, strict=False))
    for key in ("size", "count"):
        if not _INT.match(head[key]):
            raise InputError(f"{where}: '{head[key]}' is not a whole number ({key} column)")
    dtype = head.get("type", "")
    rest = tokens[len(table.prefix) :]
    timings = [
        _timing(table.group, rest[i * group : (i + 1) * group], dtype, len(b.hosts), where)
        for i in range(halves)
    ]
    root = head.get("root")
    if root is not None and not re.match(r"^-?\d+$", root):
        raise InputError(f"{where}: '{root}' is not a whole number (root column)")
    out_of_place = timings[0] if halves == 2 else None
    return _checked(
        where,
        ranks=len(b.hosts),
        line=number,
        size_bytes=int(head["size"]),
        count=int(head["count"]),
        dtype=dtype,
        redop=head.get("redop"),
        root=int(root) if root is not None else None,
        out_of_place=out_of_place,
        in_place=timings[-1],
    )


TYPE_BYTES = {
    **dict.fromkeys(("int8", "uint8", "f8e4m3", "f8e5m2"), 1),
    **dict.fromkeys(("half", "bfloat16"), 2),
    **dict.fromkeys(("int32", "uint32", "float"), 4),
    **dict.fromkeys(("int64", "uint64", "double"), 8),
}
"""Bytes of one element of each nccl-tests ``type`` (``ncclDataType_t`` names as the tests print
them, nccl-tests ``src/common.cu`` ``test_typenames``)."""


def _checked(where: str, ranks: int | None = None, **fields: Any) -> Row:
    """A row whose timings are measurements: finite, bandwidths not negative, and a time above
    zero wherever bytes moved (a 0 us transfer would be an infinite bandwidth; the fit divides
    by it). Anything else is a corrupted log, refused with its line, not fitted as ok. The size
    agrees with count x type bytes: equal to it, or (gathers and scatters, whose size is the
    whole buffer and count one rank's share) at most ``ranks`` times it; a size of 10^26 bytes
    with a count of 512 MiB was fitted (a fuzz of the CLI, 2026-12-04)."""
    row = Row(**fields)
    width = TYPE_BYTES.get(row.dtype)
    if width is not None and row.count > 0:
        least = row.count * width
        most = least * max(ranks or 1, 1)
        if not least <= row.size_bytes <= most:
            raise InputError(
                f"{where}: size {row.size_bytes} bytes disagrees with count {row.count} of "
                f"{row.dtype} ({least} bytes); accepted: count x {width} bytes"
                + (f", up to x {ranks} ranks for gathers and scatters" if (ranks or 1) > 1 else "")
            )
    for half, t in (("out-of-place", row.out_of_place), ("in-place", row.in_place)):
        if t is None:
            continue
        figures = {"time": t.time_us, "algbw": t.algbw_gb_per_s, "busbw": t.busbw_gb_per_s}
        for name, value in figures.items():
            if not math.isfinite(value) or value < 0:
                raise InputError(
                    f"{where}: {half} {name} {value} is not a measurement; accepted: a "
                    "finite number, not negative"
                )
        if row.size_bytes > 0 and t.time_us <= 0:
            raise InputError(
                f"{where}: {half} time {t.time_us} us for {row.size_bytes} bytes is not a "
                "measurement; accepted: a time above zero"
            )
    return row


def _looks_like_row(tokens: list[str], table: _Table) -> bool:
    """A data row, or a corrupted one (to be reported), rather than noise another process
    printed into the table (those are skipped)."""
    if _INT.match(tokens[0]):
        return True
    numeric = sum(bool(_NUMBER.match(t)) for t in tokens)
    return len(tokens) >= table.width - len(table.group) and 2 * numeric >= len(tokens)


def _header_fields(line: str) -> tuple[int | None, int | None]:
    warm = re.search(r"warmup iters:\s*(\d+)", line)
    iters = re.search(r"(?<!warmup )(?<!agg )iters:\s*(\d+)", line)
    return (int(iters.group(1)) if iters else None, int(warm.group(1)) if warm else None)


def parse_text(text: str, path: str = "<log>", op: str | None = None) -> list[NcclTestsRun]:
    """Every run in a nccl-tests text log. ``op`` overrides the collective's name."""
    runs: list[NcclTestsRun] = []
    builder: _Builder | None = None
    program: str | None = None
    tests_version: str | None = None
    nccl_version: str | None = None

    def close() -> None:
        nonlocal builder
        if builder is not None:
            runs.append(_finish(builder, op))
            builder = None

    for number, raw in enumerate(text.splitlines(), start=1):
        where = f"{path}:{number}"
        line = _TAG.sub("", raw).rstrip()
        if "NCCL INFO" in line or "NCCL WARN" in line:
            if found := _NCCL_VERSION.search(line):
                if builder is None:
                    nccl_version = nccl_version or found.group(1)
                elif builder.nccl_version is None:
                    builder.nccl_version = found.group(1)
            continue
        stripped = line.strip()
        if not stripped:
            continue
        if m := _TESTS_VERSION.match(stripped):
            close()
            tests_version = m.group(1)
            continue
        if stripped.startswith("Running:") or "Collective test starting" in stripped:
            close()
            found = _PROGRAM.search(stripped)
            program = found.group(1) if found else program
            continue
        if stripped.startswith("# nThread"):
            close()
            iters, warm = _header_fields(stripped)
            builder = _Builder(
                path=path,
                line=number,
                program=program,
                tests_version=tests_version,
                nccl_version=nccl_version,
                iters=iters,
                warmup_iters=warm,
            )
            program = tests_version = nccl_version = None
            continue
        if m := _NCCL_VERSION.search(stripped):
            if builder is not None:
                builder.nccl_version = m.group(1)
            else:
                nccl_version = m.group(1)
            continue
        if builder is None:
            continue
        if failure := _FAILURE.search(stripped):
            builder.aborted = builder.aborted or failure.group(0).strip()
            continue
        if stripped.startswith("#"):
            _header_line(builder, stripped, where)
            continue
        tokens = stripped.split()
        if builder.table is None or builder.complete or not _looks_like_row(tokens, builder.table):
            continue
        builder.rows.append(_row(builder, tokens, number))
    close()
    if not runs:
        raise InputError(
            f"{path}: no nccl-tests table found (expected a '# nThread ... "
            "minBytes ... maxBytes' header line and a '# size count type ...' "
            "column line); is this nccl-tests output?"
        )
    return runs


def _header_line(b: _Builder, line: str, where: str) -> None:
    if m := _DEVICE.match(line):
        rank = int(m.group(1))
        if rank != len(b.hosts):
            raise InputError(
                f"{where}: device list out of order (rank {rank} after {len(b.hosts)} ranks)"
            )
        b.hosts.append(m.group(2))
        b.device_names.append(m.group(3))
        return
    body = line.lstrip("#").split()
    if body[:2] == ["size", "count"]:
        b.table = _Table.from_header(body, where)
        return
    if line.startswith("# Out of bounds values"):
        value = line.split(":", 1)[1].split()
        b.out_of_bounds = int(_number(value[0], where, "out of bounds")) if value else None
        return
    if line.startswith("# Avg bus bandwidth"):
        value = line.split(":", 1)[1].split()
        b.avg_busbw = _number(value[0], where, "avg bus bandwidth") if value else None
        b.complete = True


def _finish(b: _Builder, op: str | None) -> NcclTestsRun:
    where = f"{b.path}:{b.line}"
    if not b.hosts:
        raise InputError(
            f"{where}: the run has no '# Using devices' rank list, so the number "
            "of ranks and nodes is unknown"
        )
    if b.table is None and not b.rows and not b.aborted:
        raise InputError(
            f"{where}: the run has no '# size count type ...' column header (truncated log?)"
        )
    name, source = _which_op(b, op)
    return NcclTestsRun(
        path=b.path,
        line=b.line,
        op=name,
        op_source=source,
        hosts=tuple(b.hosts),
        device_names=tuple(b.device_names),
        rows=tuple(b.rows),
        tests_version=b.tests_version,
        nccl_version=b.nccl_version,
        iters=b.iters,
        warmup_iters=b.warmup_iters,
        out_of_bounds=b.out_of_bounds,
        avg_busbw_gb_per_s=b.avg_busbw,
        aborted=b.aborted,
        complete=b.complete,
        notes=(f"{where}: collective taken to be {name} (from its {source})",)
        if source in ("file name", "bus-bandwidth factor")
        else (),
    )


def _which_op(b: _Builder, op: str | None) -> tuple[str, str]:
    named = [
        (name, source)
        for name, source in (
            (op_from_name(b.program) if b.program else None, "program name"),
            (op_from_name(b.path), "file name"),
        )
        if name
    ]
    if op:
        # the program name outranks the file name, so only the first that names one counts
        for name, source in named[:1]:
            require(
                name == op,
                f"{b.path}:{b.line}: --op {op} contradicts the log's {source} ({name}); "
                f"accepted: --op {name}, or no --op",
            )
        return op, "--op"
    if named:
        return named[0]
    return _op_from_factor(b.rows, len(b.hosts), f"{b.path}:{b.line}"), "bus-bandwidth factor"


def _op_from_factor(rows: Sequence[Row], n: int, where: str) -> str:
    """busbw/algbw is nccl-tests' bus factor (doc/PERFORMANCE.md), which names the collective
    family; the redop/root columns split the family."""
    ratios = [
        t.busbw_gb_per_s / t.algbw_gb_per_s
        for r in rows
        for t in (r.out_of_place, r.in_place)
        if t is not None and t.algbw_gb_per_s >= 1.0
    ]
    hint = "; name it with --op"
    if not ratios or n <= 2:
        raise InputError(
            f"{where}: cannot tell which collective this run is (no program name"
            f"{' and only 2 ranks' if n <= 2 else ''}){hint}"
        )
    ratio = float(np.median(ratios))
    factors = {"all_reduce": 2 * (n - 1) / n, "half": (n - 1) / n, "one": 1.0}
    family = min(factors, key=lambda k: abs(factors[k] - ratio))
    if abs(factors[family] - ratio) > 0.03 * factors[family]:
        raise InputError(
            f"{where}: busbw/algbw = {ratio:.3f} matches no nccl-tests bus factor "
            f"for {n} ranks{hint}"
        )
    redop = rows[0].redop if rows else None
    root = rows[0].root if rows else None
    reduces = redop not in (None, "none")
    if family == "all_reduce":
        return "all_reduce"
    if family == "half" and reduces:
        return "reduce_scatter"
    if family == "one" and root is not None and root >= 0:
        return "reduce" if reduces else "broadcast"
    raise InputError(
        f"{where}: busbw/algbw = {ratio:.3f} fits several collectives "
        f"({'all_gather or alltoall' if family == 'half' else 'sendrecv or others'})"
        f"{hint}"
    )


# --------------------------------------------------------------------------------------------
# JSON format (nccl-tests -J FILE.json)


def _json_timing(raw: Any, where: str) -> Timing | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise InputError(f"{where}: a result's timing must be an object")
    try:
        time = raw["time"] if "time" in raw else raw["cpu_time"]
        wrong = raw.get("nwrong")
        return Timing(
            time_us=float(time),
            algbw_gb_per_s=float(raw["alg_bw"]),
            busbw_gb_per_s=float(raw["bus_bw"]),
            wrong=None if wrong is None else int(float(wrong)),
            p99_us=None,
            cv=None,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{where}: malformed timing ({type(exc).__name__}: {exc})") from None


def parse_json(text: str, path: str = "<json>", op: str | None = None) -> list[NcclTestsRun]:
    """A nccl-tests ``-J`` JSON report (one run)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{path}:{exc.lineno}: not valid JSON ({exc.msg}); a nccl-tests JSON "
            "report that ends early was cut off before the run finished"
        ) from None
    if not isinstance(doc, Mapping) or "results" not in doc or "config" not in doc:
        raise InputError(
            f"{path}: not an nccl-tests JSON report; accepted: a -J report with 'config' and "
            "'results'"
        )
    config = doc["config"]
    devices = config.get("devices") if isinstance(config, Mapping) else None
    if not isinstance(devices, list) or not devices:
        raise InputError(f"{path}: 'config.devices' is missing; cannot count ranks and nodes")
    hosts = [str(d.get("hostname", "")) for d in devices]
    names = [str(d.get("device_info", "")) for d in devices]
    rows = []
    for i, raw in enumerate(doc["results"] or ()):
        where = f"{path}: results[{i}]"
        if not isinstance(raw, Mapping):
            raise InputError(f"{where}: must be an object")
        try:
            root = str(raw.get("root", "")).strip()
            rows.append(
                _checked(
                    where,
                    ranks=len(devices),
                    line=i,
                    size_bytes=int(raw["size"]),
                    count=int(raw["count"]),
                    dtype=str(raw["type"]),
                    redop=str(raw.get("redop")),
                    root=int(root) if root else None,
                    out_of_place=_json_timing(raw.get("out_of_place"), where),
                    in_place=_json_timing(raw.get("in_place"), where),
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{where}: malformed result ({type(exc).__name__}: {exc})") from None
    args = doc.get("args") or []
    program = Path(str(args[0])).name if args else None
    b = _Builder(
        path=path,
        line=1,
        program=program,
        tests_version=None,
        nccl_version=_nccl_code(doc.get("nccl_version")),
        iters=config.get("iterations"),
        warmup_iters=config.get("warmup_iters"),
        hosts=hosts,
        device_names=names,
        rows=rows,
    )
    bounds = doc.get("out_of_bounds")
    b.out_of_bounds = int(bounds["count"]) if isinstance(bounds, Mapping) else None
    avg = doc.get("average_bus_bandwidth")
    b.avg_busbw = float(avg["bandwidth"]) if isinstance(avg, Mapping) else None
    b.complete = avg is not None
    errors = doc.get("errors") or []
    b.aborted = "; ".join(str(e) for e in errors) or None
    return [_finish(b, op)]


def _nccl_code(code: Any) -> str | None:
    # NCCL_VERSION_CODE: major*10000 + minor*100 + patch since 2.9 (nccl.h)
    if not isinstance(code, int) or code <= 0:
        return None
    return f"{code // 10000}.{code // 100 % 100}.{code % 100}"


# --------------------------------------------------------------------------------------------


def parse(text: str, path: str = "<log>", op: str | None = None) -> list[NcclTestsRun]:
    """Text or JSON, told apart by the first character."""
    if text.lstrip().startswith("{"):
        return parse_json(text, path, op)
    return parse_text(text, path, op)


def parse_files(paths: Iterable[str | Path], op: str | None = None) -> list[NcclTestsRun]:
    runs: list[NcclTestsRun] = []
    for p in paths:
        path = Path(p)
        text = files.read_text(path, label="nccl-tests log", errors="replace")
        runs.extend(parse(text, str(path), op))
    return runs
