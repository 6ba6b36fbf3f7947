"""The plan's expected cost uses prompt caching and measured session shapes; the worst case stays uncached.

Unit figures are worked by hand below (Sonnet prices of runner/data/prices.json: $3 in, $15 out, $3.75 cache
write, $0.30 cache read per million tokens). The end-to-end test runs `skill-evals run` twice with the real
Claude Code CLI against the fake Messages API: the second run's plan takes the first run's measured figures as
its basis (`[cost] basis = "auto"`, the default: the newest earlier run beside it), and results.json shows planned
vs spent per session and their ratio.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from runner.corpus.settings import Settings
from runner.hosts.prices import load as load_prices
from runner.plan.cost import (
    MAX_TOOL_RESULT_TOKENS,
    SessionShape,
    auto_basis,
    cold_sessions,
    read_basis,
    session_usd,
    worst_session_usd,
)
from runner.plan.plan import UNHASHED_ESTIMATE_FIELDS, Plan
from runner.testing.fake_anthropic import FakeAnthropic, skill, text
from tests.conftest import EXAMPLE, REPO, run_cli

SONNET = load_prices(Settings()).price("claude-sonnet-4-6")
SHAPE = SessionShape(first_turn=10_000, cached_prefix=6_000, growth=1_000, turns=2, output_per_turn=100)


@pytest.mark.parametrize(("layout", "which", "usd"), [
    # a case's first session: reads 6,000 (shared) + 10,000 (turn 1 reads turn 0); writes 4,000 + 1,000
    ("conversation", "first", (16_000 * 0.3 + 5_000 * 3.75 + 200 * 15) / 1e6),
    # the first wave writes the shared prefix too: reads 10,000, writes 11,000
    ("conversation", "cold", (10_000 * 0.3 + 11_000 * 3.75 + 200 * 15) / 1e6),
    # a later session of the same case sent the same first turn: reads 10,000 + 10,000, writes the growth
    ("conversation", "repeat", (20_000 * 0.3 + 1_000 * 3.75 + 200 * 15) / 1e6),
    # the api host marks only the shared prefix: both turns read 6,000; 4,000 + 5,000 uncached
    ("prefix", "first", (12_000 * 0.3 + 9_000 * 3 + 200 * 15) / 1e6),
    ("prefix", "repeat", (12_000 * 0.3 + 9_000 * 3 + 200 * 15) / 1e6),
    ("prefix", "cold", (6_000 * 0.3 + 6_000 * 3.75 + 9_000 * 3 + 200 * 15) / 1e6),
    ("none", "first", (21_000 * 3 + 200 * 15) / 1e6),
])
def test_one_session_costs_what_its_cache_layout_reads_and_writes(layout: str, which: str, usd: float) -> None:
    assert session_usd(SHAPE, layout, SONNET, which) == pytest.approx(usd)


def test_a_prefix_under_the_models_minimum_is_never_read() -> None:
    haiku = load_prices(Settings()).price("claude-haiku-4-5")  # minimum 4,096 tokens
    small = SessionShape(first_turn=5_000, cached_prefix=3_000, growth=0, turns=1, output_per_turn=0)
    # Claude Code: the shared 3,000 are under the minimum, so the turn writes its whole 5,000.
    assert session_usd(small, "conversation", haiku, "first") == pytest.approx(5_000 * 1.25 / 1e6)
    assert session_usd(small, "prefix", haiku, "first") == pytest.approx(5_000 * 1.0 / 1e6)


def test_the_first_wave_writes_and_the_rest_read_unless_the_cache_may_expire() -> None:
    assert cold_sessions(sessions=66, concurrency=2, timeout_s=300, ttl_s=300) == 2
    assert cold_sessions(sessions=1, concurrency=4, timeout_s=300, ttl_s=300) == 1
    # Sessions may start 400 s apart: the cache may be gone before the next one reads it.
    assert cold_sessions(sessions=66, concurrency=1, timeout_s=400, ttl_s=300) == 66


def test_the_worst_case_stays_uncached_and_unchanged() -> None:
    worst = worst_session_usd(10_000, 6, 4096, SONNET.input, SONNET.output)
    turns = sum(10_000 + t * (4096 + MAX_TOOL_RESULT_TOKENS) for t in range(6))
    assert worst == pytest.approx((turns * 3 + 6 * 4096 * 15) / 1e6)


def results_of_run(fake: FakeAnthropic, out: Path, config: Path | None) -> dict:
    """One session per case of dependency-upgrade-reviewer, against the fake; its results.json."""
    args = ["run", "--library", str(EXAMPLE), "--out", str(out), "--no-judge", "--no-early-stop", "--repeats", "1",
            "--quorum", "1", "--concurrency", "1", "--timeout", "60", "--skill", "dependency-upgrade-reviewer",
            "--no-library-validator"]
    if config is not None:
        args += ["--config", str(config)]
    done = run_cli(*args, fake=fake, key="sk-test-plan-cost", cwd=REPO)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads((out / "results.json").read_text())


def test_results_show_planned_against_spent_and_a_measured_basis_plans_the_next_run(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    results = []
    for out in (runs / "first", runs / "second"):
        with FakeAnthropic() as fake:  # a cache of its own: the second run reads nothing the first one wrote
            fake.default(skill("dependency-upgrade-reviewer"), text("Done."))
            results.append(results_of_run(fake, out, None))
    first, second = results
    for results in (first, second):
        cost = results["cost"]
        assert cost["sessions"] == results["attempts_finished"] > 1
        assert cost["spent_session_usd"] == pytest.approx(results["spend"]["usd"] / cost["sessions"], rel=1e-3)
        assert cost["ratio"] == pytest.approx(cost["planned_session_usd"] / cost["spent_session_usd"], rel=1e-3)
        assert cost["prefixes"] == 1 and cost["cache_read_share"] > 0.5
        kinds = {row["kind"] for row in cost["by_kind"]}
        assert kinds and all(row["turns"] == 2 for row in cost["by_kind"])
    # The first plan had nothing measured beside it; the second used what the first run measured, per kind.
    first_estimate = json.loads((runs / "first" / "plan.json").read_text())["estimate"]
    assert first_estimate["cost_basis"].startswith("defaults (no earlier claude-code run"), first_estimate
    estimate = json.loads((runs / "second" / "plan.json").read_text())["estimate"]
    assert str(runs / "first" / "results.json") in estimate["cost_basis"]
    assert all(row["turns"] == 2 and row["basis"].startswith("measured") for row in estimate["by_kind"])
    assert 0.7 <= second["cost"]["ratio"] <= 1.4, (second["cost"], estimate)
    # A prediction is not part of the plan's identity: the two plans differ only in it, and hash the same.
    plans = [Plan.model_validate_json((runs / name / "plan.json").read_text()) for name in ("first", "second")]
    assert plans[0].estimate.expected_usd != plans[1].estimate.expected_usd
    assert plans[0].digest() == plans[1].digest() == second["plan"]["hash"]
    changed = plans[1].model_copy(update={"estimate": plans[1].estimate.model_copy(update={"worst_usd": 1.0})})
    assert changed.digest() != plans[1].digest()  # the worst case is what the cap reserves: it stays in
    # Every report shows planned against spent and the ratio.
    cost = second["cost"]
    shown = f"planned ${cost['planned_session_usd']:.4f}/session, spent ${cost['spent_session_usd']:.4f}/session"
    for fmt in ("terminal", "markdown", "html"):
        report = report_of(runs / "second", fmt).replace("&#36;", "$")  # Markdown writes $ as a reference
        assert shown in report and f"planned/spent {cost['ratio']:.2f}" in report, fmt
        assert "1 distinct prefix(es)" in report
    junit = report_of(runs / "second", "junit")
    assert f'name="planned_over_spent" value="{cost["ratio"]:.4f}"' in junit
    assert f'name="spent_session_usd" value="{cost["spent_session_usd"]:.6f}"' in junit


def report_of(run: Path, fmt: str) -> str:
    done = run_cli("report", str(run), "--format", fmt, cwd=REPO, env={**os.environ, "COLUMNS": "400"})
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def write_results(folder: Path, host: str, model: str, finished: str, sessions: int) -> Path:
    folder.mkdir(parents=True)
    row = {"kind": "positive", "sessions": sessions, "turns": 3, "first_turn_input_tokens": 9000,
           "growth_tokens_per_turn": 500, "output_tokens_per_turn": 200, "usd_per_session": 0.01}
    (folder / "results.json").write_text(json.dumps({"finished_at": finished, "plan": {"host": host, "model": model},
                                                     "cost": {"by_kind": [row], "token_scale": 0.8}}))
    return folder / "results.json"


def test_auto_basis_is_the_newest_earlier_run_of_the_same_host_and_model(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    older = write_results(runs / "a", "claude-code", "claude-sonnet-4-6", "2026-12-01T10:00:00Z", 4)
    write_results(runs / "b", "claude-code", "claude-haiku-4-5", "2026-12-02T10:00:00Z", 4)  # another model
    write_results(runs / "c", "api", "claude-sonnet-4-6", "2026-12-02T11:00:00Z", 4)  # another host
    write_results(runs / "d", "claude-code", "claude-sonnet-4-6", "2026-12-02T12:00:00Z", 0)  # nothing measured
    (runs / "e").mkdir()
    (runs / "e" / "results.json").write_text("{torn")  # passed over, not fatal
    assert auto_basis(runs, "claude-code", "claude-sonnet-4-6") == older
    basis = read_basis("auto", tmp_path, runs, "claude-code", "claude-sonnet-4-6")
    assert basis.described == f"measured in {older}" and basis.kinds["positive"].turns == 3
    assert basis.token_scale == 0.8
    newer = write_results(runs / "f", "claude-code", "claude-sonnet-4-6", "2026-12-02T13:00:00Z", 2)
    assert auto_basis(runs, "claude-code", "claude-sonnet-4-6") == newer
    nothing = read_basis("auto", tmp_path, tmp_path / "absent", "api", "claude-opus-4-1")
    assert nothing.kinds == {} and nothing.described.startswith("defaults (no earlier api run of claude-opus-4-1")
    assert read_basis("", tmp_path, runs, "claude-code", "claude-sonnet-4-6").described == "defaults"


def test_the_plan_hash_is_the_same_in_two_checkouts_and_an_old_plan_keeps_its_own(tmp_path: Path) -> None:
    """Issue 32: the shards of one run are planned in different checkouts (each CI job has a workspace of its own,
    act's too), so the library's absolute folder is not in the plan hash: the content hash says it is the same
    library. A plan.json from before (no `root_in_hash`) hashes as it did then, with the folder, so a run folder made
    then still resumes and merges."""
    from tests.conftest import cli

    plans = []
    for name in ("one", "two"):
        shutil.copytree(EXAMPLE, tmp_path / name / "library", symlinks=True)
        done = cli("plan", "--library", str(tmp_path / name / "library"), "--tier", "full", "--no-surface",
                   "--format", "json")
        assert done.exit_code == 0, done.output
        plans.append(Plan.model_validate(json.loads(done.output)))
    assert plans[0].library.root != plans[1].library.root and plans[0].library.root_in_hash is False
    assert plans[0].digest() == plans[1].digest()
    other = plans[1].model_copy(update={"library": plans[1].library.model_copy(update={"content_hash": "0" * 16})})
    assert other.digest() != plans[0].digest()  # another library's content is another plan
    old = [json.loads(p.model_dump_json()) for p in plans]
    for data in old:
        del data["library"]["root_in_hash"]
    before = [Plan.model_validate(data) for data in old]
    assert before[0].library.root_in_hash is True and before[0].digest() != before[1].digest()
    # ...and exactly the hash such a plan had: the model without the field, as it was dumped then.
    body = before[0].model_dump_json(exclude={"created_at": True, "session_wall": True,
                                              "library": {"root_in_hash", "read_from"},  # read_from: never hashed
                                              "estimate": set(UNHASHED_ESTIMATE_FIELDS),
                                              "cases": {"__all__": {"cached"}},  # issue 33's field, never hashed
                                              "routing_sweep": True,  # issue 34's field, hashed only when set
                                              "sequential": True,  # issue 35's field, hashed only when set
                                              **({"record_mac": True} if before[0].record_mac is None else {}),
                                              **({} if before[0].floor_notes else {"floor_notes": True})})
    assert before[0].digest() == hashlib.sha256(body.encode()).hexdigest()[:16]
