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
    from runner.plan import build as plan_mod
    from runner.results import build as results_mod

RESULTS_WHAT = "a results file of this runner"


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


def read_plan(folder: Path) -> plan_mod.Plan:
    """A run folder's plan.json, or a usage error (modelfile.Unreadable when it cannot be read as a plan)."""
    from runner.plan.build import Plan
    from runner.results import modelfile

    path = folder / "plan.json"
    if not path.exists():
        fail_usage(f"{folder}: no plan.json (not a run folder)")
    return modelfile.read(path, Plan, "a plan written by `skill-evals plan` or `run`")
