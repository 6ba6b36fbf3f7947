"""Reading a run folder's plan.json and results.json for a command, or saying in one line why not.

A folder given on the command line can be anything: not a run folder, an unfinished one, a file from another
version. The line names the file and where it breaks (line and column, or the first key that is wrong), never
pydantic's dump.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from runner.cli.app import fail_usage

if TYPE_CHECKING:
    from runner.plan.plan import Plan
    from runner.results import build as results_mod

RESULTS_WHAT = "a results file of this runner"

# The files that say a folder holds a run (runner.execute.rundir's PLAN, ATTEMPTS and RESULTS; a test holds them equal:
# that module imports the SDK, seconds too slow for checking an option).
RUN_MARKERS = ("plan.json", "attempts.jsonl", "results.json")
# What a new run folder may already hold: the lock of a start stopped before it planned, and the files `run --container`
# puts in for the run inside (the selection, the commit's settings and quarantine list: runner.cli.incontainer).
STARTING_FILES = frozenset({"run.lock", "selection.json", "settings.toml", "quarantine.json"})


def busy(folder: Path) -> str | None:
    """Why no other process may start on `folder` now, or None: a live process holds its run.lock (the claim of
    runner.execute.rundir, which stays the rule; this is its early word, before the floor and the surface audit)."""
    import errno
    import fcntl
    import os

    try:
        fd = os.open(folder / "run.lock", os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None  # no lock file (or none we could hold): the claim decides, with its own message
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno not in (errno.EACCES, errno.EAGAIN):
            return None
        holder = os.pread(fd, 64, 0).decode("utf-8", errors="replace").strip() or "unknown"
        return (f"{folder}: another skill-evals process (pid {holder}) is running on this run folder; wait for it to "
                f"end (or stop it), then continue with `skill-evals run --resume {folder}`")
    finally:
        os.close(fd)  # drops the probe's lock with it
    return None


def occupied(folder: Path) -> str | None:
    """Why a new run may not be written into `folder`, or None. A folder holding a run is never written over: the new
    plan and results would replace the finished ones beside the old attempts and transcripts. A folder holding
    anything else is not a run folder, and a run's files would be mixed into it."""
    try:
        entries = sorted(entry.name for entry in folder.iterdir())
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{folder} cannot be listed ({exc.strerror or exc})"
    if "run.lock" in entries and (problem := busy(folder)):
        return problem
    marker = next((name for name in RUN_MARKERS if name in entries), None)
    if marker is not None:
        return (f"{folder} holds a run ({marker}), which a new run would destroy: continue it with "
                f"`skill-evals run --resume {folder}`, or give --out a new folder")
    others = [name for name in entries if name not in STARTING_FILES]
    if others:
        return (f"{folder} is not empty ({len(others)} entr{'y' if len(others) == 1 else 'ies'}, e.g. {others[0]!r}) "
                "and is not a run folder: give --out a new or empty folder")
    return None


def results_problem(folder: Path) -> tuple[results_mod.Results | None, str]:
    """A run folder's results.json, or why not."""
    from runner.results import modelfile
    from runner.results.build import Results

    path = folder / "results.json"
    if not path.exists():
        return None, f"{folder}: no results.json (is this a finished run folder?)"
    try:
        return modelfile.read(path, Results, RESULTS_WHAT), ""
    except modelfile.Unreadable as exc:
        return None, str(exc)


def read_results(folder: Path) -> results_mod.Results:
    results, problem = results_problem(folder)
    if results is None:
        fail_usage(problem)
    return results


def read_plan(folder: Path) -> Plan:
    """A run folder's plan.json, or a usage error (modelfile.Unreadable when it cannot be read as a plan)."""
    from runner.plan.plan import Plan
    from runner.results import modelfile

    path = folder / "plan.json"
    if not path.exists():
        fail_usage(f"{folder}: no plan.json (not a run folder)")
    return modelfile.read(path, Plan, "a plan written by `skill-evals plan` or `run`")
