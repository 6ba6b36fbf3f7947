"""Requests in, Message Batches out, results back: the one place that talks to the Batches API.

In: `submit(custom_id, params)`, one Messages API request. Out: an `ItemResult` per request, never a guess (why there
is no message, `retryable`, `spend_limit`). Each batch is recorded (runner.execute.batch.store) before polling, so a
resume polls it instead of sending again.

Design notes: docs/design/batches.md.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import anthropic
from anthropic.types import Message

from runner.execute.batch.store import BatchRecord, BatchStore
from runner.hosts.ratelimit import SpendLimitMiddleware, SpendLimitReached

MAX_REQUESTS = 100_000  # per batch (API limit)
MAX_BYTES = 128 * 1024 * 1024  # per batch we send; the API's limit is 256 MB
DEFAULT_POLL_S = 30.0
RETRYABLE = {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}

ResultKind = Literal["succeeded", "errored", "canceled", "expired", "failed"]


def digest(params: dict[str, Any], nonce: str | None = None) -> str:
    """What identifies a request across a resume (a judge's random nonce is left out)."""
    text = json.dumps(params, sort_keys=True, ensure_ascii=False)
    if nonce:
        text = text.replace(nonce, "NONCE")
    return hashlib.sha256(text.encode()).hexdigest()


def custom_id(prefix: str, key: str, *parts: str) -> str:
    """A custom_id the API accepts (^[a-zA-Z0-9_-]{1,64}$), stable for the same key and parts."""
    return "-".join([prefix + hashlib.sha256(key.encode()).hexdigest()[:32], *parts])[:64]


@dataclass
class ItemResult:
    kind: ResultKind
    message: Message | None = None
    error_type: str | None = None
    cause: str = ""
    spend_limit: bool = False  # the Batches API said spending must stop (runner.hosts.ratelimit.SpendLimitReached)

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
        self._closed = False
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
        """Stop polling (the batches go on server-side; their ids are recorded for a resume). Both the rounds
        that used the broker and the batch judge close it when they end; the second close does nothing."""
        if self._closed:
            return
        self._closed = True
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
    # As on the direct path: a spend limit raises at its first response, never retried (runner.hosts.ratelimit).
    client = anthropic.AsyncAnthropic(api_key=api_key, base_url=base_url, max_retries=max_retries, timeout=600,
                                      middleware=[SpendLimitMiddleware()])
    return BatchBroker(client, BatchStore(folder), poll_s=poll_s)

