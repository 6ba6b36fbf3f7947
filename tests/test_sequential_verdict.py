"""The sequential verdict: the rule (runner.core.sequential) and its starts, the settings that choose it, the plan's
expected sessions, and one run end to end on the claude-code host (the real CLI) against the fake Messages API with
scripted firing sequences (always, never, 50 %, 75 %, 90 %, an errored first attempt, a no_trigger case), its
UNDECIDED case shown in Markdown, HTML, JUnit and the check run."""

from __future__ import annotations

import json
import threading
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from runner.core.quorum import QuorumRule, Tally
from runner.core.sequential import SequentialRule, characteristics, expected_attempts
from runner.corpus.settings import Settings
from runner.execute.executor import CaseStarts
from runner.pipeline import run as runs_mod
from runner.plan.plan import PlannedCase
from runner.testing.fake_anthropic import FakeAnthropic, dynamic, error, skill, text
from tests.conftest import cli, run_cli
from tests.helpers import demo_skill, results_of, skill_evals_run

RULE = SequentialRule()


# ---- the rule ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("wins", "losses", "errors", "decision"), [
    (0, 0, 0, "pending"), (2, 0, 0, "win"), (0, 2, 0, "loss"), (1, 1, 0, "pending"), (3, 1, 0, "win"),
    (1, 3, 0, "loss"), (3, 3, 0, "undecided"),  # the bound, 6 attempts: open
    (2, 2, 0, "pending"), (2, 3, 0, "pending"),  # one more loss fails it
    (2, 2, 2, "error"),  # nothing left, but the 2 errored ones as trials could have decided it
    (2, 2, 1, "error"),  # one left cannot reach ±2 (curtailed), but two could have
    (1, 0, 5, "error"), (0, 0, 6, "error"),
])
def test_decide(wins: int, losses: int, errors: int, decision: str) -> None:
    assert RULE.decide(Tally(wins=wins, losses=losses, errors=errors)) == decision


def test_curtailed_is_undecided_when_the_errors_could_not_have_decided_it_either() -> None:
    seven = SequentialRule(max_repeats=7)
    assert seven.decide(Tally(wins=3, losses=3)) == "undecided"  # one attempt left cannot reach ±2
    assert seven.decide(Tally(wins=3, losses=3, errors=1)) == "undecided"  # nor could the errored one have


def test_the_defaults_are_two_more_wins_than_losses() -> None:
    assert RULE.llr(2, 0) == pytest.approx(RULE.upper) and RULE.llr(0, 2) == pytest.approx(RULE.lower)
    assert RULE.fewest == 2
    for wins in range(8):
        for losses in range(8 - wins):
            crossed = RULE.crossed(wins, losses)
            assert crossed == ("win" if wins - losses >= 2 else "loss" if losses - wins >= 2 else None)


def test_starts_come_in_rounds_and_never_one_that_cannot_be_needed() -> None:
    assert RULE.starts_allowed(Tally()) == 2
    assert RULE.starts_allowed(Tally(in_flight=1)) == 0  # the round is not over
    assert RULE.starts_allowed(Tally(wins=1, losses=1)) == 2
    assert RULE.starts_allowed(Tally(wins=1)) == 1  # the leader ran alone: its round has one more
    assert RULE.starts_allowed(Tally(wins=1, errors=1)) == 1  # one more win decides: never two
    assert RULE.starts_allowed(Tally(wins=3, losses=3)) == 0  # curtailed
    assert RULE.starts_allowed(Tally(wins=2, losses=2, errors=2)) == 0  # "error": nothing more starts
    wide = SequentialRule(round_size=4)
    assert wide.starts_allowed(Tally()) == 2  # the first two trials could decide: not four
    assert SequentialRule(max_repeats=7).starts_allowed(Tally(wins=3, losses=3)) == 0  # one left cannot decide


@pytest.mark.parametrize("kwargs", [{"pass_rate": 0.2, "indifference": 0.25}, {"alpha": 0.5}, {"beta": 0},
                                    {"max_repeats": 0}, {"round_size": 0}])
def test_a_rule_outside_its_bounds_is_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        SequentialRule(**kwargs)


