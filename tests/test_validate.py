"""`skill-evals validate` on corrupted copies: each corruption gives its rule id at its exact line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import cli, findings_of, line_of, run_cli

SKILLS = Path(".claude") / "skills"
TRIAGE = SKILLS / "test-report-triage"
PROBE_DIR = TRIAGE / "evals" / "probes" / "rc-summary-empty-payments-suite"


def rel(path: Path) -> str:
    return path.as_posix()


def only(findings: list[dict], rule: str) -> list[dict]:
    return [f for f in findings if f["rule"] == rule]


def assert_finding(findings: list[dict], rule: str, file: Path, line: int, level: str = "error") -> dict:
    hits = [f for f in only(findings, rule) if f["file"] == rel(file) and f["line"] == line]
    assert hits, f"no {rule} at {file}:{line}; got {[(f['rule'], f['file'], f['line']) for f in findings]}"
    assert hits[0]["level"] == level
    return hits[0]


def test_example_library_is_clean(example_copy: Path) -> None:
    code, findings = findings_of(example_copy)
    errors = [f for f in findings if f["level"] == "error"]
    assert code == 0 and errors == []
    assert any(f["rule"] == "library-validator-passed" for f in findings)


def test_trailing_comma_points_at_the_comma(example_copy: Path) -> None:
    path = example_copy / TRIAGE / "evals" / "evals.json"
    text = path.read_text()
    # Add a trailing comma after the last assertion of the first case.
    marker = 'until the skipped test is shown to pass or is shown not to cover tomorrow\'s release."'
    assert marker in text
    path.write_text(text.replace(marker, marker + ",", 1))
    code, findings = findings_of(example_copy, "--no-library-validator")
    assert code == 1
    hit = assert_finding(findings, "json-syntax", TRIAGE / "evals" / "evals.json", line_of(path, marker))
    assert "trailing comma" in hit["message"]


def test_unknown_case_type_is_a_finding_and_never_mapped(example_copy: Path) -> None:
    path = example_copy / SKILLS / "migration-planner" / "evals" / "evals.json"
    data = json.loads(path.read_text())
    data["cases"][1]["type"] = "should_maybe_trigger"
    path.write_text(json.dumps(data, indent=2))
    code, findings = findings_of(example_copy, "--no-library-validator")
    assert code == 1
    hit = assert_finding(findings, "unknown-case-type", SKILLS / "migration-planner" / "evals" / "evals.json",
                         line_of(path, '"should_maybe_trigger"'))
    assert "should_maybe_trigger" in hit["message"]
    census = json.loads(cli("census", "--library", str(example_copy), "--format", "json").output)
    assert census["cases"]["by_kind"]["unknown"] == 1
    assert any(r["rule"] == "unknown-case-type" for r in census["pattern_breaks"]["decided_by_override_or_fallback"])


def test_name_differs_from_folder(example_copy: Path) -> None:
    path = example_copy / SKILLS / "migration-planner" / "SKILL.md"
    path.write_text(path.read_text().replace("name: migration-planner", "name: migrations-planner", 1))
    code, findings = findings_of(example_copy, "--no-library-validator")
    assert code == 1
    assert_finding(findings, "name-mismatch", SKILLS / "migration-planner" / "SKILL.md", 2)


def test_dangling_expected_skill(example_copy: Path) -> None:
    path = example_copy / TRIAGE / "evals" / "trigger-evals.json"
    data = json.loads(path.read_text())
    data["cases"][1]["expected_skill"] = "flaky-test-hunter"
    path.write_text(json.dumps(data, indent=2))
    code, findings = findings_of(example_copy, "--no-library-validator")
    assert code == 1
    assert_finding(findings, "dangling-reference", TRIAGE / "evals" / "trigger-evals.json",
                   line_of(path, '"expected_skill": "flaky-test-hunter"'))


def test_dangling_subagent_and_should_not_trigger(example_copy: Path) -> None:
    path = example_copy / TRIAGE / "evals" / "trigger-evals.json"
    data = json.loads(path.read_text())
    data["cases"][0]["should_not_trigger"] = ["migration-planner", "ghost-skill"]
    data["cases"][2]["expected_skill"] = "nobody (subagent)"
    path.write_text(json.dumps(data, indent=2))
    _, findings = findings_of(example_copy, "--no-library-validator")
    assert_finding(findings, "dangling-reference", TRIAGE / "evals" / "trigger-evals.json",
                   line_of(path, '"ghost-skill"'))
    sub = assert_finding(findings, "dangling-reference", TRIAGE / "evals" / "trigger-evals.json",
                         line_of(path, '"nobody (subagent)"'))
    assert "agents/nobody.md" in sub["message"]


def _set_description(skill_md: Path, parsed: str) -> int:
    """Write `parsed` as a single-quoted YAML scalar; returns the raw length on the line."""
    quoted = "'" + parsed.replace("'", "''") + "'"
    lines = skill_md.read_text().splitlines(keepends=True)
    index = next(i for i, line in enumerate(lines) if line.startswith("description:"))
    lines[index] = f"description: {quoted}\n"
    skill_md.write_text("".join(lines))
    return len(quoted)


def test_description_measured_on_the_parsed_value(example_copy: Path) -> None:
    path = example_copy / SKILLS / "migration-planner" / "SKILL.md"
    base = "Plan a database migration, don't guess. "
    at_limit = (base * 40)[:1024]
    raw = _set_description(path, at_limit)
    assert raw > 1024, "the quoting must make the raw text longer than the parsed value"
    code, findings = findings_of(example_copy, "--no-library-validator")
    assert only(findings, "description-too-long") == [] and code == 0

    _set_description(path, (base * 40)[:1025])
    code, findings = findings_of(example_copy, "--no-library-validator")
    assert code == 1
    hit = assert_finding(findings, "description-too-long", SKILLS / "migration-planner" / "SKILL.md",
                         line_of(path, "description:"))
    assert "1025" in hit["message"]


def test_drifted_seeded_defects(example_copy: Path) -> None:
    path = example_copy / PROBE_DIR / "probe.json"
    data = json.loads(path.read_text())
    data["kind"] = "band"
    data["seeded_defects"] = 2
    path.write_text(json.dumps(data, indent=2))
    code, findings = findings_of(example_copy, "--no-library-validator")
    assert code == 1
    assert_finding(findings, "probe-seeded-defects", PROBE_DIR / "probe.json", line_of(path, '"seeded_defects"'))


def test_signposted_probe(example_copy: Path) -> None:
    path = example_copy / PROBE_DIR / "question.md"
    lines = path.read_text().splitlines(keepends=True)
    lines.insert(3, "Note the following before you answer: one of the jobs is not what it seems.\n")
    path.write_text("".join(lines))
    code, findings = findings_of(example_copy, "--no-library-validator")
    assert code == 1
    hit = assert_finding(findings, "probe-signpost", PROBE_DIR / "question.md", 4)
    assert hit["col"] == 1


def test_symlink_to_etc_passwd_is_reported_and_not_followed(example_copy: Path) -> None:
    link = example_copy / TRIAGE / "references" / "passwd.md"
    link.parent.mkdir(exist_ok=True)
    os.symlink("/etc/passwd", link)
    skill_md = example_copy / SKILLS / "migration-planner" / "SKILL.md"
    skill_md.unlink()
    os.symlink("/etc/passwd", skill_md)
    code, findings = findings_of(example_copy, "--no-library-validator")
    assert code == 1
    assert_finding(findings, "symlink-escape", TRIAGE / "references" / "passwd.md", 1)
    assert_finding(findings, "symlink-escape", SKILLS / "migration-planner" / "SKILL.md", 1)
    everything = json.dumps(findings)
    assert "root:x:0:0" not in everything, "the target's content must never be read into findings"


def test_symlink_inside_the_library_is_fine(example_copy: Path) -> None:
    target = example_copy / SKILLS / "migration-planner" / "references"
    target.mkdir(exist_ok=True)
    os.symlink("../../migration-planner/SKILL.md", target / "alias.md")
    _, findings = findings_of(example_copy, "--no-library-validator")
    assert only(findings, "symlink-escape") == []


# ---- more probe rules (seed 000) --------------------------------------------------------------

def test_floor_probe_with_two_defects(example_copy: Path) -> None:
    path = example_copy / PROBE_DIR / "probe.json"
    question = (example_copy / PROBE_DIR / "question.md").read_text()
    data = json.loads(path.read_text())
    second_line = next(line for line in question.splitlines() if "ok" in line and line not in data["defects"][0]["locator"])
    data["defects"].append({"id": "d2", "shape": "euphemized", "locator": second_line, "caught_when": "x"})
    data["seeded_defects"] = 2
    path.write_text(json.dumps(data, indent=2))
    _, findings = findings_of(example_copy, "--no-library-validator")
    assert_finding(findings, "probe-floor-one-defect", PROBE_DIR / "probe.json", line_of(path, '"defects"'))


def test_missing_locator(example_copy: Path) -> None:
    path = example_copy / PROBE_DIR / "probe.json"
    data = json.loads(path.read_text())
    data["defects"][0]["locator"] = "this text is not in the artifact"
    path.write_text(json.dumps(data, indent=2))
    _, findings = findings_of(example_copy, "--no-library-validator")
    hit = assert_finding(findings, "probe-locator", PROBE_DIR / "probe.json", line_of(path, '"id": "d1"') - 1)
    assert "does not occur" in hit["message"]


def test_forty_one_line_artifact(example_copy: Path) -> None:
    path = example_copy / PROBE_DIR / "question.md"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines + [f"filler line {i}" for i in range(41 - len(lines))]) + "\n")
    _, findings = findings_of(example_copy, "--no-library-validator")
    hit = assert_finding(findings, "probe-too-long", PROBE_DIR / "question.md", 40)
    assert "41 lines" in hit["message"]


def test_time_pressure_as_a_shape(example_copy: Path) -> None:
    path = example_copy / PROBE_DIR / "probe.json"
    data = json.loads(path.read_text())
    data["defects"][0]["shape"] = "time_pressure"
    path.write_text(json.dumps(data, indent=2))
    _, findings = findings_of(example_copy, "--no-library-validator")
    assert_finding(findings, "probe-time-pressure-shape", PROBE_DIR / "probe.json", line_of(path, '"shape"'))


# ---- other corruptions ------------------------------------------------------------------------

def test_duplicate_ids_in_one_file(example_copy: Path) -> None:
    path = example_copy / TRIAGE / "evals" / "evals.json"
    data = json.loads(path.read_text())
    data["cases"][2]["id"] = data["cases"][0]["id"]
    path.write_text(json.dumps(data, indent=2))
    _, findings = findings_of(example_copy, "--no-library-validator")
    assert_finding(findings, "duplicate-id", TRIAGE / "evals" / "evals.json",
                   line_of(path, f'"id": "{data["cases"][0]["id"]}"', occurrence=2) - 1)


def test_yaml_error_in_frontmatter(example_copy: Path) -> None:
    path = example_copy / SKILLS / "migration-planner" / "SKILL.md"
    lines = path.read_text().splitlines(keepends=True)
    lines[2] = "description: Plan migrations: safely\n"  # ': ' inside a plain scalar is not strict YAML
    path.write_text("".join(lines))
    _, findings = findings_of(example_copy, "--no-library-validator")
    assert_finding(findings, "frontmatter-yaml", SKILLS / "migration-planner" / "SKILL.md", 3)


def test_duplicate_frontmatter_key(example_copy: Path) -> None:
    path = example_copy / SKILLS / "migration-planner" / "SKILL.md"
    lines = path.read_text().splitlines(keepends=True)
    lines.insert(3, "name: migration-planner\n")
    path.write_text("".join(lines))
    _, findings = findings_of(example_copy, "--no-library-validator")
    hit = assert_finding(findings, "frontmatter-yaml", SKILLS / "migration-planner" / "SKILL.md", 4)
    assert "duplicate key" in hit["message"]


def test_not_utf8_points_at_the_line(example_copy: Path) -> None:
    path = example_copy / TRIAGE / "evals" / "evals.json"
    data = path.read_bytes().replace(b"Nightly on main", b"Nightly on \xff\xfe main", 1)
    path.write_bytes(data)
    _, findings = findings_of(example_copy, "--no-library-validator")
    assert_finding(findings, "not-utf8", TRIAGE / "evals" / "evals.json", line_of_bytes(data, b"\xff"))


def line_of_bytes(data: bytes, needle: bytes) -> int:
    return data[: data.index(needle)].count(b"\n") + 1


def test_huge_file_is_not_read(example_copy: Path) -> None:
    (example_copy / ".skill-evals.toml").write_text("[limits]\nmax_file_bytes = 2000\n")
    path = example_copy / TRIAGE / "evals" / "evals.json"
    assert path.stat().st_size > 2000
    _, findings = findings_of(example_copy, "--no-library-validator")
    assert_finding(findings, "file-too-large", TRIAGE / "evals" / "evals.json", 1)


def test_schema_error_points_at_the_extra_key(example_copy: Path) -> None:
    path = example_copy / TRIAGE / "evals" / "evals.json"
    data = json.loads(path.read_text())
    data["cases"][3]["expect"]["trigger"] = True
    path.write_text(json.dumps(data, indent=2))
    _, findings = findings_of(example_copy, "--no-library-validator")
    hit = assert_finding(findings, "eval-schema", TRIAGE / "evals" / "evals.json", line_of(path, '"trigger": true'))
    assert "cases[3].expect" in hit["message"]


def test_type_and_triggers_must_agree(example_copy: Path) -> None:
    path = example_copy / TRIAGE / "evals" / "evals.json"
    data = json.loads(path.read_text())
    data["cases"][0]["expect"]["triggers"] = False
    path.write_text(json.dumps(data, indent=2))
    _, findings = findings_of(example_copy, "--no-library-validator")
    assert_finding(findings, "type-triggers-conflict", TRIAGE / "evals" / "evals.json",
                   line_of(path, f'"id": "{data["cases"][0]["id"]}"') - 1)


# ---- the library's own validator, settings, formats, exit codes -------------------------------

def test_library_validator_runs_first_and_gates(example_copy: Path) -> None:
    script = example_copy / "scripts" / "validate-skills.py"
    script.write_text("import sys\nprint('ERROR .claude/skills/x: broken on purpose')\nsys.exit(1)\n")
    result = cli("validate", "--library", str(example_copy))
    assert result.exit_code == 1
    assert "library-validator" in result.output and "broken on purpose" in result.output


def test_configured_validator_command_gets_no_secrets(example_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret-marker")
    probe = example_copy / "env_probe.py"
    probe.write_text("import os, sys\nprint(sorted(os.environ))\nsys.exit(3 if 'ANTHROPIC_API_KEY' in os.environ else 0)\n")
    (example_copy / ".skill-evals.toml").write_text('[validator]\ncommand = "python3 env_probe.py"\n')
    code, findings = findings_of(example_copy)
    assert code == 0, findings
    assert any(f["rule"] == "library-validator-passed" for f in findings)


def test_no_validator_found_is_a_note(example_copy: Path) -> None:
    (example_copy / "scripts" / "validate-skills.py").unlink()
    code, findings = findings_of(example_copy)
    assert code == 0
    assert only(findings, "library-validator-missing")[0]["level"] == "info"


def test_settings_typo_is_an_error_with_its_line(example_copy: Path) -> None:
    (example_copy / ".skill-evals.toml").write_text("[listing]\nbudget_chars = 9000\nbudget_char = 1\n")
    code, findings = findings_of(example_copy, "--no-library-validator")
    assert code == 1
    assert_finding(findings, "settings-invalid", Path(".skill-evals.toml"), 3)


def test_settings_syntax_error(example_copy: Path) -> None:
    (example_copy / ".skill-evals.toml").write_text("[listing]\nbudget_chars = = 9\n")
    code, findings = findings_of(example_copy, "--no-library-validator")
    assert code == 1
    assert_finding(findings, "settings-syntax", Path(".skill-evals.toml"), 2)


def test_override_naming_no_case(example_copy: Path) -> None:
    (example_copy / ".skill-evals.toml").write_text(
        '[[case_override]]\nuid = "test-report-triage/evals/nope"\nkind = "refusal"\nreason = "x"\n')
    code, findings = findings_of(example_copy, "--no-library-validator")
    assert code == 1 and only(findings, "override-unknown-case")


def test_github_format_annotates_files(example_copy: Path) -> None:
    path = example_copy / SKILLS / "migration-planner" / "SKILL.md"
    path.write_text(path.read_text().replace("name: migration-planner", "name: Migration_Planner", 1))
    result = cli("validate", "--library", str(example_copy), "--format", "github", "--no-library-validator")
    assert result.exit_code == 1
    line = next(out for out in result.output.splitlines() if "name-mismatch" in out)
    assert line.startswith("::error file=.claude/skills/migration-planner/SKILL.md,line=2,")
    assert "title=skill-evals name-mismatch::" in line


def test_missing_library_is_a_usage_error_without_traceback(tmp_path: Path) -> None:
    done = run_cli("validate", "--library", str(tmp_path / "nowhere"))
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and "no such file or folder" in done.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    done = run_cli("census", "--library", str(empty))
    assert done.returncode == 2 and "no skills found" in done.stderr


def test_manual_only_targets_are_warnings(example_copy: Path) -> None:
    _, findings = findings_of(example_copy)
    warnings = only(findings, "manual-only-target")
    assert {f["file"] for f in warnings} == {
        rel(SKILLS / "release-publisher" / "evals" / "evals.json"), rel(TRIAGE / "evals" / "trigger-evals.json")}
    assert all(f["level"] == "warning" for f in warnings)
