"""The command line's parser: one function per command adds its sub-parser, and `parse` reads the arguments.

Apart from `ablate.cli` so that the commands read there as what they do, and what each accepts reads here. A
bad argument is one line and exit status 2, as every bad input is (`Parser.error`).
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import NoReturn

from ablate.stats.diagnosis import UNLIKELY_BELOW
from ablate.workload.registry import unknown

Commands = argparse._SubParsersAction  # what `add_subparsers` returns: each command's parser is added to it


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2, as for every bad input
        if choice := re.match(r"argument (\S+): invalid choice: '(.*)' \(choose from (.*)\)$", message):
            valid = re.findall(r"'([^']*)'", choice[3])  # argparse's own message, with the nearest choice added
            message = f"argument {choice[1]}: {unknown('choice', [choice[2]], valid)}"
        from ablate.render.terminal import message as wrapped_message

        self.exit(2, wrapped_message(f"ablate: error: {message} (see {self.prog} --help)") + "\n")


def parse(argv: list[str] | None, results: Path) -> argparse.Namespace:
    """The command and its arguments; `results` is every --results' default. Exits 2 on an argument it does not
    know, said by the command's own parser."""
    parser, commands = build(results)
    args, extra = parser.parse_known_args(argv)
    if extra:  # said by the command's own parser, so that its --help is the one pointed to
        sub = commands.choices[args.command]
        flags = [e for e in extra if e.startswith("-")]
        sub.error(unknown("option", flags[:1], set(re.findall(r"(?<![\w-])--?[a-z][\w-]*", sub.format_usage())))
                  if flags else f"unrecognized arguments: {' '.join(extra)}")
    return args