def test_case_starts_follow_the_rounds() -> None:
    planned = PlannedCase(uid="s/evals/x", skill="s", kind="trigger", target="s", repeats=6, quorum=4, why="test")
    starts = CaseStarts(planned, [], RULE, first_alone=False)
    first = starts.take()
    assert first == [("main", 1), ("main", 2)] and starts.take() == []
    assert starts.in_flight == 2


def test_exact_characteristics_by_hand() -> None:
    always, never = characteristics(RULE, 1.0), characteristics(RULE, 0.0)
    assert (always.expected_attempts, always.passed, always.expected_rounds) == (2.0, 1.0, 1.0)
    assert (never.expected_attempts, never.failed) == (2.0, 1.0)
    # p = 0.5: each round of two is WW or LL (decided) with 1/2, else back to the start; three open rounds leave
    # 3-3 at the bound of 6: UNDECIDED with (1/2)^3.
    half = characteristics(RULE, 0.5)
    assert half.undecided == pytest.approx(0.125) and half.passed == pytest.approx(0.4375)
    assert half.expected_attempts == pytest.approx(2 * (1 + 0.5 + 0.25))
    edge = characteristics(RULE, RULE.p0)
    assert edge.passed <= RULE.alpha / (1 - RULE.beta)  # Wald's bound, looking after every round


def test_expected_attempts_follow_what_an_earlier_run_saw() -> None:
    unknown = expected_attempts(RULE)
    assert 2.0 < unknown < 3.5
    assert expected_attempts(RULE, 10, 0) < unknown < expected_attempts(RULE, 5, 5)


def test_the_result_cache_takes_what_the_rule_needs_and_the_case_result_says_how_sure() -> None:
    from runner.cache.reuse import enough
    from runner.core.outcomes import AttemptOutcome
    from runner.corpus.library import Case
    from runner.execute.rundir import AttemptRecord
    from runner.results.build import case_result

    planned = PlannedCase(uid="s/evals/x", skill="s", kind="trigger", target="s", repeats=6, quorum=4, why="test")

    def records(outcomes: str) -> list[AttemptRecord]:
        return [AttemptRecord(attempt_id=f"s/evals/x#main#{n}", uid="s/evals/x", arm="main", repeat=n, plan_hash="h",
                              status="finished", outcome=AttemptOutcome(
                                  state="PASS" if o == "F" else "FAIL", activation="PASS" if o == "F" else "FAIL",
                                  fired=["s"] if o == "F" else [], target_fired=o == "F", fired_instead=[]))
                for n, o in enumerate(outcomes, 1)]

    assert [r.repeat for r in enough(planned, records("FFF"), RULE) or []] == [1, 2]  # two wins decide
    assert enough(planned, records("F-F"), RULE) is None  # still open: the case runs
    assert [r.repeat for r in enough(planned, records("F-F-F-"), RULE) or []] == list(range(1, 7))  # undecided
    assert enough(planned, records("F-F"), QuorumRule(3, 2)) is not None  # what k of N would take
    case = Case(uid="s/evals/x", skill="s", source="evals", id="x", file="s/evals/evals.json", line=1, format="aegis",
                prompt="p", target="s", kind="trigger", kind_rule="t")
    result = case_result(planned, case, records("F-F-F-"), None, None, set(), rule=RULE)
    assert (result.state, result.wins, result.losses) == ("UNDECIDED", 3, 3)
    assert result.sequential is not None and result.sequential.fixed_n3 == "PASS" and result.sequential.round == 3
    assert case_result(planned, case, records("--"), None, None, set(), rule=RULE).state == "FAIL"


# ---- choosing it ---------------------------------------------------------------------------------------------------

def test_the_verdict_comes_from_the_option_else_the_tier_else_run() -> None:
    settings = Settings.model_validate({"tiers": {"pr": {"verdict": "sequential"}}})
    full = runs_mod.apply_options(settings, runs_mod.Options(tier="full"))[1]
    pr = runs_mod.apply_options(settings, runs_mod.Options(tier="pr", base="main"))[1]
    forced = runs_mod.apply_options(settings, runs_mod.Options(tier="pr", base="main", verdict="quorum"))[1]
    assert (full.verdict, pr.verdict, forced.verdict) == ("quorum", "sequential", "quorum")
    with pytest.raises(ValueError, match="--no-early-stop"):
        runs_mod.apply_options(settings, runs_mod.Options(tier="pr", base="main", early_stop=False))


