"""Shipped schemas are valid and current; the CLI's formats and entry points behave."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from runner.corpus import schema_check
from runner.corpus.settings import Settings
from tests.conftest import EXAMPLE, cli, run_cli

SCHEMAS = ["aegis-evals", "aegis-trigger-evals", "skill-creator-evals", "skill-creator-trigger-set", "probe",
           "settings", "results", "improve"]


@pytest.mark.parametrize("name", SCHEMAS)
def test_shipped_schemas_are_valid_draft_2020_12(name: str) -> None:
    schema = json.loads(resources.files("runner").joinpath("schemas", f"{name}.schema.json").read_text())
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_settings_schema_matches_the_model() -> None:
    shipped = json.loads(resources.files("runner").joinpath("schemas", "settings.schema.json").read_text())
    generated = Settings.model_json_schema(by_alias=True)
    for key in ("$schema", "title"):
        shipped.pop(key)
        generated.pop(key, None)
    assert shipped == generated, "regenerate runner/schemas/settings.schema.json from runner.corpus.settings.Settings"


def test_results_schema_matches_the_model() -> None:
    from runner.results.build import Results
    shipped = json.loads(resources.files("runner").joinpath("schemas", "results.schema.json").read_text())
    generated = Results.model_json_schema()
    for key in ("$schema", "title"):
        shipped.pop(key)
        generated.pop(key, None)
    assert shipped == generated, "regenerate runner/schemas/results.schema.json from runner.results.build.Results"


def test_labels_schema_matches_the_model() -> None:
    """labels.json (the review mode's download, calibrate-judge's input) is a list of LabelledItem."""
    from pydantic import TypeAdapter

    from runner.judge.agreement import LabelledItem
    shipped = json.loads(resources.files("runner").joinpath("schemas", "labels.schema.json").read_text())
    generated = TypeAdapter(list[LabelledItem]).json_schema()
    for key in ("$schema", "title"):
        shipped.pop(key)
    assert shipped == generated, "regenerate runner/schemas/labels.schema.json: python scripts/regen_schemas.py"


def test_example_files_match_their_schemas() -> None:
    skills = EXAMPLE / ".claude" / "skills"
    for path in skills.glob("*/evals/evals.json"):
        assert not list(schema_check.validator(schema_check.AEGIS_EVALS).iter_errors(json.loads(path.read_text())))
    for path in skills.glob("*/evals/trigger-evals.json"):
        assert not list(schema_check.validator(schema_check.AEGIS_TRIGGER).iter_errors(json.loads(path.read_text())))
    for path in skills.glob("*/evals/probes/*/probe.json"):
        assert not list(schema_check.validator(schema_check.PROBE).iter_errors(json.loads(path.read_text())))


def test_skill_creator_format_is_read(tmp_path: Path) -> None:
    skill = tmp_path / "skills" / "pdf-filler"
    (skill / "evals").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: pdf-filler\ndescription: Fill PDF forms from data.\n---\n# PDF\n")
    (skill / "evals" / "evals.json").write_text(json.dumps({"skill_name": "pdf-filler", "evals": [
        {"id": 1, "prompt": "Fill form.pdf with this CSV", "expected_output": "a filled PDF",
         "files": ["evals/files/form.pdf"], "expectations": ["The output PDF has every field filled."]},
        {"id": 2, "prompt": "Fill it again", "assertions": ["Says which fields were empty."]},
    ]}, indent=2))
    census = json.loads(cli("census", "--library", str(tmp_path), "--format", "json").output)
    assert census["cases"]["by_kind"] == {"trigger": 2}
    assert census["cases"]["by_type"] == {"(skill-creator)": 2}
    assert census["assertions"]["total"] == 2
    result = cli("validate", "--library", str(tmp_path))
    assert result.exit_code == 0, result.output


def test_python_dash_m_runner_and_json_output() -> None:
    done = run_cli("validate", "--library", str(EXAMPLE), "--format", "json")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["counts"]["error"] == 0 and payload["cases"] == 39 + 3  # and the routing set at evals/routing.json
    assert all({"level", "rule", "file", "line", "message"} <= set(f) for f in payload["findings"])


def test_census_text_view_names_the_essentials() -> None:
    result = cli("census", "--library", str(EXAMPLE))
    assert result.exit_code == 0
    for expected in ("Cases by kind", "Refusal cases", "Assertions:", "manual-only", "(subagent) targets",
                     "Skill listing", "rule 3", "review by a person"):
        assert expected in result.output


def test_help_lists_commands() -> None:
    result = cli("--help")
    assert result.exit_code == 0 and "validate" in result.output and "census" in result.output


def test_skill_creator_trigger_set_from_settings(example_copy: Path) -> None:
    triggers = example_copy / "evals" / "migration-planner-triggers.json"
    triggers.parent.mkdir(exist_ok=True)  # the example's routing set lives there too
    triggers.write_text(json.dumps([
        {"query": "Plan adding a NOT NULL column to orders", "should_trigger": True},
        {"query": "Write the postmortem for last night", "should_trigger": False},
        {"query": "Rename a column live", "should_trigger": "yes"},
    ], indent=2))
    (example_copy / ".skill-evals.toml").write_text(
        '[[trigger_set]]\nskill = "migration-planner"\npath = "evals/migration-planner-triggers.json"\n')
    census = json.loads(cli("census", "--library", str(example_copy), "--format", "json").output)
    assert census["cases"]["by_source"]["trigger"] == 14 + 3
    decided = {r["uid"]: r["rule"] for r in census["pattern_breaks"]["decided_by_override_or_fallback"]}
    assert decided == {"migration-planner/trigger/q3": "schema-invalid"}
    result = cli("validate", "--library", str(example_copy), "--format", "json", "--no-library-validator")
    findings = json.loads(result.output)["findings"]
    bad = [f for f in findings if f["rule"] == "eval-schema"]
    assert bad and bad[0]["file"] == "evals/migration-planner-triggers.json" and bad[0]["line"] == 12