def build(results: Path) -> tuple[Parser, Commands]:
    """`ablate`'s parser and its commands, in the order `ablate --help` lists them."""
    parser = Parser(prog="ablate", description="Measure which PyTorch training speed-ups are worth it.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    _add_run(commands, results)
    _add_worker(commands, results)
    _add_stored(commands, "report", "rebuild the analysis and report from stored trials (runs nothing)", results)
    _add_stored(commands, "sync", "log the stored trials that have no MLflow run yet (after MLflow was unreachable)",
                results)
    _add_compare(commands, results)
    commands.add_parser("list", help="list studies and strategies")
    _add_new(commands)
    _add_diagnose(commands, results)
    _add_ui(commands, results)
    return parser, commands


def _add_run(commands: Commands, results: Path) -> None:
    run = _study_command(commands, "run", "run a study (resumes where it stopped)")
    _add_search(run)
    _add_design(run)
    run.add_argument("--trials", type=_positive, metavar="N", help="number of trials for --search optuna")
    run.add_argument("--workers", type=_positive, default=1, metavar="N",
                     help="worker processes on this machine sharing --storage (a server database); "
                          "with --device cuda, worker i runs on cuda:i (default: %(default)s)")
    run.add_argument("--explain", action="store_true",
                     help="print the measurement method in full before the run (blocks, racing, "
                          "accuracy seeds); the report's method section says it too")
    run.add_argument("--full-table", action="store_true",
                     help="print every column of the results table (wide; the CSV always has them) "
                          "instead of the 100-column summary")
    _add_where(run, results, "default: an SQLite file under results/STUDY/", "cpu or cuda[:N]")


def _add_worker(commands: Commands, results: Path) -> None:
    worker = _study_command(commands, "worker", "run grid trials of a study shared through a server database, "
                                                "alongside other workers on any machine")
    worker.set_defaults(search="grid", trials=None, workers=1)  # workers share the grid's combinations
    # `run --workers N` prints the table and report once, when all of its workers have finished
    worker.add_argument("--no-summary", action="store_true", help=argparse.SUPPRESS)
    _add_design(worker)
    _add_where(worker, results, "required: a server database, e.g. postgresql://user:password@host/db",
               "cpu or cuda[:N]", required=True)


def _add_stored(commands: Commands, name: str, text: str, results: Path) -> None:
    """`report` or `sync`: a command that reads a stored study back."""
    stored = _study_command(commands, name, text)
    _add_search(stored)
    _add_where(stored, results, "default: the SQLite file under results/STUDY/", "device type the trials ran on")


def _study_command(commands: Commands, name: str, text: str) -> argparse.ArgumentParser:
    command = commands.add_parser(name, help=text)
    command.add_argument("study", help="a name in studies/ or a path to a study file")
    return command


def _add_search(command: argparse.ArgumentParser) -> None:
    command.add_argument("--search", choices=("grid", "optuna"), default="grid",
                         help="grid: every combination; optuna: --trials N of them, chosen by TPE "
                              "(default: %(default)s)")


def _add_design(command: argparse.ArgumentParser) -> None:
    """--quick or --single-pass: a cheaper design than the whole table, each stored apart from the study's own."""
    design = command.add_mutually_exclusive_group()
    design.add_argument("--quick", action="store_true",
                        help="only what the answer needs: half the grid where its dimensions allow, the rest "
                             "predicted, and accuracy for the finalists only (the study setting protocol.quick); "
                             "stored apart from the whole table, so give it its own --results")
    design.add_argument("--single-pass", action="store_true",
                        help="measure every combination once against one baseline, with no blocks and no "
                             "racing (the design before blocks; its speed-ups carry no interval); stored "
                             "apart from the study's own protocol, so give it its own --results")


def design_flags(args: argparse.Namespace) -> tuple[str, ...]:
    """The design options a run was given, as `ablate worker` takes them again (`run --workers N`)."""
    return (("--quick",) if getattr(args, "quick", False) else ()) + (
        ("--single-pass",) if getattr(args, "single_pass", False) else ())


def _add_where(command: argparse.ArgumentParser, results: Path, storage_help: str, device_help: str,
               required: bool = False) -> None:
    """--storage, --device and --results: where a study command's trials are stored, run and reported."""
    command.add_argument("--storage", required=required, metavar="URL", help=f"Optuna storage URL ({storage_help})")
    command.add_argument("--device", help=f"{device_help} (default: cuda:0 where CUDA is available, else cpu)")
    command.add_argument("--results", type=Path, default=results, metavar="DIR",
                         help="results folder (default: %(default)s)")


def _add_compare(commands: Commands, results: Path) -> None:
    compare = commands.add_parser("compare", help="what changed between two studies of one workload (after an "
                                                  "upgrade, on another machine), row by row, with intervals")
    compare.add_argument("a", type=Path, metavar="A", help="the study before: a results folder, a study's folder in "
                                                           "it, or a report's summary.json")
    compare.add_argument("b", type=Path, metavar="B", help="the study after, given as A is")
    compare.add_argument("--study", help="the study to compare where a results folder holds several")
    compare.add_argument("--margin", type=_percent, default=None, metavar="PCT",
                         help="a row reads 'same' only where shown within +-PCT%% (default: 5)")
    compare.add_argument("--fail-above", type=_percent, default=None, metavar="PCT",
                         help="exit with status 1 where a row moved by more than PCT%% either way (for a CI job)")
    compare.add_argument("--pair-anyway", action="store_true",
                         help="compare studies of different workloads or device types (named as they are)")
    compare.add_argument("--out", type=Path, metavar="DIR",
                         help="where the page and change.json go (default: RESULTS/changes/A-vs-B)")
    compare.add_argument("--results", type=Path, default=results, metavar="DIR",
                         help="results folder, for the default --out (default: %(default)s)")


def _add_new(commands: Commands) -> None:
    new = commands.add_parser("new", help="write a commented study file for a model, ready to edit and run")
    new.add_argument("model", help="hf:ARCH (hf:llama), hf:PATH, timm:NAME, torchvision:NAME, a built-in model or "
                                   "package.module:Class")
    new.add_argument("--out", type=Path, metavar="FILE", help="where to write it (default: ./NAME.yaml)")


def _add_diagnose(commands: Commands, results: Path) -> None:
    diagnose = commands.add_parser("diagnose", help="profile the baseline alone (about a minute on a CPU): where its "
                                                    "step goes, and which strategies can help")
    diagnose.add_argument("target", metavar="STUDY_OR_MODEL",
                          help="a name in studies/, a path to a study file, or a model as `ablate new` takes it")
    diagnose.add_argument("--device", help="cpu or cuda[:N] (default: cuda:0 where CUDA is available, else cpu)")
    diagnose.add_argument("--write-study", type=Path, metavar="FILE",
                          help="write a study whose space holds the strategies that can help (a ceiling of "
                               f"x{UNLIKELY_BELOW:.2f} or more on this profile)")
    diagnose.add_argument("--results", type=Path, default=results, metavar="DIR",
                          help="results folder, for the log of library messages (default: %(default)s)")


def _add_ui(commands: Commands, results: Path) -> None:
    ui = commands.add_parser("ui", help="open the MLflow UI on 127.0.0.1")
    ui.add_argument("--port", type=_port, default=5000, help="port to serve on (default: %(default)s)")
    ui.add_argument("--results", type=Path, default=results, help="results folder (default: %(default)s)")


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return int(text)


def _percent(text: str) -> float:
    """A percentage as a fraction: "5" -> 0.05."""
    try:
        value = float(text.rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage (e.g. 5)") from None
    if not 0 < value < 100:
        raise argparse.ArgumentTypeError(f"{text}: a percentage above 0 and below 100")
    return value / 100


def _port(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number from 1 to 65535, got {text!r}")
    return int(text)
