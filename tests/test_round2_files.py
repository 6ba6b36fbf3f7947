"""Issue 29, part "files": one eval file is one set of cases however it is named (item 0), and eval files outside
`<skill>/evals/` are read when they map to one skill and otherwise listed as found and not read (item 7).

The libraries are tests/round2_files.py's. Loading is in-process (the corpus is what changed); one `plan` and one
`validate` go through the real CLI, since what an author reads there is the behaviour.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from rich.console import Console

from runner.corpus import settings as settings_mod
from runner.corpus.findings import Finding
from runner.corpus.library import Library
from runner.corpus.loader import find_root, load_library
from runner.corpus.settings import Settings
from runner.floor import census
from tests import round2_files as r2
from tests.conftest import cli, findings_of


def load(library_path: Path) -> tuple[Library, list[Finding]]:
    """As the CLI loads it: the settings file at the repository root when there is one."""
    root, _ = find_root(library_path)
    file = root / settings_mod.SETTINGS_FILE
    settings, problems = settings_mod.load(file if file.exists() else None, root)
    assert problems == []
    library, findings = load_library(library_path, settings, file if file.exists() else None)
    return library, findings


# ---- item 0 --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("naming", sorted(r2.NAMINGS))
def test_one_file_is_one_set_of_cases(tmp_path: Path, naming: str) -> None:
    named = r2.NAMINGS[naming](tmp_path / "repo")
    library, findings = load(named.library)
    queries = json.loads(named.file.read_text(encoding="utf-8"))
    # One case per query of the one file, with the uid discovery gives it, whichever ways lead to the file.
    assert [c.uid for c in library.cases] == [f"{named.uid_prefix}q{i}" for i in range(1, len(queries) + 1)]
    assert [c.kind for c in library.cases] == ["trigger" if q["should_trigger"] else "no_trigger" for q in queries]
    assert {os.path.realpath(Path(library.root) / c.file) for c in library.cases} == {os.path.realpath(named.file)}
    assert [f for f in findings if f.level.value == "error"] == []
    assert [f.rule for f in findings if f.level.value == "warning" and f.rule != "evals-missing"] == []
    # The second way is said, as a note, where the author wrote it.
    notes = [f for f in findings if f.rule in ("trigger-set-already-read", "eval-file-read-once")]
    assert len(notes) == 1 and notes[0].level.value == "info"
    expected_at = settings_mod.SETTINGS_FILE if (Path(library.root) / settings_mod.SETTINGS_FILE).exists() else None
    assert notes[0].file == (expected_at or notes[0].file)
    assert (Path(library.root) / notes[0].file).exists()


def test_a_trigger_set_entry_for_another_skill_is_a_warning_and_no_second_set(tmp_path: Path) -> None:
    """The file lives in pdf-tools/evals/ but the entry gives it to sheet-tools: the folder decides (stable uids), and
    the author is told how to give it to the other skill."""
    root = r2.NAMINGS["evals/<other>.json"](tmp_path / "repo").library
    (root / ".skill-evals.toml").write_text(
        f'[[trigger_set]]\nskill = "{r2.NEIGHBOUR}"\npath = ".claude/skills/{r2.SKILL}/evals/trigger-set.json"\n',
        encoding="utf-8")
    library, findings = load(root)
    assert {c.skill for c in library.cases} == {r2.SKILL} and len(library.cases) == len(r2.QUERIES)
    [note] = [f for f in findings if f.rule == "trigger-set-already-read"]
    assert note.level.value == "warning" and f"skill '{r2.NEIGHBOUR}'" in note.message


# ---- item 7 --------------------------------------------------------------------------------------------

OUTSIDE_CASES = {
    "pdf-tools/evals/merge": ("trigger", "pdf-tools", "evals/pdf-tools/evals.json"),
    "pdf-tools/trigger/trigger-eval:q1": ("trigger", "pdf-tools", "evals/pdf-tools/trigger-eval.json"),
    "pdf-tools/trigger/trigger-eval:q2": ("trigger", "pdf-tools", "evals/pdf-tools/trigger-eval.json"),
    "sheet-tools/trigger/triggering:q1": ("trigger", "sheet-tools", "misc/evals/sheet-tools/triggering.json"),
    "sheet-tools/trigger/triggering:q2": ("no_trigger", "sheet-tools", "misc/evals/sheet-tools/triggering.json"),
    "memo-writer/evals/routing-checks:memo": ("trigger", "memo-writer", "evals/scenarios/routing-checks.json"),
    "sheet-tools/evals/routing-checks:sheet": ("trigger", "sheet-tools", "evals/scenarios/routing-checks.json"),
    "memo-writer/evals/own-skill:weather": ("no_trigger", "memo-writer", "evals/scenarios/own-skill.json"),
}
NOT_READ = {
    "evals/ghost-skill/evals.json": "no skill of this library is named 'ghost-skill'",
    "evals/notes.json": "routing sets",
    "evals/cases.yaml": "YAML",
    "benchmarks/trigger_results.json": "names a skill",
    "pdf-tools-workspace": "workspace",
    "skills/pdf-tools/evals/extra.csv": "CSV",
}


def test_eval_files_outside_skill_folders_are_read_as_the_skill_they_name(tmp_path: Path) -> None:
    library, findings = load(r2.outside_layouts(tmp_path / "repo"))
    got = {c.uid: (c.kind, c.target, c.file) for c in library.cases}
    assert got == OUTSIDE_CASES
    rules = {c.uid: c.kind_rule for c in library.cases}
    assert rules["memo-writer/evals/own-skill:weather"] == "field:checks.skill_invoked=false"
    assert rules["sheet-tools/evals/routing-checks:sheet"] == "field:checks.skill_invoked=sheet-tools"
    assert [f for f in findings if f.level.value == "error"] == []
    # A file read from outside the skill folders is part of the library: editing it changes the content hash.
    before = library.content_hash
    (Path(library.root) / "misc" / "evals" / "sheet-tools" / "triggering.json").write_text("[]", encoding="utf-8")
    assert load(Path(library.root))[0].content_hash != before


def test_every_other_eval_looking_file_is_found_and_not_read_with_why(tmp_path: Path) -> None:
    root = r2.outside_layouts(tmp_path / "repo")
    library, findings = load(root)
    unread = {u.file: u.reason for u in library.unread}
    assert sorted(unread) == sorted(NOT_READ)
    for file, words in NOT_READ.items():
        assert words in unread[file], (file, unread[file])
        assert (root / file).exists()
        said = [f for f in findings if f.file == file]
        assert len(said) == 1 and "found, not read" in said[0].message and said[0].level.value in ("info", "warning")
    # The census says the same, in text and json.
    report = census.compute(library, Settings(), findings)
    assert {u.file: u.reason for u in report.not_read} == unread
    assert json.loads(report.model_dump_json())["not_read"][0]["file"] in NOT_READ
    console = Console(record=True, width=400)
    census.render_text(report, console)
    text = console.export_text()
    assert f"Eval files found and not read: {len(NOT_READ)}" in text
    assert all(f"  {file}: {reason}" in text for file, reason in unread.items())


def test_a_folder_of_scripts_beside_the_skills_is_not_a_skill_missing_its_skill_md(tmp_path: Path) -> None:
    root = r2.outside_layouts(tmp_path / "repo")
    # A folder that does hold eval files of its own and no SKILL.md still is one.
    r2.write_json(root / "skills" / "half-done" / "evals" / "evals.json", [{"prompt": "Do it"}])
    code, findings = findings_of(root)
    missing = sorted(f["file"] for f in findings if f["rule"] == "skill-md-missing")
    assert missing == ["skills/half-done"] and code == 1  # the folder: a finding names what exists
    # validate names every file found and not read.
    shown = {f["file"]: f["message"] for f in findings if "found, not read" in f["message"]}
    assert set(shown) == set(NOT_READ) | {"skills/half-done/evals/evals.json"}
    assert "half-done/ holds no SKILL.md" in shown["skills/half-done/evals/evals.json"]


def test_the_outside_cases_are_planned_with_their_uids_and_kinds(tmp_path: Path) -> None:
    root = r2.outside_layouts(tmp_path / "repo")
    result = cli("plan", "--library", str(root), "--no-surface", "--format", "json")
    assert result.exit_code == 0, result.output
    planned = {c["uid"]: c["kind"] for c in json.loads(result.output)["cases"]}
    assert {uid: kind for uid, kind in planned.items() if uid in OUTSIDE_CASES} == {
        uid: kind for uid, (kind, _, _) in OUTSIDE_CASES.items()}


def test_skill_checks_items_that_name_no_skill_are_invalid_cases_with_a_reason(tmp_path: Path) -> None:
    root = r2.outside_layouts(tmp_path / "repo")
    r2.write_json(root / "evals" / "scenarios" / "mixed.json", {"scenario_name": "mixed", "evals": [
        {"id": "ok", "prompt": "Memo about the picnic", "checks": {"skill_invoked": "memo-writer", "tone": "warm"}},
        {"id": "stranger", "prompt": "Paint a fence", "checks": {"skill_invoked": "fence-painter"}},
        {"id": "whose", "prompt": "Anything at all", "checks": {"skill_invoked": True}}]})
    library, findings = load(root)
    cases = {c.uid: c for c in library.cases if c.file == "evals/scenarios/mixed.json"}
    assert cases["memo-writer/evals/mixed:ok"].kind == "trigger"
    assert {uid: c.kind for uid, c in cases.items() if uid != "memo-writer/evals/mixed:ok"} == {
        "(library)/evals/mixed:stranger": "invalid", "(library)/evals/mixed:whose": "invalid"}
    errors = {f.uid: f.message for f in findings if f.level.value == "error"}
    assert "'fence-painter', which is not a skill of this library" in errors["(library)/evals/mixed:stranger"]
    assert "names no skill" in errors["(library)/evals/mixed:whose"]
    assert any(f.rule == "eval-unknown-key" and "'tone'" in f.message for f in findings)
