"""What an attempt's (or a judge call's) requests cost, the ones whose reply was lost included.

A request whose reply was lost is charged a bound, never $0, so lost replies cannot spend past the cap.
`BillingMiddleware` counts every HTTP attempt into the current `Tally`, a ContextVar the executor opens per attempt.

Design notes: docs/design/rate-limits-and-spend.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from runner.core.observation import CostBasis, Usage
from runner.hosts.prices import PriceTable

CHARS_PER_TOKEN = 4  # the estimate runner.plan.planner and the judge's worst case use
# runner.plan.cost.MAX_TOOL_RESULT_TOKENS (not imported: that module imports this one's importers): the most a
# turn's tool results add to the next request, in the plan's worst case.
TOOL_RESULT_TOKENS = 25_000
# A bound no price can make (an unpriced model): the caller charges the reservation (`charge`).
UNKNOWN = float("inf")


def input_bound_usd(prices: PriceTable, model: str, input_tokens: int, max_output_tokens: int) -> float:
    """What one request of `input_tokens` (an estimate) and at most `max_output_tokens` of output could cost: its
    input priced as a cache write (never less than the input price), its output at max_tokens."""
    price = prices.price(model)
    if price is None:
        return UNKNOWN
    write = price.cache_write if price.cache_write is not None else price.input * 1.25
    return (input_tokens * max(price.input, write) + max_output_tokens * price.output) / 1_000_000


def usage_bound_usd(prices: PriceTable, model: str, known: Usage, max_output_tokens: int) -> float:
    """A request whose input the API reported (message_start) and whose output never arrived whole."""
    cost = prices.cost(model, known.model_copy(update={"output_tokens": max(known.output_tokens,
                                                                            max_output_tokens)}))
    return UNKNOWN if cost is None else cost


@dataclass(frozen=True)
class Mark:
    """A tally's figures at one moment (`Tally.since`: what a host run added after it)."""

    reported_usd: float
    bound_usd: float
    lost: int


ProgressFn = Callable[["Tally"], None]


@dataclass
class Tally:
    """What one attempt's (or judge call's) requests are known to have cost so far.

    reported_usd: from usage the API reported; bound_usd: the bounds of lost replies (the design notes); lost: how
    many. A request being sent is open (`open_request` .. `close_request`); `in_flight_usd` is the bound a host that
    does not see its requests (the CLI) keeps for the one its session may have in flight. `total` counts both.
    """

    reported_usd: float = 0.0
    bound_usd: float = 0.0
    lost: int = 0
    in_flight_usd: float = 0.0
    reservation_id: str | None = None  # the ledger's journal id (the claude-code host marks its session folder)
    on_change: ProgressFn | None = field(default=None, repr=False)
    _open_bound: float | None = field(default=None, repr=False)
    _sent: int = field(default=0, repr=False)
    _refused: int = field(default=0, repr=False)

    def total(self) -> float:
        """Everything so far, what is open or in flight counted at its bound."""
        return self.reported_usd + self.bound_usd + self.in_flight_usd + self._open_usd()

    def bound_part(self) -> float:
        """Of `total`, what is a bound rather than reported."""
        return self.bound_usd + self.in_flight_usd + self._open_usd()

    def _open_usd(self) -> float:
        if self._open_bound is None:
            return 0.0
        return max(1, self._sent - self._refused) * self._open_bound

    def mark(self) -> Mark:
        return Mark(self.reported_usd, self.bound_usd, self.lost)

    def since(self, mark: Mark) -> Mark:
        return Mark(self.reported_usd - mark.reported_usd, self.bound_usd - mark.bound_usd, self.lost - mark.lost)

    def changed(self) -> None:
        if self.on_change is not None:
            self.on_change(self)

    # ---- a request the runner sends itself (the anthropic SDK) ----

    def open_request(self, bound_usd: float) -> None:
        """A request is about to be sent (with the SDK's retries); `bound_usd` is what one of its HTTP attempts could
        cost (input_bound_usd)."""
        self._open_bound, self._sent, self._refused = bound_usd, 0, 0
        self.changed()

    def http_sent(self) -> None:
        self._sent += 1

    def http_refused(self) -> None:
        self._refused += 1

    def close_request(self, reply_usd: float | None, billed: bool = True, lost_bound_usd: float | None = None
                      ) -> None:
        """The request ended. reply_usd: the cost of the reply whose usage was read (None: none was). billed: False
        when it ended in an answer the API bills nothing for (an HTTP error status, a batch result that is no
        message); with a middleware-counted client the counts say which attempts were billed. lost_bound_usd: a
        tighter bound for the last attempt's lost reply (its message_start usage was read)."""
        if self._open_bound is None:
            return
        bound = self._open_bound
        if self._sent:
            attempts = self._sent - self._refused
        else:  # a client without BillingMiddleware (a batch): the one request the caller knows of
            attempts = 1 if billed or reply_usd is not None else 0
        lost = max(0, attempts - (1 if reply_usd is not None else 0))
        if reply_usd is not None:
            self.reported_usd += reply_usd
        if lost:
            last = lost_bound_usd if lost_bound_usd is not None and reply_usd is None else bound
            self.bound_usd += (lost - 1) * bound + min(last, bound)
            self.lost += lost
        self._open_bound, self._sent, self._refused = None, 0, 0
        self.changed()

    def abandon(self) -> None:
        """The request was given up without an answer (the session's wall clock ran out): billed, at its bound."""
        self.close_request(None)

    def give_up(self) -> None:
        """The attempt was cancelled: what was open or in flight is lost, at its bound."""
        self.abandon()
        if self.in_flight_usd > 0:
            self.bound_usd += self.in_flight_usd
            self.lost += 1
            self.in_flight_usd = 0.0
            self.changed()

    # ---- figures a host learns otherwise (the CLI's session) ----

    def add(self, reported_usd: float, bound_usd: float, lost: int) -> None:
        self.reported_usd += reported_usd
        self.bound_usd += bound_usd
        self.lost += lost
        self.changed()

    def settle_to(self, mark: Mark, reported_usd: float, bound_usd: float, lost: int) -> None:
        """Make what was added since `mark` these figures (a host that learns its final figures at the end)."""
        self.reported_usd = mark.reported_usd + reported_usd
        self.bound_usd = mark.bound_usd + bound_usd
        self.lost = mark.lost + lost
        self.changed()

    def set_in_flight(self, bound_usd: float) -> None:
        if bound_usd != self.in_flight_usd:
            self.in_flight_usd = bound_usd
            self.changed()


