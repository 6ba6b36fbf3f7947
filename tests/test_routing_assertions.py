"""Routing assertions (issue 34 part 1): must / must not / at most N / allow_extra / in order, read as skill-up and
waza write them, checked by the floor, and graded from what fired — on the api host (in this process) and on the
claude-code host with the real bundled CLI (one run), both against the scripted fake Messages API.

Every library here is written by the test (synthetic files in tmp folders). Each routing part has a case that passes
and a case that fails, and one case whose every attempt errors: ERROR, with no routing part counted for or against.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from runner.corpus.library import RoutingSpec
from runner.corpus.loader import load_library
from runner.corpus.settings import Settings
from runner.execute.rundir import RunDir
from runner.pipeline.run import Credentials, Options, execute, prepare, write_plan
from runner.report import html, junit, markdown, terminal
from runner.results.build import Results
from runner.testing.fake_anthropic import FakeAnthropic, error, skill, text
from tests.conftest import findings_of, line_of
from tests.helpers import KEY, attempts, case, results_of, skill_evals_run

SKILLS = ("alpha", "beta", "gamma")

# uid -> (the routing case as written, what the scripted model does, the case's expected state, the routing part
# that decides it). The prompts carry a unique tag the fake matches on.
ROUTING_SET = "evals/routing.json"


def write_library(root: Path) -> Path:
    """Three skills; routing cases in a library-level routing set (skill-up's keys, waza's keys, skill-up's nested
    `routing_expect`) and in alpha's skill-creator evals.json."""
    for name in SKILLS:
        folder = root / ".claude" / "skills" / name
        (folder / "evals").mkdir(parents=True)
        (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: Handle {name} requests. Use when the "
                                         f"user asks for {name}.\n---\n\n# {name}\n\nDo the {name} work.\n")
    (root / "evals").mkdir()
    (root / "evals" / "routing.json").write_text(json.dumps({"cases": [
        {"id": "must-pass", "prompt": "[r-must-pass] alpha please", "must_include": ["alpha"]},
        {"id": "must-fail", "prompt": "[r-must-fail] alpha and beta please", "must_include": ["alpha", "beta"]},
        {"id": "not-pass", "prompt": "[r-not-pass] not gamma", "routing_expect": {"must_not_include": ["gamma"]}},
        {"id": "not-fail", "prompt": "[r-not-fail] not gamma", "forbidden_skills": ["gamma"]},
        {"id": "max-pass", "prompt": "[r-max-pass] one skill", "max_skills": 1},
        {"id": "max-fail", "prompt": "[r-max-fail] one skill", "routing_expect": {"max_skills": 1}},
        {"id": "extra-pass", "prompt": "[r-extra-pass] only beta", "expected": "beta", "allow_extra": False},
        {"id": "extra-fail", "prompt": "[r-extra-fail] only beta", "must_include": "beta", "allow_extra": False},
        {"id": "order-pass", "prompt": "[r-order-pass] alpha then beta", "required_skills": ["alpha", "beta"],
         "mode": "in_order"},
        {"id": "order-fail", "prompt": "[r-order-fail] alpha then beta", "required_skills": ["alpha", "beta"],
         "mode": "in_order"},
        {"id": "errored", "prompt": "[r-errored] alpha please", "must_include": ["alpha"]},
    ]}, indent=2))
    (root / ".claude" / "skills" / "alpha" / "evals" / "evals.json").write_text(json.dumps({
        "skill_name": "alpha", "evals": [
            {"id": "own-alone", "prompt": "[r-own-alone] alpha alone", "should_trigger": True, "allow_extra": False,
             "expectations": ["Invokes `alpha`."]}]}, indent=2))
    return root


