"""The spend cap (semantics §7): reserve the worst case before a session, settle on the real figure.

The ledger is the one place that decides whether a session may start. A reservation that would
take committed + reserved spend past the cap waits while other reservations are outstanding (their
sessions settle at their real, usually much lower, cost and may free room); it fails only when it
cannot fit with nothing else outstanding, and then the caller starts nothing more. So the cap
bounds concurrency as well as spend (a $10 cap with a $1.68 worst case never has more than five
sessions in flight), and committed + reserved never passes the cap. Actual cost comes from the
host's own usage figures; if a session somehow cost more than it reserved, the excess is still
recorded (spend is never hidden) and no further reservation can succeed.

A process can be killed with sessions in flight; their tokens may have been used and no attempt
record says so. So a ledger with a `Journal` writes every reservation to the run folder's
reservations.jsonl, fsynced, before the caller starts what it reserved for, and every settlement
after (written, not fsynced: a killed process's writes survive it; only a machine crash can lose
one, and then that reservation counts at its worst case, the safe direction). `journal_totals`
reads it back on resume: a settled reservation counts at its real cost, an unsettled one at its
reserved worst case, because nothing says what it used. Records made while journaling name their
reservation (AttemptRecord.reservation_id), so the caller can tell the spend no record shows.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Reservation:
    amount_usd: float
    settled: bool = False
    id: str | None = None  # its journal line; None without a journal


AppendLine = Callable[[str, bool], None]  # (line, fsync it): RunDir.append_line of reservations.jsonl


@dataclass
class Journal:
    """reservations.jsonl of one run folder, for the reservations of one plan (module docstring)."""

    plan_hash: str
    append: AppendLine
    # Ids are unique across the processes of a run folder: a resumed attempt reserves again under a new id.
    prefix: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    count: int = 0

    def reserved(self, amount_usd: float, label: str | None) -> str:
        self.count += 1
        ident = f"{self.prefix}-{self.count}"
        self.append(json.dumps({"event": "reserve", "id": ident, "plan_hash": self.plan_hash, "usd": amount_usd,
                                "for": label}, ensure_ascii=False), True)
        return ident

    def settled(self, ident: str, actual_usd: float) -> None:
        self.append(json.dumps({"event": "settle", "id": ident, "usd": actual_usd}), False)


@dataclass(frozen=True)
class JournalTotals:
    """What the journal says one plan's reservations cost, over every process of the run folder."""

    usd: float = 0.0             # settled ones at their real cost + unsettled ones at their reserved amount
    unsettled: int = 0           # reservations no settlement followed (in flight when a process was killed)
    unsettled_usd: float = 0.0
    unsettled_for: tuple[str, ...] = ()  # the attempt ids of the unsettled session reservations


def journal_totals(path: Path, plan_hash: str) -> JournalTotals:
    """Read reservations.jsonl one line at a time; only the open reservations are held in memory."""
    if not path.exists():
        return JournalTotals()
    open_ones: dict[str, tuple[float, str | None]] = {}
    settled_usd = 0.0
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            try:
                entry = json.loads(line)
                ident, usd = str(entry["id"]), float(entry["usd"])
            except (ValueError, KeyError, TypeError):
                continue  # a torn line: a reservation never made durable, so nothing was started for it
            if entry.get("event") == "reserve" and entry.get("plan_hash") == plan_hash:
                open_ones[ident] = (usd, entry.get("for"))
            elif entry.get("event") == "settle" and ident in open_ones:
                del open_ones[ident]
                settled_usd += max(0.0, usd)
    unsettled_usd = sum(usd for usd, _ in open_ones.values())
    return JournalTotals(usd=settled_usd + unsettled_usd, unsettled=len(open_ones), unsettled_usd=unsettled_usd,
                         unsettled_for=tuple(label for _, label in open_ones.values() if label))


@dataclass
class Ledger:
    cap_usd: float | None  # None: no cap (the plan says so in every report)
    spent_usd: float = 0.0
    reserved_usd: float = 0.0
    refused: int = 0
    journal: Journal | None = None
    _settled: asyncio.Condition = field(default_factory=asyncio.Condition, repr=False)

    def _fits(self, amount_usd: float) -> bool:
        return self.cap_usd is None or self.spent_usd + self.reserved_usd + amount_usd <= self.cap_usd + 1e-12

    async def reserve(self, amount_usd: float, label: str | None = None) -> Reservation | None:
        """A reservation, journaled (fsynced) before it is returned; None when the cap is reached. `label`:
        what it is for (an attempt id), shown when it is found unsettled after a kill."""
        async with self._settled:
            while not self._fits(amount_usd):
                if self.reserved_usd <= 1e-12:
                    self.refused += 1  # nothing outstanding could free room: the cap is reached
                    return None
                await self._settled.wait()
            ident = self.journal.reserved(amount_usd, label) if self.journal is not None else None
            self.reserved_usd += amount_usd
            return Reservation(amount_usd=amount_usd, id=ident)

    async def settle(self, reservation: Reservation, actual_usd: float) -> None:
        async with self._settled:
            if reservation.settled:
                return
            reservation.settled = True
            self.reserved_usd = max(0.0, self.reserved_usd - reservation.amount_usd)
            self.spent_usd += max(0.0, actual_usd)
            if self.journal is not None and reservation.id is not None:
                self.journal.settled(reservation.id, actual_usd)
            self._settled.notify_all()

    def record_prior(self, spent_usd: float) -> None:
        """Spend of attempts finished before a resume: it counts against the same cap."""
        self.spent_usd += spent_usd
