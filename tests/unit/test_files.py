"""Files a user names (gpuscale.files): regular files only, a size cap, no hang on a FIFO, no
traceback on a name too long, no folder created behind the user's back; and the regressions of
issue 12's adversarial pass that concern them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuscale import catalog, files
from gpuscale.cli.main import main
from gpuscale.costmodel.profile import load_profile
from gpuscale.errors import InputError
from gpuscale.measure import nccl_tests, sources
from gpuscale.measure.bench_setup import check_host_memory, choose_launch, rank_buffer_bytes
from gpuscale.measure.trace import analyze

pytestmark = pytest.mark.timeout(60)  # a FIFO read that blocks is a failure, not a hang

LOGS = Path(__file__).resolve().parents[1] / "data" / "nccl-tests"
H100 = LOGS / "a100-2node-allreduce-oci-oke.log"
LONG = "x" * 5000


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe.json"
    os.mkfifo(path)
    return path


def _rejected(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpuscale: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


# ------------------------------------------------------------------------------ the helper


def test_regular_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_text("héllo")
    assert files.read_text(path, label="x") == "héllo"


@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_non_regular_inputs_are_refused_at_once(kind: str, fifo: Path, tmp_path: Path) -> None:
    path = {"fifo": fifo, "device": Path("/dev/zero"), "directory": tmp_path}[kind]
    word = {"fifo": "FIFO", "device": "device", "directory": "directory"}[kind]
    with pytest.raises(InputError, match=f"is a {word}.*accepted: a regular file") as exc:
        files.read_bytes(path, label="config.json", field="model")
    assert exc.value.field == "model"


def test_read_is_capped(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    path.write_bytes(b"0" * (2 * files.MiB + 1))
    with pytest.raises(InputError, match="larger than 2 MiB"):
        files.read_bytes(path, label="log", max_bytes=2 * files.MiB)
    assert len(files.read_bytes(path, label="log", max_bytes=3 * files.MiB)) == 2 * files.MiB + 1


def test_name_too_long_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="File name too long"):
        files.read_text(tmp_path / LONG, label="profile")
    with pytest.raises(InputError, match="File name too long"):
        files.output_path(tmp_path / LONG, label="--html")
    assert not files.exists(tmp_path / LONG)


def test_binary_input_names_what_is_expected(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(InputError, match="not a text file; expected a config"):
        files.read_text(path, label="config.json", expected="a config.json")


@pytest.mark.parametrize("kind", ["missing folder", "fifo", "device", "directory"])
def test_bad_output_paths_are_refused(kind: str, fifo: Path, tmp_path: Path) -> None:
    path = {
        "missing folder": tmp_path / "no" / "such" / "out.html",
        "fifo": fifo,
        "device": Path("/dev/null"),
        "directory": tmp_path,
    }[kind]
    with pytest.raises(InputError) as exc:
        files.output_path(path, label="--html", field="html")
    assert exc.value.field == "html" and f"--html '{path}'" in str(exc.value)
    assert not (tmp_path / "no").exists()  # never created silently


def test_write_is_whole_or_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "profile.yaml"
    target.write_text("old")
    files.write_text(target, "new", label="-o")
    assert target.read_text() == "new"

    def broken(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(InputError, match="No space left on device"):
        files.write_text(target, "half", label="-o")
    assert target.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["profile.yaml"]  # no temporary left


# ------------------------------------------------------------------- every input it guards


def test_config_json_fifo_device_and_long_name(fifo: Path) -> None:
    with pytest.raises(InputError, match="FIFO"):
        catalog.model(str(fifo))
    with pytest.raises(InputError, match="unknown model"):
        catalog.model(LONG)  # a model id longer than a file name: not a path, not a model
    with pytest.raises(InputError, match="File name too long"):
        catalog.model(LONG + ".json")


def test_fit_dev_zero_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    link = tmp_path / "config.json"
    link.symlink_to("/dev/zero")
    assert "is a device" in _rejected(capsys, "fit", str(link), "--gpu", "h100-sxm")
    assert "is a device" in _rejected(capsys, "fit", "/dev/zero", "--gpu", "h100-sxm")


def test_profile_fifo_and_long_name(fifo: Path, tmp_path: Path) -> None:
    prof = fifo.with_suffix(".yaml")
    fifo.rename(prof)
    with pytest.raises(InputError, match="FIFO"):
        load_profile(str(prof))
    with pytest.raises(InputError, match="File name too long"):
        load_profile(str(tmp_path / (LONG + ".yaml")))


def test_nccl_tests_log_and_calibrate_from_are_guarded(fifo: Path) -> None:
    for read in (nccl_tests.parse_files, sources.load):
        for path in (fifo, Path("/dev/zero")):
            with pytest.raises(InputError, match="accepted: a regular file"):
                read([path])


def test_trace_fifo_is_refused(fifo: Path) -> None:
    with pytest.raises(InputError, match="FIFO"):
        analyze([fifo])


@pytest.mark.parametrize("flag", ["-o", "--html"])
def test_import_output_to_a_fifo_or_missing_folder(
    capsys: pytest.CaptureFixture[str], fifo: Path, tmp_path: Path, flag: str
) -> None:
    err = _rejected(capsys, "import", "nccl-tests", str(H100), flag, str(fifo))
    assert "FIFO" in err
    missing = tmp_path / "nope" / "out"
    assert "does not exist" in _rejected(
        capsys, "import", "nccl-tests", str(H100), flag, str(missing)
    )
    assert not missing.parent.exists()


# ------------------------------------------------------- nccl-tests rows that are not data


def _corrupt(tmp_path: Path, value: str) -> Path:
    """The H100 log with the out-of-place time of its 1 MiB row replaced by ``value``."""
    lines = H100.read_text().splitlines()
    for i, line in enumerate(lines):
        tokens = line.split()
        if tokens and tokens[0] == "1048576":
            old = tokens[5]
            lines[i] = line.replace(f" {old} ", f" {value.rjust(len(old))} ", 1)
            break
    else:
        raise AssertionError("no 1 MiB row")
    path = tmp_path / f"time-{value}.log"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("value", ["0", "0.00", "nan", "-200", "inf"])
def test_row_without_a_real_time_is_refused_and_nothing_written(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, value: str
) -> None:
    log = _corrupt(tmp_path, value)
    out = tmp_path / "cal.yaml"
    err = _rejected(capsys, "import", "nccl-tests", str(log), "-o", str(out))
    assert "is not a measurement" in err and f"{log}:" in err
    assert not out.exists()


def test_bench_json_with_a_zero_time_is_refused(tmp_path: Path) -> None:
    doc = (
        '{"kind": "gpuscale.bench.collectives", "samples": [{"op": "all_reduce", "level": '
        '"intra", "ranks": 2, "ranks_per_node": 2, "size_bytes": 1024, "count": 256, "dtype": '
        '"float32", "time_us": 0, "algbw_gb_per_s": 1, "busbw_gb_per_s": 1}]}'
    )
    from gpuscale.measure.results import COLLECTIVES_KIND

    path = tmp_path / "bench.json"
    path.write_text(doc.replace("gpuscale.bench.collectives", COLLECTIVES_KIND))
    with pytest.raises(InputError, match="time_us 0 is not a measurement"):
        sources.load([path])


# ---------------------------------------------------------- bench sizes vs host memory


def test_huge_sweep_is_refused_before_a_rank_starts() -> None:
    launch = choose_launch(nproc=None, backend="auto", gpus=0)
    assert (launch.ranks, launch.backend) == (2, "gloo")
    sizes = [2**30 * 64]
    with pytest.raises(InputError, match="host memory") as exc:
        check_host_memory(["all_reduce"], sizes, "float32", launch.ranks, available=2**34)
    assert exc.value.field == "sizes"
    check_host_memory(["all_reduce"], [2**20], "float32", 2, available=2**34)
    check_host_memory(["all_reduce"], sizes, "float32", 2, available=None)  # unknown: no guess


def test_rank_buffers_follow_the_op() -> None:
    n, size = 4, 2**20
    assert rank_buffer_bytes("all_reduce", size, "float32", n) == size
    assert rank_buffer_bytes("send_recv", size, "float32", n) == 2 * size
    assert rank_buffer_bytes("all_gather", size, "float32", n) == size + size // n
    assert rank_buffer_bytes("all_to_all", size, "float32", n) == 2 * size


def test_bench_cli_checks_memory_first(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    err = _rejected(capsys, "bench", "collectives", "--sizes", "1K:100T", "--factor", "1000")
    assert "host memory" in err


def test_doctor_and_bench_share_the_launch_rule() -> None:
    assert choose_launch(nproc=None, backend="auto", gpus=8) == choose_launch(
        nproc=8, backend="nccl", gpus=8
    )
    assert choose_launch(nproc=None, backend="auto", gpus=1).backend == "gloo"
    with pytest.raises(InputError, match="--nproc must be >= 2"):
        choose_launch(nproc=1, backend="auto", gpus=0)