# What the scripted model does per tag, and what the case must come to: (turns, state, {part: state}).
SCRIPT = {
    "[r-must-pass]": ((skill("alpha"), text("done")), "PASS", {"must": "PASS"}),
    "[r-must-fail]": ((skill("alpha"), text("done")), "FAIL", {"must": "FAIL"}),
    "[r-not-pass]": ((skill("alpha"), text("done")), "PASS", {"must_not": "PASS"}),
    "[r-not-fail]": ((skill("gamma"), text("done")), "FAIL", {"must_not": "FAIL"}),
    "[r-max-pass]": ((skill("alpha"), text("done")), "PASS", {"max_skills": "PASS"}),
    "[r-max-fail]": ((skill("alpha"), skill("beta"), text("done")), "FAIL", {"max_skills": "FAIL"}),
    "[r-extra-pass]": ((skill("beta"), text("done")), "PASS", {"must": "PASS", "allow_extra": "PASS"}),
    "[r-extra-fail]": ((skill("beta"), skill("gamma"), text("done")), "FAIL", {"must": "PASS", "allow_extra": "FAIL"}),
    "[r-order-pass]": ((skill("alpha"), skill("beta"), text("done")), "PASS", {"must": "PASS", "order": "PASS"}),
    "[r-order-fail]": ((skill("beta"), skill("alpha"), text("done")), "FAIL", {"must": "PASS", "order": "FAIL"}),
    "[r-own-alone]": ((skill("alpha"), text("done")), "PASS", {"must": "PASS", "allow_extra": "PASS"}),
}
UIDS = {
    "[r-must-pass]": "alpha/routing/must-pass", "[r-must-fail]": "alpha/routing/must-fail",
    "[r-not-pass]": "(library)/routing/not-pass", "[r-not-fail]": "(library)/routing/not-fail",
    "[r-max-pass]": "(library)/routing/max-pass", "[r-max-fail]": "(library)/routing/max-fail",
    "[r-extra-pass]": "beta/routing/extra-pass", "[r-extra-fail]": "beta/routing/extra-fail",
    "[r-order-pass]": "alpha/routing/order-pass", "[r-order-fail]": "alpha/routing/order-fail",
    "[r-own-alone]": "alpha/evals/own-alone",
}
ERRORED = "alpha/routing/errored"


def script(fake: FakeAnthropic) -> None:
    for tag, (turns, _, _) in SCRIPT.items():
        fake.script(tag, *turns)
    fake.script("[r-errored]", error(500, "api_error", "boom"))


def check(results: dict, out: Path) -> None:
    """Every case's state and each routing part's, from results.json; the evidence says what fired."""
    for tag, (_, state, parts) in SCRIPT.items():
        uid = UIDS[tag]
        got = case(results, uid)
        assert got["kind"] == "routing" and got["state"] == state, (uid, got["state"], got["routing"])
        assert {p["part"]: p["state"] for p in got["routing"]} == parts, (uid, got["routing"])
        for part in got["routing"]:
            assert part["attempts"] and all("fired" in a["evidence"] or "library skill" in a["evidence"]
                                            or "in order" in a["evidence"] for a in part["attempts"]), part
    # Evidence names what fired.
    order = {p["part"]: p for p in case(results, UIDS["[r-order-fail]"])["routing"]}["order"]
    assert order["attempts"][0]["evidence"] == "in_order: first fired in order: beta, alpha; alpha then beta asked"
    extra = {p["part"]: p for p in case(results, UIDS["[r-extra-fail]"])["routing"]}["allow_extra"]
    assert extra["attempts"][0]["evidence"].startswith("others fired: gamma")
    most = {p["part"]: p for p in case(results, UIDS["[r-max-fail]"])["routing"]}["max_skills"]
    assert most["attempts"][0]["evidence"] == "2 library skill(s) fired (alpha, beta); at most 1"
    # An errored attempt is ERROR and counts for neither side: no routing part is claimed from it.
    broken = case(results, ERRORED)
    assert broken["state"] == "ERROR" and broken["wins"] == broken["losses"] == 0 and broken["errors"] >= 1
    assert broken["routing"] == []
    assert all(a["outcome"]["routing"] == [] and a["outcome"]["state"] == "ERROR" for a in attempts(out, ERRORED))


# ---- the api host, in this process ----------------------------------------------------------------------------------

def test_routing_assertions_on_the_api_host(tmp_path: Path) -> None:
    root = write_library(tmp_path / "library")
    settings = Settings()
    library, findings = load_library(root, settings)
    assert not [f for f in findings if f.level.value == "error"], findings
    out = tmp_path / "run"
    with FakeAnthropic() as fake:
        script(fake)
        uids = tuple([*UIDS.values(), ERRORED])
        prepared = prepare(library, settings, Options(host="api", repeats=1, quorum=1, no_judge=True, cases=uids),
                           Credentials(api_key=KEY, base_url=fake.url), audit=False)
        rundir = RunDir(out)
        write_plan(rundir, prepared)
        execute(prepared, rundir)
    results = results_of(out)
    assert results["plan"]["host"] == "api"
    check(results, out)
    reports_show_the_routing_parts(results, out)


