"""The first real user: the Project Aegis library (185 skill folders), read at its full size."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import cli, cli_imports

# What made validate slow on this library was importing the session stack (anthropic, the agent SDK,
# runs) before reading a file. The test asserts that cause, not a time: the wall time is measured by
# `python -m benchmarks.commands` (timed tests fail on a loaded machine; CI saw 2.36 s once).
HEAVY_MODULES = ("anthropic", "claude_agent_sdk", "runner.pipeline.run", "docker", "github")


def test_validate_passes_without_the_slow_imports(aegis_skills: Path) -> None:
    done = cli_imports(HEAVY_MODULES, "validate", "--library", str(aegis_skills))
    assert done.stdout.splitlines()[-2:] == ["exit 0", "loaded"], done.stdout[-3000:] + done.stderr[-3000:]
    assert "0 error(s)" in done.stdout


def test_census_counts(aegis_skills: Path) -> None:
    result = cli("census", "--library", str(aegis_skills), "--format", "json")
    assert result.exit_code == 0
    census = json.loads(result.output)
    skills = census["skills"]
    assert (skills["total"], skills["real"], skills["templates"]) == (185, 184, ["_template"])
    assert len(skills["manual_only"]) == 18
    cases = census["cases"]
    assert cases["by_source"] == {"evals": 882, "trigger": 858}
    assert cases["by_type"] == {"should_trigger": 690, "should_not_trigger": 190, "should_not_do": 2}
    assert cases["template_cases_not_run"] == 4
    assert census["assertions"]["total"] == 2834
    assert sum(census["assertions"]["by_class"].values()) == 2834
    subagents = census["subagents"]
    assert len(subagents["expected_skill"]) == 4
    assert len(subagents["overlaps_with"]) == 5
    assert {r["detail"] for r in subagents["expected_skill"]} == {
        "ai-security-red-team-reviewer", "release-readiness-reviewer"}


def test_refusals_and_pattern_breaks(aegis_skills: Path) -> None:
    census = json.loads(cli("census", "--library", str(aegis_skills), "--format", "json").output)
    # corpus-formats.md: 160 should-not-<verb> refusals typed should_trigger, plus 2 should_not_do.
    assert census["refusals"]["by_rule"] == {"id-prefix:should-not-": 160, "type:should_not_do": 2}
    breaks = census["pattern_breaks"]
    assert len(breaks["refusal_like_ids_typed_no_trigger"]) == 6
    assert len(breaks["halt_cases"]) == 32
    kinds = census["cases"]["by_kind"]
    assert kinds == {"discrimination": 858, "trigger": 530, "no_trigger": 190, "refusal": 162}


def test_manual_only_targets_and_listing(aegis_skills: Path) -> None:
    census = json.loads(cli("census", "--library", str(aegis_skills), "--format", "json").output)
    # corpus-formats.md: 100 trigger-evals cases expect a manual-only skill to win.
    assert census["manual_only"]["by_source"] == {"trigger": 100, "evals": 73}
    assert census["manual_only"]["cases_targeting"] == 173 and len(census["manual_only"]["skills"]) == 18
    listing = census["listing"]
    assert listing["listed"] == 185 - 18
    assert len(listing["with_description"]) + len(listing["name_only"]) == listing["listed"]
    # At the default budget most of the library is listed by name only (host-surface.md).
    # (The host's own entries alone take more than the default budget: every library skill is name only.)
    assert len(listing["name_only"]) == 167 and listing["with_description"] == []
    assert listing["total_chars_all_descriptions"] == 160_925


def test_listing_budget_is_a_setting(aegis_skills: Path, tmp_path: Path) -> None:
    config = tmp_path / "settings.toml"
    config.write_text("[listing]\nbudget_chars = 250000\n")
    census = json.loads(cli("census", "--library", str(aegis_skills), "--config", str(config),
                            "--format", "json").output)
    assert census["listing"]["name_only"] == []
    assert len(census["listing"]["with_description"]) == 167


def test_assertion_classes_on_the_real_corpus(aegis_skills: Path) -> None:
    census = json.loads(cli("census", "--library", str(aegis_skills), "--format", "json").output)
    by_class = census["assertions"]["by_class"]
    # "Does not invoke X: ..." assertions are activation checks answered by the harness.
    assert by_class == {"semantic": 2746, "activation": 86, "artifact_shape": 2}
    rules = census["assertions"]["by_rule"]
    assert rules == {"default-semantic": 2746, "activation-does-not-invoke": 83, "activation-not-invoke-this-skill": 2,
                     "activation-skill-must-not-fire": 1, "shape-backtick-literal": 1, "shape-output-header": 1}
