"""Adaptive concurrency and request pacing under the API's rate limits.

One `AdaptiveLimiter` per run decides when a session, and through `RateLimitMiddleware` each request, may start:
an AIMD window, a pause after a 429, then pacing at the limit the API announced. Time is read only through its
`clock` and `sleep`. Spend limits are not rate limits: `SpendLimitMiddleware` stops at the first one.

Design notes: docs/design/rate-limits-and-spend.md.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from runner.core.observation import Observation

API_PERIOD_S = 60.0  # the API's request limit is per minute
DEFAULT_MARGIN = 0.05  # pacing slack for clock and network jitter: throughput at most 1/1.05 of the limit


class LimiterStats(BaseModel):
    """What the limiter did in one run (for benchmarks and the run's record)."""

    rate_limited: int = Field(default=0, description="429 observations (responses, or attempts that ended 429).")
    decreases: int = 0
    increases: int = 0
    window: int = Field(description="The concurrency window now.")
    min_window: int
    ceiling: int
    paced_limit: int | None = Field(default=None, description="L of the pacing, once a 429 showed it.")
    paused_s: float = Field(default=0.0, description="Total length of the pauses set (overlaps counted once).")


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """Seconds from `retry-after-ms` or `retry-after` (seconds; an HTTP date is not used by the API)."""
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            value = float(raw) / scale
        except ValueError:
            continue
        if math.isfinite(value) and value >= 0:
            return value
    return None


def reset_in_s(headers: Mapping[str, str], now_wall: float) -> float | None:
    """Seconds until `anthropic-ratelimit-requests-reset` (RFC 3339), or None."""
    raw = headers.get("anthropic-ratelimit-requests-reset")
    if not raw:
        return None
    try:
        when = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - now_wall)


def request_limit(headers: Mapping[str, str]) -> int | None:
    raw = headers.get("anthropic-ratelimit-requests-limit")
    try:
        value = int(raw) if raw is not None else None
    except ValueError:
        return None
    return value if value and value > 0 else None


