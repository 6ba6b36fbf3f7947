"""Issue 29 items 4, 5 and 6, and which rule decided a kind (item 2): what an author meant, on the synthetic
libraries of tests/round2_kinds.py. In-process reads of the corpus, census and plan; one run through the real
Claude Code CLI against the fake Messages API for the two kinds the harness decides from activations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.corpus import dialects, tags
from runner.corpus.library import Case
from runner.corpus.loader import load_library
from runner.corpus.settings import Settings
from runner.testing.fake_anthropic import FakeAnthropic, text
from runner.testing.fake_anthropic import skill as skill_call
from runner.testing.fake_judge import JUDGE_MATCH
from tests import round2_kinds as libraries
from tests.conftest import cli, line_of
from tests.helpers import results_of, skill_evals_run


def cases_of(root: Path) -> dict[str, Case]:
    library, _ = load_library(root, Settings())
    return {case.uid: case for case in library.cases}


# ---- item 4: a category tag is a label, a misspelt kind is still an error ---------------------------------------

@pytest.mark.parametrize(("value", "kind", "near", "label"), [
    ("behavior", None, None, "behavior"), ("contract", None, None, "contract"), ("security", None, None, "security"),
    ("benchmark", None, None, "benchmark"), ("planning", None, None, "planning"), ("edge-case", None, None, "edge-case"),
    ("No-Trigger", "no_trigger", None, None), ("shouldNotTrigger", "no_trigger", None, None),
    ("Happy Path", "trigger", None, None),
    ("negatve", None, "negative", None), ("postiive", None, "positive", None), ("triger", None, "trigger", None),
    ("trigger_accuracy", None, "trigger", None),
    # Longer than any kind name could be: a tag, kept short (it is shown in every report), no distance computed.
    ("x" * 100_000, None, None, "x" * 64 + "…"),
])
def test_a_type_value_is_a_kind_a_typo_of_one_or_a_tag(value: str, kind: str | None, near: str | None,
                                                       label: str | None) -> None:
    assert tags.read_type(value, dialects.TRIGGER_TYPES, dialects.NEGATIVE_TYPES) == tags.TypeReading(kind, near, label)


def test_category_tags_keep_the_case_runnable_and_are_its_label(tmp_path: Path) -> None:
    root = libraries.category_tags(tmp_path / "repo")
    library, findings = load_library(root, Settings())
    by_uid = {case.uid: case for case in library.cases}
    read = {uid.rsplit("/", 1)[1]: (c.kind, c.kind_rule, c.label) for uid, c in by_uid.items()}
    assert read == {
        "behavior-1": ("trigger", "format:skill-creator", "behavior"),
        "contract-1": ("trigger", "format:skill-creator", "contract"),
        "security-1": ("trigger", "format:skill-creator", "security"),
        # Beside a field that says the kind, the tag decides nothing either.
        "benchmark-1": ("no_trigger", "field:should_trigger=false", "benchmark"),
        "planning-1": ("trigger", "format:skill-creator", "planning"),
        "typo-1": ("unknown", "unknown-case-type:type=negatve", None),
        "spelt-1": ("no_trigger", "field:type=No-Trigger", None),
    }
    # The floor holds back only the misspelt kind, at its line, and says which kind it is close to.
    errors = [f for f in findings if f.level.value == "error"]
    assert [(f.rule, f.uid) for f in errors] == [("unknown-case-type", "ledger-summary/evals/typo-1")]
    assert errors[0].line == line_of(root / "skills" / "ledger-summary" / "evals" / "evals.json", '"negatve"')
    assert "close to 'negative'" in errors[0].message
    census = json.loads(cli("census", "--library", str(root), "--format", "json").output)
    assert census["cases"]["by_label"] == {"behavior": 1, "benchmark": 1, "contract": 1, "planning": 1,
                                           "security": 1}
    text_census = cli("census", "--library", str(root)).output
    assert "Category tags" in text_census and "security 1" in text_census


# ---- item 5: negative controls written as scenarios -----------------------------------------------------------

def test_negative_controls_written_as_scenarios_are_no_trigger_cases(tmp_path: Path) -> None:
    by_uid = cases_of(libraries.negative_scenarios(tmp_path / "repo"))
    kinds = {uid: (c.kind, c.kind_rule) for uid, c in by_uid.items() if uid.startswith("pdf-tools/")}
    assert kinds == {
        "pdf-tools/scenario/spreadsheet": ("no_trigger", "negative-control:activation-does-not-invoke"),
        "pdf-tools/scenario/weather": ("no_trigger", "negative-control:activation-does-not-invoke"),
        "pdf-tools/evals/2": ("no_trigger", "negative-control:activation-does-not-invoke"),
        "pdf-tools/scenario/merge": ("trigger", "format:scenario"),
        "pdf-tools/evals/1": ("trigger", "format:skill-creator"),
    }
    # The sentence is the harness's to check from the activations, never the judge's.
    [claim] = by_uid["pdf-tools/scenario/spreadsheet"].assertions
    assert (claim.text, claim.assertion_class) == ("Agent does NOT activate the pdf-tools skill", "activation")
    assert [a.assertion_class for a in by_uid["pdf-tools/evals/2"].assertions] == ["activation", "semantic"]
    assert all(by_uid[uid].target == "pdf-tools" for uid in kinds)


# ---- item 6: deferral cases --------------------------------------------------------------------------------------

def test_a_case_that_hands_its_request_to_another_skill_is_a_routing_case(tmp_path: Path) -> None:
    by_uid = cases_of(libraries.deferrals(tmp_path / "repo"))
    routing = {uid.rsplit("/", 1)[1]: (c.kind, c.kind_rule, c.target, c.should_not_trigger)
               for uid, c in by_uid.items() if uid.startswith("pricing-strategy/")}
    assert routing == {
        "checkout-cro": ("discrimination", "deferral:defers-to", "page-cro", ["pricing-strategy"]),
        "landing-copy": ("discrimination", "deferral:cross-references", "page-cro", ["pricing-strategy"]),
        # Not a skill of the library: nothing to route to, the default stands.
        "seo-question": ("trigger", "format:skill-creator", "pricing-strategy", []),
        # Negated: the author says it does not defer.
        "discount": ("trigger", "format:skill-creator", "pricing-strategy", []),
        "tiers": ("trigger", "format:skill-creator", "pricing-strategy", []),
        # Invoked by hand: the skill fires whatever the model would pick; the redirect is judged on the answer.
        "invoked-redirect": ("refusal", "explicit-invocation", "pricing-strategy", []),
    }
    assert by_uid["pricing-strategy/evals/checkout-cro"].skill == "pricing-strategy"  # still its file's case


# ---- item 2: which rule decided, in the census and the plan ----------------------------------------------------

def test_census_and_plan_name_the_rule_behind_each_kind_no_field_decided(tmp_path: Path) -> None:
    root = libraries.deferrals(tmp_path / "repo")
    census = json.loads(cli("census", "--library", str(root), "--format", "json").output)
    guessed = {ref["uid"]: (ref["rule"], ref["detail"]) for ref in census["kind_rules"]["cases"]}
    assert guessed["pricing-strategy/evals/checkout-cro"] == ("deferral:defers-to", "discrimination")
    assert guessed["pricing-strategy/evals/tiers"] == ("format:skill-creator", "trigger")
    assert census["kind_rules"]["by_rule"] == {"format:skill-creator": 4, "deferral:cross-references": 1,
                                               "deferral:defers-to": 1, "explicit-invocation": 1}
    text_census = cli("census", "--library", str(root)).output
    assert "Kinds decided by a rule of the runner, not by a field of the file: 7 case(s)" in text_census
    assert "deferral:defers-to: 1: pricing-strategy/evals/checkout-cro (discrimination)" in text_census
    assert "format:skill-creator: 4: " in text_census and "… and 1 more" in text_census

    tagged = libraries.category_tags(tmp_path / "tags")
    args = ("--no-library-validator", "--no-surface")
    plan = json.loads(cli("plan", "--library", str(tagged), *args, "--format", "json").output)
    by_uid = {c["uid"]: c for c in plan["cases"]}
    assert by_uid["ledger-summary/evals/behavior-1"]["kind_rule"] == "format:skill-creator"
    assert by_uid["ledger-summary/evals/behavior-1"]["label"] == "behavior"
    # A field of the file decided these: nothing for the author to check.
    assert by_uid["ledger-summary/evals/benchmark-1"]["kind_rule"] is None
    assert by_uid["ledger-summary/evals/spelt-1"]["kind_rule"] is None
    plan_text = cli("plan", "--library", str(tagged), *args).output
    assert "Kinds decided by a rule, not a field of the file: 4 case(s)" in plan_text
    assert "format:skill-creator: 4: ledger-summary/evals/behavior-1 (trigger)" in plan_text


# ---- items 5 and 6 on the real host ------------------------------------------------------------------------------

def test_negative_control_and_deferral_are_decided_from_activations_on_both_hosts(tmp_path: Path) -> None:
    """The real Claude Code CLI (and the api host) against the fake: the negative-control scenario passes because
    nothing fired, with no judge call; the deferral case passes because page-cro fired and pricing-strategy did not."""
    root = libraries.scenario_e2e(tmp_path / "repo")
    for host in ("claude-code", "api"):
        out = tmp_path / f"run-{host}"
        with FakeAnthropic() as fake:
            fake.script("checkout page converts", skill_call("page-cro"), text("Start with the checkout form."))
            fake.default(text("Light rain is likely."))
            done = skill_evals_run(fake, out, "--host", host, "--repeats", "1", "--case", "pricing-strategy/*",
                                   library=root)
            judged = fake.requests_for(JUDGE_MATCH)
        assert done.returncode == 0, done.stdout + done.stderr
        results = results_of(out)
        by_uid = {c["uid"]: c for c in results["cases"]}
        weather, deferral = by_uid["pricing-strategy/scenario/weather"], by_uid["pricing-strategy/evals/checkout-cro"]
        assert (weather["kind"], weather["state"]) == ("no_trigger", "PASS"), (host, weather)
        assert [a["state"] for a in weather["assertions"]] == ["PASS"]
        assert (deferral["kind"], deferral["target"], deferral["state"]) == ("discrimination", "page-cro", "PASS"), \
            (host, deferral)
        assert deferral["label"] == "behavior"
        assert [(p["neighbour"], p["state"]) for p in deferral["pairs"]] == [("pricing-strategy", "PASS")]
        assert results["spend"]["judge_calls"] == 0 and judged == []


def test_every_report_shows_the_tag_beside_the_kind() -> None:
    """A failing case with a tag: the Markdown, JUnit, HTML and terminal renderings say `trigger (tag security)`."""
    from rich.console import Console

    from runner.report import html, junit, markdown, terminal
    from runner.results.build import CaseResult
    from tests.report_fixtures import assemble

    results = assemble([CaseResult(uid="ledger-summary/evals/security-1", skill="ledger-summary", kind="trigger",
                                   label="security", target="ledger-summary", state="FAIL", losses=2, repeats_run=2,
                                   repeats_planned=3, quorum=2)])
    console = Console(record=True, width=200)
    terminal.render(results, console)
    for shown in (markdown.render(results), junit.render(results), html.render(results), console.export_text()):
        assert "trigger (tag security)" in shown
