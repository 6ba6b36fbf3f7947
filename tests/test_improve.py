"""`skill-evals improve`: the description loop end to end against the fake Messages API (real `anthropic` SDK,
real HTTP to 127.0.0.1, the api host for the sessions, the CLI as a separate process), and its parts.

The fake is scripted as a model whose choice depends only on the listing it is shown: zoo-keeper fires for a zebra
prompt when its description says "zebra", and for any yak prompt when its description says "yak" (stealing
yak-groomer's cases). So the right fix ("zebra") exists, and a greedy one ("zebra and yaks") scores higher on train
but breaks the neighbour.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from runner.corpus.loader import load_library
from runner.corpus.settings import Settings
from runner.improve import split as split_mod
from runner.improve.loop import compare
from runner.improve.model import Improve, Score
from runner.improve.propose import PROPOSER_MATCH
from runner.improve.skillmd import description_span, rewrite_description
from runner.testing.fake_anthropic import FakeAnthropic, dynamic, error, first_user_text
from tests.conftest import run_cli
from tests.zoo_library import CURRENT, GOOD, GREEDY, YAK, ZOO, choose, listing_of, make_library, proposals

KEY = "sk-ant-test-improve-7c1e"


def improve(fake: FakeAnthropic, library: Path, out: Path, *args: str, key: str | None = KEY):
    return run_cli("improve", ZOO, "--library", str(library), "--out", str(out), "--host", "api", "--model",
                   "claude-haiku-4-5", "--proposer-model", "claude-sonnet-4-6", "--repeats", "3", "--seed", "7",
                   "--no-library-validator", *args, fake=fake, key=key)


def read_improve(out: Path) -> Improve:
    """improve.json, checked against the shipped schema first (what a consumer of the file reads it with)."""
    data = json.loads((out / "improve.json").read_text())
    schema = json.loads(resources.files("runner").joinpath("schemas", "improve.schema.json").read_text())
    problems = list(Draft202012Validator(schema).iter_errors(data))
    assert not problems, problems[0].message
    return Improve.model_validate(data)


def proposer_requests(fake: FakeAnthropic) -> list[dict[str, Any]]:
    return [r.body for r in fake.message_requests if PROPOSER_MATCH in first_user_text(r.body)]


@pytest.fixture
def fake():
    with FakeAnthropic() as server:
        server.default(dynamic(choose))
        yield server


def test_the_loop_finds_the_keyword_rejects_the_greedy_candidate_and_never_shows_the_test_split(
        fake: FakeAnthropic, tmp_path: Path) -> None:
    library = make_library(tmp_path / "lib")
    before = (library / ".claude/skills/zoo-keeper/SKILL.md").read_text()
    fake.script(PROPOSER_MATCH, proposals(GREEDY, GOOD, "x" * 1025))
    out = tmp_path / "out"
    done = improve(fake, library, out, "--max-usd", "5")
    assert done.returncode == 0, done.stdout + done.stderr
    record = read_improve(out)
    by_id = {c.id: c for c in record.candidates}

    # The split: stratified, the single discrimination case in train, the seed recorded.
    assert record.seed == 7 and record.split_by_kind == {"discrimination": (1, 0), "no_trigger": (4, 2),
                                                         "trigger": (12, 8)}
    # Train: the current description misses every zebra case; both candidates fix them, the greedy one also wins
    # the yak-pen case, so it is the best on train.
    assert by_id["current"].train is not None and by_id["current"].train.passed == 4
    greedy, good, too_long = by_id["r1c1"], by_id["r1c2"], by_id["r1c3"]
    assert greedy.train is not None and good.train is not None
    assert (greedy.train.passed, greedy.train.failed) == (17, 0) and (good.train.passed, good.train.failed) == (16, 1)
    assert too_long.state == "too-long" and too_long.train is None
    assert not any(p.name.startswith("r1c3") for p in (out / "runs").iterdir())
    # The neighbour check: the greedy candidate steals yak-groomer's three cases and is rejected.
    assert greedy.neighbours is not None and greedy.neighbours.state == "rejected"
    assert sorted(greedy.neighbours.broke) == [f"{YAK}/evals/groom-{i}" for i in range(3)]
    assert good.neighbours is not None and good.neighbours.state == "passed"
    # The held-out test: the keyword candidate, better with non-overlapping Wilson intervals.
    comparison = record.test_comparison
    assert comparison is not None and comparison.candidate == "r1c2" and "zebra" in GOOD
    assert (comparison.current.passed, comparison.current.decided) == (2, 10)
    assert (comparison.proposed.passed, comparison.proposed.decided) == (10, 10)
    assert comparison.proposed.wilson_95 and comparison.current.wilson_95
    assert comparison.proposed.wilson_95[0] > comparison.current.wilson_95[1]
    assert comparison.verdict == "better" and record.outcome.verdict == "better" and record.outcome.chosen == "r1c2"
    # Scores count cases, not attempts: said in the file and in the table.
    assert comparison.current.unit == comparison.proposed.unit == "cases" and "not attempts" in record.score_unit
    assert "cases, not attempts" in done.stdout and "neighbour check was partial" not in record.outcome.summary
    # Never the test split to the proposer: no test prompt in any proposer request; every train prompt in each.
    cases = {c.uid: c for c in load_library(library, Settings())[0].cases}
    # Round 2 (the keyword candidate still fails the yak-pen case): the same three proposals, duplicates now (the long one is too long first).
    sent = proposer_requests(fake)
    assert len(sent) == 2 and record.stop_reason == "no-proposals"
    assert [c.state for c in record.candidates if c.round == 2] == ["duplicate", "duplicate", "too-long"]
    for body in sent:
        dumped = json.dumps(body, ensure_ascii=False)
        assert not [uid for uid in record.test if json.dumps(cases[uid].prompt)[1:-1] in dumped]
        assert all(json.dumps(cases[uid].prompt)[1:-1] in dumped for uid in record.train)
        assert body["output_config"]["format"]["type"] == "json_schema"
    # Spend: within the cap, and the sum of what the runs and the proposer settled.
    runs = [json.loads(p.read_text())["spend"]["usd"] for p in (out / "runs").glob("*/results.json")]
    assert 0 < record.spend.usd <= record.spend.cap_usd == 5
    assert record.spend.usd == pytest.approx(sum(runs) + record.spend.proposer_usd, abs=1e-5)
    assert record.spend.proposer_usd > 0
    # The diff suggests the one-line description; the library itself is never edited.
    diff = (out / "SKILL.md.diff").read_text()
    assert f"+description: {json.dumps(GOOD)}" in diff and f"-description: {json.dumps(CURRENT)}" in diff
    assert (library / ".claude/skills/zoo-keeper/SKILL.md").read_text() == before
    assert "better" in done.stdout and "r1c2" in done.stdout
    # The table shows each candidate whole (it cut descriptions at 60 characters and reasons at 40, at any width).
    from io import StringIO

    from rich.console import Console

    from runner.improve.render import print_improve
    wide = Console(width=1000, record=True, file=StringIO())
    print_improve(record, wide)
    shown = wide.export_text()
    assert GOOD in shown and GREEDY in shown, shown


def test_a_proposer_http_error_is_an_error_not_a_verdict(fake: FakeAnthropic, tmp_path: Path) -> None:
    library = make_library(tmp_path / "lib")
    fake.script(PROPOSER_MATCH, error(500, "api_error", "proposer down"))
    out = tmp_path / "out"
    done = improve(fake, library, out, "--max-usd", "5")
    assert done.returncode == 0, done.stdout + done.stderr
    record = read_improve(out)
    assert record.outcome.state == "ERROR" and record.outcome.verdict is None and record.test_comparison is None
    assert record.rounds[0].proposal.state == "ERROR" and "HTTP 500" in (record.rounds[0].proposal.error or "")
    assert record.stop_reason == "proposer-error"
    assert [c.id for c in record.candidates] == ["current"]
    assert len(proposer_requests(fake)) == 3  # the call and the SDK's two retries, nothing more
    assert not (out / "SKILL.md.diff").exists()
    assert not list((out / "runs").glob("test-*"))


def test_without_a_key_the_plan_is_printed_and_nothing_runs(fake: FakeAnthropic, tmp_path: Path) -> None:
    library = make_library(tmp_path / "lib")
    out = tmp_path / "out"
    done = improve(fake, library, out, key=None)
    assert done.returncode == 0, done.stdout + done.stderr
    record = read_improve(out)
    assert record.outcome.state == "UNRUN" and record.outcome.reason == "no-credentials"
    assert record.planned is not None and record.planned.train_cases == 17 and record.planned.test_cases == 10
    assert record.planned.neighbour_cases == 3 and record.planned.sessions_per_train_evaluation == (34, 51)
    assert record.candidates == [] and record.spend.usd == 0
    assert fake.message_requests == []
    assert "Plan (nothing run)" in done.stdout and "UNRUN (no-credentials)" in done.stdout


def test_a_cap_that_covers_no_session_is_unrun(fake: FakeAnthropic, tmp_path: Path) -> None:
    library = make_library(tmp_path / "lib")
    fake.script(PROPOSER_MATCH, proposals(GOOD))
    out = tmp_path / "out"
    done = improve(fake, library, out, "--max-usd", "0")
    assert done.returncode == 0, done.stdout + done.stderr
    record = read_improve(out)
    assert record.outcome.state == "UNRUN" and record.outcome.reason == "budget-cap"
    assert record.spend.usd == 0 and fake.message_requests == []


# ---- the parts -----------------------------------------------------------------------------------------------

def test_split_is_stratified_deterministic_and_recorded(tmp_path: Path) -> None:
    library, _ = load_library(make_library(tmp_path / "lib"), Settings())
    cases = split_mod.own_cases(library, ZOO)
    first = split_mod.split_cases(cases, seed=3)
    assert first == split_mod.split_cases(list(reversed(cases)), seed=3)  # order of the input does not matter
    assert split_mod.split_cases(cases, seed=4).test != first.test
    kinds = {c.uid: c.kind for c in cases}
    for kind in ("trigger", "no_trigger"):
        assert any(kinds[u] == kind for u in first.train) and any(kinds[u] == kind for u in first.test)
    assert not set(first.train) & set(first.test) and set(first.train) | set(first.test) == set(kinds)
    assert all(kinds[u] != "discrimination" for u in first.test)  # one case of a kind stays in train
    assert [split_mod.held_out_count(n, 0.4) for n in (0, 1, 2, 3, 10)] == [0, 0, 1, 1, 4]
    assert [c.uid for c in split_mod.neighbour_cases(library, ZOO)] == [f"{YAK}/evals/groom-{i}" for i in range(3)]


def test_the_description_edit_is_one_line_and_changes_nothing_else() -> None:
    text = "---\nname: x\ndescription: >\n  folded: with colon\n  and more\n# kept\nlicense: MIT\n---\n\nBody\n"
    assert description_span(text) == (3, 5)
    edited = rewrite_description(text, 'Says "this": # and more')
    assert edited == ('---\nname: x\ndescription: "Says \\"this\\": # and more"\n# kept\nlicense: MIT\n---\n\n'
                      "Body\n")


def test_the_verdict_needs_intervals_that_do_not_overlap() -> None:
    def score(passed: int, failed: int, errored: int = 0) -> Score:
        from runner.core.quorum import wilson_interval
        return Score(run_dir="x", passed=passed, failed=failed, errored=errored, unrun=0,
                     rate=passed / (passed + failed), wilson_95=wilson_interval(passed, passed + failed),
                     spend_usd=0, cases=[])
    assert compare(score(2, 8), score(10, 0))[0] == "better"
    assert compare(score(10, 0), score(2, 8))[0] == "worse"
    assert compare(score(3, 3), score(5, 1))[0] == "no better"
    assert compare(score(2, 8), score(10, 0, errored=1))[0] == "undecided"


def test_the_improve_schema_matches_the_model() -> None:
    shipped = json.loads(resources.files("runner").joinpath("schemas", "improve.schema.json").read_text())
    generated = Improve.model_json_schema()
    for key in ("$schema", "title"):
        shipped.pop(key)
        generated.pop(key, None)
    assert shipped == generated, "regenerate runner/schemas/improve.schema.json: python scripts/regen_schemas.py"


def test_the_cap_stops_the_loop_and_a_partial_candidate_is_not_chosen(fake: FakeAnthropic, tmp_path: Path) -> None:
    """The cap (0.59) covers one session's worst case (0.5617: max turns, no cache) and little more, so sessions run
    one at a time, each reserving its worst case; the current description's train run and the proposer call fit,
    and the candidate's run stops where the ledger can no longer cover a worst case. Its cases not run are UNRUN
    (budget-cap), a partial score is never compared, the loop stops, nothing is claimed, spend stays in the cap."""
    library = make_library(tmp_path / "lib")
    fake.script(PROPOSER_MATCH, proposals(GOOD))
    out = tmp_path / "out"
    done = improve(fake, library, out, "--max-usd", "0.59")
    assert done.returncode == 0, done.stdout + done.stderr
    record = read_improve(out)
    current, candidate = record.candidates
    assert current.train is not None and current.train.unrun == 0 and current.train.passed == 4
    assert record.rounds[0].proposal.state == "ok" and len(proposer_requests(fake)) == 1
    assert candidate.train is not None and candidate.train.unrun > 0 and candidate.train.stop_reason == "budget-cap"
    assert {c.reason for c in candidate.train.cases if c.state == "UNRUN"} == {"budget-cap"}
    assert "budget-cap" in (candidate.reason or "") and candidate.neighbours is None
    assert record.stop_reason == "budget-cap" and record.test_comparison is None and record.outcome.verdict is None
    assert not (out / "SKILL.md.diff").exists()
    assert 0 < record.spend.usd <= 0.59


def test_a_greedy_best_on_train_is_rejected_inside_the_round_and_the_proposer_is_told_why(
        fake: FakeAnthropic, tmp_path: Path) -> None:
    """Round 1 proposes only the greedy candidate: it passes every train case (so, unchecked, it would end the loop
    with all-train-pass) but steals yak-groomer's cases. It is rejected inside round 1, the loop goes on, and the
    round-2 request carries the rejection with the neighbour prompts it fired on; the keyword candidate follows."""
    library = make_library(tmp_path / "lib")

    def reply(body: dict[str, Any]) -> Any:  # the keyword fix once the greedy one has been tried
        return proposals(GOOD if GREEDY in first_user_text(body) else GREEDY).fn(body)
    fake.script(PROPOSER_MATCH, dynamic(reply))
    out = tmp_path / "out"
    done = improve(fake, library, out, "--max-usd", "5", "--rounds", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    record = read_improve(out)
    by_id = {c.id: c for c in record.candidates}
    greedy, good = by_id["r1c1"], by_id["r2c1"]
    assert greedy.train is not None and (greedy.train.passed, greedy.train.failed) == (17, 0)
    assert greedy.neighbours is not None and greedy.neighbours.state == "rejected"
    broke = [f"{YAK}/evals/groom-{i}" for i in range(3)]
    assert sorted(greedy.neighbours.broke) == broke
    assert record.rounds[0].best == "current" and not record.rounds[0].improved  # rejected: not the round's best
    assert record.stop_reason != "all-train-pass"
    sent = proposer_requests(fake)
    assert len(sent) == 2
    second = first_user_text(sent[1])
    assert "it made these neighbour prompts fire it" in second and GREEDY in second
    cases = {c.uid: c for c in load_library(library, Settings())[0].cases}
    assert all(json.dumps(cases[uid].prompt)[1:-1] in second for uid in broke)
    assert f"fired instead: {ZOO}" in second
    assert sorted(record.rounds[1].proposal.neighbour_uids) == broke
    for body in sent:  # neither a test prompt nor a test uid, rejection section included
        dumped = json.dumps(body, ensure_ascii=False)
        assert not [uid for uid in record.test if json.dumps(cases[uid].prompt)[1:-1] in dumped]
    assert good.neighbours is not None and good.neighbours.state == "passed"
    assert record.outcome.chosen == "r2c1" and record.outcome.verdict == "better"
    assert record.spend.usd <= record.spend.cap_usd


def test_a_neighbour_case_that_errored_with_the_current_description_is_unchecked(
        fake: FakeAnthropic, tmp_path: Path) -> None:
    """groom-1 errors with the current description in the listing (HTTP 400 on every attempt), so whether a
    candidate breaks it cannot be told: it is reported unchecked, the check is partial, and the verdict says so."""
    library = make_library(tmp_path / "lib")

    def flaky(body: dict[str, Any]) -> Any:
        if "yak number 1 " in first_user_text(body) and listing_of(body).get(ZOO) == CURRENT:
            return error(400, "invalid_request_error", "scripted failure of one neighbour case")
        return choose(body)
    fake.default(dynamic(flaky))
    fake.script(PROPOSER_MATCH, proposals(GOOD))
    out = tmp_path / "out"
    done = improve(fake, library, out, "--max-usd", "5", "--rounds", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    record = read_improve(out)
    assert record.neighbour_baseline is not None and record.neighbour_baseline.errored == 1
    good = {c.id: c for c in record.candidates}["r1c1"]
    assert good.neighbours is not None and good.neighbours.state == "partial"
    assert good.neighbours.unchecked == [f"{YAK}/evals/groom-1"] and good.neighbours.broke == []
    assert record.outcome.chosen == "r1c1" and "neighbour check was partial" in record.outcome.summary
    assert "partial" in done.stdout
