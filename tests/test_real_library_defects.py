"""Defects seen on real libraries (issue 12 §4): single-word skill names in activation assertions,
a fast refusal of a path that holds no library, and a cap line that stays true when nothing runs.

The skill names and assertion texts here are synthetic.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.cli.printing import cap_line as _cap_line
from runner.corpus import claims, classify
from runner.corpus.library import Assertion, Case
from runner.execute import grading
from tests.conftest import cli, cli_imports

RULES = classify.packaged_rules()
# A library with single-word skills, a name that is the prefix of a longer one, a subagent and a
# folder-style name with an underscore.
NAMES = frozenset({"pdf", "docx", "pdf-tools", "ledger-review", "_template", "auditor (subagent)"})


# ---- which skills an assertion names --------------------------------------------------------------

@pytest.mark.parametrize(("text", "named"), [
    ("Does not invoke pdf.", ["pdf"]),
    ("Uses the `pdf` skill", ["pdf"]),
    ("Invokes 'docx' and then \"pdf\".", ["docx", "pdf"]),
    ("Invokes `document-skills:pdf` first.", ["pdf"]),           # plugin:skill is the skill
    ("Does not invoke pdf-tools.", ["pdf-tools"]),               # the longest name wins
    ("Defers to auditor (subagent).", ["auditor (subagent)"]),
    ("Defers to the auditor subagent.", ["auditor (subagent)"]),
    ("Does not invoke my-pdf or pdf2 or PDF or docs/pdf.md.", []),  # only whole names, as written
    ("Writes ledger-review's summary and pdf's index.", []),       # a possessive is not the skill
    ("Never loads _template.", ["_template"]),
])
def test_skill_mentions(text: str, named: list[str]) -> None:
    assert classify.skill_mentions(text, NAMES) == named


@pytest.mark.parametrize(("text", "cls", "rule"), [
    ("Does not invoke pdf.", "activation", "activation-does-not-invoke"),
    ("Does not invoke `pdf`", "activation", "activation-does-not-invoke"),
    ("Does not use the `docx` skill.", "activation", "activation-does-not-invoke"),
    ("Uses the `pdf` skill", "activation", "activation-uses-skill"),
    ("Invokes pdf", "activation", "activation-invokes-skill"),
    ("Invokes `document-skills:pdf` before answering.", "activation", "activation-invokes-skill"),
    ("`pdf` is not invoked.", "activation", "activation-skill-must-not-fire"),
    ("Defers to the auditor subagent.", "activation", "activation-defers-to"),
    ("Does not invoke this skill; docx owns the format.", "activation", "activation-does-not-invoke"),
    # A verb of activation without a skill of the library is about the answer, not activation.
    ("Does not load entire CI logs.", "semantic", "default-semantic"),
    ("Does not trigger a refresh on an unverified delta.", "semantic", "default-semantic"),
    ("Does not invoke the report-writer skill.", "semantic", "default-semantic"),  # not a skill of this library
    ("Defers to the correct skill or a plain response.", "semantic", "default-semantic"),
    ("Uses pdf to extract the tables.", "semantic", "default-semantic"),  # "use" needs the word "skill"
    ("`pdf` triggers a download of the report.", "semantic", "default-semantic"),
    ("Does not load this skill's reference files.", "semantic", "default-semantic"),
])
def test_activation_needs_a_named_skill(text: str, cls: str, rule: str) -> None:
    decision = classify.assertion_class(text, {}, RULES, NAMES)
    assert (decision.assertion_class, decision.rule) == (cls, rule)


def test_unknown_names_fall_back_to_kebab_case_tokens() -> None:
    # The old call sites (no names) read any kebab-case token as a skill, as before.
    assert classify.assertion_class("Does not invoke ledger-review.", {}, RULES).assertion_class == "activation"
    assert classify.assertion_class("Does not invoke pdf.", {}, RULES).assertion_class == "semantic"
    assert classify.skill_mentions("Invokes ledger-review, not pdf.", frozenset()) == ["ledger-review"]


# ---- the verdict reads the same names, clause by clause -------------------------------------------

def _case(target: str = "docx") -> Case:
    return Case(uid=f"{target}/evals/x", skill=target, source="evals", id="x", file="evals.json", line=1,
                format="aegis", prompt="p", target=target, kind="trigger", kind_rule="type:should_trigger")


def _assertion(text: str) -> Assertion:
    decision = classify.assertion_class(text, {}, RULES, NAMES)
    return Assertion(index=1, text=text, line=1, assertion_class=decision.assertion_class, class_rule=decision.rule)


@pytest.mark.parametrize(("text", "fired", "state"), [
    ("Does not invoke `pdf`.", [], "PASS"),
    ("Does not invoke `pdf`.", ["pdf"], "FAIL"),
    ("Does not invoke pdf.", ["pdf-tools"], "PASS"),       # a longer name is another skill
    ("Uses the `document-skills:pdf` skill.", ["pdf"], "PASS"),
    ("Invokes `pdf`; does not invoke `docx`.", ["pdf"], "PASS"),
    ("Invokes `pdf`; does not invoke `docx`.", ["pdf", "docx"], "FAIL"),
    ("Invokes `pdf`; does not invoke `docx`.", ["docx"], "FAIL"),
    ("Invokes `pdf`. Never triggers docx.", [], "FAIL"),
    ("The skill must not fire here.", ["docx"], "FAIL"),   # "the skill" is the case's own target
    ("The skill must not fire here.", ["pdf"], "PASS"),
    ("Defers to auditor (subagent).", ["auditor (subagent)"], "PASS"),
    ("Defers to docx.", [], "FAIL"),
    # After another claim, "defers to" names the owner; the session need not invoke it.
    ("Does not invoke pdf; defers to docx.", [], "PASS"),
    ("Does not invoke pdf; defers to docx.", ["pdf"], "FAIL"),
    # The reason after the claim names another skill; it is not a second claim.
    ("Does not invoke pdf: tables in a scan are ledger-review's job.", ["ledger-review"], "PASS"),
])
def test_activation_verdicts(text: str, fired: list[str], state: str) -> None:
    assertion = _assertion(text)
    assert assertion.assertion_class == "activation"
    outcome = grading.check_activation_assertion(assertion, _case(), fired, set(NAMES))
    assert outcome.state == state, outcome.evidence


@pytest.mark.parametrize("text", [
    "Does not invoke pdf.", "Invokes `pdf`; does not invoke `docx`.", "Defers to the auditor subagent.",
    "Never loads _template or pdf-tools.", "Invokes `document-skills:pdf`.",
])
def test_classifier_and_verdict_name_the_same_skills(text: str) -> None:
    assert claims._named_targets(text, _case(), set(NAMES)) == classify.skill_mentions(text, NAMES)


def test_an_override_to_activation_still_reads_the_negation() -> None:
    # No rule reads these words; the author overrode the class: the first named skill decides.
    assertion = Assertion(index=1, text="Must never, even once, let pdf run.", line=1,
                          assertion_class="activation", class_rule="override")
    assert grading.check_activation_assertion(assertion, _case(), [], set(NAMES)).state == "PASS"
    assert grading.check_activation_assertion(assertion, _case(), ["pdf"], set(NAMES)).state == "FAIL"


# ---- a path that holds no library is refused before the slow imports -----------------------------

# The slow part of refusing a bad path was importing these first (2.6 s here; ~0.5 s without them). The test
# asserts the cause, not a time: timings belong in benchmarks/.
HEAVY_MODULES = ("anthropic", "claude_agent_sdk", "runner.pipeline.run")


@pytest.mark.parametrize("command", ["surface", "plan", "run", "census"])
def test_a_bad_library_path_is_refused_before_the_slow_imports(command: str, tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent"
    done = cli_imports(HEAVY_MODULES, command, "--library", str(missing))
    assert done.stdout.splitlines() == ["exit 2", "loaded"], done.stdout + done.stderr
    assert done.stderr.strip() == f"skill-evals: {missing}: no such file or folder"
    assert "Traceback" not in done.stderr


def test_a_file_is_not_a_library(tmp_path: Path) -> None:
    file = tmp_path / "notes.txt"
    file.write_text("x")
    result = cli("surface", "--library", str(file))
    assert result.exit_code == 2 and "--library needs a folder" in result.output


# ---- the cap line -----------------------------------------------------------------------------------

def test_cap_line_when_nothing_runs(example_copy: Path) -> None:
    # A case that needs the model to pick a manual-only skill is UNRUN: there is no session to reserve anything for.
    # (The skill's other cases invoke it by hand, `/release-publisher ...`, and run: issue 29.)
    result = cli("plan", "--library", str(example_copy), "--no-surface", "--no-library-validator",
                 "--host", "api", "--case", "release-publisher/evals/negative-is-run-good-enough")
    assert result.exit_code == 0, result.output
    assert "runnable: 0" in result.output
    assert "Cap: $10.00; no session to reserve (nothing is runnable)" in result.output
    assert "admits 0" not in result.output


def test_cap_line_says_what_the_cap_allows() -> None:
    assert _cap_line(10.0, 0.0, 0) == "Cap: $10.00; no session to reserve (nothing is runnable)"
    assert "limits none of the 6 session(s)" in _cap_line(10.0, 0.0, 6)
    assert _cap_line(0.5, 1.6885, 6).startswith("Cap: $0.50 is below one session's worst case ($1.6885): no "
                                                "session can start")
    assert _cap_line(10.0, 1.6885, 6).startswith("Cap: $10.00 admits 5 concurrent worst-case reservations")
    assert _cap_line(10.0, 1.0, 3).startswith("Cap: $10.00 admits 3 concurrent")