def reports_show_the_routing_parts(results: dict, out: Path) -> None:
    """Markdown, JUnit, HTML (with the run folder: each attempt's routing) and the terminal say which routing part
    failed and what fired."""
    shown = Results.model_validate(results)
    said = "in_order: first fired in order: beta, alpha; alpha then beta asked"
    md = markdown.render(shown)
    assert "must not fire: gamma: **FAIL**" in md and said in md
    assert "routing failed: in order: alpha, beta" in junit.render(shown)
    page = html.render(shown, out)
    assert "<h4>Routing assertions</h4>" in page and said in page
    assert "order FAIL: " + said in page  # the attempt's own data, for the attempts pane
    console = Console(record=True, width=200)
    terminal.render(shown, console)
    assert "at most 1 library skill(s) fire FAIL (0/1)" in console.export_text()


# ---- the claude-code host with the real CLI (end to end: tests/conftest.py lists it) --------------------------------

def test_routing_assertions_on_claude_code_with_the_real_cli(tmp_path: Path) -> None:
    root = write_library(tmp_path / "library")
    out = tmp_path / "run"
    with FakeAnthropic() as fake:
        script(fake)
        done = skill_evals_run(fake, out, "--repeats", "1", "--quorum", "1", "--no-judge", library=root)
    assert done.returncode == 0, done.stdout + done.stderr
    results = results_of(out)
    assert results["plan"]["host"] == "claude-code"
    check(results, out)


# ---- the shapes as written, and the floor ---------------------------------------------------------------------------

def test_skill_up_and_waza_shapes_are_read_as_written(tmp_path: Path) -> None:
    root = write_library(tmp_path / "library")
    library, _ = load_library(root, Settings())
    by_uid = {c.uid: c for c in library.cases}
    assert by_uid["alpha/routing/must-fail"].routing == RoutingSpec(must_fire=["alpha", "beta"])
    assert by_uid["(library)/routing/not-pass"].routing == RoutingSpec(must_not_fire=["gamma"])  # nested
    assert by_uid["(library)/routing/not-fail"].routing == RoutingSpec(must_not_fire=["gamma"])  # waza
    assert by_uid["(library)/routing/max-fail"].routing == RoutingSpec(max_skills=1)
    # A routing set's expected skill joins the must set; a bare name reads as a list of one.
    assert by_uid["beta/routing/extra-pass"].routing == RoutingSpec(must_fire=["beta"], allow_extra=False)
    assert by_uid["beta/routing/extra-fail"].routing == RoutingSpec(must_fire=["beta"], allow_extra=False)
    assert by_uid["alpha/routing/order-pass"].routing == RoutingSpec(must_fire=["alpha", "beta"], order="in_order")
    # In a skill's skill-creator file: the file's skill stays the owner; should_trigger adds it to the must set.
    own = by_uid["alpha/evals/own-alone"]
    assert own.routing == RoutingSpec(must_fire=["alpha"], allow_extra=False) and own.kind_rule == "field:routing"
    assert {c.kind for c in library.cases} == {"routing"}
    # waza's exact, and a bare list in a skill's evals.json.
    (root / ".claude" / "skills" / "beta" / "evals" / "evals.json").write_text(json.dumps([
        {"id": "w-exact", "prompt": "exactly", "required_skills": ["beta", "gamma"], "mode": "exact"},
        {"id": "w-any", "prompt": "any", "required_skills": ["gamma"], "forbidden_skills": "alpha",
         "mode": "any_order"}]))
    library, findings = load_library(root, Settings())
    by_uid = {c.uid: c for c in library.cases}
    assert by_uid["beta/routing/w-exact"].routing == RoutingSpec(must_fire=["beta", "gamma"], order="exact")
    assert by_uid["beta/routing/w-any"].routing == RoutingSpec(must_fire=["gamma"], must_not_fire=["alpha"])
    assert not [f for f in findings if f.rule == "eval-unknown-key"], findings


def test_a_case_that_is_not_routing_is_unchanged(tmp_path: Path) -> None:
    """Only routing keys make a routing case: a routing set's plain expected skill stays discrimination, and a
    skill-creator `mode` beside no routing key is not read as one."""
    root = write_library(tmp_path / "library")
    (root / "evals" / "plain.json").write_text(json.dumps({"cases": [
        {"id": "p1", "prompt": "gamma please", "expected": "gamma", "unexpected_skills": ["alpha"]}]}))
    library, _ = load_library(root, Settings())
    plain = next(c for c in library.cases if c.uid == "gamma/routing/plain:p1")
    assert plain.kind == "discrimination" and plain.routing is None and plain.should_not_trigger == ["alpha"]