def test_a_pull_request_may_tighten_the_rule_never_loosen_it(tmp_path: Path) -> None:
    library = demo_skill(tmp_path / "lib", [{"id": "one", "type": "should_trigger", "prompt": "summarise it",
                                              "expect": {"triggers": True, "assertions": ["The demo skill activates."]}}])
    (library / ".skill-evals.toml").write_text("[run]\nverdict = \"sequential\"\n[sequential]\nalpha = 0.3\n"
                                               "indifference = 0.1\nmax_repeats = 9\n", encoding="utf-8")
    done = cli("plan", "--library", str(library), "--no-surface", "--untrusted-settings")
    assert done.exit_code != 0
    assert "[sequential] alpha = 0.3 (line 4: above 0.1" in done.output
    assert "indifference" not in done.output  # narrower is stricter
    (library / ".skill-evals.toml").write_text("[run]\nverdict = \"sequential\"\n[sequential]\nalpha = 0.05\n",
                                               encoding="utf-8")
    done = cli("plan", "--library", str(library), "--no-surface", "--untrusted-settings", "--format", "json")
    assert done.exit_code == 0, done.output
    plan = json.loads(done.stdout)
    assert plan["sequential"]["alpha"] == 0.05 and plan["cases"][0]["repeats"] == 6


def test_the_plan_says_the_rule_and_its_expected_sessions(tmp_path: Path) -> None:
    library = demo_skill(tmp_path / "lib", [{"id": f"c{i}", "type": "should_trigger", "prompt": f"summarise {i}",
                                              "expect": {"triggers": True, "assertions": ["The demo skill activates."]}}
                                             for i in range(4)])
    done = cli("plan", "--library", str(library), "--no-surface", "--verdict", "sequential")
    assert done.exit_code == 0, done.output
    assert "sequential verdict, at most 6 attempts" in done.stdout
    assert "Verdict: sequential: pass rate above 0.5" in done.stdout
    assert f"expected ≈ {4 * expected_attempts(RULE):,.0f}" in done.stdout and "8–24" in done.stdout


# ---- end to end ----------------------------------------------------------------------------------------------------

# uid -> what each attempt's session does, in order: F fires the skill, - does not, E gets a 500 (no retry).
SCRIPT = {
    "always": "FFFFFFF",
    "never": "-------",
    "half": "F-F-F-F",
    "three-quarters": "-FFF-FFF",
    "ninety": "FFFFFFFFF-",
    "error-first": "EFFFFFF",
    "quiet": "-------",  # a no_trigger case: not firing is its win
}
KINDS = {"quiet": "should_not_trigger"}
# uid -> (state, attempts, wins, losses, errors, round)
EXPECTED = {
    "always": ("PASS", 2, 2, 0, 0, 1),
    "never": ("FAIL", 2, 0, 2, 0, 1),
    "half": ("UNDECIDED", 6, 3, 3, 0, 3),  # 3-3 at the bound
    "three-quarters": ("PASS", 4, 3, 1, 0, 2),
    "ninety": ("PASS", 2, 2, 0, 0, 1),
    "error-first": ("PASS", 3, 2, 0, 1, 2),  # the 500 is no trial: a third attempt, one more win
    "quiet": ("PASS", 2, 2, 0, 0, 1),
}


def prompt_of(name: str) -> str:
    return f"[{name}] summarise the demo report please."


def scripted_library(root: Path) -> Path:
    library = demo_skill(root, [{"id": name, "type": KINDS.get(name, "should_trigger"), "prompt": prompt_of(name),
                                 "expect": {"triggers": name not in KINDS,
                                            "assertions": ["The demo skill activates." if name not in KINDS
                                                           else "The demo skill does not activate."]}}
                                for name in SCRIPT])
    # One session at a time, so each case's attempts meet its script in order; a 500 is not retried, so it is one
    # attempt's error.
    (library / ".skill-evals.toml").write_text("[run]\nconcurrency = 1\nhost_max_retries = 0\n", encoding="utf-8")
    return library