class AdaptiveLimiter:
    """One per run. `slot()` around a session; `before_request` / `observe_response` around a request."""

    def __init__(self, max_concurrency: int, *, period_s: float = API_PERIOD_S, margin: float = DEFAULT_MARGIN,
                 default_pause_s: float = 30.0, grow_after: int | None = None, adaptive: bool = True,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep):
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        self.max = max_concurrency
        self.window = max_concurrency
        self.ceiling = max_concurrency
        self.period_s = period_s  # the rate limit's period (a scaled fake's is shorter)
        self.margin = margin
        self.default_pause_s = default_pause_s  # a 429 that says nothing of when to come back
        self.grow_after = grow_after  # None: one window's worth of attempts (one "round")
        # adaptive False: the runner before this module (a fixed window; only an attempt that ended
        # rate-limited pauses starts), kept for comparison in benchmarks/ratelimit.py.
        self.adaptive = adaptive
        # Every time the limiter reads or waits for: the callers' `started` times come from the same clock.
        self.clock = clock
        self.sleep = sleep
        self.active = 0
        self.resume_at = 0.0
        self.last_decrease = -math.inf
        self.last_rate_limited = -math.inf
        self.successes = 0
        self.limit: int | None = None
        self.released: deque[float] = deque()  # times requests were let through, once pacing is on
        self.stats = LimiterStats(window=self.window, min_window=self.window, ceiling=self.ceiling)
        self._changed: asyncio.Condition | None = None  # made in the running loop on first use

    # ---- session starts ----------------------------------------------------------------------

    def _condition(self) -> asyncio.Condition:
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    async def acquire(self) -> float:
        """Wait for a free slot in the window and the end of any pause; the start time."""
        changed = self._condition()
        async with changed:
            while True:
                now = self.clock()
                wait = self.resume_at - now
                if wait <= 0 and self.active < self.window:
                    self.active += 1
                    return now
                if wait <= 0:
                    await changed.wait()
                    continue
                # Woken by a change or by the pause's end, whichever comes first: a timer task on
                # `self.sleep` rather than wait_for's timeout, which would wait on the loop's own clock.
                timer = asyncio.ensure_future(self._notify_after(wait))
                try:
                    await changed.wait()
                finally:
                    timer.cancel()

    async def release(self) -> None:
        changed = self._condition()
        async with changed:
            self.active -= 1
            changed.notify_all()

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[float]:
        started = await self.acquire()
        try:
            yield started
        finally:
            # Shielded: a cancelled session still gives its slot back.
            await asyncio.shield(self.release())

    async def _notify(self) -> None:
        changed = self._condition()
        async with changed:
            changed.notify_all()

    async def _notify_after(self, delay: float) -> None:
        await self.sleep(delay)
        await self._notify()

    # ---- the policy ----------------------------------------------------------------------------

    def on_rate_limited(self, started: float, pause_s: float | None, reset_s: float | None = None,
                        limit: int | None = None) -> None:
        """A 429 for a request or attempt that started at `started` (on the limiter's clock)."""
        now = self.clock()
        self.stats.rate_limited += 1
        self.last_rate_limited = now
        self.successes = 0
        until = now + (pause_s if pause_s is not None else self.default_pause_s)
        if reset_s is not None:
            until = max(until, now + min(reset_s, self.period_s))
        if until > self.resume_at:
            self.stats.paused_s += until - max(now, self.resume_at)
            self.resume_at = until
        if not self.adaptive:
            return
        if limit is not None:
            self.limit = limit
            self.stats.paced_limit = limit
        if started < self.last_decrease:
            return  # sent under the window before the last decrease: the same episode
        self.ceiling = max(1, min(self.ceiling, self.window - 1))
        self.window = max(1, self.window // 2)
        self.last_decrease = now
        self.stats.decreases += 1
        self.stats.window, self.stats.ceiling = self.window, self.ceiling
        self.stats.min_window = min(self.stats.min_window, self.window)

    def on_success(self, started: float) -> None:
        """An attempt that started at `started` ended without any 429 seen."""
        if started < self.last_rate_limited or not self.adaptive:
            return  # it overlapped a 429 episode: no evidence the window is safe
        self.successes += 1
        if self.successes >= (self.grow_after or self.window) and self.window < min(self.max, self.ceiling):
            self.window += 1
            self.successes = 0
            self.stats.increases += 1
            self.stats.window = self.window

    # ---- per request (middleware) --------------------------------------------------------------

    async def before_request(self) -> float:
        """Hold a request for the pause and the pacing; the time it was let through.

        The pacing keeps a log of the times requests were really let through (not the times they
        were meant to go): a request let through late, behind a busy event loop, pushes the later
        ones back as the API's own window does. Check and append happen with no await between them."""
        while True:
            now = self.clock()
            if now < self.resume_at:
                await self.sleep(self.resume_at - now)
                continue
            if self.limit is None:
                break
            window = self.period_s * (1 + self.margin)
            while self.released and self.released[0] <= now - window:
                self.released.popleft()
            if len(self.released) < self.limit:
                break
            await self.sleep(self.released[0] + window - now)
        if self.limit is not None:
            self.released.append(now)
        return now

    async def observe_response(self, status: int, headers: Mapping[str, str], started: float) -> None:
        limit = request_limit(headers)
        if status == 429:
            self.on_rate_limited(started, retry_after_s(headers), reset_in_s(headers, time.time()), limit)
            await self._notify()
        elif limit is not None and self.limit is not None:
            self.limit = limit  # the limit changed (or was raised) since pacing began
            self.stats.paced_limit = limit

    # ---- per attempt (executor) ----------------------------------------------------------------

    async def observe_attempt(self, obs: Observation, started: float) -> None:
        """Feed one finished attempt: its 429s (error or retried by the host) or a success."""
        retries = cli_rate_limit_retries(obs.transcript)
        if obs.error_kind == "rate-limited":
            self.on_rate_limited(started, None)
        elif retries and self.adaptive:
            # The CLI already waited out its retry delay inside the session: only the window shrinks.
            self.on_rate_limited(started, 0.0)
        elif obs.error_kind is None:
            self.on_success(started)
        await self._notify()


def cli_rate_limit_retries(transcript: list[dict[str, Any]]) -> int:
    """Claude Code's `api_retry` system messages for a 429 (measured on CLI 2.1.332:
    `{"type":"system","subtype":"api_retry","error_status":429,"retry_delay_ms":...}`)."""
    count = 0
    for entry in transcript:
        if entry.get("_type") == "SystemMessage" and entry.get("subtype") == "api_retry":
            data = entry.get("data")
            if isinstance(data, dict) and data.get("error_status") == 429:
                count += 1
    return count


class RateLimitMiddleware:
    """anthropic SDK middleware: every HTTP attempt waits for the limiter and reports its status.

    Like every middleware of the runner, an async callable `(request, call_next)`, which the SDK's client calls
    exactly as it calls a subclass's `anthropic.Middleware.handle_async`: so this module does not import the SDK,
    and a run whose host makes no request of its own (claude-code: the CLI makes them) never loads it."""

    def __init__(self, limiter: AdaptiveLimiter):
        self.limiter = limiter

    async def __call__(self, request: Any, call_next: Any) -> Any:
        started = await self.limiter.before_request()
        response = await call_next(request)
        await self.limiter.observe_response(response.status_code, response.headers, started)
        return response


# ---- spend limits ----------------------------------------------------------------------------------

# `error.details.error_code` of a spend limit: the documented tier cap, and the contract cap that the CLI
# bundled with claude-agent-sdk (Claude Code 2.1.332) checks for beside it as an account limit.
SPEND_LIMIT_CODES = frozenset({"enforced_spend_limit_reached", "contract_spend_limit_reached"})
# How the API's 400 for a spend limit set on the organization or the workspace begins (the errors docs).
USAGE_LIMITS = re.compile(r"You have reached your specified (?:workspace )?API usage limits", re.IGNORECASE)
SPEND_STATUSES = (400, 402, 429)  # the only statuses a spend limit comes with: the rest is never read here


def _error_fields(body: Any) -> tuple[str, str, str | None]:
    """(error.type, error.message, error.details.error_code) of an error body, '' / None when absent."""
    error = body.get("error") if isinstance(body, dict) else None
    error = error if isinstance(error, dict) else {}
    details = error.get("details")
    code = details.get("error_code") if isinstance(details, dict) else None
    kind, message = error.get("type"), error.get("message")
    return (kind if isinstance(kind, str) else "", message if isinstance(message, str) else "",
            code if isinstance(code, str) else None)


def spend_limit_cause(status: int, headers: Mapping[str, str], body: Any) -> str | None:
    """Why an error response means no request can succeed until spending is allowed again (with the API's own
    message, which says when access resumes), or None for any other response."""
    kind, message, code = _error_fields(body)
    said = f": {message}" if message else ""
    if code in SPEND_LIMIT_CODES:
        return f"HTTP {status} {code} (a spend limit){said}"
    if status == 429 and retry_after_s(headers) is None:
        return f"HTTP 429 without retry-after (a spend limit){said}"
    if status == 400 and USAGE_LIMITS.search(message):
        return f"HTTP 400 {kind or 'invalid_request_error'} (an API usage limit){said}"
    if status == 402:
        return f"HTTP 402 {kind or 'billing_error'} (the credit balance){said}"
    return None


class SpendLimitReached(Exception):
    """The API said spending must stop. Not an APIStatusError, so the SDK neither retries nor converts it."""

    def __init__(self, status: int, cause: str, request_id: str | None = None):
        super().__init__(cause)
        self.status = status
        self.cause = cause
        self.request_id = request_id


def _raise_if_spend_limit(status: int, headers: Mapping[str, str], content: bytes) -> None:
    try:
        body = json.loads(content) if content else None
    except ValueError:  # not JSON: whatever it is, it is no documented spend-limit answer
        body = None
    cause = spend_limit_cause(status, headers, body)
    if cause is not None:
        raise SpendLimitReached(status, cause, headers.get("request-id"))


class SpendLimitMiddleware:
    """anthropic SDK middleware (AsyncAnthropic, the runner's only client kind; an async callable, as
    RateLimitMiddleware says): a spend-limit response raises SpendLimitReached from its first HTTP attempt.

    Put it last in `middleware=` (innermost, nearest the HTTP call): then it raises before RateLimitMiddleware
    sees the 429, so the limiter neither pauses nor shrinks for what is no rate limit. An error body is small:
    reading it here leaves the same bytes for the SDK when the response is no spend limit."""

    async def __call__(self, request: Any, call_next: Any) -> Any:
        response = await call_next(request)
        http = response.http_response
        if http.status_code in SPEND_STATUSES:
            await http.aread()
            _raise_if_spend_limit(http.status_code, http.headers, http.content)
        return response
