"""The floor gates what it covers (issue 12 §1): one broken skill holds back its own cases, one invalid case
only itself, a library-level error (the library's validator, the settings) everything; `--strict` is all or
nothing; `plan` shows exactly what `run` does; `validate` stays all-or-nothing.

`run` is the real CLI in a separate process against the fake Messages API (`--host api`, N=1), as in
tests/test_run.py; `plan` and `validate` run in-process.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from runner.corpus.findings import error, warning
from runner.corpus.library import Library
from runner.corpus.loader import load_library
from runner.corpus.settings import Settings
from runner.floor import gate as floor_mod
from runner.report import html, markdown, rollup, terminal
from runner.results.build import Results
from runner.testing.fake_anthropic import FakeAnthropic
from tests.conftest import EXAMPLE, cli, findings_of, line_of, run_cli
from tests.helpers import KEY, key_of, results_of, skill_evals_run

SKILLS = Path(".claude") / "skills"
BROKEN = "migration-planner"
FIRST_CASE = f"{BROKEN}/evals/positive-add-not-null-column"
FAST = ("--host", "api", "--repeats", "1")


def example_library() -> Library:
    library, _ = load_library(EXAMPLE, Settings())
    return library


def break_frontmatter(library: Path, skill: str = BROKEN) -> Path:
    """SKILL.md's frontmatter stops being YAML (`frontmatter-yaml`), which the library's own validator,
    a line-by-line `key: value` reader, does not notice: only our floor does."""
    path = library / SKILLS / skill / "SKILL.md"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace(f"name: {skill}\n", f"name: {skill}\nowner: [unclosed\n", 1), encoding="utf-8")
    return path


def break_one_case(library: Path) -> Path:
    """One key the schema does not allow, inside the first case of the skill's evals.json."""
    path = library / SKILLS / BROKEN / "evals" / "evals.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["cases"][0]["expect"]["weight"] = 2
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


def plan_json(library: Path, *args: str) -> dict:
    result = cli("plan", "--library", str(library), "--format", "json", "--no-surface", *FAST, *args)
    assert result.exit_code == 0, result.output + result.stderr
    return json.loads(result.stdout)


def held(cases: list[dict], reason_key: str) -> dict[str, tuple[str, str | None]]:
    """uid -> (reason, detail) of every case that is not run, from plan.json or results.json."""
    detail_key = "unrun_detail" if reason_key == "unrun_reason" else "detail"
    return {c["uid"]: (c[reason_key], c[detail_key]) for c in cases
            if c[reason_key] and (reason_key == "unrun_reason" or c["state"] == "UNRUN")}


def uids_of(skill: str) -> set[str]:
    return {c.uid for c in example_library().cases if c.skill == skill}


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    # In-process `plan` plans with credentials, as `run` does (the plan would say no-credentials otherwise).
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)


# ---- scoping --------------------------------------------------------------------------------------------

def test_each_error_is_scoped_to_what_it_is_about() -> None:
    library = example_library()
    skill_md = library.skills[BROKEN].skill_md
    evals = f"{library.skills[BROKEN].dir}/evals/evals.json"
    findings = [
        error("eval-schema", evals, 3, "named case", uid=FIRST_CASE),
        error("frontmatter-yaml", skill_md, 4, "named skill", skill="test-report-triage"),
        error("not-utf8", f"{library.skills['release-publisher'].dir}/references/x.md", 2, "a file in the folder"),
        error("symlink-escape", ".claude/agents/security-reviewer.md", 1, "outside every skill"),
        error("library-validator", "scripts/validate-skills.py", 1, "failed", skill=BROKEN),
        error("settings-invalid", ".skill-evals.toml", 2, "unknown key"),
        warning("manual-only-target", evals, 6, "warnings never gate", skill=BROKEN),
    ]
    gate = floor_mod.gate(findings, library)
    assert set(gate.cases) == {FIRST_CASE}
    assert set(gate.skills) == {"test-report-triage", "release-publisher"}
    assert [f.rule for f in gate.library] == ["symlink-escape", "library-validator", "settings-invalid"]
    assert gate.stops_everything

    skill_only = floor_mod.gate(findings[:3], library)
    assert not skill_only.stops_everything
    assert skill_only.hold(FIRST_CASE, BROKEN).reason == "invalid-case"  # type: ignore[union-attr]
    hold = skill_only.hold("release-publisher/evals/x", "release-publisher")
    assert hold is not None and hold.reason == "floor-error" and hold.skill == "release-publisher"
    assert hold.detail == f"{library.skills['release-publisher'].dir}/references/x.md:2: [not-utf8] a file in the folder"
    assert skill_only.hold("dependency-upgrade-reviewer/evals/x", "dependency-upgrade-reviewer") is None
    assert floor_mod.gate(findings[:3], library, strict=True).stops_everything
    assert not floor_mod.gate(findings[-1:], library, strict=True).stops_everything  # a warning is not an error


