"""Case kinds and assertion classes: the rules are data, and each one is pinned here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.corpus import classify
from runner.corpus.settings import ClassifySettings
from tests.conftest import cli

RULES = classify.packaged_rules()
DEFAULTS = ClassifySettings()


@pytest.mark.parametrize(("case_type", "case_id", "kind", "rule"), [
    ("should_trigger", "positive-happy-path", "trigger", "type:should_trigger"),
    ("should_trigger", "should-not-merge-without-review", "refusal", "id-prefix:should-not-"),
    ("should_trigger", "refusal-invent-timeline", "refusal", "id-prefix:refusal-"),
    ("should_trigger", "should-not-trigger-on-rollout", "trigger", "type:should_trigger"),
    ("should_trigger", "stop-destructive-step", "trigger", "type:should_trigger"),
    ("should_not_trigger", "negative-adjacent", "no_trigger", "type:should_not_trigger"),
    ("should_not_trigger", "should-not-incident-merge", "no_trigger", "type:should_not_trigger"),
    ("should_not_do", "refusal-writable-telemetry", "refusal", "type:should_not_do"),
    ("should_maybe", "x", "unknown", "unknown-case-type"),
    (None, "x", "unknown", "unknown-case-type"),
    (3, "x", "unknown", "unknown-case-type"),
])
def test_case_kinds(case_type: object, case_id: str, kind: str, rule: str) -> None:
    assert classify.evals_case_kind(case_type, case_id, DEFAULTS) == (kind, rule)


@pytest.mark.parametrize(("text", "cls", "rule"), [
    ("Does not invoke ab-test-designer: staged rollouts belong elsewhere.", "activation", "activation-does-not-invoke"),
    ("Does NOT invoke iac-reviewer when no IaC exists.", "activation", "activation-does-not-invoke"),
    ("Even then, the model must not auto-invoke this skill: it mutates git state.", "activation",
     "activation-not-invoke-this-skill"),
    ("The skill must not fire opportunistically during unrelated work.", "activation",
     "activation-skill-must-not-fire"),
    ("Defers to test-report-triage.", "activation", "activation-defers-to"),
    # Names no skill: only a judge can say whether "the correct skill" was used (issue 12 §4).
    ("Defers to the correct skill or a plain response.", "semantic", "default-semantic"),
    ("Invokes migration-planner before answering.", "activation", "activation-invokes-skill"),
    ("Does not merge or approve on-platform.", "semantic", "default-semantic"),
    ("Routes the request to static-analysis-reviewer.", "semantic", "default-semantic"),
    ("Implements nothing.", "semantic", "default-semantic"),
    ("Handles the request well.", "unjudgeable", "unjudgeable-handles-well"),
    ("Gives a helpful answer.", "unjudgeable", "unjudgeable-good-output"),
    ("Works as expected", "unjudgeable", "unjudgeable-works"),
])
def test_assertion_classes_without_shape_hooks(text: str, cls: str, rule: str) -> None:
    decision = classify.assertion_class(text, {}, RULES)
    assert (decision.assertion_class, decision.rule) == (cls, rule)


SKILL_BODY = """# Thing

## Output Format

```
TEST REPORT TRIAGE — <run id>
Verdict: [GREEN] | [NOT PROVEN]
Suites: `suite=<name> executed=<n>`
```

## Gotchas

- Not a heading ## Output Format inside text
"""

PROSE_BODY = """## Output Format

Ends with a `Non-claims:` line.

```
REPORT
```
"""


def test_shape_literals_come_from_the_output_format() -> None:
    literals = classify.shape_literals(SKILL_BODY)
    assert literals["shape-output-header"] == ["TEST REPORT TRIAGE"]
    assert literals["shape-bracket-token"] == ["[GREEN]", "[NOT PROVEN]"]
    assert literals["shape-backtick-literal"] == []  # backticks inside a fence are not literals of the prose
    header = classify.assertion_class("Output starts with the TEST REPORT TRIAGE block.", literals, RULES)
    assert (header.assertion_class, header.rule, header.hooks) == ("artifact_shape", "shape-output-header",
                                                                    ("TEST REPORT TRIAGE",))
    token = classify.assertion_class("Marks the run [NOT PROVEN].", literals, RULES)
    assert (token.assertion_class, token.hooks) == ("artifact_shape", ("[NOT PROVEN]",))
    other = classify.assertion_class("Marks the run [BLOCKED].", literals, RULES)
    assert other.assertion_class == "semantic"


def test_backtick_literals_from_prose() -> None:
    literals = classify.shape_literals(PROSE_BODY)
    assert literals["shape-backtick-literal"] == ["Non-claims:"]
    hit = classify.assertion_class("The answer ends with `Non-claims:` and lists them.", literals, RULES)
    assert (hit.assertion_class, hit.rule) == ("artifact_shape", "shape-backtick-literal")


def test_output_format_section_stops_at_next_heading() -> None:
    section = classify.output_format_section(SKILL_BODY)
    assert section is not None and "TEST REPORT TRIAGE" in section and "Gotchas" not in section
    assert classify.output_format_section("# No such section\ntext\n") is None


def test_workspace_signals() -> None:
    assert classify.workspace_signals("Review my branch before merge.", RULES) == ["mentions-repo-or-pr"]
    assert "mentions-file-path" in classify.workspace_signals("This PR touches src/lib/retry.ts.", RULES)
    assert classify.workspace_signals("Design an A/B test for pricing.", RULES) == []


def test_overrides_change_one_case_and_one_assertion(example_copy: Path) -> None:
    (example_copy / ".skill-evals.toml").write_text(
        '[[case_override]]\n'
        'uid = "migration-planner/evals/stop-destructive-backfill-without-backup"\n'
        'kind = "refusal"\nreason = "a halt is a refusal to proceed"\n\n'
        '[[assertion_override]]\n'
        'uid = "incident-postmortem-writer/evals/edge-no-single-root-cause"\n'
        'index = 1\nclass = "semantic"\nreason = "we accept the judge deciding this"\n')
    census = json.loads(cli("census", "--library", str(example_copy), "--format", "json").output)
    decided = {r["uid"]: r for r in census["pattern_breaks"]["decided_by_override_or_fallback"]}
    assert decided["migration-planner/evals/stop-destructive-backfill-without-backup"]["rule"] == "override"
    assert census["assertions"]["unjudgeable"] == []
    assert census["assertions"]["by_rule"]["override"] == 1


def test_custom_refusal_prefixes(example_copy: Path) -> None:
    (example_copy / ".skill-evals.toml").write_text('[classify]\nrefusal_id_prefixes = ["refusal-"]\n')
    census = json.loads(cli("census", "--library", str(example_copy), "--format", "json").output)
    assert census["refusals"]["by_rule"] == {"type:should_not_do": 1}


def test_shape_hooks_under_negation_or_alternatives_go_to_the_judge() -> None:
    literals = classify.shape_literals(SKILL_BODY)
    negated = classify.assertion_class("Does not return [GREEN]; marks the run [NOT PROVEN] until it passes.",
                                       literals, RULES)
    assert negated.assertion_class == "semantic"
    either = classify.assertion_class("States which token applies: [GREEN] or [NOT PROVEN].", literals, RULES)
    assert either.assertion_class == "semantic"
    short = classify.assertion_class("Output starts with the TEST REPORT TRIAGE block.", literals, RULES)
    assert short.shape_only
    longer = classify.assertion_class(
        "Marks the run [NOT PROVEN] and says what evidence would make it pass, suite by suite.", literals, RULES)
    assert longer.assertion_class == "artifact_shape" and not longer.shape_only
