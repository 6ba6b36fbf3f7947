"""The batch adapters: a host and a judge that answer as the direct ones do, their model calls sent through batches.

In: the run's own host and judge and a broker (runner.execute.batch.broker). Out: a `Host` and a `Grader` the one
executor uses unchanged (`BatchApiHost`, `GatedHost`, `BatchJudge`). A result without a message is ERROR or
JUDGE-ERROR, never PASS or FAIL; tokens are priced at the table's `batch_discount`.

Design notes: docs/design/batches.md.
"""

from __future__ import annotations

import asyncio
import copy
import json
import secrets
import time
from importlib import resources
from typing import Any

import anthropic
from anthropic.types import Message

from runner.core.observation import ErrorKind, ListingSeen, Observation, SessionSpec, ToolCall, Usage
from runner.core.outcomes import AssertionOutcome
from runner.corpus.library import Assertion
from runner.execute.batch.broker import BatchBroker, custom_id, digest
from runner.hosts import api as api_mod
from runner.hosts.base import Host, utf8_safe
from runner.hosts.prices import PriceTable
from runner.hosts.sessionpath import SessionPath
from runner.hosts.surface import Surface
from runner.hosts.wall import SessionWall
from runner.judge.prose import Judge, JudgeCall, failed, read_reply


def _batch_discount() -> float:
    """The price table's `batch_discount` (runner/data/prices.json, dated with the prices): the Message
    Batches API bills every token at 50% of the standard price."""
    raw = json.loads(resources.files("runner").joinpath("data", "prices.json").read_text(encoding="utf-8"))
    return float(raw["batch_discount"])


BATCH_DISCOUNT = _batch_discount()


def batch_prices(table: PriceTable) -> PriceTable:
    """The price table at the batch discount (cache writes and reads included)."""
    models = {}
    for name, price in table.models.items():
        update: dict[str, float] = {"input": price.input * BATCH_DISCOUNT, "output": price.output * BATCH_DISCOUNT}
        if price.cache_write is not None:
            update["cache_write"] = price.cache_write * BATCH_DISCOUNT
        if price.cache_read is not None:
            update["cache_read"] = price.cache_read * BATCH_DISCOUNT
        models[name] = price.model_copy(update=update)
    return table.model_copy(update={"models": models,
                                    "source": table.source + f" Message Batches: {BATCH_DISCOUNT:.0%} of every figure."})


class BatchJudge:
    """A `Grader` (runner.judge.prose): the judge's calls, as runner.execute.executor and runner.pipeline.rejudge make
    them, answered through batches."""

    def __init__(self, judge: Judge, broker: BatchBroker):
        self.inner = judge
        self.broker = broker
        self.settings = judge.settings
        self.version = judge.version
        self.prices = batch_prices(judge.prices)
        self._seen: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"BatchJudge({self.inner!r})"

    def worst_case_usd(self, prompt: str, answer: str, calls: list[ToolCall], assertions: list[Assertion]) -> float:
        return self.inner.worst_case_usd(prompt, answer, calls, assertions) * BATCH_DISCOUNT

    async def judge(self, prompt: str, answer: str, calls: list[ToolCall], assertions: list[Assertion]
                    ) -> tuple[list[AssertionOutcome], JudgeCall]:
        call = JudgeCall(model=self.settings.model, prompt_version=self.version)
        if not assertions:
            return [], call
        started = time.monotonic()
        nonce = secrets.token_hex(8)
        params = self.inner.request_params(prompt, answer, calls, assertions, nonce)
        key = digest(params, nonce)
        # Two attempts with the same answer make the same request: each still gets its own judgement.
        occurrence = self._seen.get(key, 0)
        self._seen[key] = occurrence + 1
        for retry in range(self.settings.max_retries + 1):
            result = await self.broker.submit(custom_id("j", key, str(occurrence), f"r{retry}"), params, key)
            if result.kind == "succeeded" and result.message is not None:
                outcomes, call = read_reply(result.message, answer, assertions, call, self.prices, started)
                if not isinstance(api_mod.reply_usage(result.message), Usage):
                    # A succeeded result was billed; its usage cannot be read: its bound (runner.hosts.billing).
                    bound = self.inner.request_bound_usd(params) * BATCH_DISCOUNT
                    call.cost_usd, call.bound_usd, call.cost_basis = call.cost_usd + bound, bound, "bound"
                return outcomes, call
            if not (result.retryable and retry < self.settings.max_retries):
                break
        call.spend_limit = result.spend_limit
        return failed(assertions, call, started, result.cause)

    async def aclose(self) -> None:
        """A re-judge's batches end with its judge; a run's rounds have closed the broker already."""
        await self.broker.aclose()
        await self.inner.aclose()