def test_a_finding_without_a_case_in_a_valid_case_s_lines_holds_the_skill(example_copy: Path) -> None:
    """A line inside a case the loader could read (a duplicate id, a key after the cases) is not trusted to be
    about that case: the whole skill is held back, never a neighbouring case by accident."""
    library, _ = load_library(example_copy, Settings())
    case = next(c for c in library.cases if c.uid == FIRST_CASE)
    gate = floor_mod.gate([error("duplicate-id", case.file, case.line + 2, "dup")], library)
    assert set(gate.skills) == {BROKEN} and not gate.cases
    hold = gate.hold(FIRST_CASE, BROKEN)
    assert hold is not None and hold.detail.endswith("[duplicate-id] dup")
    more = floor_mod.gate([error("duplicate-id", case.file, case.line, "one"),
                           error("eval-schema", case.file, 1, "two")], library)
    assert more.skill_detail(BROKEN).endswith("(and 1 more error(s): see `skill-evals validate`)")


# ---- one broken skill ------------------------------------------------------------------------------------

def test_one_broken_skill_holds_back_its_cases_and_every_other_case_runs(
        example_copy: Path, fake: FakeAnthropic, tmp_path: Path) -> None:
    break_frontmatter(example_copy)
    broken = uids_of(BROKEN)
    code, findings = findings_of(example_copy, "--no-library-validator")
    assert code == 1, "validate stays all-or-nothing"
    (finding,) = [f for f in findings if f["level"] == "error"]
    shown = f"{finding['file']}:{finding['line']}:{finding['col']}: [frontmatter-yaml] {finding['message']}"
    assert finding["file"] == f".claude/skills/{BROKEN}/SKILL.md"

    plan = plan_json(example_copy, "--no-library-validator")
    floor_errors = {c["uid"]: c["unrun_detail"] for c in plan["cases"] if c["unrun_reason"] == "floor-error"}
    assert set(floor_errors) == broken and broken
    assert set(floor_errors.values()) == {shown}
    assert plan["held_back"] == {BROKEN: shown}
    others = [c for c in plan["cases"] if c["skill"] != BROKEN]
    assert others and all(c["unrun_reason"] != "floor-error" and c["unrun_detail"] is None for c in others)
    runnable = {c["uid"] for c in plan["cases"] if c["unrun_reason"] is None}
    assert runnable and not runnable & broken
    assert plan["estimate"]["runnable_cases"] == len(runnable) == plan["estimate"]["sessions_max"]

    text = cli("plan", "--library", str(example_copy), "--no-surface", *FAST, "--no-library-validator")
    assert text.exit_code == 0
    assert f"floor-error {len(broken)}" in text.stdout
    assert f"  {BROKEN}: {shown}" in text.stdout

    out = tmp_path / "run"
    done = skill_evals_run(fake, out, *FAST, "--no-library-validator", library=example_copy)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{BROKEN}: {shown}" in done.stdout
    results = results_of(out)
    planned = json.loads((out / "plan.json").read_text())

    # plan and run agree case by case: the same cases not run, for the same reasons, with the same finding.
    assert held(plan["cases"], "unrun_reason") == held(planned["cases"], "unrun_reason")
    assert held(results["cases"], "reason") == held(planned["cases"], "unrun_reason")
    by_uid = {c["uid"]: c for c in results["cases"]}
    for uid in runnable:
        assert by_uid[uid]["attempts"] and by_uid[uid]["repeats_run"] == 1, by_uid[uid]
    for uid in broken:
        assert by_uid[uid]["state"] == "UNRUN" and by_uid[uid]["reason"] == "floor-error"
        assert by_uid[uid]["detail"] == floor_errors[uid] and not by_uid[uid]["attempts"]
        assert fake.requests_for(key_of(uid)) == [], f"{uid} was held back but reached the API"
    assert results["unrun_by_reason"]["floor-error"] == len(broken)
    assert results["plan"]["held_back"] == plan["held_back"]

    # Every report shows them as UNRUN with the finding, never as failures.
    typed = Results.model_validate(results)
    roll = rollup.build(typed)
    assert not {c.uid for c in roll.failing + roll.erroring + roll.judge_erroring} & broken
    assert [n.uid for n in roll.held_back] == [BROKEN]
    md = markdown.render(typed)
    assert "### Held back by the floor (1)" in md and f"- {BROKEN}: skill held back (floor-error)" in md
    assert f"| floor-error | {len(broken)} |" in md
    page = html.render(typed)
    assert 'id="held-back"' in page and "frontmatter-yaml" in page
    from rich.console import Console
    console = Console(record=True, width=400)
    terminal.render(typed, console)
    assert "Held back by the floor (1)" in console.export_text()


# ---- one invalid case ------------------------------------------------------------------------------------

