"""`--batch`: model turns and judge calls through the Message Batches API, at half the price.

In: a prepared run (runner.execute.run.prepare) or a re-judge's judge, the run folder, the credentials. Out: the
same attempts and results the direct path writes (`run --batch`: runner.execute.run.execute with batched rounds),
plus `<run>/batches/`, the record of every batch sent, which a resume polls instead of paying again.

What is batched (`skill-evals run --batch`, `skill-evals judge --batch`):
- judge calls: every pending judge call goes into a batch; each result maps back by its custom_id;
- `api`-host sessions: each model turn of every in-flight session is one request of a batch; a session that needs
  another turn (tool_use) sends it in the next batch. The session loop, its tools, the listing and the Observation
  are the api host's own: only the transport differs, so attempt records and states are the direct path's.
- `claude-code` sessions cannot be batched (the CLI makes its own calls); with `--batch` they run as usual (at the
  plan's concurrency) and only their judge calls are batched.

The parts:
- store.py: what is persisted and resumed (`<run>/batches/<batch id>.json`) and the end-of-run summary line;
- broker.py: requests in, batches out (submitted, recorded, polled), results back, never guessed;
- host.py: the adapters the one executor uses unchanged (`BatchApiHost`, `GatedHost`, `BatchJudge`) and the prices
  at the batch discount.
The rounds themselves are the executor's (runner.execute.executor.Rounds): in a run, every attempt of a quorum round
joins the broker, and a batch goes out once all of them wait on it. A re-judge has no rounds: its batch goes out
once no new judge call arrived for the broker's `settle_s`.

Results are never guessed: `errored`, `expired` and `canceled` results make the session ERROR (`api-error`, with
the cause) or the judged assertions JUDGE-ERROR, never PASS, never FAIL. A batch the API refuses because spending
must stop (runner.execute.ratelimit.SpendLimitMiddleware) makes its sessions ERROR `spend-limit` and its judge calls
JUDGE-ERROR with `spend_limit`, and the run stops as on the direct path.
"""

from __future__ import annotations

import dataclasses
from typing import cast

from runner.execute import run as runs_mod
from runner.execute.batch.broker import DEFAULT_POLL_S, MAX_REQUESTS, BatchBroker, make_broker
from runner.execute.batch.host import BATCH_DISCOUNT, BatchApiHost, BatchJudge, GatedHost, batch_prices
from runner.execute.batch.store import BATCHES, BatchRecord, BatchStore, summary
from runner.execute.executor import ProgressFn, Rounds
from runner.execute.hosts.api import ApiHost
from runner.execute.hosts.base import Host
from runner.execute.hosts.registry import traits
from runner.execute.rundir import RunDir
from runner.judge.prose import Judge
from runner.results.build import Results

__all__ = ["BATCHES", "BATCH_DISCOUNT", "DEFAULT_POLL_S", "MAX_REQUESTS", "BatchApiHost", "BatchBroker", "BatchJudge",
           "BatchRecord", "BatchStore", "GatedHost", "batch_prices", "execute_batched", "make_broker", "summary"]


def execute_batched(prepared: runs_mod.Prepared, rundir: RunDir, credentials: runs_mod.Credentials,
                    progress: ProgressFn | None = None, poll_s: float = DEFAULT_POLL_S) -> Results:
    """`run --batch`: the one executor (runner.execute.run.execute) with batched rounds, its host and judge sending
    their model calls through one broker. The results are built from the prepared plan, as on the direct path."""
    broker = make_broker(credentials.api_key or "", credentials.base_url, rundir.path / BATCHES, poll_s)
    # A batchable host (HostTraits.batchable) is the api host, whose own loop BatchApiHost runs: the registry says so
    # of no other (tests/test_host_traits.py builds each batchable host and holds it to that).
    batchable = traits(prepared.host.name).batchable
    host: Host = (BatchApiHost(cast(ApiHost, prepared.host), broker) if batchable
                  else GatedHost(prepared.host, prepared.plan.concurrency))
    judge = prepared.judge
    if isinstance(judge, Judge):  # the run's own (runner.execute.run.make_judge); without one, prose stays UNRUN
        judge = BatchJudge(judge, broker)
    # An api-host session's worst case (its reservation and its own budget bound) is at batch prices.
    rounds = Rounds(broker, MAX_REQUESTS, session_price=BATCH_DISCOUNT if batchable else 1.0)
    return runs_mod.execute(dataclasses.replace(prepared, host=host, judge=judge), rundir, progress, rounds)
