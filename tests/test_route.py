"""Issue 34, parts 4 and 5: `route`, the library-wide routing sweep (every routing case as one run, on the first-turn
host where a case is eligible and on Claude Code otherwise, through `run`'s pipeline), and the pr tier following the
confusions an earlier run's routing matrix recorded when a pull request changes a description."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from runner.core.host_traits import ROUTE_HOST
from runner.corpus.decide import first_turn_ineligible
from runner.corpus.library import Library
from runner.corpus.loader import load_library
from runner.corpus.settings import Settings
from runner.execute.rundir import RunDir
from runner.pipeline import run as runs_mod
from runner.plan import confusions, sweep
from runner.plan.select import neighbour_graph
from runner.testing.fake_anthropic import FakeAnthropic, skill, text
from runner.testing.fake_judge import JUDGE_MATCH
from tests.conftest import EXAMPLE, cli, fake_env, run_cli
from tests.helpers import KEY, commit, example_repository, git

# The kinds whose cases name a skill that must fire or stay silent, written out here as the issue lists them (the
# code reads them from runner.core.kinds): a probe is the only kind left out.
ROUTING_KINDS = {"trigger", "no_trigger", "discrimination", "refusal", "routing"}
# Why the first-turn host leaves a case to Claude Code when its outcome is certain only once several skills fired.
SEVERAL = first_turn_ineligible([["a", "b"]], [], [], "a prompt")


def library_of(root: Path) -> Library:
    library, _ = load_library(root, Settings())
    return library


def routing_uids(library: Library) -> list[str]:
    return [case.uid for case in library.cases if case.kind in ROUTING_KINDS]


# ---- the sweep's plan -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("which", ["example", "aegis"])
def test_plan_routing_plans_and_caps_every_routing_case_on_the_first_turn_host(
        which: str, aegis_skills: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`plan --routing` is what `route` runs: every routing case of the whole library (Aegis: 185 skills), no probe,
    on the first-turn host, under the cap given, each case saying why; no session starts (no key)."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    root = EXAMPLE if which == "example" else aegis_skills
    library = library_of(root)
    wanted = routing_uids(library)
    if which == "example":  # its probe is a case of the corpus, which the sweep leaves out
        assert len(wanted) == len(library.cases) - 1
    else:
        assert len(library.skills) == 185 and len(wanted) > 1000
    result = cli("plan", "--library", str(root), "--routing", "--no-surface", "--format", "json", "--max-usd", "2.5",
                 "--no-library-validator")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["host"] == ROUTE_HOST and plan["cap_usd"] == 2.5 and plan["unrun_all"] == "no-credentials"
    assert [case["uid"] for case in plan["cases"]] == wanted
    assert all(case["why"].endswith(f"a routing case ({case['kind']})") for case in plan["cases"])
    eligible = [case["uid"] for case in plan["cases"] if case["first_turn"]]
    assert eligible and set(eligible) < set(wanted)  # the rest are planned on Claude Code
    # --host still chooses: the sweep's selection on another host.
    on_api = json.loads(cli("plan", "--library", str(root), "--routing", "--host", "api", "--no-surface", "--format",
                            "json", "--no-library-validator").stdout)
    assert on_api["host"] == "api" and [case["uid"] for case in on_api["cases"]] == wanted

    # The sweep measures activation parts: every assertion that reads the answer is left out, listed in the plan,
    # and nothing is planned for the judge.
    by_uid = {case.uid: case for case in library.cases}
    prose = {uid: [{"index": a.index, "assertion_class": a.assertion_class, "text": a.text}
                   for a in by_uid[uid].assertions if a.assertion_class in ("semantic", "artifact_shape")]
             for uid in wanted}
    assert plan["routing_sweep"]["left_out"] == {uid: found for uid, found in prose.items() if found}
    assert plan["estimate"]["judge_calls_planned"] == 0
    # So every runnable case is activation-only (refusals too: their judged part is what was left out), and the
    # first-turn host takes every one a first reply can settle; what keeps the others off it is never prose.
    runnable = [case for case in plan["cases"] if case["unrun_reason"] is None]
    assert all(case["decide_when"] for case in runnable)
    why_not = {case["uid"]: first_turn_ineligible(case["decide_when"], [], by_uid[case["uid"]].files,
                                                  by_uid[case["uid"]].prompt) for case in runnable}
    assert all((why_not[case["uid"]] is None) == case["first_turn"] for case in runnable)
    on_claude_code = [case for case in runnable if not case["first_turn"]]
    assert not [uid for uid, why in why_not.items() if why is not None and why.startswith("not activation-only")]
    # The same cases in a whole run (`plan` on the first-turn host): their prose keeps most of them off it.
    whole = json.loads(cli("plan", "--library", str(root), "--host", ROUTE_HOST, "--no-surface", "--format", "json",
                           "--no-library-validator").stdout)
    assert whole.get("routing_sweep") is None and whole["estimate"]["judge_calls_planned"] > 0
    whole_eligible = [case["uid"] for case in whole["cases"] if case["first_turn"]]
    assert set(whole_eligible) < set(eligible)
    if which == "aegis":  # the figures docs/cli.md and docs/hosts.md give
        ran_eligible = [case for case in runnable if case["first_turn"]]
        ran_whole = [case for case in whole["cases"] if case["first_turn"] and case["unrun_reason"] is None]
        assert (len(runnable), len(ran_eligible), len(ran_whole)) == (1563, 808, 3)
        # Only cases certain once several skills fired: 752 discrimination cases that name neighbours, and 3 trigger
        # cases whose activation assertions name other skills too.
        assert {why_not[case["uid"]] for case in on_claude_code} == {SEVERAL}
        assert Counter(case["kind"] for case in on_claude_code) == {"discrimination": 752, "trigger": 3}


def test_route_without_a_key_plans_and_writes_an_all_unrun_report_that_says_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No key: `route` still checks the floor, plans and writes results.json, every routing case UNRUN with its
    reason, exit 0, as `run` does (the api host here: no CLI starts for the surface audit in the fast tier)."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    out = tmp_path / "sweep"
    result = cli("route", "--library", str(EXAMPLE), "--host", "api", "--out", str(out), "--no-library-validator")
    assert result.exit_code == 0, result.output
    assert "no ANTHROPIC_API_KEY reached this run" in result.output
    every, routing = len(library_of(EXAMPLE).cases), len(routing_uids(library_of(EXAMPLE)))
    assert routing == every - 1  # all but the probe
    assert f"Selection: full: every case ({every}); routing cases only: {routing} of {every} case(s)" in result.output
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    states = {case["uid"]: (case["state"], case["reason"]) for case in results["cases"]}
    assert list(states) == routing_uids(library_of(EXAMPLE))
    assert {state for state, _ in states.values()} == {"UNRUN"}
    assert {reason for _, reason in states.values()} == {"no-credentials", "manual-only-target",
                                                         "subagent-not-callable"}

    # A resume (with the key, later) runs the sweep's cases, not the whole ones: plan.json says it is a sweep, and the
    # copies are made again from it. So does `judge` on its folder (runner.pipeline.rejudge, the same function).
    plan = runs_mod.load_plan(RunDir(out))
    assert plan.routing_sweep is not None and plan.routing_sweep.left_out
    resumed = runs_mod.prepare_resume(RunDir(out), library_of(EXAMPLE), Settings(), runs_mod.Credentials(None, None))
    try:
        for uid, left_out in plan.routing_sweep.left_out.items():
            case = resumed.cases[uid]
            assert case.activation_part_only and {a.index for a in left_out}.isdisjoint(
                a.index for a in case.assertions)
        assert resumed.plan_hash == plan.digest()
    finally:
        RunDir(out).release()
    assert sweep.applied(plan, {}) == {}
    whole = library_of(EXAMPLE)
    unswept = plan.model_copy(update={"routing_sweep": None})
    assert sweep.applied(unswept, {c.uid: c for c in whole.cases}) == {c.uid: c for c in whole.cases}
    assert unswept.digest() != plan.digest()  # the sweep is part of what the plan is


def test_route_refuses_a_selection_that_holds_a_case_it_would_not_sweep(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`route --selection FILE`: a case of the file that is no routing case (the example library's probe) would be
    measured whole in a sweep that measures activation parts; it is refused, naming it; `select --routing`'s file
    is taken."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    for routing, code in ((False, 2), (True, 0)):
        picked = cli("select", "--library", str(EXAMPLE), *(["--routing"] if routing else []))
        assert picked.exit_code == 0, picked.output
        chosen = tmp_path / f"selection-{routing}.json"
        chosen.write_text(picked.stdout, encoding="utf-8")
        done = cli("route", "--library", str(EXAMPLE), "--host", "api", "--selection", str(chosen), "--out",
                   str(tmp_path / f"sweep-{routing}"), "--no-library-validator")
        assert done.exit_code == code, done.output
    probe = next(c.uid for c in library_of(EXAMPLE).cases if c.kind == "probe")
    refused = cli("route", "--library", str(EXAMPLE), "--host", "api", "--selection", str(tmp_path / "selection-False.json"),
                  "--out", str(tmp_path / "again"), "--no-library-validator")
    assert "a routing sweep runs routing cases only, and this selection holds 1 that are not" in refused.output
    assert probe in refused.output


# ---- the sweep against the fake Messages API --------------------------------------------------------------------------

# Two Aegis skills: every kind of routing case, its prose assertions left out by the sweep.
CLOSEOUT, UPLOADS = "ai-closeout-reporter", "file-upload-storage-architect"
# What the fake's model does with each first-turn case's prompt: call the skill, or answer in text (ends the turn).
FIRST_REPLIES = {
    f"{CLOSEOUT}/evals/positive-full-closeout-explicit-none": ("fires", "PASS"),
    f"{CLOSEOUT}/evals/edge-scope-reduction-must-be-disclosed": ("fires", "PASS"),
    f"{CLOSEOUT}/evals/stop-refuse-fabricated-validation": ("text", "FAIL"),  # a trigger missed
    f"{CLOSEOUT}/evals/negative-mid-task-status-update": ("fires", "FAIL"),  # a no_trigger that fired
    f"{UPLOADS}/evals/positive-add-uploads": ("fires", "PASS"),
    f"{UPLOADS}/evals/positive-slow-proxied-uploads": ("fires", "PASS"),
    f"{UPLOADS}/evals/edge-image-derivatives-and-serving": ("fires", "PASS"),
    f"{UPLOADS}/evals/should-not-trust-extension": ("fires", "PASS"),  # a refusal: its activation part only
    f"{UPLOADS}/evals/should-not-trigger-pii-lifecycle": ("text", "PASS"),
}


def test_route_on_aegis_skills_sends_one_request_per_eligible_attempt(aegis_skills: Path, tmp_path: Path) -> None:
    """`route` on two Aegis skills (the vendored copy) against the fake Messages API: every case measures its
    activation part only, so every trigger, no_trigger and refusal case is decided by Claude Code's first request,
    one request per attempt, whatever prose it carries; the discrimination cases that name neighbours run on a Claude
    Code session from the start. No judge call is made; each left-out assertion is UNRUN (routing-sweep), and each
    case's state is its activation verdict, PASS or FAIL."""
    library = library_of(aegis_skills)
    planned = [c for c in library.cases if c.skill in (CLOSEOUT, UPLOADS) and c.kind in ROUTING_KINDS]
    by_uid = {c.uid: c for c in planned}
    assert {by_uid[uid].kind for uid in FIRST_REPLIES} == {"trigger", "no_trigger", "refusal"}
    prompts = {uid: by_uid[uid].prompt for uid in FIRST_REPLIES}
    # requests_for matches a prompt within a request's first user text: no prompt may hold another.
    assert not [(a, b) for a in prompts.values() for b in prompts.values() if a != b and a in b]
    prose = {uid: [a for a in by_uid[uid].assertions if a.assertion_class in ("semantic", "artifact_shape")]
             for uid in FIRST_REPLIES}
    assert all(prose.values())  # each would need a whole session and a judge call in `run`
    out = tmp_path / "sweep"
    with FakeAnthropic() as fake:
        for uid, (reply, _) in FIRST_REPLIES.items():
            if reply == "fires":
                fake.script(prompts[uid], skill(by_uid[uid].skill))
        fake.default(text("A plain answer without any skill."))
        done = run_cli("route", "--library", str(aegis_skills), "--skill", CLOSEOUT, "--skill", UPLOADS,
                       "--repeats", "3", "--max-usd", "4", "--out", str(out), "--no-library-validator",
                       "--timeout", "120", env=fake_env(fake, KEY))
        assert done.returncode == 0, done.stdout + done.stderr
        sent = {uid: fake.requests_for(prompt) for uid, prompt in prompts.items()}
        judged = fake.requests_for(JUDGE_MATCH)
    assert judged == []
    plan = json.loads((out / "plan.json").read_text(encoding="utf-8"))
    assert plan["host"] == ROUTE_HOST and plan["cap_usd"] == 4
    assert [c["uid"] for c in plan["cases"]] == [c.uid for c in planned]
    assert sorted(c["uid"] for c in plan["cases"] if c["first_turn"]) == sorted(FIRST_REPLIES)
    assert plan["estimate"]["judge_calls_planned"] == 0
    assert {uid: [a["index"] for a in found] for uid, found in plan["routing_sweep"]["left_out"].items()} == \
        {uid: [a.index for a in found] for uid, found in prose.items()}
    left = sum(len(found) for found in prose.values())
    assert (f"Routing sweep: route measures which skills fire; {left} prose/shape assertion(s) of "
            f"{len(prose)} case(s) are not judged in a routing sweep") in done.stdout

    records = [json.loads(line) for line in (out / "attempts.jsonl").read_text(encoding="utf-8").splitlines()]
    finished = [r for r in records if r["status"] == "finished"]
    on_first_turn = [r for r in finished if r["uid"] in FIRST_REPLIES]
    # Early stop: two wins (or two losses) decide k=2 of N=3, so each case ran two attempts.
    assert len(on_first_turn) == 2 * len(FIRST_REPLIES)
    assert all(r["first_turn"]["outcome"] == "decided" for r in on_first_turn)
    requests = sum(len(found) for found in sent.values())
    assert requests / len(on_first_turn) <= 1.05, (requests, len(on_first_turn))
    assert requests == len(on_first_turn)  # 1.00: no first reply here leaves its outcome open
    others = [r for r in finished if r["uid"] not in FIRST_REPLIES]
    assert {by_uid[r["uid"]].kind for r in others} == {"discrimination"}
    assert all(r["first_turn"]["outcome"] == "not-eligible" for r in others)

    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    cases = {case["uid"]: case for case in results["cases"]}
    assert {uid: cases[uid]["state"] for uid in FIRST_REPLIES} == {uid: s for uid, (_, s) in FIRST_REPLIES.items()}
    for uid in FIRST_REPLIES:
        unrun = [(a["index"], a["text"]) for a in cases[uid]["assertions"] if a["reason"] == "routing-sweep"]
        assert unrun == [(a.index, a.text) for a in prose[uid]]
        assert all(a["state"] == "UNRUN" for a in cases[uid]["assertions"] if a["reason"] == "routing-sweep")
    assert cases[f"{UPLOADS}/evals/should-not-trust-extension"]["parts"] == {"activation": "PASS",
                                                                            "refusal": "UNRUN"}
    assert results["assertion_counts"]["unrun:routing-sweep"] == left
    # Every report says what the sweep left out, beside the verdicts.
    said = (f"a routing sweep measured which skills fire: {left} prose/shape assertion(s) of {len(prose)} case(s) "
            "were not judged (UNRUN routing-sweep)")
    assert f"Routing sweep: {said}" in done.stdout
    for fmt in ("markdown", "terminal", "html", "junit"):
        shown = cli("report", str(out), "--format", fmt)
        assert shown.exit_code == 0 and said in shown.output, fmt
    assert results["spend"]["cap_usd"] == 4 and 0 < results["spend"]["usd"] <= 4
    assert f"Results: {out}/results.json" in done.stdout