def test_one_invalid_case_holds_back_only_that_case(example_copy: Path, fake: FakeAnthropic, tmp_path: Path) -> None:
    path = break_one_case(example_copy)
    line = line_of(path, '"weight"')
    shown = f".claude/skills/{BROKEN}/evals/evals.json:{line}:"

    plan = plan_json(example_copy, "--skill", BROKEN)
    reasons = {c["uid"]: (c["unrun_reason"], c["unrun_detail"]) for c in plan["cases"]}
    reason, detail = reasons.pop(FIRST_CASE)
    assert reason == "invalid-case" and detail.startswith(shown) and "[eval-schema]" in detail
    assert reasons and all(r == (None, None) for r in reasons.values()), reasons
    assert plan["held_back"] == {}

    out = tmp_path / "run"
    done = skill_evals_run(fake, out, *FAST, "--skill", BROKEN, library=example_copy)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{FIRST_CASE} (invalid-case): {shown}" in done.stdout
    results = results_of(out)
    by_uid = {c["uid"]: c for c in results["cases"]}
    assert (by_uid[FIRST_CASE]["state"], by_uid[FIRST_CASE]["reason"]) == ("UNRUN", "invalid-case")
    assert by_uid[FIRST_CASE]["detail"] == detail
    assert fake.requests_for(key_of(FIRST_CASE)) == []
    assert all(by_uid[uid]["attempts"] for uid in reasons)

    assert findings_of(example_copy)[0] == 1, "validate stays all-or-nothing"


# ---- what stops everything ----------------------------------------------------------------------------------

def _failing_validator(library: Path) -> str:
    (library / "scripts" / "validate-skills.py").write_text(
        "import sys\nprint('ERROR .claude/skills: the library says no')\nsys.exit(1)\n", encoding="utf-8")
    return "library-validator"


def _invalid_settings(library: Path) -> str:
    (library / ".skill-evals.toml").write_text("[run]\nno_such_setting = 1\n", encoding="utf-8")
    return "settings-invalid"


@pytest.mark.parametrize("make_error", [_failing_validator, _invalid_settings])
def test_a_library_level_error_stops_plan_and_run(make_error, example_copy: Path, fake: FakeAnthropic,
                                                  tmp_path: Path) -> None:
    rule = make_error(example_copy)
    plan = cli("plan", "--library", str(example_copy), "--no-surface", *FAST)
    assert plan.exit_code == 1 and f"[{rule}]" in plan.stdout and "nothing would run" in plan.stderr
    as_json = cli("plan", "--library", str(example_copy), "--no-surface", "--format", "json", *FAST)
    assert as_json.exit_code == 1 and rule in {f["rule"] for f in json.loads(as_json.stdout)["findings"]}

    out = tmp_path / "run"
    done = skill_evals_run(fake, out, *FAST, library=example_copy)
    assert done.returncode == 1 and f"[{rule}]" in done.stdout and "nothing was run" in done.stderr
    assert not (out / "plan.json").exists() and not (out / "results.json").exists()
    assert fake.requests == [], "a library-level floor error started something"


def test_strict_is_all_or_nothing_and_validate_stays_strict(example_copy: Path, fake: FakeAnthropic,
                                                            tmp_path: Path) -> None:
    break_frontmatter(example_copy)
    plan = cli("plan", "--library", str(example_copy), "--no-surface", *FAST, "--strict")
    assert plan.exit_code == 1 and "[frontmatter-yaml]" in plan.stdout and "--strict" in plan.stderr

    out = tmp_path / "run"
    done = skill_evals_run(fake, out, *FAST, "--strict", library=example_copy)
    assert done.returncode == 1 and "nothing was run" in done.stderr
    assert not (out / "results.json").exists() and fake.requests == []

    code, findings = findings_of(example_copy)
    assert code == 1 and "frontmatter-yaml" in {f["rule"] for f in findings}


# ---- calibrate: refused only for the probes the floor holds back ---------------------------------------------

PROBE = "test-report-triage/probe/rc-summary-empty-payments-suite"


def calibrate(fake: FakeAnthropic, library: Path) -> subprocess.CompletedProcess[str]:
    return run_cli("calibrate", PROBE, "--library", str(library), "--host", "api", fake=fake, key=KEY)


def test_calibrate_is_refused_only_for_a_held_back_probe(example_copy: Path, fake: FakeAnthropic) -> None:
    break_frontmatter(example_copy, "test-report-triage")
    refused = calibrate(fake, example_copy)
    assert refused.returncode == 1 and "held back by the floor (floor-error)" in refused.stderr
    assert "nothing was started" in refused.stderr and fake.requests == []

    fixed = example_copy / SKILLS / "test-report-triage" / "SKILL.md"
    fixed.write_text((EXAMPLE / SKILLS / "test-report-triage" / "SKILL.md").read_text(encoding="utf-8"),
                     encoding="utf-8")
    break_frontmatter(example_copy, BROKEN)  # an unrelated skill's error does not stop this probe
    done = calibrate(fake, example_copy)
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads((example_copy / SKILLS / "test-report-triage" / "evals" / "probes" /
                         "rc-summary-empty-payments-suite" / "calibration.json").read_text())["records"][-1]
    assert record["status"] == "finished" and record["starts"]
