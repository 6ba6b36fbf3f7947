"""A killed run's worst cases, reconciled with the evidence it left.

The next process of a run folder, holding its lock, reconciles each unsettled reservation once, from the best
evidence (`attempt-record`, `session-log`, `progress`, else `none`): never below what the evidence shows billed,
never above the reservation. Session folders are untrusted data.

Design notes: docs/design/rate-limits-and-spend.md.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from runner.core.observation import SessionSpec
from runner.corpus.settings import Price
from runner.execute.budget import OpenReservation, Reconciled, open_reservations, reconcile_line
from runner.execute.rundir import RESERVATIONS, AttemptRecord, RunDir
from runner.hosts import billing, cli_log, workspace
from runner.hosts.cli_spend import MARK_SUFFIX, CliCosts, StreamSeen
from runner.hosts.prices import PriceTable
from runner.plan.plan import Plan

MARK_MAX_BYTES = 4096
MAX_MARKS = 10_000


@dataclass(frozen=True)
class Evidence:
    reported_usd: float  # what it shows billed
    usd: float           # with the bounds of what it shows lost
    source: str
    detail: str


def run_parent(run_folder: Path, base: Path | None = None) -> Path:
    """Where the run folder's session folders are (workspace.claim_run_parent's folder, not emptied here)."""
    base = base if base is not None else (workspace.default_parent() or Path(tempfile.gettempdir()))
    return base / workspace.run_parent_name(run_folder)


def _read_small(path: Path) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        try:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return None
            return handle.read(MARK_MAX_BYTES + 1)
        except OSError:
            return None


def marked_sessions(parent: Path) -> dict[str, Path]:
    """reservation id -> the session folder a killed claude-code host left for it (its mark beside it)."""
    found: dict[str, Path] = {}
    try:
        names = sorted(os.listdir(parent))[:MAX_MARKS]
    except OSError:
        return found
    for name in names:
        if not name.endswith(MARK_SUFFIX):
            continue
        raw = _read_small(parent / name)
        try:
            mark = json.loads(raw) if raw is not None and len(raw) <= MARK_MAX_BYTES else None
        except (ValueError, RecursionError):
            mark = None
        ident = mark.get("reservation_id") if isinstance(mark, dict) else None
        root = parent / name[: -len(MARK_SUFFIX)]
        try:
            is_folder = stat.S_ISDIR(os.lstat(root).st_mode)
        except OSError:
            is_folder = False
        if isinstance(ident, str) and is_folder:
            found[ident] = root
    return found


def plan_costs(plan: Plan, reserved_usd: float) -> CliCosts:
    """A killed session's prices and bounds, from the plan it ran under (its model, its price, its bounds)."""
    estimate = plan.estimate
    price = Price(input=estimate.price_input_per_mtok, output=estimate.price_output_per_mtok,
                  cache_write=estimate.price_cache_write_per_mtok or None,
                  cache_read=estimate.price_cache_read_per_mtok or None)
    prices = PriceTable(read_on=estimate.price_read_on, source="the plan's", models={plan.model: price})
    spec = SessionSpec(attempt_id="reconcile", uid="reconcile", prompt="", model=plan.model, max_turns=1,
                       timeout_s=1, max_output_tokens=plan.max_output_tokens, max_usd=reserved_usd,
                       request_input_tokens=estimate.first_turn_input_tokens or None)
    return CliCosts(prices, spec)


def from_session(folder: Path, costs: CliCosts) -> Evidence | None:
    log = cli_log.read(folder / "config")
    if log is None:
        return None
    spent = costs.final(log, None, StreamSeen(), ended=False)
    return Evidence(spent.reported_usd, spent.reported_usd + spent.bound_usd, "session-log",
                    f"the CLI's log: {len(log.replies)} repl(ies) received, {spent.lost} request(s) without one "
                    "(in flight at the kill, or lost) at their bound")


def evidence(found: OpenReservation, recorded: dict[str, float], sessions: dict[str, Path], plan: Plan | None
             ) -> Evidence:
    if found.id in recorded:
        return Evidence(recorded[found.id], recorded[found.id], "attempt-record", "the attempt's own record")
    progress = (Evidence(found.progress_usd - found.progress_bound_usd, found.progress_usd, "progress",
                         "the last figure the killed process journaled for it")
                if found.progress_usd is not None else None)
    if found.id in sessions and plan is not None:
        log = from_session(sessions[found.id], plan_costs(plan, found.usd))
        # The CLI writes its log behind the session: a log that shows less reported than the killed process had
        # journaled is stale, and the journaled figure (further on, and bounded as conservatively) stands.
        if log is not None and (progress is None or progress.reported_usd <= log.reported_usd + 1e-9):
            return log
    if progress is not None:
        return progress
    return Evidence(0.0, found.usd, "none", "no evidence: it stays at its worst case")


def figure(found: OpenReservation, seen: Evidence) -> float:
    """Never below what the evidence shows billed, never above the reservation unless that alone is more."""
    if seen.source == "attempt-record":
        return seen.usd
    charged, _, _ = billing.charge(seen.usd, seen.usd - seen.reported_usd, found.usd)
    return min(max(charged, seen.reported_usd), max(found.usd, seen.reported_usd))


def reconcile(rundir: RunDir, plan: Plan | None, records: Iterable[AttemptRecord] = (),
              base: Path | None = None) -> list[Reconciled]:
    """Reconcile every reservation a killed process of this run folder left unsettled (the design notes). Call
    it holding the folder's lock and before the host is made (that empties the killed sessions' folders).
    `records`: the attempt records the vetting accepted (runner.results.vetting) — a forged record must never
    lower what a reservation counts."""
    opened = open_reservations(rundir.path / RESERVATIONS)
    if not opened:
        return []
    wanted = {found.id for found in opened}
    recorded = {r.reservation_id: r.total_cost_usd for r in records if r.reservation_id in wanted}
    sessions = marked_sessions(run_parent(rundir.path, base))
    done = []
    for found in opened:
        seen = evidence(found, {k: v for k, v in recorded.items() if k is not None}, sessions, plan)
        usd = figure(found, seen)
        rundir.append_line(RESERVATIONS, reconcile_line(found.id, usd, seen.source, seen.detail))
        done.append(Reconciled(found.id, found.label, found.usd, usd, seen.source, seen.detail))
    return done