# ---- the pr tier follows confusions ---------------------------------------------------------------------------------

CHANGED, STEALER_OF_IT, STOLEN_BY_IT = "release-publisher", "migration-planner", "incident-postmortem-writer"
NEIGHBOUR = "test-report-triage"  # the changed skill's only named neighbour
UNRELATED = "dependency-upgrade-reviewer"
EXPECTS_NONE = f"{UNRELATED}/evals/negative-cve-exploitability"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return example_repository(tmp_path)


def previous_run(folder: Path, routing: Any) -> Path:
    """An earlier run's folder whose results.json holds `routing` (left out when None), as the matrix writes it."""
    folder.mkdir(parents=True)
    results: dict[str, Any] = {"schema_version": 1, "cases": []}
    if routing is not None:
        results["routing"] = routing
    (folder / "results.json").write_text(json.dumps(results), encoding="utf-8")
    return folder


CONFUSIONS = [
    {"expected": STEALER_OF_IT, "fired": CHANGED, "attempts": 7, "of": 9,
     "cases": [f"{STEALER_OF_IT}/evals/positive-add-not-null-column"]},
    {"expected": CHANGED, "fired": STOLEN_BY_IT, "attempts": 2, "of": 6,
     "cases": [f"{CHANGED}/evals/positive-publish-approved-release"]},
    {"expected": "none", "fired": CHANGED, "attempts": 1, "of": 3, "cases": [EXPECTS_NONE]},
    {"expected": UNRELATED, "fired": NEIGHBOUR, "attempts": 5, "of": 5, "cases": []},  # does not touch CHANGED
    {"expected": STEALER_OF_IT, "fired": 7, "attempts": "many"},  # not of the shape: skipped and counted
]


