"""``gpuscale`` entry point: one click group, one module per command.

Every user error ends as one line on stderr (``gpuscale: ...``) with exit code 2; tracebacks are
kept for bugs.
"""

from __future__ import annotations

import importlib
import os
import sys

import click

from gpuscale import __version__
from gpuscale.errors import InputError, RunFailure

COMMANDS: dict[str, tuple[str, str]] = {
    "advise-comm": (
        "gpuscale.cli.advise_comm",
        "Which DDP communication hook of gpuscale.runtime pays off for MODEL trained "
        "data-parallel on GPUS GPUs over the INTER fabric, and by how much.",
    ),
    "bench": (
        "gpuscale.cli.bench",
        "Measure collectives and matmuls with real torch.distributed and torch.",
    ),
    "calibrate": (
        "gpuscale.cli.calibrate",
        "Fit a calibration profile (per-level latency and bandwidth, GEMM efficiency curve) "
        "from the collective and matmul benchmarks, run now or read with --from.",
    ),
    "catalog": (
        "gpuscale.cli.catalog_cmd",
        "List catalog entries: gpus (default), links (fabrics) or models.",
    ),
    "cluster": (
        "gpuscale.cli.cluster",
        "Placement on a shared cluster: trace-driven simulation, synthetic traces, topology "
        "exports.",
    ),
    "doctor": (
        "gpuscale.cli.doctor",
        "Check torch/CUDA/NCCL, GPUs, NVLink/PCIe, NCCL_* and network settings, and run a "
        "short all-reduce and matmul.",
    ),
    "estimate": (
        "gpuscale.cli.estimate",
        "Predict one training step of MODEL on a cluster under one parallel plan.",
    ),
    "export": (
        "gpuscale.cli.export",
        "Write the plan as torchtitan, Megatron-LM, DeepSpeed, accelerate, Slurm, Kueue or "
        "Volcano files.",
    ),
    "fit": (
        "gpuscale.cli.fit",
        "Does MODEL (catalog id or config.json) fit on --gpu? Memory breakdown per GPU, "
        "verdict, and the smallest set-up that fits.",
    ),
    "import": ("gpuscale.cli.import_cmd", "Import measurements made by other tools."),
    "infer": (
        "gpuscale.cli.infer",
        "Time to first token, time per output token and throughput of serving MODEL.",
    ),
    "plan": (
        "gpuscale.cli.plan",
        "Search every parallel plan of MODEL on --gpus GPUs and rank what fits.",
    ),
    "scale": ("gpuscale.cli.scale", "Best plan of MODEL at 1, 2, 4, ..."),
    "serve": (
        "gpuscale.cli.serve",
        "A local web page: pick a model, GPU, fabric and GPU count (or a serving load) and see "
        "the verdict, the top plans, the curves and the memory, with the report and every "
        "export.",
    ),
    "trace": (
        "gpuscale.cli.trace",
        "Analyze PyTorch profiler traces: where the step time goes and why.",
    ),
}
"""Each command: the module that defines it (as ``command``, a click command or group) and its
short help, the first sentence of its docstring (held equal by tests/integration/
test_cli_help.py). Modules are imported on first use and ``gpuscale --help`` lists the commands
from this table alone, so neither pays for another command's imports (the cluster simulator,
plotly, torch-backed benchmarks)."""

COMMAND_MODULES: dict[str, str] = {name: module for name, (module, _) in COMMANDS.items()}

# Two-word commands whose first word is a command of its own: ``gpuscale calibrate run`` lives
# in its own module while ``gpuscale calibrate --from ...`` keeps working as before.
SUBCOMMAND_MODULES: dict[tuple[str, str], str] = {
    ("calibrate", "run"): "gpuscale.cli.calibrate_run",
}


def _load(module: str) -> click.Command:
    command = importlib.import_module(module).command
    if not isinstance(command, click.Command):
        raise TypeError(f"{module}.command is not a click command")
    return command


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMAND_MODULES)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMAND_MODULES.get(cmd_name)
        return None if module is None else _load(module)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands and their short help, from :data:`COMMANDS` (no command is loaded),
        shortened to the terminal's width as click shortens a command's own help."""
        limit = formatter.width - 6 - max(map(len, COMMANDS))  # click's Group.format_commands
        rows = [
            (name, click.Command(name, help=short).get_short_help_str(limit))
            for name, (_, short) in sorted(COMMANDS.items())
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        module = SUBCOMMAND_MODULES.get((name, args[1] if len(args) > 1 else ""))
        if module is not None:
            return f"{name} {args[1]}", _load(module), args[2:]
        if name and not name.startswith("-") and name not in COMMAND_MODULES:
            from gpuscale.errors import unknown

            raise unknown("command", name, COMMAND_MODULES)
        return super().resolve_command(ctx, args)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gpuscale")
def cli() -> None:
    """One GPU, one node, or a cluster? Plan, measure and run large-model training."""


def _one_line(text: str) -> str:
    return " ".join(text.split())


FLAGS: dict[str, str] = {
    "sequence_parallel": "--no-sequence-parallel",
    "flash_attention": "--no-flash-attention",
    "double_quant": "--no-double-quant",
    "weight_dtype": "--weights",
    "only": "--fit",  # calibrate run: the quantity to fit
    "model": "MODEL",  # the argument, not a flag
}
"""API arguments whose flag is not ``--`` + the argument with dashes."""


def flag_for(field: str) -> str:
    """The CLI flag of an API argument: ``gpus_per_node`` -> ``--gpus-per-node``."""
    return FLAGS.get(field, "--" + field.replace("_", "-"))


def _message(exc: InputError) -> str:
    """The error's line; one that does not name a flag gets its field's flag in front."""
    text = _one_line(str(exc))
    if exc.field and "--" not in text:
        return f"{flag_for(exc.field)}: {text}"
    return text


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return the exit code (0 ok, 1 failure found by a check, 2 bad input)."""
    try:
        result = cli.main(args=argv, prog_name="gpuscale", standalone_mode=False)
    except InputError as exc:
        click.echo(f"gpuscale: {_message(exc)}", err=True)
        return 2
    except RunFailure as exc:
        click.echo(f"gpuscale: {_one_line(str(exc))}", err=True)
        return 1
    except click.exceptions.NoArgsIsHelpError as exc:
        # `gpuscale` or `gpuscale bench` alone: show the help, as a bare group should.
        click.echo(exc.ctx.get_help() if exc.ctx is not None else cli.get_help(click.Context(cli)))
        return 2
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else "gpuscale"
        message = _one_line(exc.format_message()).rstrip(".")
        click.echo(
            f"gpuscale: {where.removeprefix('gpuscale ')}: {message}; see {where} --help", err=True
        )
        return 2
    except click.ClickException as exc:
        click.echo(f"gpuscale: {_one_line(exc.format_message())}", err=True)
        return exc.exit_code
    except click.Abort:
        click.echo("gpuscale: aborted", err=True)
        return 130
    except BrokenPipeError:
        # The reader closed the pipe (`| head`): what was asked for was delivered. Point stdout
        # at /dev/null so that the interpreter's last flush does not fail again on exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    return result if isinstance(result, int) else 0


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