def script(fake: FakeAnthropic) -> None:
    lock = threading.Lock()
    sent = dict.fromkeys(SCRIPT, 0)

    def reply(name: str) -> Any:
        def turn(body: dict[str, Any]) -> Any:
            if any(m.get("role") == "assistant" for m in body.get("messages") or [] if isinstance(m, dict)):
                return text("The demo report, in one line.")
            with lock:
                step = SCRIPT[name][sent[name]]
                sent[name] += 1
            return {"F": skill("demo"), "-": text("Here is a summary without the skill."),
                    "E": error(500, "api_error", "scripted")}[step]
        return dynamic(turn)

    for name in SCRIPT:
        fake.script(f"[{name}]", reply(name), reply(name))


@pytest.fixture(scope="module")
def sequential_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    work = tmp_path_factory.mktemp("sequential")
    library = scripted_library(work / "library")
    plan = cli("plan", "--library", str(library), "--no-surface", "--host", "claude-code", "--verdict", "sequential",
               "--format", "json")
    assert plan.exit_code == 0, plan.output
    with FakeAnthropic() as fake:
        script(fake)
        out = work / "runs" / "first"  # where a later plan in `work` looks for the earlier run ([cost] basis auto)
        done = skill_evals_run(fake, out, "--host", "claude-code", "--verdict", "sequential", library=library)
        assert done.returncode == 0, done.stdout + done.stderr
    return out, results_of(out), json.loads(plan.stdout)


def test_clear_cases_stop_at_the_first_round_and_open_ones_run_longer(
        sequential_run: tuple[Path, dict[str, Any], dict[str, Any]]) -> None:
    out, results, _ = sequential_run
    by_uid = {c["uid"].split("/")[-1]: c for c in results["cases"]}
    for name, (state, attempts, wins, losses, errors, round_) in EXPECTED.items():
        case = by_uid[name]
        assert (case["state"], case["repeats_run"], case["wins"], case["losses"], case["errors"]) == \
            (state, attempts, wins, losses, errors), name
        figures = case["sequential"]
        assert (figures["attempts"], figures["trials"], figures["round"]) == (attempts, wins + losses, round_), name
    attempts_run = [json.loads(line) for line in (out / "attempts.jsonl").read_text().splitlines() if line.strip()]
    assert sum(1 for a in attempts_run if a.get("status") == "finished") == sum(e[1] for e in EXPECTED.values())
    half = by_uid["half"]
    assert half["reason"].startswith("the rate stayed open after 6 attempt(s)")
    assert half["sequential"]["rate"] == 0.5 and half["sequential"]["interval_95"][0] < 0.5 < \
        half["sequential"]["interval_95"][1]
    # Fixed N = 3 on the first three attempts: F-F passes the 50 % case, -FF passes the 75 % one.
    assert half["sequential"]["fixed_n3"] == "PASS"
    summary = results["sequential"]
    assert (summary["cases"], summary["passed"], summary["failed"], summary["undecided"], summary["broken"]) == \
        (7, 5, 1, 1, 0)
    assert summary["sessions"] == 21 and summary["sessions_fixed_n3"] == 21 and summary["sessions_bound"] == 42
    assert {flip["uid"].split("/")[-1]: flip["fixed_n3"] for flip in summary["flips"]} == {"half": "PASS"}
    assert results["counts"]["UNDECIDED"] == 1