@pytest.mark.parametrize(("item", "rule", "needle", "words"), [
    ({"id": "b1", "prompt": "x", "must_include": ["alpha", "delta"]}, "dangling-reference", '"delta"', "'delta'"),
    ({"id": "b2", "prompt": "x", "routing_expect": {"must_not_include": ["gamma", "zeta"]}}, "dangling-reference",
     '"zeta"', "'zeta'"),
    ({"id": "b3", "prompt": "x", "forbidden_skills": "omega"}, "dangling-reference", '"omega"', "'omega'"),
    ({"id": "b4", "prompt": "x", "must_include": ["alpha"], "max_skills": 0}, "eval-schema", '"max_skills"',
     "minimum of 1"),
    ({"id": "b5", "prompt": "x", "must_include": ["alpha"], "max_skills": "2"}, "eval-schema", '"max_skills"',
     "integer"),
    ({"id": "b6", "prompt": "x", "required_skills": ["alpha"], "mode": "sometimes"}, "eval-schema", '"mode"',
     "sometimes"),
    ({"id": "b7", "prompt": "x", "must_include": ["alpha"], "allow_extra": "no"}, "eval-schema", '"allow_extra"',
     "boolean"),
    ({"id": "b10", "prompt": "x", "routing_expect": {"allow_extra": True}}, "eval-schema", ('{', 2),
     "nothing to check"),
    ({"id": "b8", "prompt": "x", "must_include": ["alpha"], "must_not_include": ["alpha"]}, "contradictory-case",
     ('"alpha"', 2), "must fire and must not fire"),
    ({"id": "b9", "prompt": "x", "must_include": ["alpha", "beta"], "max_skills": 1}, "contradictory-case",
     '"max_skills"', "max_skills is 1"),
])
def test_the_floor_names_bad_routing_keys_at_their_line(tmp_path: Path, item: dict, rule: str,
                                                          needle: str | tuple[str, int], words: str) -> None:
    root = write_library(tmp_path / "library")
    evals = root / ".claude" / "skills" / "gamma" / "evals" / "evals.json"
    evals.write_text(json.dumps({"skill_name": "gamma", "evals": [item]}, indent=2))
    code, findings = findings_of(root, "--no-library-validator")
    assert code == 1
    mine = [f for f in findings if f["rule"] == rule and f["file"] == ".claude/skills/gamma/evals/evals.json"]
    assert mine, findings
    where = line_of(evals, *needle) if isinstance(needle, tuple) else line_of(evals, needle)
    assert mine[0]["line"] == where and words in mine[0]["message"], mine
    # The case is held back, never run as a guess; nothing else of the library is.
    library, _ = load_library(root, Settings())
    held = next(c for c in library.cases if c.id == item["id"])
    assert held.kind in ("invalid", "routing")


def test_a_manual_only_must_skill_keeps_the_case_unrun_and_a_must_not_one_does_not(tmp_path: Path) -> None:
    """The model can never pick a manual-only skill: a routing case that needs one to fire stays UNRUN
    (manual-only-target), never FAIL; one that only forbids it still measures its other parts."""
    from runner.floor.validate import check_manual_only
    from runner.plan.planner import unrun_reason

    root = write_library(tmp_path / "library")
    skill_md = root / ".claude" / "skills" / "gamma" / "SKILL.md"
    skill_md.write_text(skill_md.read_text().replace("description:", "disable-model-invocation: true\ndescription:"))
    (root / "evals" / "manual.json").write_text(json.dumps({"cases": [
        {"id": "needs", "prompt": "alpha and gamma", "must_include": ["alpha", "gamma"]},
        {"id": "forbids", "prompt": "not gamma", "must_not_include": ["gamma"], "max_skills": 1}]}))
    library, _ = load_library(root, Settings())
    by_uid = {c.uid: c for c in library.cases}
    assert unrun_reason(by_uid["alpha/routing/manual:needs"], library) == "manual-only-target"
    assert unrun_reason(by_uid["(library)/routing/manual:forbids"], library) is None
    warned = [f for f in check_manual_only(library) if f.file == "evals/manual.json"]
    assert len(warned) == 1 and "gamma" in warned[0].message
    assert "(manual:needs)" in warned[0].message and "forbids" not in warned[0].message


