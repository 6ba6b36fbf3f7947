"""What a person reads of an improve.json: the candidates' table and the outcome (the diff is its own file)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from runner.improve.model import Improve, NeighbourCheck, PlannedWork, Score


def _score(score: Score | None) -> str:
    if score is None:
        return "—"
    interval = f" [{score.wilson_95[0]:.2f}, {score.wilson_95[1]:.2f}]" if score.wilson_95 else ""
    extra = "".join(f", {n} {what}" for n, what in ((score.errored, "error"), (score.unrun, "unrun")) if n)
    return f"{score.passed}/{score.decided}{interval}{extra}"


def _check(check: NeighbourCheck) -> str:
    """The counts only: the cases are listed in improve.json (a narrow terminal cuts a list)."""
    counts = [f"{len(uids)} {what}" for uids, what in ((check.broke, "broke"), (check.unsure, "no result"),
                                                      (check.unchecked, "unchecked")) if uids]
    return check.state + (f" ({', '.join(counts)})" if counts else "")


def print_improve(record: Improve, console: Console) -> None:
    if record.approximation:
        console.print(f"Host: {record.host} — {record.approximation}", markup=False)
    console.print(f"{record.skill}: {len(record.train)} train / {len(record.test)} test case(s), seed {record.seed}, "
                  f"N={record.repeats} k={record.quorum}; neighbours: {', '.join(record.neighbours) or 'none'} "
                  f"({len(record.neighbour_cases)} case(s))", markup=False)
    if record.planned is not None:
        print_plan(record.planned, record.spend.cap_usd, console)
    else:
        # Cases, not attempts: each case is one k-of-N quorum verdict; the attempts are in each run's folder.
        table = Table(title=f"Candidates (train: cases passed / decided — cases, not attempts; each case a "
                            f"{record.quorum}-of-{record.repeats} quorum verdict; Wilson 95%)")
        # Every cell whole, wrapped to the terminal: a description or a reason cut at a width is one a person
        # cannot judge (improve.json has the same text).
        for column in ("id", "state", "train", "neighbours", "chars", "description"):
            table.add_column(column, overflow="fold", no_wrap=column in ("id", "chars"))
        for c in record.candidates:
            check = _check(c.neighbours) if c.neighbours else "—"
            state = c.state + (f": {c.reason}" if c.reason else "")
            table.add_row(escape(c.id), escape(state), _score(c.train), escape(check), str(c.chars),
                          escape(c.description))
        console.print(table)
        for r in record.rounds:
            if r.proposal.state != "ok":
                console.print(f"Round {r.index}: proposer {r.proposal.state}: {r.proposal.error}", markup=False)
        comparison = record.test_comparison
        if comparison is not None:
            console.print(f"Held-out test (cases passed / decided, not attempts): current "
                          f"{_score(comparison.current)}, {comparison.candidate} "
                          f"{_score(comparison.proposed)} → {comparison.verdict}", markup=False)
        console.print(f"Stop: {record.stop_reason}. Spend ${record.spend.usd:.4f} of ${record.spend.cap_usd:.2f} "
                      f"(sessions ${record.spend.sessions_usd:.4f}, proposer ${record.spend.proposer_usd:.4f})",
                      markup=False)
    console.print(f"Outcome: {record.outcome.summary}", markup=False)


def print_plan(planned: PlannedWork, cap_usd: float, console: Console) -> None:
    low, high = planned.sessions_per_train_evaluation
    console.print(
        f"Plan (nothing run): {planned.train_cases} train, {planned.test_cases} test and {planned.neighbour_cases} "
        f"neighbour case(s). One train evaluation: {low}–{high} session(s) at ${planned.worst_session_usd:.4f} "
        f"worst each; up to {planned.train_evaluations_max} train evaluation(s), {planned.neighbour_runs_max} "
        f"neighbour run(s), {planned.test_runs} test run(s) and {planned.proposer_calls_max} proposer call(s) "
        f"(${planned.proposer_worst_usd:.4f} worst each), all within the cap of ${cap_usd:.2f}.", markup=False)
