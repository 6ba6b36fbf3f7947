"""Progress while a run executes: a live bar at a terminal, plain lines in CI and logs."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from runner.execute.executor import ProgressFn, RunState
from runner.execute.rundir import AttemptRecord


def _line(record: AttemptRecord, state: RunState, cap: float) -> str:
    outcome = record.outcome
    verdict = outcome.state if outcome else record.status.upper()
    fired = ", ".join(outcome.fired) if outcome and outcome.fired else "nothing"
    extra = f" {record.error_kind}" if record.error_kind else ""
    return (f"{record.attempt_id}: {verdict}{extra} (fired: {fired}) ${record.cost_usd:.4f}; "
            f"spent ${state.ledger.spent_usd:.4f} of ${cap:.2f}")


@contextmanager
def reporter(total: int, cap: float, terminal: bool) -> Iterator[ProgressFn]:
    if not terminal:
        def plain(record: AttemptRecord, state: RunState) -> None:
            print(_line(record, state, cap), file=sys.stderr, flush=True)
        yield plain
        return
    counts: Counter[str] = Counter()
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=False) as bar:
        task = bar.add_task("sessions", total=total)

        def live(record: AttemptRecord, state: RunState) -> None:
            counts[record.outcome.state if record.outcome else "CANCELLED"] += 1
            summary = " ".join(f"{k} {v}" for k, v in sorted(counts.items()))
            bar.update(task, advance=1, description=f"{summary} | ${state.ledger.spent_usd:.2f}/${cap:.2f}")
        yield live