def test_the_plan_expected_about_the_sessions_used(
        sequential_run: tuple[Path, dict[str, Any], dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    out, results, plan = sequential_run
    used = results["sequential"]["sessions"]
    expected = plan["estimate"]["sessions_expected"]
    assert expected == pytest.approx(len(SCRIPT) * expected_attempts(RULE), abs=0.01)
    assert 0.8 <= expected / used <= 1.25, (expected, used)
    assert plan["estimate"]["sessions_max"] == 6 * len(SCRIPT)
    # The next plan beside that run expects each case at the rate that run observed of it.
    monkeypatch.chdir(out.parent.parent)
    again = cli("plan", "--library", str(out.parent.parent / "library"), "--no-surface", "--host", "claude-code", "--verdict",
                "sequential", "--format", "json")
    assert again.exit_code == 0, again.output
    estimate = json.loads(again.stdout)["estimate"]
    assert estimate["sessions_expected_from_history"] == len(SCRIPT)
    assert estimate["sessions_expected"] == pytest.approx(
        sum(expected_attempts(RULE, c["wins"], c["losses"]) for c in results["cases"]), abs=0.01)


def test_the_undecided_case_is_shown_as_such_everywhere(
        sequential_run: tuple[Path, dict[str, Any], dict[str, Any]], tmp_path: Path) -> None:
    out, results, _ = sequential_run
    half = next(c for c in results["cases"] if c["uid"].endswith("/half"))
    markdown = run_cli("report", str(out), "--format", "markdown")
    assert markdown.returncode == 0, markdown.stderr
    assert "UNDECIDED" in markdown.stdout and "Sequential verdict" in markdown.stdout
    page = run_cli("report", str(out), "--format", "html")
    assert page.returncode == 0 and "UNDECIDED" in page.stdout
    junit = run_cli("report", str(out), "--format", "junit")
    assert junit.returncode == 0, junit.stderr
    testcase = next(t for t in ET.fromstring(junit.stdout).iter("testcase") if t.get("name", "").endswith(half["uid"])
                    or half["uid"] in (t.get("name") or ""))
    assert testcase.find("failure") is None and testcase.find("error") is None
    skipped = testcase.find("skipped")
    assert skipped is not None and (skipped.get("message") or "").startswith("UNDECIDED")

    from runner.publish.github import Context, publish
    from runner.results.build import Results
    from runner.testing.fake_github import FakeGitHub
    token = "ghs_TOKEN-MARKER-sequential"
    with FakeGitHub(token=token) as gh:
        ctx = Context(api_url=gh.url, repository=gh.repository, event_name="pull_request", sha="b" * 40,
                      head_sha="a" * 40, pr_number=7, step_summary=tmp_path / "summary.md")
        for mode in ("advisory", "required"):
            outcome = publish(Results.model_validate(results), ctx, token, seconds_between_requests=None,
                              seconds_between_writes=None, mode=mode)
            check = gh.check_runs[outcome.check_run_id]
            # One FAIL ("never") is in this run: required fails on it, advisory stays neutral; never success.
            assert check["conclusion"] == ("failure" if mode == "required" else "neutral")
            assert "UNDECIDED 1" in check["output"]["title"]
            assert "UNDECIDED" in check["output"]["text"] or "UNDECIDED" in check["output"]["summary"]


def test_a_sequential_run_where_nothing_ran_claims_no_figure() -> None:
    """No key: the plan's rule is shown, and no case figure is claimed for it."""
    from runner.report.rollup import sequential_cases_text
    from runner.results.sureness import SequentialSummary
    empty = SequentialSummary(rule=RULE.describe(), pass_at_p0=0.0947, fail_at_p1=0.0947, undecided_at_theta=0.125,
                              cases=0, passed=0, failed=0, undecided=0, broken=0, sessions=0, sessions_fixed_n3=0,
                              sessions_bound=0)
    assert sequential_cases_text(empty) == "no case ran by it: no verdict and no figure of it is claimed"


def test_merged_shards_give_the_unsharded_sequential_figures() -> None:
    from runner.results.build import sequential_summary
    from runner.results.merge import merge
    from tests.report_fixtures import sequential
    from tests.test_merge_history import other_shard

    whole = sequential()
    parts = []
    for index in range(2):
        cases = [c if position % 2 == index else other_shard(c) for position, c in enumerate(whole.cases)]
        parts.append(whole.model_copy(update={"cases": cases, "shard": f"{index + 1}/2",
                                              "sequential": sequential_summary(whole.plan.sequential, cases)}))
    assert all(p.sequential is not None and p.sequential.cases < whole.sequential.cases  # type: ignore[union-attr]
               for p in parts)
    merged = merge(parts)
    assert merged.sequential == whole.sequential


def test_a_resumed_case_finishes_its_round() -> None:
    """A resume rebuilds a case's starts from its records: one attempt of the round ran, so one more starts."""
    from runner.core.outcomes import AttemptOutcome
    from runner.execute.rundir import AttemptRecord

    planned = PlannedCase(uid="s/evals/x", skill="s", kind="trigger", target="s", repeats=6, quorum=4, why="test")
    won = AttemptRecord(attempt_id="s/evals/x#main#1", uid="s/evals/x", arm="main", repeat=1, plan_hash="h",
                        status="finished", outcome=AttemptOutcome(state="PASS", activation="PASS", fired=["s"],
                                                                  target_fired=True, fired_instead=[]))
    starts = CaseStarts(planned, [won], RULE, first_alone=False)
    assert starts.take() == [("main", 2)]
