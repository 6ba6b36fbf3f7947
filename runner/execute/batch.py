"""`--batch`: model turns and judge calls through the Message Batches API, at half the price.

What is batched (`skill-evals run --batch`, `skill-evals judge --batch`):
- judge calls: every pending judge call goes into a batch; each result maps back by its custom_id;
- `api`-host sessions: each model turn of every in-flight session is one request of a batch; a session
  that needs another turn (tool_use) sends it in the next batch. The session loop, its tools, the
  listing and the Observation are the api host's own (runner.execute.hosts.api): only the transport differs,
  so attempt records and states are the same as on the direct path.
- `claude-code` sessions cannot be batched (the CLI makes its own calls); with `--batch` they run as
  usual (at the plan's concurrency) and only their judge calls are batched.

How the work is grouped. A batch is submitted when every participant is waiting on one (no request
that could still join it is being prepared): in a run, the participants are the attempts of one
quorum round, so attempts are started round by round — every undecided case starts the attempts
`starts_allowed` gives it, the round runs to its end (session batches, then its judge batch), and the
tallies decide the next round. These are the decisions the direct path makes (it never starts an
attempt a verdict cannot need either), so the same scripted answers give the same states. (One
difference: on the direct path an attempt that errors while its sibling still runs lets the next
repeat start, depending on which finishes first; a round sees both results and starts nothing the
verdict can no longer use, so a case that ends ERROR may have run fewer errored repeats.) A round
whose worst-case reservations do not all fit under the spend cap runs in waves of as many as fit:
every attempt still reserves its worst case before it starts, as on the direct path. Tier-2 probes
(both arms, every repeat) all go into the first round. A re-judge has no rounds: its batch is
submitted once no new judge call arrived for `settle_s`.

Results are never guessed: `errored`, `expired` and `canceled` results make the session ERROR
(`api-error`, with the cause) or the judged assertions JUDGE-ERROR — never PASS, never FAIL. A batch the
API refuses because spending must stop (runner.execute.ratelimit.SpendLimitMiddleware) makes its sessions ERROR
`spend-limit` and its judge calls JUDGE-ERROR with `spend_limit`, and the run stops as on the direct path. An
errored result of a transient type (overloaded, api_error, rate limit, timeout) is sent again in a
later batch, as many times as the direct path's client would retry it (`host_max_retries`,
`[judge] max_retries`).

Resumable: the batch id and its custom_ids (with a digest of each request) are written to
`<run>/batches/<batch id>.json` as soon as the batch is created, before any polling. A resumed run
(or `judge` again on the same run) rebuilds the same requests, finds them in a batch that was created
but whose results were never delivered, and polls that batch instead of submitting again. A batch
whose results were delivered is marked so and never reused (a sample is used once).

Prices: every token of a batch costs the price table's figure times its `batch_discount` (0.5: the
Batches API's 50%, which cache reads and writes get on top of their own multipliers); a session's
worst case, reserved against the cap, is priced the same way.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import secrets
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import anthropic
from anthropic.types import Message
from pydantic import BaseModel

from runner.corpus.library import Assertion
from runner.execute.hosts import api as api_mod
from runner.execute.hosts.base import ErrorKind, ListingSeen, Observation, SessionSpec, ToolCall
from runner.execute.ratelimit import SpendLimitMiddleware, SpendLimitReached
from runner.execute.rundir import RunDir, safe_name
from runner.judge.prose import Judge, JudgeCall, failed, read_reply
from runner.plan.prices import PriceTable
from runner.results.verdicts import AssertionOutcome

BATCHES = "batches"  # the folder of batch records inside a run folder


def _batch_discount() -> float:
    """The price table's `batch_discount` (runner/data/prices.json, dated with the prices): the Message
    Batches API bills every token at 50% of the standard price."""
    raw = json.loads(resources.files("runner").joinpath("data", "prices.json").read_text(encoding="utf-8"))
    return float(raw["batch_discount"])


BATCH_DISCOUNT = _batch_discount()
MAX_REQUESTS = 100_000  # per batch (API limit)
MAX_BYTES = 128 * 1024 * 1024  # per batch we send; the API's limit is 256 MB
DEFAULT_POLL_S = 30.0
RETRYABLE = {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}

ResultKind = Literal["succeeded", "errored", "canceled", "expired", "failed"]


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


def digest(params: dict[str, Any], nonce: str | None = None) -> str:
    """What identifies a request across a resume (a judge's random nonce is left out)."""
    text = json.dumps(params, sort_keys=True, ensure_ascii=False)
    if nonce:
        text = text.replace(nonce, "NONCE")
    return hashlib.sha256(text.encode()).hexdigest()


def custom_id(prefix: str, key: str, *parts: str) -> str:
    """A custom_id the API accepts (^[a-zA-Z0-9_-]{1,64}$), stable for the same key and parts."""
    return "-".join([prefix + hashlib.sha256(key.encode()).hexdigest()[:32], *parts])[:64]


# ---- the run folder's batch records ---------------------------------------------------------------

class BatchRecord(BaseModel):
    batch_id: str
    created_at: str
    requests: dict[str, str]  # custom_id -> digest of the request
    delivered: bool = False


class BatchStore:
    """`<run>/batches/<batch id>.json`, one record per batch, written atomically."""

    def __init__(self, folder: Path):
        self.folder = folder

    def _path(self, batch_id: str) -> Path:
        return self.folder / f"{safe_name(batch_id)}.json"

    def save(self, record: BatchRecord) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        RunDir(self.folder).write_json(self._path(record.batch_id).name, record.model_dump_json(indent=1))

    def undelivered(self) -> list[BatchRecord]:
        if not self.folder.is_dir():
            return []
        records = []
        for path in sorted(self.folder.glob("*.json")):
            try:
                record = BatchRecord.model_validate_json(path.read_text(encoding="utf-8"))
            except ValueError:
                continue  # a torn write: that batch is not reused (its requests are sent again)
            if not record.delivered:
                records.append(record)
        return records

    def delivered(self, record: BatchRecord) -> None:
        self.save(record.model_copy(update={"delivered": True}))


def summary(folder: Path) -> str:
    """One line for the end of a batched run: what was sent, and what a resume would poll again."""
    records = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            records.append(BatchRecord.model_validate_json(path.read_text(encoding="utf-8")))
        except ValueError:
            continue
    pending = [r.batch_id for r in records if not r.delivered]
    line = (f"Message Batches: {len(records)} batch(es), {sum(len(r.requests) for r in records)} request(s); "
            f"records in {folder}")
    if pending:
        line += f"; results not yet delivered (a resume polls them): {', '.join(pending)}"
    return line


# ---- the broker: requests in, batches out, results back ------------------------------------------

@dataclass
class ItemResult:
    kind: ResultKind
    message: Message | None = None
    error_type: str | None = None
    cause: str = ""
    spend_limit: bool = False  # the Batches API said spending must stop (runner.execute.ratelimit.SpendLimitReached)

    @property
    def retryable(self) -> bool:
        return self.kind == "errored" and self.error_type in RETRYABLE


@dataclass
class _Item:
    custom_id: str
    params: dict[str, Any]
    digest: str
    size: int
    future: asyncio.Future[ItemResult]


@dataclass
class BrokerStats:
    batches_created: int = 0
    batches_resumed: int = 0
    requests: int = 0
    polls: int = 0
    batch_ids: list[str] = field(default_factory=list)


class BatchBroker:
    """Collects requests and submits them as batches.

    Participant mode (`join`/`leave`): a batch is submitted when every participant is waiting on the
    broker. Quiet mode (no participant ever joined): when no new request came for `settle_s`.
    """

    def __init__(self, client: anthropic.AsyncAnthropic, store: BatchStore, poll_s: float = DEFAULT_POLL_S,
                 settle_s: float = 0.5):
        self._client = client
        self.store = store
        self.poll_s = poll_s
        self.settle_s = settle_s
        self.participants: int | None = None
        self._pending: list[_Item] = []
        self._in_flush = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._quiet: asyncio.TimerHandle | None = None
        self.stats = BrokerStats()

    # participants
    def join(self, count: int = 1) -> None:
        self.participants = (self.participants or 0) + count

    def leave(self) -> None:
        assert self.participants is not None and self.participants > 0
        self.participants -= 1
        self._maybe_flush()

    async def submit(self, cid: str, params: dict[str, Any], key: str | None = None) -> ItemResult:
        future: asyncio.Future[ItemResult] = asyncio.get_running_loop().create_future()
        text = json.dumps(params, sort_keys=True, ensure_ascii=False)
        self._pending.append(_Item(cid, params, key or hashlib.sha256(text.encode()).hexdigest(), len(text), future))
        self._maybe_flush()
        return await future

    def _maybe_flush(self) -> None:
        if not self._pending:
            return
        if self.participants is None:
            if self._quiet is not None:
                self._quiet.cancel()
            self._quiet = asyncio.get_running_loop().call_later(self.settle_s, self._start_flush)
        elif len(self._pending) + self._in_flush >= self.participants:
            self._start_flush()

    def _start_flush(self) -> None:
        items, self._pending = self._pending, []
        if not items:
            return
        self._in_flush += len(items)
        task = asyncio.ensure_future(self._flush(items))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _flush(self, items: list[_Item]) -> None:
        try:
            groups = self._reuse(items)
            claimed = {id(item) for _, group in groups for item in group}
            fresh = [item for item in items if id(item) not in claimed]
            await asyncio.gather(*(self._serve(record, group) for record, group in groups),
                                 *(self._serve(None, chunk) for chunk in _chunks(fresh)))
        finally:
            for item in items:  # nothing may be left waiting forever, whatever went wrong above
                self._resolve(item, ItemResult("failed", cause="the batch broker stopped"))
            self._maybe_flush()

    def _resolve(self, item: _Item, result: ItemResult) -> None:
        """Hand one result back; its participant is no longer waiting on a batch in flight."""
        if item.future.done():
            return
        item.future.set_result(result)
        self._in_flush -= 1

    def _reuse(self, items: list[_Item]) -> list[tuple[BatchRecord, list[_Item]]]:
        """Requests that an earlier, undelivered batch of this run folder already holds (resume)."""
        groups = []
        left = {item.custom_id: item for item in items}
        for record in self.store.undelivered():
            group = [left.pop(cid) for cid, key in record.requests.items() if cid in left and left[cid].digest == key]
            if group:
                groups.append((record, group))
        return groups

    async def _serve(self, record: BatchRecord | None, items: list[_Item]) -> None:
        try:
            if record is None:
                # Each params is a plain dict, what one messages.create call would send (judge.request_params, an
                # api-host turn): the SDK's TypedDict for it is not spelled out here.
                requests = [{"custom_id": i.custom_id, "params": i.params} for i in items]
                batch = await self._client.messages.batches.create(requests=requests)  # type: ignore[arg-type]
                record = BatchRecord(batch_id=batch.id, created_at=datetime.now(timezone.utc).isoformat(),
                                     requests={i.custom_id: i.digest for i in items})
                self.store.save(record)  # before any polling: a resume finds this batch instead of paying again
                self.stats.batches_created += 1
            else:
                self.stats.batches_resumed += 1
            self.stats.batch_ids.append(record.batch_id)
            self.stats.requests += len(items)
            results = await self._results(record.batch_id)
        except SpendLimitReached as exc:  # from the first response: nothing in this batch (or after it) can run
            for item in items:
                self._resolve(item, ItemResult("failed", cause=f"spend limit: {exc.cause}", spend_limit=True))
            return
        except (anthropic.APIError, ValueError) as exc:  # after the SDK's own retries
            cause = _api_failure(exc)
            for item in items:
                self._resolve(item, ItemResult("failed", cause=cause))
            return
        self.store.delivered(record)
        for item in items:
            self._resolve(item, results.get(item.custom_id) or ItemResult(
                "failed", cause=f"batch {record.batch_id} returned no result for {item.custom_id}"))

    async def _results(self, batch_id: str) -> dict[str, ItemResult]:
        while True:
            batch = await self._client.messages.batches.retrieve(batch_id)
            self.stats.polls += 1
            if batch.processing_status == "ended":
                break
            await asyncio.sleep(self.poll_s)
        out: dict[str, ItemResult] = {}
        async for line in await self._client.messages.batches.results(batch_id):
            out[line.custom_id] = _item_result(batch_id, line.result)
        return out

    async def aclose(self) -> None:
        """Stop polling (the batches go on server-side; their ids are recorded for a resume)."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._client.close()


def _chunks(items: list[_Item]) -> list[list[_Item]]:
    chunks: list[list[_Item]] = []
    size = 0
    for item in items:
        if not chunks or len(chunks[-1]) >= MAX_REQUESTS or size + item.size > MAX_BYTES:
            chunks.append([])
            size = 0
        chunks[-1].append(item)
        size += item.size
    return chunks


def _item_result(batch_id: str, result: Any) -> ItemResult:
    kind = result.type
    if kind == "succeeded":
        return ItemResult("succeeded", message=result.message)
    if kind == "errored":
        error = getattr(result.error, "error", None)
        error_type = getattr(error, "type", None) or "unknown"
        message = getattr(error, "message", "") or ""
        return ItemResult("errored", error_type=error_type,
                          cause=f"batch {batch_id}: the request errored ({error_type}: {message})")
    if kind == "expired":
        return ItemResult("expired", cause=f"batch {batch_id}: the request expired before it was processed "
                                           "(a batch ends 24 hours after it is created)")
    if kind == "canceled":
        return ItemResult("canceled", cause=f"batch {batch_id}: the request was canceled")
    return ItemResult("failed", cause=f"batch {batch_id}: unknown result type {kind!r}")


def _api_failure(exc: BaseException) -> str:
    if isinstance(exc, anthropic.APIStatusError):
        return f"the Message Batches API answered HTTP {exc.status_code} after the SDK's retries: {exc.message}"
    if isinstance(exc, anthropic.APIConnectionError):
        return f"the Message Batches API could not be reached after the SDK's retries: {exc}"
    return f"the Message Batches API's answer could not be read: {type(exc).__name__}: {exc}"


def make_broker(api_key: str, base_url: str | None, folder: Path, poll_s: float, max_retries: int = 2
                ) -> BatchBroker:
    # As on the direct path: a spend limit raises at its first response, never retried (runner.execute.ratelimit).
    client = anthropic.AsyncAnthropic(api_key=api_key, base_url=base_url, max_retries=max_retries, timeout=600,
                                      middleware=[SpendLimitMiddleware()])
    return BatchBroker(client, BatchStore(folder), poll_s=poll_s)


# ---- the judge through batches --------------------------------------------------------------------

class BatchJudge:
    """The judge's interface (as runner.execute.executor and runner.judge.rejudge use it), answered through batches."""

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
                return read_reply(result.message, answer, assertions, call, self.prices, started)
            if not (result.retryable and retry < self.settings.max_retries):
                break
        call.spend_limit = result.spend_limit
        return failed(assertions, call, started, result.cause)

    async def aclose(self) -> None:
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
            self.fail(api_mod._SessionError(kind, exc.cause))  # noqa: SLF001


class BatchApiHost:
    """The api host with its model turns sent as batch requests (same listing, tools, observation)."""

    def __init__(self, inner: api_mod.ApiHost, broker: BatchBroker):
        self.inner = inner
        self.name = inner.name
        self.broker = broker
        # Sessions price their usage (and check their budget) at the batch discount.
        self._priced = copy.copy(inner)
        self._priced.prices = batch_prices(inner.prices)

    def versions(self) -> dict[str, str]:
        return self.inner.versions()

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
        return api_mod._scrub(obs, host._api_key)  # noqa: SLF001


class GatedHost:
    """A host that cannot be batched (claude-code), at the plan's concurrency: in batch mode the
    executor admits every attempt of a round at once, so the sessions are limited here instead."""

    def __init__(self, inner: Any, concurrency: int):
        self.inner = inner
        self.name = inner.name
        self._gate = asyncio.Semaphore(concurrency)

    def versions(self) -> dict[str, str]:
        return self.inner.versions()

    async def run(self, spec: SessionSpec) -> Observation:
        async with self._gate:
            return await self.inner.run(spec)


# ---- a run in batch mode ----------------------------------------------------------------------------

def execute_batched(prepared: Any, rundir: RunDir, credentials: Any, progress: Any = None,
                    poll_s: float = DEFAULT_POLL_S) -> Any:
    """runs.execute with `--batch`: quorum rounds, session turns and judge calls through batches."""
    from runner.execute import run as runs_mod
    from runner.execute.executor import STOP_CANCELLED, Executor, RunState, until_signalled

    plan = prepared.plan
    # The same journaled ledger as the direct path: a batch request in flight at a kill counts against the cap.
    prior, ledger = runs_mod.open_ledger(rundir, plan, prepared.plan_hash)
    state = RunState(ledger=ledger)

    async def main() -> None:
        inner_host = prepared.host
        broker = make_broker(credentials.api_key or "", credentials.base_url, rundir.path / BATCHES, poll_s)
        host: Any = (BatchApiHost(inner_host, broker) if isinstance(inner_host, api_mod.ApiHost)
                     else GatedHost(inner_host, plan.concurrency))
        judge = BatchJudge(prepared.judge, broker) if prepared.judge is not None else None
        # Every attempt of a wave is admitted at once: they wait on the broker, not on a session slot.
        # An api-host session's worst case (its reservation and its own budget bound) is at batch prices.
        update: dict[str, Any] = {"concurrency": MAX_REQUESTS}
        if isinstance(host, BatchApiHost):
            update["estimate"] = plan.estimate.model_copy(
                update={"worst_session_usd": plan.estimate.worst_session_usd * BATCH_DISCOUNT})
        wide = plan.model_copy(update=update)
        extra = {"probes": prepared.probes} if getattr(prepared, "probes", None) else {}
        executor = Executor(wide, prepared.plan_hash, prepared.cases, host, rundir, state, prepared.known_names,
                            progress, judge, plan.judge_unavailable, mine=runs_mod.shard_uids(plan, prepared.shard),
                            **extra)
        try:
            await until_signalled(asyncio.ensure_future(run_rounds(executor, broker, prior)),
                                  lambda: state.stop(STOP_CANCELLED))
        finally:
            if judge is not None:
                await judge.aclose()
            else:
                await broker.aclose()

    if plan.unrun_all is None:
        asyncio.run(main())
    return runs_mod.finish(prepared, rundir, state.stop_reason, ledger.refused)


@dataclass
class _CaseTally:
    wins: int = 0
    losses: int = 0
    errors: int = 0
    used: set[int] = field(default_factory=set)

    def add(self, state: str) -> None:
        self.wins += state == "PASS"
        self.losses += state == "FAIL"
        self.errors += state in ("ERROR", "JUDGE-ERROR")


async def run_rounds(executor: Any, broker: BatchBroker, prior: dict[str, list[Any]]) -> None:
    """Start, round by round, what the quorum allows; each round runs to its end before the next."""
    from runner.results.quorum import QuorumRule, Tally, starts_allowed

    runnable = [c for c in executor.plan.cases
                if c.unrun_reason is None and (executor.mine is None or c.uid in executor.mine)]
    tallies = {c.uid: _CaseTally() for c in runnable}
    for planned in runnable:
        for record in prior.get(planned.uid, []):
            tallies[planned.uid].used.add(record.repeat)
            if record.outcome is not None:
                tallies[planned.uid].add(record.outcome.state)
    # A tier-2 probe runs both arms at every repeat (nothing stops early): all of it in the first round.
    starts: list[tuple[Any, int, str]] = []
    for planned in [c for c in runnable if getattr(c, "arms", None)]:
        done = {(r.arm, r.repeat) for r in prior.get(planned.uid, [])}
        starts += [(planned, n, arm) for n in range(1, planned.repeats + 1) for arm in planned.arms
                   if (arm, n) not in done]
    runnable = [c for c in runnable if not getattr(c, "arms", None)]
    while not executor.state.stop_reason:
        for planned in runnable:
            tally = tallies[planned.uid]
            rule = QuorumRule(planned.repeats, planned.quorum)
            allowed = starts_allowed(rule, Tally(wins=tally.wins, losses=tally.losses, errors=tally.errors))
            free = [n for n in range(1, planned.repeats + 1) if n not in tally.used][:allowed]
            tally.used.update(free)
            starts += [(planned, repeat, "main") for repeat in free]
        if not starts:
            return
        while starts and not executor.state.stop_reason:
            size = wave_size(executor)
            wave, starts = starts[:size], starts[size:]
            for record in await _wave(executor, broker, wave):
                if record is not None and record.outcome is not None and record.uid in tallies:
                    tallies[record.uid].add(record.outcome.state)
        starts = []


def wave_size(executor: Any) -> int:
    """How many attempts may be in flight at once: as many worst-case reservations as the cap still
    holds (each attempt reserves its worst case before it starts, as on the direct path). At least one:
    when even that one does not fit, its reservation fails and the run stops as the direct path does."""
    ledger = executor.state.ledger
    worst = executor.plan.estimate.worst_session_usd
    if ledger.cap_usd is None or worst <= 0:
        return MAX_REQUESTS
    free = ledger.cap_usd - ledger.spent_usd - ledger.reserved_usd
    return max(1, min(MAX_REQUESTS, int(free // worst)))


async def _wave(executor: Any, broker: BatchBroker, wave: list[tuple[Any, int, str]]) -> list[Any]:
    broker.join(len(wave))

    async def one(planned: Any, repeat: int, arm: str) -> Any:
        try:
            if arm == "main":
                return await executor.one_attempt(planned, repeat)
            return await executor.one_attempt(planned, repeat, arm)
        finally:
            broker.leave()

    return await asyncio.gather(*(one(planned, repeat, arm) for planned, repeat, arm in wave))
