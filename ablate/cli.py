"""Command line: `ablate run | worker | report | sync | compare | list | ui | new | diagnose`. Entry points only:
parse, call, print. What each command accepts is `ablate.cli_parser`'s. What a command does lives on its floor:
the checks before anything is written in `ablate.run.preflight`, `--workers N` in `ablate.run.workers`, a stored
study read back for `report` and `sync` in `ablate.run.stored_study`, `ablate new`'s study file in
`ablate.config.scaffold`, `ablate diagnose` in `ablate.run.diagnose`, two studies set side by side (`compare`) in
`ablate.run.change`.

Imports are made where a command needs them: `ablate list` and `--help` import no torch (a second or more),
and library messages and warnings go to a log file in every command (`ablate.trial.library_log`).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

from ablate import cli_parser
from ablate.config.validate import StudyError
from ablate.stats.diagnosis import UNLIKELY_BELOW
from ablate.store.lock import Busy, study_lock
from ablate.trial import library_log

if TYPE_CHECKING:
    from ablate.config.schema import Study
    from ablate.run.preflight import Cleared
    from ablate.run.runner import Outcome, Runner
    from ablate.tracking.tracker import Tracker

RESULTS_DIR = Path(os.environ.get("ABLATE_RESULTS_DIR", "results"))


def main(argv: list[str] | None = None) -> int:
    args = cli_parser.parse(argv, RESULTS_DIR)
    library_log.hold()  # library messages and warnings wait for the log file the command names (the study's)
    try:
        if "device" in args:  # a command that reads a study: torch is imported here
            from ablate.trial.machine import default_device

            args.device = args.device or default_device()
        return {"run": _run, "worker": _run, "report": _report, "sync": _sync, "list": _list, "ui": _ui,
                "new": _new, "diagnose": _diagnose, "compare": _compare}[args.command](args)
    except KeyboardInterrupt:  # Ctrl-C outside a run's measurements (those stop as `Interrupted`: `_measure`)
        resumes = "; run the same command again: it resumes where it stopped" if args.command in ("run", "worker") \
            else ""
        print(f"ablate: interrupted{resumes}", file=sys.stderr)
        return 130
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


def _run(args: argparse.Namespace) -> int:
    from ablate.run import preflight
    from ablate.trial.machine import describe

    cleared = preflight.run(args.study, args.device, args.search, args.trials, args.workers,
                            args.command == "worker" or args.workers > 1, args.storage, args.results)
    study, storage = cleared.study, cleared.storage
    args.folder = args.results / study.name  # the folder a full disk is said of

    from ablate.config.design import chosen
    from ablate.render.terminal import wrapped
    from ablate.run.header import header
    from ablate.run.runner import Runner
    from ablate.store.storage import shared

    if study.data_note:  # how text reaches a library model: its tokenizer, or bytes as token ids
        print(wrapped(f"{study.name}: {study.data_note}"))
    machine = describe(str(cleared.device))
    # The lock keeps a second process off an SQLite storage; a server database is shared by design.
    lock = contextlib.nullcontext() if shared(storage) else study_lock(args.results / study.name, study.name)
    with lock, library_log.trial_log_set():  # the lock refuses at once while another run holds the study
        library_log.to_log_file(cleared.log)  # MLflow's loggers too, and the trials' output
        runner = Runner(study, machine, args.search, storage, args.results, n_trials=args.trials,
                        protocol=chosen(study.protocol, single=args.single_pass, quick=args.quick))
        for line in header(runner, args.search, args.trials, getattr(args, "explain", False)):
            print(wrapped(line))
        outcome = _measure(args, cleared, runner)
    if isinstance(outcome, int):  # stopped, or the workers' status
        return outcome
    if getattr(args, "no_summary", False):
        return 0
    _print_end(args, study, cleared.log, runner, outcome)
    return 0


def _measure(args: argparse.Namespace, cleared: Cleared, runner: Runner) -> Outcome | int:
    """The study measured here, or by `--workers N` processes first: its outcome, or the exit status it stopped
    with."""
    from ablate.render.terminal import message
    from ablate.run.interrupts import Interrupted
    from ablate.run.workers import run_workers

    try:
        if args.workers > 1:
            runner.parent.open()  # before the workers start, so that they all log under it
            if status := run_workers(args.study, args.workers, cleared.device, cleared.storage, args.results,
                                      cli_parser.design_flags(args)):
                if status == 130:  # the workers have stopped; the parent run they shared is ended here
                    runner.parent.stop()
                return status
        return runner.run()
    except Interrupted as stopped:
        print(message(f"ablate: {stopped}"), file=sys.stderr)
        if _answer_settled(runner):
            print(message(f"ablate: the answer was settled before the stop (only the table pass was left): "
                          f"ablate report {args.study}{_stored_options(args)} gives it"), file=sys.stderr)
        _warn_offline(runner.tracker, args)
        return 130  # the shell's status for a run stopped by Ctrl-C


def _print_end(args: argparse.Namespace, study: Study, log: Path, runner: Runner, outcome: Outcome) -> None:
    """A finished run's last lines: its table, where its results and reports are, and MLflow's part."""
    from ablate.render.results import COMPACT_WIDTH, render, render_compact
    from ablate.render.terminal import addressed, width, wrapped

    if not outcome.ran:
        print(wrapped("nothing to run: the study is finished, every planned measurement has a result (the table "
                      "and report are read back from the storage)"))
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
        _print_mlflow(args, study, runner, outcome)
    for built in outcome.reports:
        print(built.summary())
    _warn_offline(runner.tracker, args, runner.logged_late)


def _print_mlflow(args: argparse.Namespace, study: Study, runner: Runner, outcome: Outcome) -> None:
    """Where the run is in MLflow, and how to open it there."""
    from ablate.render.terminal import LINE

    # Addresses on lines of their own: a terminal of 100 columns copies them whole.
    print(f"MLflow: experiment ablate/{study.name}"
          f"{', parent run ' + outcome.parent_run_id if outcome.parent_run_id else ''}, in\n"
          f"  {outcome.tracking_uri}")
    opener = "" if runner.tracker.on_server else f"run `{_ui_command(args.results)}`, then "
    if len(f"the answer in MLflow's UI: {opener}open") > LINE:  # the command on a line of its own, copied whole
        opener = f"run\n  {_ui_command(args.results)}\nthen "
    print(f"the answer in MLflow's UI: {opener}open\n  {runner.tracker.view_url}")


def _warn_offline(tracker: Tracker, args: argparse.Namespace, logged_late: int = 0) -> None:
    """The run's last line when MLflow was unreachable: what is missing and the command that pushes it, or that
    what it missed while down was logged when it answered again."""
    from ablate.render.terminal import message

    if not tracker.offline:
        if tracker.outages:
            print(message(f"MLflow at {tracker.uri} was unreachable {tracker.outages} time(s) during the run; the "
                          f"{logged_late} measurements it missed were logged when it answered again"))
        return
    print(message(f"ablate: warning: MLflow at {tracker.uri} was unreachable ({tracker.offline_reason}); the results "
                  f"are in the Optuna storage; when MLflow is back, log them with: ablate sync {args.study}"
                  f"{_stored_options(args, every=True)}"), file=sys.stderr)


def _stored_options(args: argparse.Namespace, every: bool = False) -> str:
    """The options that find this run's stored study again (`ablate report`, `ablate sync`); `every`: its search and
    device also where they are the defaults."""
    from ablate.trial.machine import default_device

    options = [f"--search {args.search}"] if every or args.search != "grid" else []
    options += [f"--device {args.device}"] if every or args.device != default_device() else []
    options += [f"--storage {args.storage}"] if args.storage else []
    options += [f"--results {args.results}"] if args.results != RESULTS_DIR else []
    return "".join(f" {o}" for o in options)


def _answer_settled(runner: Runner) -> bool:
    """The table pass was queued, so the answer it follows was done (`ablate.stats.race.finalists.table`)."""
    from ablate.config.design import TABLE
    from ablate.store import records

    return any(records.from_trial(t).phase == TABLE for t in runner.optuna_study.get_trials(deepcopy=False))


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
