"""The spend cap (semantics §7): reserve the worst case before a session, settle on the real figure.

The ledger is the one place that decides whether a session may start. A reservation that would
take committed + reserved spend past the cap waits while other reservations are outstanding (their
sessions settle at their real, usually much lower, cost and may free room); it fails only when it
cannot fit with nothing else outstanding, and then the caller starts nothing more. So the cap
bounds concurrency as well as spend (a $10 cap with a $1.68 worst case never has more than five
sessions in flight), and committed + reserved never passes the cap. Actual cost comes from the
host's own usage figures; if a session somehow cost more than it reserved, the excess is still
recorded (spend is never hidden) and no further reservation can succeed.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field


@dataclass
class Reservation:
    amount_usd: float
    settled: bool = False


@dataclass
class Ledger:
    cap_usd: float | None  # None: no cap (the plan says so in every report)
    spent_usd: float = 0.0
    reserved_usd: float = 0.0
    refused: int = 0
    _settled: asyncio.Condition = field(default_factory=asyncio.Condition, repr=False)

    def _fits(self, amount_usd: float) -> bool:
        return self.cap_usd is None or self.spent_usd + self.reserved_usd + amount_usd <= self.cap_usd + 1e-12

    async def reserve(self, amount_usd: float) -> Reservation | None:
        async with self._settled:
            while not self._fits(amount_usd):
                if self.reserved_usd <= 1e-12:
                    self.refused += 1  # nothing outstanding could free room: the cap is reached
                    return None
                await self._settled.wait()
            self.reserved_usd += amount_usd
            return Reservation(amount_usd=amount_usd)

    async def settle(self, reservation: Reservation, actual_usd: float) -> None:
        async with self._settled:
            if reservation.settled:
                return
            reservation.settled = True
            self.reserved_usd = max(0.0, self.reserved_usd - reservation.amount_usd)
            self.spent_usd += max(0.0, actual_usd)
            self._settled.notify_all()

    def record_prior(self, spent_usd: float) -> None:
        """Spend of attempts finished before a resume: it counts against the same cap."""
        self.spent_usd += spent_usd