def test_the_cache_key_of_a_routing_case_follows_its_assertions(tmp_path: Path) -> None:
    """Changing `max_skills` must not reuse the results of the old assertion; a case without routing keeps its key."""
    from runner.cache.keys import case_fields
    from runner.corpus.files import make_policy

    root = write_library(tmp_path / "library")
    policy = make_policy([root], root, Settings().limits.max_file_bytes)
    library, _ = load_library(root, Settings())
    most = next(c for c in library.cases if c.uid == "(library)/routing/max-pass")
    before = case_fields(most, policy)
    after = case_fields(most.model_copy(update={"routing": RoutingSpec(max_skills=2)}), policy)
    assert before != after and before["routing"]["max_skills"] == 1
    plain = most.model_copy(update={"routing": None, "kind": "trigger"})
    assert "routing" not in case_fields(plain, policy)


def test_a_mode_beside_no_routing_key_is_not_a_routing_case(tmp_path: Path) -> None:
    """Another tool's `mode` in a skill-creator item (no routing key beside it) is not read as waza's: the case keeps
    its kind and loads; beside routing keys, a mode the runner does not read is an error at its line."""
    root = write_library(tmp_path / "library")
    evals = root / ".claude" / "skills" / "gamma" / "evals" / "evals.json"
    evals.write_text(json.dumps({"skill_name": "gamma", "evals": [
        {"id": "m1", "prompt": "gamma it", "mode": "interactive", "expectations": ["Explains gamma."]}]}, indent=2))
    library, findings = load_library(root, Settings())
    m1 = next(c for c in library.cases if c.uid == "gamma/evals/m1")
    assert m1.kind == "trigger" and m1.routing is None
    mine = [f for f in findings if f.file.endswith("gamma/evals/evals.json")]
    assert [(f.level.value, f.rule, f.line) for f in mine] == [("warning", "eval-unknown-key", line_of(evals, '"mode"'))]


def observed(names: list[str], bounds: list[str] | None = None, kinds: dict[str, str] | None = None):
    """An observation of these activations (a name ending ` (subagent)` came by a Task call)."""
    from runner.core.observation import Activation, Observation

    return Observation(attempt_id="x#main#1", host="test", bounds_hit=bounds or [], activations=[
        Activation(name=name, mechanism="subagent" if name.endswith("(subagent)") else "skill-tool", turn=turn)
        for turn, name in enumerate(names)])


def test_only_the_librarys_skills_count_towards_at_most_n_and_extras(tmp_path: Path) -> None:
    """A host's own skill (a name the library does not have) and a subagent are not the library's skills: they never
    break `max_skills`, `allow_extra` or `exact`; a subagent named in the must set counts there."""
    from runner.execute.grading import attempt_outcome

    root = write_library(tmp_path / "library")
    (root / ".claude" / "agents").mkdir()
    (root / ".claude" / "agents" / "scout.md").write_text("---\nname: scout\ndescription: Look around.\n---\nLook.\n")
    library, _ = load_library(root, Settings())
    known = library.names()
    base = next(c for c in library.cases if c.uid == "(library)/routing/max-pass")

    def outcome(spec: RoutingSpec, names: list[str], bounds: list[str] | None = None):
        return attempt_outcome(base.model_copy(update={"routing": spec}), observed(names, bounds), known)

    host_own = ["alpha", "code-review", "scout (subagent)"]
    assert outcome(RoutingSpec(max_skills=1), host_own).activation == "PASS"
    assert outcome(RoutingSpec(must_fire=["alpha"], allow_extra=False), host_own).activation == "PASS"
    assert outcome(RoutingSpec(must_fire=["alpha"], order="exact"), host_own).activation == "PASS"
    assert outcome(RoutingSpec(must_fire=["scout (subagent)", "alpha"], order="in_order"), host_own).activation == "FAIL"
    assert outcome(RoutingSpec(must_fire=["alpha", "scout (subagent)"], order="in_order"), host_own).activation == "PASS"
    # `allow_extra: false` with no must skill: no library skill may fire.
    none = outcome(RoutingSpec(allow_extra=False), ["beta"])
    assert none.activation == "FAIL" and none.routing[0].evidence.startswith("others fired: beta")
    # A session cut by its turn bound: what already failed is certain, what could still change is ERROR.
    assert outcome(RoutingSpec(must_not_fire=["gamma"]), ["gamma"], ["max-turns"]).activation == "FAIL"
    cut = outcome(RoutingSpec(must_not_fire=["gamma"]), ["alpha"], ["max-turns"])
    assert cut.activation == "ERROR" and cut.state == "ERROR" and cut.routing[0].state == "ERROR"
    assert outcome(RoutingSpec(must_fire=["alpha", "beta"]), ["alpha"], ["max-turns"]).activation == "ERROR"
    assert outcome(RoutingSpec(must_fire=["alpha", "beta"]), ["alpha"]).activation == "FAIL"


