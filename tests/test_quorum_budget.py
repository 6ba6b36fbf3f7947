"""Quorum, early stop, Wilson intervals and the spend ledger: the arithmetic the verdicts rest on."""

from __future__ import annotations

import asyncio
import itertools
import subprocess
from pathlib import Path

import pytest

from runner.core.quorum import QuorumRule, Tally, decide, starts_allowed, wilson_interval
from runner.execute.budget import Ledger
from runner.hosts.claude_code import KEEP, write_env_wrapper


def test_rule_validation() -> None:
    with pytest.raises(ValueError):
        QuorumRule(4, 3)
    with pytest.raises(ValueError):
        QuorumRule(3, 1)
    assert QuorumRule(3, 2).losses_to_fail == 2


@pytest.mark.parametrize(("wins", "losses", "errors", "verdict"), [
    (2, 0, 0, "win"), (0, 2, 0, "loss"), (1, 1, 0, "pending"), (1, 0, 2, "error"), (0, 0, 3, "error"),
    (0, 1, 1, "pending"), (1, 1, 1, "error"),
])
def test_decide_three_of_two(wins: int, losses: int, errors: int, verdict: str) -> None:
    assert decide(QuorumRule(3, 2), Tally(wins, losses, errors)) == verdict


def test_early_stop_starts_exactly_k_when_the_first_k_win() -> None:
    rule = QuorumRule(5, 3)
    assert starts_allowed(rule, Tally()) == 3
    assert starts_allowed(rule, Tally(in_flight=3)) == 0
    assert starts_allowed(rule, Tally(wins=3)) == 0
    assert starts_allowed(rule, Tally(wins=2, losses=1)) == 1
    assert starts_allowed(rule, Tally(wins=2, losses=2)) == 1


def test_errors_are_never_replaced() -> None:
    rule = QuorumRule(3, 2)
    # Two errors leave one repeat: neither 2 wins nor 2 losses is reachable -> ERROR, nothing starts.
    assert decide(rule, Tally(errors=2)) == "error"
    assert starts_allowed(rule, Tally(errors=2)) == 0
    # Never more starts than N in total, whatever happened.
    for wins, losses, errors in itertools.product(range(4), repeat=3):
        tally = Tally(wins, losses, errors)
        if tally.finished <= 3:
            assert tally.started + starts_allowed(rule, tally) <= 3


def test_wilson() -> None:
    assert wilson_interval(0, 0) is None
    low, high = wilson_interval(3, 3)
    assert 0.43 < low < 0.44 and high == 1.0
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and 0.27 < high < 0.28


def test_ledger_refuses_past_the_cap_and_counts_overshoot() -> None:
    async def scenario() -> Ledger:
        ledger = Ledger(cap_usd=1.0)
        first = await ledger.reserve(0.6)
        assert first is not None
        # 0.6 reserved + 0.6 > 1.0: the second waits for the first to settle instead of failing...
        waiting = asyncio.ensure_future(ledger.reserve(0.6))
        await asyncio.sleep(0.05)
        assert not waiting.done() and ledger.refused == 0
        await ledger.settle(first, 0.1)
        second = await waiting  # ...and fits once the first cost only 0.1
        assert second is not None and ledger.reserved_usd == pytest.approx(0.6)
        await ledger.settle(second, 0.7)  # the host overspent its reservation: recorded, never hidden
        assert await ledger.reserve(0.3) is None  # 0.8 spent, nothing outstanding: refused at once
        assert await ledger.reserve(0.6) is None
        return ledger

    ledger = asyncio.run(scenario())
    assert ledger.spent_usd == pytest.approx(0.8) and ledger.refused == 2 and ledger.reserved_usd == 0


def test_cli_wrapper_passes_only_the_kept_variables(tmp_path: Path) -> None:
    wrapper = write_env_wrapper(tmp_path, Path("/usr/bin/env"))
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp/h", "ANTHROPIC_API_KEY": "k", "GITHUB_TOKEN": "ghp_secret",
           "AWS_SECRET_ACCESS_KEY": "aws", "CLAUDE_CONFIG_DIR": "/tmp/c"}
    done = subprocess.run([str(wrapper)], env=env, capture_output=True, text=True, check=True)
    seen = dict(line.split("=", 1) for line in done.stdout.splitlines())
    seen.pop("PWD", None)  # the shell itself sets it; it is on the list
    assert seen == {"PATH": "/usr/bin:/bin", "HOME": "/tmp/h", "ANTHROPIC_API_KEY": "k", "CLAUDE_CONFIG_DIR": "/tmp/c"}
    assert set(seen) <= set(KEEP)
