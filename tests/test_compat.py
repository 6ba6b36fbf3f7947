"""Compatibility with the libraries people have (issue 12): every layout and eval format the runner reads,
on small synthetic copies (tests/compat_libraries.py), asserting the skills found, the cases per kind and
the findings; and the flat `.claude/skills/<name>/` sessions receive, through the real Claude Code CLI."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from runner.corpus.findings import Finding
from runner.corpus.layout import LibraryError
from runner.corpus.library import ANY_SKILL, LIBRARY_OWNER, Library
from runner.corpus.loader import load_library
from runner.corpus.settings import Settings
from runner.hosts.surface import parse_listing
from runner.testing.fake_anthropic import FakeAnthropic, text
from runner.testing.fake_anthropic import skill as skill_call
from tests import compat_libraries as compat
from tests.conftest import cli, findings_of, line_of
from tests.helpers import git, skill_evals_run


def load(path: Path, settings: Settings | None = None) -> tuple[Library, list[Finding]]:
    return load_library(path, settings or Settings())


def kinds(library: Library) -> dict[str, int]:
    return dict(Counter(case.kind for case in library.cases))


def rules(findings: list[Finding]) -> list[tuple[str, str, str]]:
    return sorted((f.level.value, f.rule, f.file) for f in findings)


# ---- layouts --------------------------------------------------------------------------------------

def test_nested_category_folders(tmp_path: Path) -> None:
    library, findings = load(compat.nested_categories(tmp_path / "repo"))
    assert library.layout.kind == "skills-folder" and "category folders" in library.layout.description
    assert sorted(library.skills) == ["csv-cleaner", "memo-drafter", "tone-checker"]
    assert library.skills["memo-drafter"].dir == "skills/writing/memo-drafter"
    assert kinds(library) == {"trigger": 6}
    # `planned/` holds no skill: a category, never a broken skill. `half-done/` was meant as one.
    assert rules(findings) == [("error", "skill-md-missing", "skills/data/half-done/skill.md")]
    assert findings[0].skill == "half-done"


def test_category_folders_at_the_repository_root(tmp_path: Path) -> None:
    library, findings = load(compat.root_categories(tmp_path / "repo"))
    assert library.layout.kind == "root-categories"
    assert library.layout.roots == ["engineering", "marketing"]
    assert sorted(library.skills) == ["api-linter", "copy-editor", "log-reader"]
    assert kinds(library) == {"trigger": 3} and findings == []


def test_marketplace_with_plugins_manifests_and_categories(tmp_path: Path) -> None:
    library, findings = load(compat.marketplace(tmp_path / "repo"))
    layout = library.layout
    assert layout.kind == "marketplace" and "review-kit, office, finance" in layout.description
    # review-kit: its skills/ folder plus the path its manifest adds; office: exactly the two it lists (an
    # entry sourced at the root lists its skills); finance: <category>/skills/. unlisted-draft ships in none.
    assert sorted(library.skills) == ["commit-namer", "diff-reader", "ledger-checker", "sheet-maker", "slide-maker"]
    assert {name: s.plugin for name, s in library.skills.items()} == {
        "commit-namer": "review-kit", "diff-reader": "review-kit", "ledger-checker": "finance",
        "sheet-maker": "office", "slide-maker": "office"}
    assert sorted(library.agents) == ["triager"]
    assert kinds(library) == {"trigger": 3}
    remote = [f for f in findings if f.rule == "plugin-remote-source"]
    assert len(remote) == 1 and remote[0].level.value == "info" and "remote-tools" in remote[0].message
    assert remote[0].line == line_of(tmp_path / "repo" / ".claude-plugin" / "marketplace.json", '"source": {')
    assert sorted(f.rule for f in findings if f.level.value != "info") == ["evals-missing"] * 3


def test_marketplace_path_that_does_not_exist_is_an_error_at_its_line(tmp_path: Path) -> None:
    root = compat.marketplace(tmp_path / "repo")
    manifest = root / ".claude-plugin" / "marketplace.json"
    data = json.loads(manifest.read_text())
    data["plugins"][1]["skills"].append("./skills/renamed-away")
    compat.write_json(manifest, data)
    library, findings = load(root)
    [missing] = [f for f in findings if f.rule == "plugin-path-missing"]
    assert missing.level.value == "error" and "renamed-away" in missing.message
    assert missing.line == line_of(manifest, "renamed-away")
    assert "sheet-maker" in library.skills  # the rest of the plugin still loads


def test_skills_folder_under_another_name(tmp_path: Path) -> None:
    library, findings = load(compat.other_named_folder(tmp_path / "repo"))
    assert library.layout.kind == "other-folder" and library.layout.roots == ["scientific-skills"]
    assert sorted(library.skills) == ["assay-planner", "lab-report"]
    assert kinds(library) == {"trigger": 3} and findings == []


def test_library_pointing_at_one_skill_with_evals_at_the_repository_root(tmp_path: Path) -> None:
    root = compat.single_skill_repository(tmp_path / "repo")
    library, findings = load(root / "skills" / "pdf-helper")
    assert library.layout.kind == "single-skill" and library.layout.evals_dirs == ["evals"]
    assert list(library.skills) == ["pdf-helper"]  # the repository's other skill is not this library
    assert Path(library.root) == root.resolve()
    assert kinds(library) == {"trigger": 2, "no_trigger": 1}
    assert sorted(c.uid for c in library.cases) == ["pdf-helper/evals/1", "pdf-helper/trigger/q1",
                                                    "pdf-helper/trigger/q2"]
    assert findings == []
    # Pointing at the SKILL.md file works too, and at a skill with its evals beside it.
    again, _ = load(root / "skills" / "pdf-helper" / "SKILL.md")
    assert list(again.skills) == ["pdf-helper"]
    compat.creator_evals(root / "skills" / "other-skill", "other-skill", count=3)
    beside, _ = load(root / "skills" / "other-skill")
    assert kinds(beside) == {"trigger": 3}


def test_symlinked_skill_inside_is_followed_outside_is_an_escape_and_empty_submodule_warns(tmp_path: Path) -> None:
    root = compat.links_and_submodules(tmp_path / "repo", tmp_path / "elsewhere")
    library, findings = load(root)
    assert sorted(library.skills) == ["linked-skill", "plain-skill"]
    assert "outside-skill" not in library.skills
    assert rules(findings) == [("error", "symlink-escape", "skills/outside-skill"),
                               ("warning", "submodule-empty", "skills/vendored")]
    assert next(f for f in findings if f.rule == "symlink-escape").skill == "outside-skill"


def test_several_candidate_roots_say_which_was_chosen_and_roots_can_name_both(tmp_path: Path) -> None:
    root = compat.rival_roots(tmp_path / "repo")
    library, _ = load(root)
    assert library.layout.roots == ["skills"] and sorted(library.skills) == ["alpha-skill", "beta-skill", "gamma-skill"]
    assert ".claude/skills/ (1 skill)" in library.layout.candidates
    assert "`.claude/skills` holds fewer (1 skill) and was not read" in library.layout.note
    settings = Settings.model_validate({"library": {"roots": [".claude/skills", "skills"]}})
    both, _ = load(root, settings)
    assert both.layout.kind == "configured"
    assert sorted(both.skills) == ["alpha-skill", "beta-skill", "gamma-skill", "repo-helper"]
    census = json.loads(cli("census", "--library", str(root), "--format", "json").output)
    assert census["library"]["layout"] == "skills-folder" and census["library"]["roots"] == ["skills"]
    assert "was not read" in census["library"]["layout_note"]


def test_claude_skills_is_read_one_level_deep_as_the_host_reads_it(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    compat.git_init(root)
    compat.skill(root / ".claude" / "skills" / "top-skill")
    compat.skill(root / ".claude" / "skills" / "group" / "deep-skill")
    library, findings = load(root)
    assert list(library.skills) == ["top-skill"]
    assert [r for r in rules(findings) if r[1] != "evals-missing"] == [
        ("warning", "skill-not-loaded", ".claude/skills/group/deep-skill/SKILL.md")]


def test_two_skill_folders_with_one_name(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    compat.git_init(root)
    compat.skill(root / "skills" / "writing" / "editor")
    compat.skill(root / "skills" / "code" / "editor")
    library, findings = load(root)
    assert library.skills["editor"].dir == "skills/code/editor"  # path order: code/ before writing/
    assert [r for r in rules(findings) if r[1] != "evals-missing"] == [
        ("error", "duplicate-skill-name", "skills/writing/editor/SKILL.md")]


def test_a_path_with_no_skill_is_a_usage_error_and_fast(tmp_path: Path) -> None:
    (tmp_path / "empty" / "docs").mkdir(parents=True)
    with pytest.raises(LibraryError, match="no skills found"):
        load(tmp_path / "empty")
    result = cli("validate", "--library", str(tmp_path / "empty"))
    assert result.exit_code == 2 and "no skills found" in result.stderr


def test_frontmatter_name_differs_from_folder_is_an_alias() -> None:
    # Claude Code 2.1.332 lists such a skill as `folder (name)` and accepts either name in a Skill call.
    with_description, name_only = parse_listing(
        "The following skills are available for use with the Skill tool:\n\n- pdf-tools (pdf): Work with PDFs.\n"
        "- plain: A plain one.\n- dropped (other)\n")
    assert with_description == ["pdf-tools", "plain"] and name_only == ["dropped"]
    # A description over several lines (one of the host's own, CLI 2.1.332) does not end the listing.
    with_description, _ = parse_listing(
        "The following skills are available for use with the Skill tool:\n\n- a-skill: One.\n"
        "- host-api: Reference for an API.\nTRIGGER when asked.\nSKIP otherwise.\n- later-one: After it.\n"
        "</system-reminder>\n- not-a-skill: after the listing\n")
    assert with_description == ["a-skill", "host-api", "later-one"]


def test_frontmatter_alias_is_one_skill_for_the_classifier_and_the_verdict(tmp_path: Path) -> None:
    from runner.execute import grading

    root = tmp_path / "repo"
    compat.git_init(root)
    compat.skill(root / "skills" / "pdf-tools", name="pdf")
    compat.skill(root / "skills" / "docx-tools", name="docx")
    compat.write_json(root / "skills" / "pdf-tools" / "evals" / "evals.json", {"skill_name": "pdf-tools", "evals": [
        {"id": 1, "prompt": "Make a memo.", "should_trigger": False, "expectations": ["Does not invoke `pdf`."]}]})
    library, _ = load(root)
    assert library.aliases() == {"pdf": "pdf-tools", "docx": "docx-tools"}
    assert library.names()["pdf"] == "pdf-tools"
    [case] = library.cases
    [assertion] = case.assertions
    assert assertion.assertion_class == "activation"  # `pdf` is a name of the library
    fired = grading.check_activation_assertion(assertion, case, ["pdf-tools"], library.names())
    assert fired.state == "FAIL" and "pdf-tools fired" in fired.evidence
    assert grading.check_activation_assertion(assertion, case, ["docx-tools"], library.names()).state == "PASS"


# ---- eval formats ---------------------------------------------------------------------------------

def test_every_format_is_read_with_its_kinds_and_findings(tmp_path: Path) -> None:
    root = compat.formats_library(tmp_path / "repo")
    library, findings = load(root)
    by_uid = {case.uid: case for case in library.cases}
    assert dict(Counter(c.source for c in library.cases)) == {"evals": 9, "trigger": 7, "scenario": 1, "routing": 4}
    # `type: stress` is a category tag (issue 29 item 4): the case is read by its other fields, a trigger case.
    assert kinds(library) == {"trigger": 8, "no_trigger": 9, "discrimination": 3, "invalid": 1}
    # skill-creator evals.json: negative controls recognised by the rule that decided, extra keys warned.
    rule_of = {uid.split("/", 2)[2]: (c.kind, c.kind_rule) for uid, c in by_uid.items()
               if uid.startswith("form-filler/evals/")}
    assert rule_of == {
        "1": ("trigger", "format:skill-creator"),
        "2": ("no_trigger", "expected_output:should-not-trigger"),
        "negative-weather": ("no_trigger", "id-prefix:negative-"),
        "4": ("no_trigger", "field:should_trigger=false"),
        "5": ("trigger", "field:type=boundary"),
        "6": ("trigger", "format:skill-creator"),
        "7": ("no_trigger", "field:kind=anti"),
    }
    assert by_uid["form-filler/evals/6"].label == "stress"
    first = by_uid["form-filler/evals/1"]
    assert first.files == ["evals/files/intake.txt"] and first.files_dir == str(root / "skills" / "form-filler")
    assert [a.text for a in by_uid["form-filler/evals/5"].assertions] == [
        "The answer contains `signature`.", "Leaves the signature blank."]
    # Trigger sets: a list (trigger-queries.json, trigger-evals.json), an object with `queries` at the skill root.
    assert {by_uid[u].kind for u in ("form-filler/trigger/q1", "ocr-reader/trigger/q1", "note-taker/trigger/n1")} \
        == {"trigger"}
    assert by_uid["ocr-reader/trigger/q3"].kind == "invalid"
    # eval.json (singular): eval_id, eval_name, kind.
    assert by_uid["ocr-reader/evals/e-1"].kind == "trigger" and by_uid["ocr-reader/evals/e-1"].note == "receipt"
    assert by_uid["ocr-reader/evals/e-2"].kind == "no_trigger"
    # A scenario: its expected behaviour is judged; the second skill it names must fire too.
    scenario = by_uid["form-filler/scenario/scanned"]
    assert scenario.target == "form-filler" and scenario.files == ["evaluations/scan.txt"]
    assert [(a.text, a.assertion_class) for a in scenario.assertions] == [
        ("Reads the scan first.", "semantic"), ("Fills every field.", "semantic"),
        ("Invokes `ocr-reader`.", "activation")]
    # The routing set: owned by the skill it expects; a prompt no skill should take belongs to the library.
    assert by_uid["form-filler/routing/route-1"].kind == "discrimination"
    assert by_uid["ocr-reader/routing/route-2"].should_not_trigger == ["form-filler"]
    none = by_uid[f"{LIBRARY_OWNER}/routing/route-3"]
    assert none.kind == "no_trigger" and none.target == ANY_SKILL
    forms = root / "skills" / "form-filler"
    assert rules(findings) == sorted([
        ("warning", "eval-unknown-key", "skills/form-filler/evals/evals.json"),
        ("warning", "eval-unknown-key", "skills/form-filler/evals/trigger-queries.json"),
        ("warning", "eval-format-unknown", "skills/form-filler/evals/notes.json"),
        ("error", "eval-schema", "skills/ocr-reader/evals/trigger-evals.json"),
        ("warning", "eval-format-unknown", "evals/settings.json"),
    ])
    unknown_key = next(f for f in findings if f.rule == "eval-unknown-key" and "covers" in f.message)
    assert unknown_key.line == line_of(forms / "evals" / "evals.json", '"covers"')
    schema = next(f for f in findings if f.rule == "eval-schema")
    # The offending value is quoted, not the file.
    assert schema.message == '[2].should_trigger: expected boolean, got "sometimes"'
    assert schema.uid == "ocr-reader/trigger/q3"
    not_understood = next(f for f in findings if f.file.endswith("notes.json"))
    assert "an object with keys todo" in not_understood.message


def test_validate_and_census_on_the_formats_library(tmp_path: Path) -> None:
    root = compat.formats_library(tmp_path / "repo")
    code, findings = findings_of(root, "--no-library-validator")
    assert code == 1
    dangling = [f for f in findings if f["rule"] == "dangling-reference"]
    assert len(dangling) == 1 and "no-such-skill" in dangling[0]["message"]
    assert dangling[0]["uid"] == "no-such-skill/routing/route-4"
    census = json.loads(cli("census", "--library", str(root), "--format", "json").output)
    assert census["cases"]["by_format"] == {"routing": 4, "scenario": 1, "skill-creator": 9, "trigger-set": 7}


def test_answer_keys_never_reach_a_session(tmp_path: Path) -> None:
    from runner.hosts import workspace

    root = compat.formats_library(tmp_path / "repo")
    library, _ = load(root)
    files = workspace.LibraryFiles.of(library, 1_048_576)
    ws = workspace.build(files, [], [])
    try:
        skills = ws.project / ".claude" / "skills"
        assert sorted(p.name for p in skills.iterdir()) == ["form-filler", "note-taker", "ocr-reader"]
        assert not (skills / "ocr-reader" / "eval.json").exists()
        assert not (skills / "note-taker" / "evals.json").exists()
        assert not (skills / "form-filler" / "evaluations").exists()
        assert not (skills / "form-filler" / "evals").exists()
        assert (skills / "form-filler" / "SKILL.md").is_file()
    finally:
        ws.remove()


# ---- what sessions receive, through the real host ---------------------------------------------------

def test_marketplace_skills_reach_claude_code_flat(tmp_path: Path) -> None:
    """The real CLI, against the capture endpoint: every plugin skill is listed, none missing."""
    root = compat.marketplace(tmp_path / "repo")
    result = cli("surface", "--library", str(root), "--format", "json", "--listing-budget", "50000")
    assert result.exit_code == 0, result.output
    surface = json.loads(result.output)
    assert sorted(surface["with_description"]) == ["commit-namer", "diff-reader", "ledger-checker", "sheet-maker",
                                                   "slide-maker"]
    assert surface["missing"] == [] and "unlisted-draft" not in surface["not_from_library"]


def test_nested_layout_runs_on_claude_code_and_the_api_host(tmp_path: Path) -> None:
    """A case of a skill two folders deep: the real CLI loads it from the flat session folder (its Skill
    call is accepted) and the case passes; the same on the api host."""
    root = compat.nested_categories(tmp_path / "repo")
    (root / "skills" / "data" / "half-done").rename(tmp_path / "moved-away")  # keep the floor clean
    with FakeAnthropic() as fake:
        fake.script("Please do task 1 for csv-cleaner", skill_call("csv-cleaner"), text("Step 1 is done."))
        fake.default(text("A plain answer."))
        for host in ("claude-code", "api"):
            out = tmp_path / f"run-{host}"
            done = skill_evals_run(fake, out, "--host", host, "--case", "csv-cleaner/evals/1", "--repeats", "1",
                                   "--no-judge", library=root)
            assert done.returncode == 0, done.stdout + done.stderr
            results = json.loads((out / "results.json").read_text())
            [case] = results["cases"]
            # The prose assertion is not judged here (--no-judge): the case is UNRUN for that part only.
            assert case["uid"] == "csv-cleaner/evals/1" and case["activation"]["state"] == "PASS", case
            assert case["state"] == "UNRUN" and case["reason"] == "judge-disabled"
            records = [json.loads(line) for line in (out / "attempts.jsonl").read_text().splitlines()]
            assert records[0]["outcome"]["fired"] == ["csv-cleaner"]
            skill_calls = [c for c in records[0]["tool_calls"] if c["name"] == "Skill"]
            assert len(skill_calls) == 1 and skill_calls[0]["is_error"] in (None, False)  # the host accepted it


def test_pr_tier_finds_the_changed_skill_in_a_nested_layout(tmp_path: Path) -> None:
    from runner.plan.select import select_tier

    root = compat.marketplace(tmp_path / "repo")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    readme = root / "plugins" / "review-kit" / "skills" / "diff-reader" / "references" / "notes.md"
    readme.parent.mkdir(parents=True)
    readme.write_text("More guidance.\n", encoding="utf-8")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "head")
    library, _ = load(root)
    selection = select_tier(library, "pr", base="HEAD~1", head="HEAD")
    assert selection.changed_skills == ["diff-reader"]
    assert [case.uid for case in selection.cases] == ["diff-reader/evals/1", "diff-reader/evals/2"]


def test_an_error_in_one_routing_case_holds_back_that_case_only(tmp_path: Path) -> None:
    """A routing set lives outside every skill folder: its case errors must name their case, or the floor
    would take them for the library's and stop every skill."""
    from runner.floor import gate as floor

    root = compat.formats_library(tmp_path / "repo")
    routing = root / "evals" / "routing.json"
    data = json.loads(routing.read_text())
    data["cases"].append({"id": "route-5", "prompt": "Sort my photos.", "expected": 5})
    compat.write_json(routing, data)
    library, findings = load(root)
    bad = [f for f in findings if f.file == "evals/routing.json" and f.level.value == "error"]
    assert [(f.rule, f.uid) for f in bad] == [("eval-schema", f"{LIBRARY_OWNER}/routing/route-5")]
    assert bad[0].message.startswith("cases[4].expected")
    gate = floor.gate(findings, library)
    assert f"{LIBRARY_OWNER}/routing/route-5" in gate.cases and not gate.library
