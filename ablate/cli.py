"""Command line: `ablate run | worker | report | sync | compare | list | ui | new | diagnose`. Entry points only:
parse, call, print. What a command does lives on its floor: the checks before anything is written in
`ablate.run.preflight`, `--workers N` in `ablate.run.workers`, a stored study read back for `report` and `sync` in
`ablate.run.stored_study`, `ablate new`'s study file in `ablate.config.scaffold`, `ablate diagnose` in
`ablate.run.diagnose`, two studies set side by side (`compare`) in `ablate.run.change`.

Imports are made where a command needs them: `ablate list` and `--help` import no torch (a second or more),
and library messages and warnings go to a log file in every command (`ablate.trial.library_log`).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import shlex
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from ablate.config.validate import StudyError
from ablate.stats.diagnosis import UNLIKELY_BELOW
from ablate.store.lock import Busy, study_lock
from ablate.trial import library_log
from ablate.workload.registry import unknown

if TYPE_CHECKING:
    from ablate.tracking.tracker import Tracker

RESULTS_DIR = Path(os.environ.get("ABLATE_RESULTS_DIR", "results"))


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2, as for every bad input
        if choice := re.match(r"argument (\S+): invalid choice: '(.*)' \(choose from (.*)\)$", message):
            valid = re.findall(r"'([^']*)'", choice[3])  # argparse's own message, with the nearest choice added
            message = f"argument {choice[1]}: {unknown('choice', [choice[2]], valid)}"
        from ablate.render.terminal import message as wrapped_message

        self.exit(2, wrapped_message(f"ablate: error: {message} (see {self.prog} --help)") + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(prog="ablate", description="Measure which PyTorch training speed-ups are worth it.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, text, storage_help, device_help in (
        ("run", "run a study (resumes where it stopped)",
         "default: an SQLite file under results/STUDY/", "cpu or cuda[:N]"),
        ("worker", "run grid trials of a study shared through a server database, alongside other workers "
                   "on any machine", "required: a server database, e.g. postgresql://user:password@host/db",
         "cpu or cuda[:N]"),
        ("report", "rebuild the analysis and report from stored trials (runs nothing)",
         "default: the SQLite file under results/STUDY/", "device type the trials ran on"),
        ("sync", "log the stored trials that have no MLflow run yet (after MLflow was unreachable)",
         "default: the SQLite file under results/STUDY/", "device type the trials ran on"),
    ):
        command = commands.add_parser(name, help=text)
        command.add_argument("study", help="a name in studies/ or a path to a study file")
        if name == "worker":  # workers share the grid's combinations
            command.set_defaults(search="grid", trials=None, workers=1)
            # `run --workers N` prints the table and report once, when all of its workers have finished
            command.add_argument("--no-summary", action="store_true", help=argparse.SUPPRESS)
        else:
            command.add_argument("--search", choices=("grid", "optuna"), default="grid",
                                 help="grid: every combination; optuna: --trials N of them, chosen by TPE "
                                      "(default: %(default)s)")
        if name in ("run", "worker"):
            command.add_argument("--single-pass", action="store_true",
                                 help="measure every combination once against one baseline, with no blocks and no "
                                      "racing (the design before blocks; its speed-ups carry no interval); stored "
                                      "apart from the study's own protocol, so give it its own --results")
        if name == "run":
            command.add_argument("--trials", type=_positive, metavar="N", help="number of trials for --search optuna")
            command.add_argument("--workers", type=_positive, default=1, metavar="N",
                                 help="worker processes on this machine sharing --storage (a server database); "
                                      "with --device cuda, worker i runs on cuda:i (default: %(default)s)")
            command.add_argument("--explain", action="store_true",
                                 help="print the measurement method in full before the run (blocks, racing, "
                                      "accuracy seeds); the report's method section says it too")
            command.add_argument("--full-table", action="store_true",
                                 help="print every column of the results table (wide; the CSV always has them) "
                                      "instead of the 100-column summary")
        command.add_argument("--storage", required=name == "worker", metavar="URL",
                             help=f"Optuna storage URL ({storage_help})")
        command.add_argument("--device", help=f"{device_help} (default: cuda:0 where CUDA is available, else cpu)")
        command.add_argument("--results", type=Path, default=RESULTS_DIR, metavar="DIR",
                             help="results folder (default: %(default)s)")
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
    compare.add_argument("--results", type=Path, default=RESULTS_DIR, metavar="DIR",
                         help="results folder, for the default --out (default: %(default)s)")
    commands.add_parser("list", help="list studies and strategies")
    new = commands.add_parser("new", help="write a commented study file for a model, ready to edit and run")
    new.add_argument("model", help="hf:ARCH (hf:llama), hf:PATH, timm:NAME, torchvision:NAME, a built-in model or "
                                   "package.module:Class")
    new.add_argument("--out", type=Path, metavar="FILE", help="where to write it (default: ./NAME.yaml)")
    diagnose = commands.add_parser("diagnose", help="profile the baseline alone (about a minute on a CPU): where its "
                                                    "step goes, and which strategies can help")
    diagnose.add_argument("target", metavar="STUDY_OR_MODEL",
                          help="a name in studies/, a path to a study file, or a model as `ablate new` takes it")
    diagnose.add_argument("--device", help="cpu or cuda[:N] (default: cuda:0 where CUDA is available, else cpu)")
    diagnose.add_argument("--write-study", type=Path, metavar="FILE",
                          help="write a study whose space holds the strategies that can help (a ceiling of "
                               f"x{UNLIKELY_BELOW:.2f} or more on this profile)")
    diagnose.add_argument("--results", type=Path, default=RESULTS_DIR, metavar="DIR",
                          help="results folder, for the log of library messages (default: %(default)s)")
    ui = commands.add_parser("ui", help="open the MLflow UI on 127.0.0.1")
    ui.add_argument("--port", type=_port, default=5000, help="port to serve on (default: %(default)s)")
    ui.add_argument("--results", type=Path, default=RESULTS_DIR, help="results folder (default: %(default)s)")
    args, extra = parser.parse_known_args(argv)
    if extra:  # said by the command's own parser, so that its --help is the one pointed to
        sub = commands.choices[args.command]
        flags = [e for e in extra if e.startswith("-")]
        sub.error(unknown("option", flags[:1], set(re.findall(r"(?<![\w-])--?[a-z][\w-]*", sub.format_usage())))
                  if flags else f"unrecognized arguments: {' '.join(extra)}")
    library_log.hold()  # library messages and warnings wait for the log file the command names (the study's)
    try:
        if "device" in args:  # a command that reads a study: torch is imported here
            from ablate.trial.machine import default_device

            args.device = args.device or default_device()
        return {"run": _run, "worker": _run, "report": _report, "sync": _sync, "list": _list, "ui": _ui,
                "new": _new, "diagnose": _diagnose, "compare": _compare}[args.command](args)
    except BrokenPipeError:  # `ablate list | head`: the reader has gone, which is no error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so that exit's flush cannot raise again
        return 141
    except Exception as error:
        from ablate.run.full_disk import said  # a full disk, however deep in the chain, is the user's to fix

        full = said(error, getattr(args, "folder", getattr(args, "results", None)), args.command in ("run", "worker"))
        if full is None and not isinstance(error, _user_errors()):
            raise
        from ablate.render.terminal import message

        print(message(f"ablate: error: {full or error}"), file=sys.stderr)  # wrapped: an error can run to 500 chars
        return 2
    finally:  # a command that named no study's log: results/ablate.log, made only if a library said something
        library_log.settle(getattr(args, "results", RESULTS_DIR) / library_log.LOG_NAME)


def _user_errors() -> tuple[type[Exception], ...]:
    """The errors said in one line: a bad study or device, missing data, a study another run holds. Read from
    the modules already imported (an error of a module never imported cannot have been raised)."""
    where = (("ablate.workload.data", "DataUnavailable"),)
    return (StudyError, Busy, *(getattr(sys.modules[m], n) for m, n in where if m in sys.modules))


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


def _run(args: argparse.Namespace) -> int:
    from ablate.run import preflight
    from ablate.trial.machine import describe

    cleared = preflight.run(args.study, args.device, args.search, args.trials, args.workers,
                            args.command == "worker" or args.workers > 1, args.storage, args.results)
    study, storage, log = cleared.study, cleared.storage, cleared.log
    args.folder = args.results / study.name  # the folder a full disk is said of

    from ablate.config.design import single_pass
    from ablate.render.results import COMPACT_WIDTH, render, render_compact
    from ablate.render.terminal import LINE, addressed, message, width, wrapped
    from ablate.run.header import header
    from ablate.run.interrupts import Interrupted
    from ablate.run.runner import Runner
    from ablate.run.workers import run_workers
    from ablate.store.storage import shared

    if study.data_note:  # how text reaches a library model: its tokenizer, or bytes as token ids
        print(wrapped(f"{study.name}: {study.data_note}"))
    machine = describe(str(cleared.device))
    # The lock keeps a second process off an SQLite storage; a server database is shared by design.
    lock = contextlib.nullcontext() if shared(storage) else study_lock(args.results / study.name, study.name)
    with lock, library_log.trial_log_set():  # the lock refuses at once while another run holds the study
        library_log.to_log_file(log)  # MLflow's loggers too, and the trials' output
        runner = Runner(study, machine, args.search, storage, args.results, n_trials=args.trials,
                        protocol=single_pass(study.protocol) if args.single_pass else None)
        for line in header(runner, args.search, args.trials, getattr(args, "explain", False)):
            print(wrapped(line))
        try:
            if args.workers > 1:
                runner.parent.open()  # before the workers start, so that they all log under it
                if status := run_workers(args.study, args.workers, cleared.device, storage, args.results,
                                          args.single_pass):
                    if status == 130:  # the workers have stopped; the parent run they shared is ended here
                        runner.parent.stop()
                    return status
            outcome = runner.run()
        except Interrupted as stopped:
            print(message(f"ablate: {stopped}"), file=sys.stderr)
            _warn_offline(runner.tracker, args)
            return 130  # the shell's status for a run stopped by Ctrl-C
    if getattr(args, "no_summary", False):
        return 0
    if not outcome.ran:
        print("nothing to run: the study is finished, every planned measurement has a result (the table and "
              "report are read back from the storage)")
    full = getattr(args, "full_table", False)  # `ablate worker` has no flag: the summary
    print(render(outcome.table, study.throughput_unit) if full
          else render_compact(outcome.table, study.accuracy_tolerance, width(COMPACT_WIDTH)))
    if full and study.budget.target_accuracy is not None:
        print(f"\nto target s: training time until test accuracy first reached {study.budget.target_accuracy:g}% "
              f"(checked every {study.budget.eval_every_samples or study.budget.train_samples:,} samples, evaluation "
              "excluded, first step excluded); e2e: from model preparation, compilation included (cold)")
    print(f"\n{addressed('results table', outcome.csv)}\n"
          f"{addressed('library messages (MLflow, torch, compiler)', log)}")
    if not runner.tracker.offline:  # else the warning at the end says what to do
        # Addresses on lines of their own: a terminal of 100 columns copies them whole.
        print(f"MLflow: experiment ablate/{study.name}"
              f"{', parent run ' + outcome.parent_run_id if outcome.parent_run_id else ''}, in\n"
              f"  {outcome.tracking_uri}")
        opener = "" if runner.tracker.on_server else f"run `{_ui_command(args.results)}`, then "
        if len(f"the answer in MLflow's UI: {opener}open") > LINE:  # the command on a line of its own, copied whole
            opener = f"run\n  {_ui_command(args.results)}\nthen "
        print(f"the answer in MLflow's UI: {opener}open\n  {runner.tracker.view_url}")
    for built in outcome.reports:
        print(built.summary())
    _warn_offline(runner.tracker, args, runner.logged_late)
    return 0


def _warn_offline(tracker: Tracker, args: argparse.Namespace, logged_late: int = 0) -> None:
    """The run's last line when MLflow was unreachable: what is missing and the command that pushes it, or that
    what it missed while down was logged when it answered again."""
    from ablate.render.terminal import message

    if not tracker.offline:
        if tracker.outages:
            print(message(f"MLflow at {tracker.uri} was unreachable {tracker.outages} time(s) during the run; the "
                          f"{logged_late} measurements it missed were logged when it answered again"))
        return
    options = [f"--search {args.search}", f"--device {args.device}"]
    options += [f"--storage {args.storage}"] if args.storage else []
    options += [f"--results {args.results}"] if args.results != RESULTS_DIR else []
    print(message(f"ablate: warning: MLflow at {tracker.uri} was unreachable ({tracker.offline_reason}); the results "
                  f"are in the Optuna storage; when MLflow is back, log them with: ablate sync {args.study} "
                  f"{' '.join(options)}"), file=sys.stderr)


def _report(args: argparse.Namespace) -> int:
    from ablate.run.stored_study import open_stored, rebuild

    device, study, optuna_study, storage = open_stored(args.study, args.device, args.storage, args.results,
                                                       args.search)
    reported, tracker = rebuild(study, optuna_study, storage, device, args.search, args.results)
    print(f"results table: {reported.csv}")
    for built in reported.reports:
        print(built.summary())
    if tracker.offline:
        print(f"ablate: warning: the report is not attached to MLflow (unreachable at {tracker.uri})", file=sys.stderr)
    return 0


def _sync(args: argparse.Namespace) -> int:
    from ablate.run.stored_study import open_stored, sync

    device, study, optuna_study, _ = open_stored(args.study, args.device, args.storage, args.results, args.search)
    synced = sync(study, optuna_study, device, args.search, args.results)
    where = f"MLflow at {synced.tracker.uri} (experiment ablate/{study.name})"
    if synced.pushed:
        print(f"logged {synced.pushed} runs to {where}")
    if synced.ended:
        print(f"wrote the end of the study to its parent run in {where}, and closed it")
    if not synced.pushed and not synced.ended:
        print(f"nothing to sync: every stored trial of {study.name} has its MLflow run at {synced.tracker.uri}")
    return 0


def _compare(args: argparse.Namespace) -> int:
    from ablate.run.change import command
    from ablate.stats.changes import DEFAULT_MARGIN

    return command(args.a, args.b, args.study, DEFAULT_MARGIN if args.margin is None else args.margin,
                   args.fail_above, args.pair_anyway, args.out, args.results)


def _list(args: argparse.Namespace) -> int:
    from ablate.config import catalogue  # reads the files: no torch, no strategy imported

    studies, strategies = catalogue.studies(), catalogue.strategies()
    width = max(len(name) for name in [*(name for name, _ in studies), *(s.name for s in strategies)]) + 2
    targets = {s.name: "+".join(s.targets) for s in strategies}
    aim = max(map(len, targets.values())) + 2

    def fit(text: str, used: int = 0) -> str:  # every line within 100 columns
        return textwrap.shorten(text, max(100 - width - used - 2, 20), placeholder=" ...")

    print("studies (the whole description is in the file):")
    for name, description in studies:
        print(f"  {name:<{width}}{fit(description)}")
    print("strategies: what each targets (data, copy, compute, optimizer, launch overhead, or memory) and does:")
    for s in strategies:  # reST literals read as Markdown ones
        print(f"  {s.name:<{width}}{targets[s.name]:<{aim}}{fit(s.summary.replace('``', '`'), aim)}")
    print("presets ({preset: NAME} in a study's space):")
    for name, members in catalogue.presets():
        print(f"  {name:<{width}}{' + '.join(members) or 'nothing: the baseline'}")
    return 0


def _new(args: argparse.Namespace) -> int:
    from ablate.config import scaffold

    try:  # refused before a library is imported, so before one can speak: nothing written
        scaffold.target(args.model, args.out)
    except FileExistsError as error:
        raise StudyError(str(error)) from None
    try:
        path = scaffold.write(args.model, args.out)
    except (LookupError, FileExistsError, OSError) as error:  # an unknown or unavailable model, a file in the way
        raise StudyError(str(error).strip('"')) from None
    print(f"wrote {path}; edit it, then run it with: ablate run {path}")
    return 0


def _diagnose(args: argparse.Namespace) -> int:
    from ablate.render.terminal import addressed, message
    from ablate.run import diagnose, preflight
    from ablate.trial.process import TrialFailed

    device = preflight.device(args.device)
    preflight.runnable(device)
    found = diagnose.source(args.target, device.type)
    log = library_log.to_log_file(args.results / found.study.name / library_log.LOG_NAME, lazy=True)
    if args.write_study:
        preflight.destination(args.write_study)
    preflight.writable(args.results, "results folder", "--results")
    preflight.data_present(found.study)
    try:
        with library_log.trials_to(log):
            diagnosis = diagnose.diagnose(found, device)
    except TrialFailed as failed:
        print(message(f"ablate: error: the baseline's trial failed: {failed}"), file=sys.stderr)
        print(addressed("its output", log), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("ablate: interrupted; nothing written", file=sys.stderr)
        return 130
    print("\n".join(diagnosis.lines()))
    if not args.write_study:
        return 0
    if not (helpful := diagnosis.helpful):
        print(f"ablate: no study written: no strategy available here has a ceiling of x{UNLIKELY_BELOW:.2f} or more "
              "on this profile", file=sys.stderr)
        return 1
    written = diagnose.write(diagnosis, args.write_study, f"`ablate diagnose {args.target}` on {device.type}")
    print(f"\n{addressed(f'wrote the study of the {len(helpful)} strategies that can help', written.path)}\n"
          f"{written.size:,} combinations (edit its space, or run it with --search optuna --trials N); run it with:\n"
          f"  ablate run {written.path}")
    return 0


def _ui_command(results: Path) -> str:
    """The command that opens the MLflow UI on the store a run with `--results results` used."""
    return "ablate ui" + ("" if results == RESULTS_DIR else f" --results {shlex.quote(str(results))}")


def _ui(args: argparse.Namespace) -> int:
    from ablate.tracking.ui import serve

    return serve(args.results, args.port)