# ---- api-host sessions through batches -----------------------------------------------------------

class BatchFailure(Exception):
    """A model turn had no usable batch result (errored after retries, expired, canceled, a spend limit)."""

    def __init__(self, cause: str, spend_limit: bool = False):
        super().__init__(cause)
        self.cause = cause
        self.spend_limit = spend_limit


class _BatchMessages:
    """Stands where the session's `client.messages` stands: each `create` is one request of a batch."""

    def __init__(self, broker: BatchBroker, attempt_id: str, retries: int):
        self.broker = broker
        self.attempt_id = attempt_id
        self.retries = retries
        self.turn = 0

    async def create(self, **params: Any) -> Message:
        params.pop("timeout", None)  # a batch has no per-request timeout (it ends within 24 hours)
        params.pop("stream", None)
        turn = self.turn
        self.turn += 1
        for retry in range(self.retries + 1):
            result = await self.broker.submit(custom_id("s", self.attempt_id, f"t{turn}", f"r{retry}"), params)
            if result.kind == "succeeded" and result.message is not None:
                return result.message
            if not (result.retryable and retry < self.retries):
                break
        raise BatchFailure(result.cause, result.spend_limit)


class _BatchClient:
    def __init__(self, messages: _BatchMessages):
        self.messages = messages


class _BatchSession(api_mod._Session):  # noqa: SLF001 - the api host's own loop and tools, reused unchanged
    async def loop(self, client: Any) -> None:
        try:
            await super().loop(client)
        except BatchFailure as exc:
            # A spend limit stops the run (runner.execute.executor).
            kind: ErrorKind = "spend-limit" if exc.spend_limit else "api-error"
            self.fail(api_mod.SessionError(kind, exc.cause))  # noqa: SLF001


class _Wrapping:
    """A host around another: what is not a session (the session path, versions, the surface, what is closed at
    the end) is the inner host's own."""

    inner: Host

    @property
    def middleware(self) -> list[anthropic.MiddlewareInput]:
        return self.inner.middleware

    @property
    def session_path(self) -> SessionPath | None:
        return self.inner.session_path

    @property
    def session_wall(self) -> SessionWall | None:
        return self.inner.session_wall

    def versions(self) -> dict[str, str]:
        return self.inner.versions()

    async def surface(self, model: str, library_names: set[str], invocable: set[str]) -> Surface:
        return await self.inner.surface(model, library_names, invocable)

    async def aclose(self) -> None:
        await self.inner.aclose()


class BatchApiHost(_Wrapping):
    """The api host with its model turns sent as batch requests (same listing, tools, observation). Its middleware
    is the api host's own list: the run's rate limiter put there paces the api host's direct client, which batched
    turns never use (they go through the broker's client)."""

    inner: api_mod.ApiHost

    def __init__(self, inner: api_mod.ApiHost, broker: BatchBroker):
        self.inner = inner
        self.name = inner.name
        self.broker = broker
        # Sessions price their usage (and check their budget) at the batch discount.
        self._priced = copy.copy(inner)
        self._priced.prices = batch_prices(inner.prices)

    async def run(self, spec: SessionSpec) -> Observation:
        # Mirrors ApiHost.run with the batch client and no wall-clock bound of its own: a batch ends
        # (expired at worst) 24 hours after it was created. A client hook in ApiHost.run would make
        # this copy unnecessary.
        started = time.monotonic()
        host = self._priced
        system, with_description, name_only = host.system_param(spec.exclude_skills)
        view = host.view(spec.exclude_skills)
        session = _BatchSession(host, spec, system, set(with_description) | set(name_only), view)
        obs = Observation(attempt_id=spec.attempt_id, host=host.name,
                          listing=ListingSeen(with_description=with_description, name_only=name_only))
        session.expand_command()
        await session.loop(_BatchClient(_BatchMessages(self.broker, spec.attempt_id, host.max_retries)))
        session.fill(obs)
        obs.duration_s = time.monotonic() - started
        return api_mod._scrub(utf8_safe(obs), host._api_key)  # noqa: SLF001


class GatedHost(_Wrapping):
    """A host that cannot be batched (claude-code), at the plan's concurrency: in batch mode the
    executor admits every attempt of a round at once, so the sessions are limited here instead."""

    def __init__(self, inner: Host, concurrency: int):
        self.inner = inner
        self.name = inner.name
        self._gate = asyncio.Semaphore(concurrency)

    async def run(self, spec: SessionSpec) -> Observation:
        async with self._gate:
            return await self.inner.run(spec)