_CURRENT: ContextVar[Tally | None] = ContextVar("skill_evals_tally", default=None)


def current() -> Tally | None:
    """The tally of the attempt (or judge call) this task runs, when one is open."""
    return _CURRENT.get()


@contextmanager
def metering(tally: Tally) -> Iterator[Tally]:
    """Requests this task makes inside the block count into `tally` (docs/design/rate-limits-and-spend.md)."""
    token = _CURRENT.set(tally)
    try:
        yield tally
    finally:
        _CURRENT.reset(token)


class BillingMiddleware:
    """anthropic SDK middleware (an async callable, as runner.hosts.ratelimit.RateLimitMiddleware says): each HTTP
    attempt into the current tally. Put it last (innermost): it must see the raw status before SpendLimitMiddleware
    turns a spend-limit answer into an exception."""

    async def __call__(self, request: Any, call_next: Any) -> Any:
        tally = _CURRENT.get()
        if tally is None:
            return await call_next(request)
        tally.http_sent()
        response = await call_next(request)  # an exception (connection lost, timeout, cancelled): billed, a bound
        if response.http_response.status_code >= 400:
            tally.http_refused()  # the API bills no error response
        return response


def charge(cost_usd: float, bound_usd: float, reservation_usd: float | None) -> tuple[float, float, CostBasis]:
    """(what to charge, of it the bound part, how it was established) for an attempt or judge call whose figures are
    `cost_usd` (reported + bound) and `bound_usd`: never more than its reservation unless the reported usage alone
    is more, never less than what was reported."""
    reported = max(0.0, cost_usd - bound_usd)
    if bound_usd <= 0:
        return cost_usd, 0.0, "reported"
    if reservation_usd is not None and cost_usd > reservation_usd + 1e-12:
        charged = max(reported, reservation_usd)
        return charged, charged - reported, "reservation"
    if cost_usd == UNKNOWN:  # no reservation to cap an unpriced bound: count what was reported
        return reported, 0.0, "reported"
    return cost_usd, bound_usd, "bound"


def json_chars(value: Any) -> int:
    """Characters of a request part as JSON (the estimate's input)."""
    return len(json.dumps(value, ensure_ascii=False, default=str))
