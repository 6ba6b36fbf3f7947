"""`run --batch`: the one executor with batched rounds, its host and judge sending their model calls through one
broker (runner.execute.batch)."""

from __future__ import annotations

import dataclasses
from typing import cast

from runner.core.host_traits import traits
from runner.execute.batch import (
    BATCH_DISCOUNT,
    BATCHES,
    DEFAULT_POLL_S,
    MAX_REQUESTS,
    BatchApiHost,
    BatchJudge,
    GatedHost,
    make_broker,
)
from runner.execute.executor import ProgressFn, Rounds
from runner.execute.rundir import RunDir
from runner.hosts.api import ApiHost
from runner.hosts.base import Host
from runner.judge.prose import Judge
from runner.pipeline import run as runs_mod
from runner.results.build import Results


def execute_batched(prepared: runs_mod.Prepared, rundir: RunDir, credentials: runs_mod.Credentials,
                    progress: ProgressFn | None = None, poll_s: float = DEFAULT_POLL_S) -> Results:
    """`run --batch`: the one executor (runner.pipeline.run.execute) with batched rounds, its host and judge sending
    their model calls through one broker. The results are built from the prepared plan, as on the direct path."""
    broker = make_broker(credentials.api_key or "", credentials.base_url, rundir.path / BATCHES, poll_s)
    # A batchable host (HostTraits.batchable) is the api host, whose own loop BatchApiHost runs: the registry says so
    # of no other (tests/test_host_traits.py builds each batchable host and holds it to that).
    batchable = traits(prepared.host.name).batchable
    host: Host = (BatchApiHost(cast(ApiHost, prepared.host), broker) if batchable
                  else GatedHost(prepared.host, prepared.plan.concurrency))
    judge = prepared.judge
    if isinstance(judge, Judge):  # the run's own (runner.pipeline.run.make_judge); without one, prose stays UNRUN
        judge = BatchJudge(judge, broker)
    # An api-host session's worst case (its reservation and its own budget bound) is at batch prices.
    rounds = Rounds(broker, MAX_REQUESTS, session_price=BATCH_DISCOUNT if batchable else 1.0)
    return runs_mod.execute(dataclasses.replace(prepared, host=host, judge=judge), rundir, progress, rounds)
