"""``gpuscale --help`` lists every command with its short help from one table, loading no
command's module; ``gpuscale infer ...`` loads infer's alone; every command's ``--help`` works.
Start-up cost is compared in modules imported, never in wall time."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

import click

from gpuscale.cli import main as entry

Gpuscale = Callable[..., subprocess.CompletedProcess[str]]

HEAVY = {
    "plotly",
    "gpuscale.cluster.simulate",
    "gpuscale.api.cluster",
    "gpuscale.api.measure",
    "gpuscale.measure.trace",
    "gpuscale.planner.serving.search",
    "gpuscale.report.html",
}
"""Modules a listing of the commands has no use for: the cluster simulator, plotly, the trace
analysis, the serving search, the HTML report."""


def _loaded_after(code: str) -> set[str]:
    probe = code + "\nimport sys\nprint('\\n'.join(sorted(sys.modules)))\n"
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return set(proc.stdout.split())


def _after_main(*argv: str) -> set[str]:
    code = "import contextlib, io\nfrom gpuscale.cli.main import main\n"
    code += f"with contextlib.redirect_stdout(io.StringIO()):\n    main({list(argv)!r})"
    return _loaded_after(code)


COMMAND_MODULES = set(entry.COMMAND_MODULES.values())


def test_help_loads_no_command() -> None:
    started = _loaded_after("import gpuscale.cli.main")
    for argv in (["--help"], []):  # `gpuscale` alone shows the help too
        listed = _after_main(*argv)
        assert not HEAVY & listed, sorted(HEAVY & listed)
        assert not COMMAND_MODULES & listed, sorted(COMMAND_MODULES & listed)
        # formatting the help may import a module or two of the standard library, no more
        assert len(listed - started) <= 5, sorted(listed - started)


def test_a_command_loads_its_own_module_alone() -> None:
    for words, module in (
        (["infer"], "gpuscale.cli.infer"),
        (["fit"], "gpuscale.cli.fit"),
        (["calibrate", "run"], "gpuscale.cli.calibrate_run"),
    ):
        loaded = _after_main(*words, "--help")
        assert module in loaded
        others = {m for m in COMMAND_MODULES | set(entry.SUBCOMMAND_MODULES.values())} - {module}
        assert not others & loaded, (words, sorted(others & loaded))
        assert not {"gpuscale.cluster.simulate", "gpuscale.measure.trace"} & loaded, words


def test_every_command_is_listed_with_its_short_help(gpuscale: Gpuscale) -> None:
    """The listing from the table is the one click makes from the commands themselves (their
    docstrings), so the table cannot drift from them."""
    proc = gpuscale("--help")
    assert proc.returncode == 0, proc.stderr
    listed = proc.stdout.split("Commands:\n", 1)[1]
    eager = click.Group(
        "gpuscale",
        commands={name: entry._load(module) for name, module in entry.COMMAND_MODULES.items()},
    )
    ctx = click.Context(eager, info_name="gpuscale")
    formatter = ctx.make_formatter()
    eager.format_commands(ctx, formatter)
    assert listed == formatter.getvalue().split("Commands:\n", 1)[1]
    names = [line.split()[0] for line in listed.splitlines() if line.startswith("  ")]
    assert names == sorted(entry.COMMAND_MODULES)
    for name, (module, short) in entry.COMMANDS.items():
        assert entry._load(module).get_short_help_str(10**6) == short, name


def test_every_command_help_works() -> None:
    """``--help`` of every command and sub-command exits 0 with its usage line (one process
    for all of them: each start is the same)."""
    words: list[list[str]] = []
    for name, module in entry.COMMAND_MODULES.items():
        words.append([name])
        command = entry._load(module)
        if isinstance(command, click.Group):
            words.extend([name, sub] for sub in command.list_commands(click.Context(command)))
    words.extend(list(pair) for pair in entry.SUBCOMMAND_MODULES)
    code = (
        "import contextlib, io, json, sys\n"
        "from gpuscale.cli.main import main\n"
        "out = []\n"
        f"for words in {words!r}:\n"
        "    text = io.StringIO()\n"
        "    with contextlib.redirect_stdout(text):\n"
        "        code = main([*words, '--help'])\n"
        "    out.append([words, code, text.getvalue().splitlines()[0]])\n"
        "print(json.dumps(out))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)
    assert len(results) == len(words) >= len(entry.COMMAND_MODULES) + 1
    for said, code, usage in results:
        assert code == 0, said
        assert usage.startswith(f"Usage: gpuscale {' '.join(said)}"), (said, usage)
