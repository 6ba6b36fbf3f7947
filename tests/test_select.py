"""Tier selection (semantics §7): pr from a real `git diff`, cadence rotation, full, narrowing, the CLI."""

from __future__ import annotations

import json
import math
import shutil
from collections import Counter
from datetime import date, timedelta
from pathlib import Path

import pytest

from runner.corpus.library import Library
from runner.corpus.loader import load_library
from runner.corpus.settings import Settings
from runner.plan.select import (
    SelectError,
    changed_skills,
    classify_paths,
    neighbour_graph,
    period_index,
    select,
    select_tier,
)
from tests.conftest import EXAMPLE, cli
from tests.helpers import commit, example_repository, git


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return example_repository(tmp_path)


def edit_description(repo: Path, skill: str) -> None:
    path = repo / ".claude" / "skills" / skill / "SKILL.md"
    text = path.read_text(encoding="utf-8")
    assert "\ndescription: " in text
    path.write_text(text.replace("\ndescription: ", "\ndescription: Edited in the PR. ", 1), encoding="utf-8")


def library_of(repo: Path) -> Library:
    library, _ = load_library(repo, Settings())
    return library


def cases_of(library: Library, *skills: str) -> set[str]:
    return {case.uid for case in library.cases if case.skill in skills}


def select_json(*args: str) -> dict:
    result = cli("select", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# ---- pr -------------------------------------------------------------------------------------------

def test_pr_selects_the_changed_skill_and_the_skills_that_name_it(repo: Path) -> None:
    """release-publisher names no neighbour; test-report-triage names it: the reverse direction counts."""
    edit_description(repo, "release-publisher")
    commit(repo, "head")
    library = library_of(repo)
    assert library.skills["release-publisher"].overlaps_with == []
    assert "release-publisher" in library.skills["test-report-triage"].overlaps_with
    assert neighbour_graph(library)["release-publisher"] == {"test-report-triage"}

    selection = select_json("--library", str(repo), "--tier", "pr", "--base", "base", "--head", "HEAD")
    assert selection["changed_skills"] == ["release-publisher"]
    assert selection["changed_paths"] == [".claude/skills/release-publisher/SKILL.md"]
    assert selection["settings_changed"] is False
    assert {c["uid"] for c in selection["cases"]} == cases_of(library, "release-publisher", "test-report-triage")
    for case in selection["cases"]:
        if case["skill"] == "release-publisher":
            assert case["why"] == "skill release-publisher changed in base...HEAD"
        else:
            assert case["why"] == "skill test-report-triage neighbour of release-publisher (changed in base...HEAD)"
    assert "1 changed skill(s) (release-publisher)" in selection["note"]


def test_pr_selects_the_skills_a_changed_skill_names(repo: Path) -> None:
    """test-report-triage names release-publisher, which does not name it back: the forward direction counts."""
    edit_description(repo, "test-report-triage")
    commit(repo, "head")
    library = library_of(repo)
    expected_neighbours = {"release-publisher", "dependency-upgrade-reviewer", "incident-postmortem-writer"}
    assert neighbour_graph(library)["test-report-triage"] == expected_neighbours

    selection = select_tier(library, "pr", base="base", head="HEAD")
    assert selection.changed_skills == ["test-report-triage"]
    assert {c.uid for c in selection.cases} == cases_of(library, "test-report-triage", *expected_neighbours)
    whys = {c.skill: c.why for c in selection.cases}
    assert whys["release-publisher"] == ("skill release-publisher neighbour of test-report-triage "
                                         "(changed in base...HEAD)")
    assert whys["test-report-triage"] == "skill test-report-triage changed in base...HEAD"
    assert "migration-planner" not in whys  # a neighbour's neighbour is not selected


def test_pr_head_that_only_edits_the_readme_selects_nothing_and_says_why(repo: Path) -> None:
    (repo / "README.md").write_text("changed\n", encoding="utf-8")
    commit(repo, "readme")
    selection = select_json("--library", str(repo), "--tier", "pr", "--base", "base")
    assert selection["cases"] == []
    assert selection["changed_skills"] == []
    assert selection["changed_paths"] == ["README.md"]
    assert "nothing that selects cases changed in base...HEAD" in selection["note"]
    assert "README.md" in selection["note"] and "no cases selected" in selection["note"]


def test_pr_settings_change_selects_full_capped(repo: Path) -> None:
    (repo / ".skill-evals.toml").write_text("[select]\nmax_full_cases = 10\n", encoding="utf-8")
    edit_description(repo, "release-publisher")
    commit(repo, "settings")
    library = library_of(repo)
    assert len(library.cases) > 10
    selection = select_json("--library", str(repo), "--tier", "pr", "--base", "base")
    assert selection["settings_changed"] is True
    assert selection["capped"] is True
    assert len(selection["cases"]) == 10
    assert "max_full_cases = 10" in selection["note"] and f"10 of {len(library.cases)}" in selection["note"]
    uids = [c["uid"] for c in selection["cases"]]
    # the changed skill's cases are kept first, then its neighbour's
    assert cases_of(library, "release-publisher") <= set(uids)
    assert set(uids) <= cases_of(library, "release-publisher", "test-report-triage")
    assert uids == [c.uid for c in library.cases if c.uid in set(uids)]  # library order
    for case in selection["cases"]:
        assert case["why"].startswith("settings changed: full (.skill-evals.toml changed in base...HEAD)")


def test_pr_settings_change_under_the_cap_selects_every_case(repo: Path) -> None:
    (repo / ".skill-evals").mkdir()
    (repo / ".skill-evals" / "quarantine.json").write_text("[]\n", encoding="utf-8")
    commit(repo, "settings folder")
    library = library_of(repo)
    selection = select_tier(library, "pr", base="base", head="HEAD")
    assert selection.settings_changed and not selection.capped
    assert [c.uid for c in selection.cases] == [c.uid for c in library.cases]


def test_pr_changed_subagent_touches_the_skills_that_name_it(repo: Path) -> None:
    agent = repo / ".claude" / "agents" / "security-reviewer.md"
    agent.write_text(agent.read_text(encoding="utf-8") + "\nEdited.\n", encoding="utf-8")
    commit(repo, "agent")
    library = library_of(repo)
    naming = {skill.name for skill in library.skills.values() if "security-reviewer (subagent)" in skill.overlaps_with}
    naming |= {case.skill for case in library.cases
               if "security-reviewer (subagent)" in [case.target, *case.should_not_trigger]}
    assert naming
    selection = select_tier(library, "pr", base="base", head="HEAD")
    assert set(selection.changed_skills) == naming
    assert selection.changed_agents == ["security-reviewer"]
    for case in selection.cases:
        if case.skill in naming:
            assert case.why == f"skill {case.skill} names security-reviewer (subagent), changed in base...HEAD"
        else:
            assert "neighbour of" in case.why
    touched, settings_changed, paths = changed_skills(repo, Path(".claude/skills"), "base", "HEAD", library=library)
    assert touched == naming and not settings_changed and paths == [".claude/agents/security-reviewer.md"]


def test_changed_skills_reads_the_real_diff_since_the_merge_base(repo: Path) -> None:
    git(repo, "checkout", "-q", "-b", "feature")
    edit_description(repo, "migration-planner")
    commit(repo, "feature")
    git(repo, "checkout", "-q", "main")
    edit_description(repo, "release-publisher")  # a later change on the base branch is not the PR's
    commit(repo, "main moves on")
    touched, settings_changed, paths = changed_skills(repo, Path(".claude/skills"), "main", "feature")
    assert touched == {"migration-planner"} and not settings_changed
    assert paths == [".claude/skills/migration-planner/SKILL.md"]


def test_classify_paths() -> None:
    changes = classify_paths(
        ["skills/README.md", "skills/a/SKILL.md", "skills/b/evals/evals.json", "agents/rev.md", "agents/x/y.md",
         ".skill-evals/quarantine.json", ".skill-evals.toml.bak", "docs/skills/c/SKILL.md"],
        "skills", "agents")
    assert changes.skills == {"a", "b"}
    assert changes.agents == {"rev"}
    assert changes.settings == [".skill-evals/quarantine.json"]


def test_library_in_a_subfolder_of_the_repository(tmp_path: Path) -> None:
    top = tmp_path / "mono"
    shutil.copytree(EXAMPLE, top / "lib", symlinks=True)
    (top / ".skill-evals.toml").write_text("# the repository's, not the library's\n", encoding="utf-8")
    git(top, "init", "-q")
    commit(top, "base")
    (top / ".skill-evals.toml").write_text("# changed\n", encoding="utf-8")
    edit_description(top / "lib", "release-publisher")
    commit(top, "head")
    library = library_of(top / "lib")
    selection = select_tier(library, "pr", base="HEAD~1", head="HEAD")
    assert selection.changed_paths == [".claude/skills/release-publisher/SKILL.md"]  # relative to the library root
    assert selection.changed_skills == ["release-publisher"] and not selection.settings_changed


def test_unknown_ref_is_a_usage_error_with_gits_message(repo: Path) -> None:
    result = cli("select", "--library", str(repo), "--tier", "pr", "--base", "no-such-ref")
    assert result.exit_code == 2
    assert "skill-evals: git diff no-such-ref...HEAD failed" in result.stderr
    assert "no-such-ref" in result.stderr and ("bad revision" in result.stderr or "unknown revision" in result.stderr)
    assert "Traceback" not in result.output
    plan = cli("plan", "--library", str(repo), "--tier", "pr", "--base", "base", "--head", "nope", "--no-surface")
    assert plan.exit_code == 2 and "nope" in plan.stderr and "Traceback" not in plan.output


def test_pr_without_base_and_option_like_refs_are_usage_errors(repo: Path) -> None:
    result = cli("select", "--library", str(repo), "--tier", "pr")
    assert result.exit_code == 2 and "--tier pr needs --base" in result.stderr
    result = cli("plan", "--library", str(repo), "--tier", "pr", "--no-surface")
    assert result.exit_code == 2 and "--tier pr needs --base" in result.stderr
    result = cli("select", "--library", str(repo), "--tier", "pr", "--base=--output=/tmp/x")
    assert result.exit_code == 2 and "cannot start with '-'" in result.stderr


def test_not_a_git_repository_is_a_usage_error(example_copy: Path) -> None:
    result = cli("select", "--library", str(example_copy), "--tier", "pr", "--base", "main")
    assert result.exit_code == 2 and "failed" in result.stderr and "Traceback" not in result.output


def test_select_and_plan_agree(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    edit_description(repo, "release-publisher")
    commit(repo, "head")
    args = ("--library", str(repo), "--tier", "pr", "--base", "base", "--head", "HEAD")
    selection = select_json(*args)
    # The edit breaks the example's own validator (a manual-only description must start with its sentinel),
    # a library-level floor error that would stop `plan`; selection is what this test is about.
    result = cli("plan", *args, "--no-surface", "--format", "json", "--no-library-validator")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["tier"] == "pr"
    assert [(c["uid"], c["why"]) for c in plan["cases"]] == [(c["uid"], c["why"]) for c in selection["cases"]]
    assert plan["cases"]
    narrowed = select_json(*args, "--skill", "test-report-triage", "--case", "*/evals/*")
    plan = json.loads(cli("plan", *args, "--skill", "test-report-triage", "--case", "*/evals/*", "--no-surface",
                          "--format", "json", "--no-library-validator").stdout)
    assert [(c["uid"], c["why"]) for c in plan["cases"]] == [(c["uid"], c["why"]) for c in narrowed["cases"]]
    assert narrowed["cases"] and all(c["skill"] == "test-report-triage" and "/evals/" in c["uid"]
                                     for c in narrowed["cases"])


# ---- cadence --------------------------------------------------------------------------------------

def consecutive_weeks(start: date, count: int) -> list[str]:
    keys = []
    for i in range(count):
        year, week, _ = (start + timedelta(weeks=i)).isocalendar()
        keys.append(f"{year}-W{week:02d}")
    return keys


@pytest.mark.parametrize("fraction", [1.0, 0.5, 0.3, 0.25, 0.1, 0.05])
def test_cadence_runs_every_case_exactly_once_per_cycle(fraction: float) -> None:
    library = library_of(EXAMPLE)
    slots = math.ceil(1 / fraction - 1e-9)
    totals = Counter(case.skill for case in library.cases)
    # any run of `slots` consecutive weeks is a cycle, across a year boundary (2026 has 53 ISO weeks) too
    for start in (date(2026, 12, 14), date(2027, 3, 1)):
        weeks = consecutive_weeks(start, slots)
        seen: Counter[str] = Counter()
        picked_slots = set()
        for week in weeks:
            selection = select_tier(library, "cadence", period=week, fraction=fraction)
            assert selection.slots == slots and selection.period == week
            picked_slots.add(selection.slot)
            seen.update(c.uid for c in selection.cases)
            per_skill = Counter(c.skill for c in selection.cases)
            for skill, n in totals.items():  # stratified: each skill gives floor or ceil of n/slots
                assert per_skill[skill] in (n // slots, -(-n // slots))
            for case in selection.cases:
                assert case.why.startswith(f"cadence slot {selection.slot}/{slots} for period {week}")
        assert picked_slots == set(range(1, slots + 1))
        assert set(seen) == {case.uid for case in library.cases}
        assert set(seen.values()) == {1}


def test_cadence_period_keys_rotate_and_narrowing_keeps_the_slot() -> None:
    library = library_of(EXAMPLE)
    for keys in (["2026-12-30", "2026-12-31", "2027-01-01", "2027-01-02"], ["2026-11", "2026-12", "2027-01", "2027-02"],
                 ["7", "8", "9", "10"]):
        seen = Counter(c.uid for key in keys for c in select_tier(library, "cadence", period=key).cases)
        assert set(seen.values()) == {1} and len(seen) == len(library.cases)
    assert period_index("2026-W53")[0] + 1 == period_index("2027-W01")[0]
    whole = select_tier(library, "cadence", period="2026-W48")
    narrowed = select_tier(library, "cadence", period="2026-W48", skills=["migration-planner"])
    assert [c.uid for c in narrowed.cases] == [c.uid for c in whole.cases if c.skill == "migration-planner"]
    hashed = select_tier(library, "cadence", period="nightly-blue")
    assert "not guaranteed" in hashed.note
    with pytest.raises(SelectError):
        select_tier(library, "cadence", period="2026-W60")
    result = cli("select", "--library", str(EXAMPLE), "--tier", "cadence", "--period", "2026-13")
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_cadence_uses_the_settings(tmp_path: Path) -> None:
    library_path = tmp_path / "library"
    shutil.copytree(EXAMPLE, library_path, symlinks=True)
    (library_path / ".skill-evals.toml").write_text('[select]\ncadence_fraction = 0.5\nperiod = "2026-W10"\n',
                                                    encoding="utf-8")
    selection = select_json("--library", str(library_path), "--tier", "cadence")
    assert selection["period"] == "2026-W10" and selection["slots"] == 2
    other = select_json("--library", str(library_path), "--tier", "cadence", "--period", "2026-W11")
    both = [c["uid"] for c in selection["cases"]] + [c["uid"] for c in other["cases"]]
    assert sorted(both) == sorted(c.uid for c in library_of(library_path).cases)


# ---- full ------------------------------------------------------------------------------------------

def test_full_tier_is_what_select_always_did() -> None:
    library = library_of(EXAMPLE)
    for skills, patterns, neighbours in [([], [], False), (["release-publisher"], [], True),
                                         (["migration-planner"], ["*/trigger/*"], False)]:
        expected, unknown = select(library, skills, patterns, neighbours)
        got = select_tier(library, "full", skills=skills, case_patterns=patterns, with_neighbours=neighbours)
        assert [(c.uid, c.why) for c in got.cases] == [(c.uid, why) for c, why in expected]
        assert got.unknown_skills == unknown == []
    assert select_tier(library, "full", skills=["nope"]).unknown_skills == ["nope"]
    result = cli("select", "--library", str(EXAMPLE), "--skill", "nope")
    assert result.exit_code == 2 and "no such skill" in result.stderr