def test_a_routing_session_ends_early_only_where_its_verdict_is_certain(tmp_path: Path) -> None:
    """decide_when (runner.corpus.decide) against the verdict: for every routing case here and in every order mode,
    no continuation of a sequence it calls decided changes the outcome; `max_skills` alone and `exact` never end a
    session at a pass."""
    import itertools

    from runner.corpus.decide import decide_when
    from runner.hosts.activation import decided
    from tests.test_decide import verdict

    root = write_library(tmp_path / "library")
    library, _ = load_library(root, Settings())
    known = library.names()
    cases = [c for c in library.cases if c.routing is not None]
    variants = [RoutingSpec(must_fire=["alpha", "beta"], order="exact"), RoutingSpec(allow_extra=False),
                RoutingSpec(must_fire=["alpha"], must_not_fire=["gamma"], max_skills=2, order="in_order")]
    plain = next(c for c in cases if c.uid == "(library)/routing/max-pass")  # no activation assertion of its own
    cases += [plain.model_copy(update={"routing": spec}) for spec in variants]
    universe = sorted(set(known.values()))
    checked = 0
    for routed in cases:
        sets = decide_when(routed, known)
        for length in range(1, 4):
            for names in map(list, itertools.product(universe, repeat=length)):
                if decided(sets, names) is None:
                    continue
                before = verdict(routed, names, known)
                for tail in itertools.product(universe, repeat=2):
                    assert verdict(routed, names + list(tail), known) == before, (routed.uid, routed.routing, names, tail)
                    checked += 1
    assert checked > 100
    by_uid = {c.uid: c for c in library.cases}
    assert decide_when(by_uid["(library)/routing/max-pass"], known) == []
    exact = cases[-3]
    assert all(len(s) == 1 and s[0] not in exact.routing.must_fire for s in decide_when(exact, known))
    assert decide_when(by_uid["alpha/routing/order-pass"], known) == [["alpha", "beta"]]


def test_an_override_to_routing_needs_routing_assertions(tmp_path: Path) -> None:
    """`kind = "routing"` on a case without routing assertions could never fail: a finding, the case not run. A
    routing case overridden to another kind is graded as that kind."""
    from runner.execute.grading import attempt_outcome
    from runner.plan.planner import unrun_reason

    root = write_library(tmp_path / "library")
    (root / "evals" / "plain.json").write_text(json.dumps({"cases": [
        {"id": "p1", "prompt": "gamma please", "expected": "gamma"}]}))
    (root / ".skill-evals.toml").write_text(
        '[[case_override]]\nuid = "gamma/routing/plain:p1"\nkind = "routing"\nreason = "wrong"\n\n'
        '[[case_override]]\nuid = "alpha/routing/must-fail"\nkind = "trigger"\nreason = "only alpha counts"\n')
    code, findings = findings_of(root, "--no-library-validator")
    assert code == 1
    bad = [f for f in findings if f["rule"] == "override-routing-without-assertions"]
    assert len(bad) == 1 and bad[0]["file"] == ".skill-evals.toml" and "gamma/routing/plain:p1" in bad[0]["message"]
    from runner.corpus import settings as settings_mod

    settings, _ = settings_mod.load(root / ".skill-evals.toml", root)
    library, _ = load_library(root, settings, root / ".skill-evals.toml")
    by_uid = {c.uid: c for c in library.cases}
    assert unrun_reason(by_uid["gamma/routing/plain:p1"], library) == "invalid-case"
    trigger = by_uid["alpha/routing/must-fail"]
    assert trigger.kind == "trigger" and trigger.routing is None
    assert attempt_outcome(trigger, observed(["alpha"]), library.names()).activation == "PASS"
