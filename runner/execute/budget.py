"""The spend cap (semantics §7): reserve the worst case before a session, settle on the real figure.

The ledger alone decides whether a session may start; committed + reserved never passes the cap. A `Journal`
fsyncs each reservation to reservations.jsonl before its session starts, so a killed process cannot hide what was
in flight.

Design notes: docs/design/rate-limits-and-spend.md.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path


@dataclass
class Reservation:
    amount_usd: float
    settled: bool = False
    id: str | None = None  # its journal line; None without a journal


AppendLine = Callable[[str, bool], None]  # (line, fsync it): RunDir.append_line of reservations.jsonl


@dataclass
class Journal:
    """reservations.jsonl of one run folder, for the reservations of one plan (docs/design/rate-limits-and-spend.md)."""

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

    def progress(self, ident: str, usd: float, bound_usd: float) -> None:
        """What the reservation's attempt has spent so far (of it `bound_usd` a bound): the design notes."""
        self.append(json.dumps({"event": "progress", "id": ident, "usd": usd, "bound": bound_usd}), False)


def reconcile_line(ident: str, usd: float, source: str, detail: str) -> str:
    """The journal line of one reconciliation (runner.execute.reconcile writes it, fsynced)."""
    return json.dumps({"event": "reconcile", "id": ident, "usd": usd, "from": source, "detail": detail},
                      ensure_ascii=False)


@dataclass(frozen=True)
class OpenReservation:
    """A reservation no settlement and no reconciliation followed: in flight when a process was killed."""

    id: str
    plan_hash: str | None
    usd: float                      # reserved: its worst case
    label: str | None               # the attempt id (None: a judge call's own reservation)
    progress_usd: float | None = None   # the last `progress` figure, when one was written
    progress_bound_usd: float = 0.0     # of it, the bound part


@dataclass(frozen=True)
class Reconciled:
    """One reconciliation the journal holds."""

    id: str
    label: str | None
    reserved_usd: float
    usd: float
    source: str
    detail: str


@dataclass(frozen=True)
class JournalTotals:
    """What the journal says one plan's reservations cost, over every process of the run folder."""

    usd: float = 0.0             # settled and reconciled ones at their figure + unsettled ones at their reserved amount
    unsettled: int = 0           # reservations no settlement or reconciliation followed (in flight at a kill)
    unsettled_usd: float = 0.0
    unsettled_for: tuple[str, ...] = ()  # the attempt ids of the unsettled session reservations
    reconciled: tuple[Reconciled, ...] = ()


@dataclass
class _Reading:
    open: dict[str, OpenReservation] = field(default_factory=dict)
    settled_usd: float = 0.0
    reconciled: list[Reconciled] = field(default_factory=list)


def _read(path: Path, plan_hash: str | None) -> _Reading:
    """Read reservations.jsonl one line at a time; only the open reservations are held in memory. plan_hash: only
    that plan's reservations (None: every plan's)."""
    reading = _Reading()
    if not path.exists():
        return reading
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            try:
                entry = json.loads(line)
                ident, usd = str(entry["id"]), float(entry["usd"])
            except (ValueError, KeyError, TypeError):
                continue  # a torn line: a reservation never made durable, so nothing was started for it
            event = entry.get("event")
            if event == "reserve" and (plan_hash is None or entry.get("plan_hash") == plan_hash):
                label = entry.get("for")
                reading.open[ident] = OpenReservation(ident, entry.get("plan_hash"), usd,
                                                      label if isinstance(label, str) else None)
            elif ident not in reading.open:
                continue
            elif event == "settle":
                del reading.open[ident]
                reading.settled_usd += max(0.0, usd)
            elif event == "reconcile":
                found = reading.open.pop(ident)
                reading.settled_usd += max(0.0, usd)
                reading.reconciled.append(Reconciled(ident, found.label, found.usd, max(0.0, usd),
                                                     str(entry.get("from")), str(entry.get("detail") or "")))
            elif event == "progress":
                bound = entry.get("bound")
                reading.open[ident] = replace(reading.open[ident], progress_usd=max(0.0, usd),
                                              progress_bound_usd=float(bound) if isinstance(bound, (int, float))
                                              else 0.0)
    return reading


def journal_totals(path: Path, plan_hash: str) -> JournalTotals:
    """What the journal says one plan's reservations cost (JournalTotals)."""
    reading = _read(path, plan_hash)
    open_ones = reading.open.values()
    unsettled_usd = sum(found.usd for found in open_ones)
    return JournalTotals(usd=reading.settled_usd + unsettled_usd, unsettled=len(open_ones),
                         unsettled_usd=unsettled_usd,
                         unsettled_for=tuple(found.label for found in open_ones if found.label),
                         reconciled=tuple(reading.reconciled))


def open_reservations(path: Path) -> list[OpenReservation]:
    """Every plan's reservations that neither a settlement nor a reconciliation followed, in journal order."""
    return list(_read(path, None).open.values())


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