def edit(repo: Path, skill_name: str, old: str, new: str) -> None:
    path = repo / ".claude" / "skills" / skill_name / "SKILL.md"
    text_now = path.read_text(encoding="utf-8")
    assert old in text_now
    path.write_text(text_now.replace(old, new, 1), encoding="utf-8")


def select_pr(repo: Path, *extra: str) -> dict[str, Any]:
    result = cli("select", "--library", str(repo), "--tier", "pr", "--base", "base", "--head", "HEAD", *extra)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_changed_description_selects_the_routing_cases_of_the_skills_confused_with_it(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Changing A's description selects B's routing cases because the previous run recorded B→A confusions, and the
    routing cases of C because A's prompts fired C; each case says which confusion brought it, and the plan carries
    the same reasons. Without --previous neither is selected."""
    edit(repo, CHANGED, "\ndescription: ", "\ndescription: Also for any deploy of a database migration. ")
    commit(repo, "head")
    library = library_of(repo)
    assert STEALER_OF_IT not in neighbour_graph(library)[CHANGED] | {CHANGED}
    assert STOLEN_BY_IT not in neighbour_graph(library)[CHANGED] | {CHANGED}
    earlier = previous_run(tmp_path / "nightly", {"confusions": CONFUSIONS})

    plain = select_pr(repo)
    followed = select_pr(repo, "--previous", str(earlier))
    own = {c.uid for c in library.cases if c.skill in (CHANGED, NEIGHBOUR)}
    assert {c["uid"] for c in plain["cases"]} == own
    confused = {c.uid for c in library.cases if {c.skill, c.target} & {STEALER_OF_IT, STOLEN_BY_IT}}
    assert {c["uid"] for c in followed["cases"]} == own | confused | {EXPECTS_NONE}
    assert followed["described"] == {CHANGED: "changed"}
    assert sorted(followed["confused"]) == sorted([STEALER_OF_IT, STOLEN_BY_IT])
    assert followed["previous"] == (earlier / "results.json").as_posix()

    why = {c["uid"]: c["why"] for c in followed["cases"]}
    source = f"in {earlier / 'results.json'}"
    change = f"and {CHANGED}'s description changed in base...HEAD"
    stolen = f"{STEALER_OF_IT}/evals/edge-rename-column-live-traffic"
    assert why[stolen] == (f"routing case of {STEALER_OF_IT}: confused with a changed description: "
                           f"{STEALER_OF_IT}'s prompts fired {CHANGED} (7 of 9 attempts) {source}, {change}")
    stealing = f"{STOLEN_BY_IT}/evals/positive-postmortem-from-channel-export"
    assert f"{CHANGED}'s prompts fired {STOLEN_BY_IT} (2 of 6 attempts) {source}, {change}" in why[stealing]
    assert why[EXPECTS_NONE] == (f"routing case of {UNRELATED}: a case of the confusion prompts that expect no skill "
                                 f"fired {CHANGED} (1 of 3 attempts) {source}, {change}")
    # Another skill's routing case aimed at a confused skill says so.
    aimed_elsewhere = f"{UNRELATED}/trigger/pk-retype-goes-to-{STEALER_OF_IT}"
    assert why[aimed_elsewhere].startswith(f"routing case aimed at {STEALER_OF_IT}: confused with a changed "
                                           f"description: {STEALER_OF_IT}'s prompts fired {CHANGED} (7 of 9")
    # A neighbour's routing case aimed at a confused skill keeps its reason and adds the confusion.
    aimed = f"{NEIGHBOUR}/trigger/quarantine-incident-goes-to-postmortem"
    assert why[aimed].startswith(f"skill {NEIGHBOUR} neighbour of {CHANGED}") and "(2 of 6 attempts)" in why[aimed]
    assert not any(uid.startswith(f"{UNRELATED}/") for uid in why if uid != EXPECTS_NONE
                   and library_case(library, uid).target not in (STEALER_OF_IT, STOLEN_BY_IT))
    assert "1 of 5 confusion(s)" in followed["note"] and "skipped" in followed["note"]
    assert f"2 skill(s) confused with them added ({STOLEN_BY_IT}, {STEALER_OF_IT})" in followed["note"]

    # The plan says the same, case by case (what `run --tier pr --previous` runs).
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    planned = cli("plan", "--library", str(repo), "--tier", "pr", "--base", "base", "--previous", str(earlier),
                  "--no-surface", "--format", "json", "--no-library-validator")
    assert planned.exit_code == 0, planned.output
    assert [(c["uid"], c["why"]) for c in json.loads(planned.stdout)["cases"]] == \
        [(c["uid"], c["why"]) for c in followed["cases"]]


def test_the_pr_tier_follows_the_result_caches_last_routing_matrix(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In the action a pull request restores the base branch's result cache: the last routing matrix a run kept
    there is what its pr tier follows, without --previous; --no-cache, or a damaged file (said), follows none."""
    from runner.cache.folder import Store

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    edit(repo, CHANGED, "\ndescription: ", "\ndescription: Also for any deploy of a database migration. ")
    commit(repo, "head")
    cache = tmp_path / "cache"
    store = Store(cache).open()
    store.put_routing({"rows": {STEALER_OF_IT: 9}, "confusions": CONFUSIONS[:1]}, "main run 601")

    def planned(*extra: str) -> dict[str, str]:
        done = cli("plan", "--library", str(repo), "--tier", "pr", "--base", "base", "--no-surface", "--format",
                   "json", "--no-library-validator", *extra)
        assert done.exit_code == 0, done.output
        return {c["uid"]: c["why"] for c in json.loads(done.stdout)["cases"]}

    followed, plain = planned("--cache", str(cache)), planned("--cache", str(cache), "--no-cache")
    stolen = f"{STEALER_OF_IT}/evals/edge-rename-column-live-traffic"
    assert stolen not in plain
    assert f"{STEALER_OF_IT}'s prompts fired {CHANGED} (7 of 9 attempts) in {cache / 'last-routing.json'}" in \
        followed[stolen]
    assert set(plain) < set(followed)
    store.last_routing_path.write_text("{damaged", encoding="utf-8")
    damaged = cli("plan", "--library", str(repo), "--tier", "pr", "--base", "base", "--no-surface", "--format",
                  "json", "--no-library-validator", "--cache", str(cache))
    assert damaged.exit_code == 0 and "no confusion is followed" in damaged.stderr
    assert {c["uid"] for c in json.loads(damaged.stdout)["cases"]} == set(plain)


def library_case(library: Library, uid: str) -> Any:
    return next(case for case in library.cases if case.uid == uid)


def test_only_a_description_change_follows_confusions_and_a_run_without_a_matrix_follows_none(
        repo: Path, tmp_path: Path) -> None:
    """A change to A's body, not its description, follows nothing (and says so); an earlier results.json with no
    routing matrix follows nothing either; a new skill counts as a description added."""
    edit(repo, CHANGED, "\n# ", "\nA line added to the body.\n\n# ")
    commit(repo, "body only")
    earlier = previous_run(tmp_path / "nightly", {"confusions": CONFUSIONS})
    body_only = select_pr(repo, "--previous", str(earlier))
    assert body_only["described"] == {} and body_only["confused"] == {}
    assert "no skill's description changed, so none is followed" in body_only["note"]
    assert {c["skill"] for c in body_only["cases"]} == {CHANGED, NEIGHBOUR}

    git(repo, "tag", "body")
    edit(repo, CHANGED, "\ndescription: ", "\ndescription: Reworded. ")
    commit(repo, "description")
    no_matrix = previous_run(tmp_path / "old-runner", None)
    none_followed = cli("select", "--library", str(repo), "--tier", "pr", "--base", "body", "--previous",
                        str(no_matrix / "results.json"))
    assert none_followed.exit_code == 0, none_followed.output
    selection = json.loads(none_followed.stdout)
    assert selection["described"] == {CHANGED: "changed"} and selection["confused"] == {}
    assert "records no routing matrix (no routing.confusions): no confusion is followed" in selection["note"]

    # A skill the base did not have: its description is new, and what the earlier run saw it confused with follows.
    added = repo / ".claude" / "skills" / "new-skill"
    added.mkdir()
    (added / "SKILL.md").write_text("---\nname: new-skill\ndescription: Plans database migrations.\n---\n\n# New\n",
                                    encoding="utf-8")
    commit(repo, "a new skill")
    seen = previous_run(tmp_path / "seen", {"confusions": [
        {"expected": STEALER_OF_IT, "fired": "new-skill", "attempts": 3, "of": 9, "cases": []}]})
    new = select_pr(repo, "--base", "body", "--previous", str(seen))
    assert new["described"] == {CHANGED: "changed", "new-skill": "added"}
    assert list(new["confused"]) == [STEALER_OF_IT]


def test_an_earlier_run_that_cannot_be_read_is_a_usage_error_and_other_tiers_ignore_it(
        repo: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"routing": ', encoding="utf-8")
    refused = cli("select", "--library", str(repo), "--tier", "pr", "--base", "base", "--previous", str(broken))
    assert refused.exit_code == 2 and "cannot be read as an earlier run's results.json" in refused.output
    assert "Traceback" not in refused.output
    empty = tmp_path / "no-run"
    empty.mkdir()
    missing = cli("select", "--library", str(repo), "--tier", "pr", "--base", "base", "--previous", str(empty))
    assert missing.exit_code == 2 and f"{empty / 'results.json'}" in missing.output
    full = cli("select", "--library", str(repo), "--previous", str(previous_run(tmp_path / "ok", None)))
    assert full.exit_code == 0 and "--previous only applies to --tier pr; ignored" in json.loads(full.stdout)["note"]


def test_confusions_are_read_as_written_and_tie_skills_both_ways() -> None:
    recorded = confusions.of_results({"routing": {"confusions": CONFUSIONS}}, "r.json")
    assert len(recorded.confusions) == 4 and recorded.note.startswith("1 of 5 confusion(s) in r.json")
    tied = confusions.partners(recorded.confusions, CHANGED)
    assert sorted(tied) == [STOLEN_BY_IT, STEALER_OF_IT]
    assert tied[STEALER_OF_IT][0].said() == f"{STEALER_OF_IT}'s prompts fired {CHANGED} (7 of 9 attempts)"
    assert [c.cases for c in confusions.from_no_skill(recorded.confusions, CHANGED)] == [(EXPECTS_NONE,)]
    # A row with no attempt behind it ties nothing; a results.json that is no object records nothing.
    zero = confusions.of_results({"routing": {"confusions": [{**CONFUSIONS[0], "attempts": 0}]}}, "z")
    assert confusions.partners(zero.confusions, CHANGED) == {}
    assert confusions.of_results([1, 2], "list.json").confusions == ()
    assert confusions.of_results({"routing": {"confusions": [{**CONFUSIONS[0], "of": True}]}}, "b").confusions == ()
