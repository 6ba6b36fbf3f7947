"""`--batch`: model turns and judge calls through the Message Batches API, at half the price.

store.py persists what a resume polls instead of paying again; broker.py sends requests in batches and returns
results, never guessed; host.py adapts the api host and the judge for the one executor. claude-code sessions are
never batched (only their judge calls are).

Design notes: docs/design/batches.md.
"""

from __future__ import annotations

from runner.execute.batch.broker import DEFAULT_POLL_S, MAX_REQUESTS, BatchBroker, make_broker
from runner.execute.batch.host import BATCH_DISCOUNT, BatchApiHost, BatchJudge, GatedHost, batch_prices
from runner.execute.batch.store import BATCHES, BatchRecord, BatchStore, summary

__all__ = ["BATCHES", "BATCH_DISCOUNT", "DEFAULT_POLL_S", "MAX_REQUESTS", "BatchApiHost", "BatchBroker", "BatchJudge",
           "BatchRecord", "BatchStore", "GatedHost", "batch_prices", "make_broker", "summary"]
