"""Small synthetic libraries in the layouts and eval formats real repositories use (issue 12).

Every text here is written for these tests: the layouts and key names follow public libraries, the
words do not. Each builder makes a repository in a temporary folder and returns its root.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any


def skill(folder: Path, name: str | None = None, description: str | None = None, body: str = "") -> Path:
    """A skill folder with a SKILL.md (frontmatter name defaults to the folder's)."""
    folder.mkdir(parents=True, exist_ok=True)
    name = name or folder.name
    description = description or f"Use for {folder.name.replace('-', ' ')} work in this test library."
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n# {name}\n\n{body}\n",
                                     encoding="utf-8")
    return folder


def write_json(path: Path, value: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")
    return path


def creator_evals(folder: Path, skill_name: str, count: int = 2) -> Path:
    """skill-creator evals/evals.json with `count` trigger cases."""
    return write_json(folder / "evals" / "evals.json", {"skill_name": skill_name, "evals": [
        {"id": i + 1, "prompt": f"Please do task {i + 1} for {skill_name}.", "expected_output": "done",
         "expectations": [f"The answer covers step {i + 1}."]} for i in range(count)]})


def git_init(root: Path) -> None:
    subprocess.run(["git", "init", "-q", str(root)], check=True)


# ---- layouts --------------------------------------------------------------------------------------

def nested_categories(root: Path) -> Path:
    """skills/<category>/<skill>/SKILL.md, a category with no skill yet, and a folder meant as a skill."""
    git_init(root)
    for category, names in {"writing": ["memo-drafter", "tone-checker"], "data": ["csv-cleaner"]}.items():
        for name in names:
            creator_evals(skill(root / "skills" / category / name), name)
    (root / "skills" / "planned").mkdir(parents=True)
    (root / "skills" / "planned" / "README.md").write_text("Skills to come.\n", encoding="utf-8")
    broken = root / "skills" / "data" / "half-done"
    (broken / "evals").mkdir(parents=True)
    (broken / "skill.md").write_text("---\nname: half-done\ndescription: lower-case file name.\n---\n", encoding="utf-8")
    return root


def root_categories(root: Path) -> Path:
    """<category>/<skill>/SKILL.md at the repository root (no skills/ folder)."""
    git_init(root)
    for category, names in {"engineering": ["api-linter", "log-reader"], "marketing": ["copy-editor"]}.items():
        for name in names:
            creator_evals(skill(root / category / name), name, count=1)
    (root / "docs").mkdir()
    (root / "docs" / "index.md").write_text("# Docs\n", encoding="utf-8")
    return root


def marketplace(root: Path) -> Path:
    """.claude-plugin/marketplace.json: a plugin under plugins/ (default skills/ folder plus its manifest's
    extra path), a plugin sourced at the root listing its skills (the anthropics/skills style), a plugin under
    a category folder (<category>/skills/...), a remote plugin, and a skill no plugin ships."""
    git_init(root)
    review = root / "plugins" / "review-kit"
    creator_evals(skill(review / "skills" / "diff-reader"), "diff-reader")
    skill(review / "extra" / "commit-namer")
    write_json(review / ".claude-plugin" / "plugin.json", {"name": "review-kit", "skills": ["./extra/commit-namer"]})
    (review / "agents").mkdir()
    (review / "agents" / "triager.md").write_text("---\nname: triager\ndescription: Triage.\n---\nTriage.\n",
                                                   encoding="utf-8")
    for name in ("sheet-maker", "slide-maker", "unlisted-draft"):
        skill(root / "skills" / name)
    creator_evals(root / "skills" / "sheet-maker", "sheet-maker", count=1)
    skill(root / "finance" / "skills" / "ledger-checker")
    write_json(root / ".claude-plugin" / "marketplace.json", {
        "name": "test-market", "owner": {"name": "tests"},
        "plugins": [
            {"name": "review-kit", "source": "./plugins/review-kit"},
            {"name": "office", "source": "./", "strict": False,
             "skills": ["./skills/sheet-maker", "./skills/slide-maker"]},
            {"name": "finance", "source": "./finance"},
            {"name": "remote-tools", "source": {"source": "github", "repo": "example/remote-tools"}},
        ]})
    return root


def other_named_folder(root: Path) -> Path:
    """A skills folder under another name (scientific-skills/), one skill a level deeper."""
    git_init(root)
    creator_evals(skill(root / "scientific-skills" / "assay-planner"), "assay-planner")
    creator_evals(skill(root / "scientific-skills" / "document-skills" / "lab-report"), "lab-report", count=1)
    return root


def single_skill_repository(root: Path) -> Path:
    """A repository that is one skill in a sub-folder, its evals at the repository root."""
    git_init(root)
    skill(root / "skills" / "pdf-helper")
    skill(root / "skills" / "other-skill")
    write_json(root / "evals" / "evals.json", {"skill_name": "pdf-helper", "evals": [
        {"id": 1, "prompt": "Read the attached PDF's second table.", "expectations": ["Names the table."]}]})
    write_json(root / "evals" / "trigger-evals.json", [
        {"query": "extract text from this pdf", "should_trigger": True},
        {"query": "plan my week", "should_trigger": False}])
    return root


def links_and_submodules(root: Path, outside: Path) -> Path:
    """A skill folder symlinked from elsewhere in the repository (followed), one linked from outside it (an
    escape, not followed), and an empty git submodule."""
    git_init(root)
    creator_evals(skill(root / "shared" / "linked-skill"), "linked-skill", count=1)
    creator_evals(skill(root / "skills" / "plain-skill"), "plain-skill", count=1)
    os.symlink("../shared/linked-skill", root / "skills" / "linked-skill")
    creator_evals(skill(outside / "outside-skill"), "outside-skill", count=1)
    os.symlink(str(outside / "outside-skill"), root / "skills" / "outside-skill")
    (root / "skills" / "vendored").mkdir()
    (root / ".gitmodules").write_text('[submodule "vendored"]\n\tpath = skills/vendored\n'
                                      "\turl = https://example.invalid/vendored.git\n", encoding="utf-8")
    return root


def rival_roots(root: Path) -> Path:
    """.claude/skills with one helper skill and skills/ with three library skills."""
    git_init(root)
    skill(root / ".claude" / "skills" / "repo-helper")
    for name in ("alpha-skill", "beta-skill", "gamma-skill"):
        creator_evals(skill(root / "skills" / name), name, count=1)
    return root


# ---- eval formats ---------------------------------------------------------------------------------

def formats_library(root: Path) -> Path:
    """One skills/ folder whose skills use every eval format the runner reads, plus a routing set."""
    git_init(root)
    forms = skill(root / "skills" / "form-filler")
    write_json(forms / "evals" / "evals.json", {"skill_name": "form-filler", "evals": [
        {"id": 1, "prompt": "Fill in the attached intake form.", "expected_output": "the form, filled",
         "files": ["evals/files/intake.txt"], "expectations": ["Every field has a value."],
         "name": "fill-intake", "covers": ["R1"]},
        {"id": 2, "prompt": "Write a limerick about spring.",
         "expected_output": "Should not trigger form-filler: nothing to fill."},
        {"id": "negative-weather", "prompt": "Will it rain tomorrow?"},
        {"id": 4, "prompt": "Convert this form to a spreadsheet.", "should_trigger": False},
        {"id": 5, "prompt": "Fill the form, leave the signature empty.", "type": "boundary",
         "assertions": [{"type": "content_contains", "value": "signature"}, {"text": "Leaves the signature blank."}]},
        {"id": 6, "prompt": "Fill every form in the folder.", "type": "stress"},
        {"id": 7, "prompt": "Fill this one.", "kind": "anti"},
    ]})
    (forms / "evals" / "files").mkdir()
    (forms / "evals" / "files" / "intake.txt").write_text("name: \ndate: \n", encoding="utf-8")
    write_json(forms / "evals" / "trigger-queries.json", [
        {"query": "fill out this tax form for me", "should_trigger": True, "split": "train"},
        {"query": "what is a good name for a cat", "should_trigger": False, "category": "unrelated"}])
    write_json(forms / "evals" / "notes.json", {"todo": "add more cases"})
    write_json(forms / "evaluations" / "scanned.json", {
        "skills": ["form-filler", "ocr-reader"], "query": "Fill the scanned form in scan.txt.",
        "files": ["evaluations/scan.txt"], "expected_behavior": ["Reads the scan first.", "Fills every field."]})
    (forms / "evaluations" / "scan.txt").write_text("scanned text\n", encoding="utf-8")

    ocr = skill(root / "skills" / "ocr-reader")
    write_json(ocr / "evals" / "trigger-evals.json", [
        {"query": "read the text in this photo", "should_trigger": True},
        {"query": "translate this sentence", "should_trigger": False},
        {"query": "scan this receipt", "should_trigger": "sometimes"}])
    write_json(ocr / "eval.json", [
        {"eval_id": "e-1", "eval_name": "receipt", "kind": "standard", "prompt": "Read this receipt image.",
         "assertions": [{"id": "a1", "text": "Lists the total."}]},
        {"eval_id": "e-2", "eval_name": "off-topic", "kind": "negative", "prompt": "Sum these numbers: 2, 3."}])

    notes = skill(root / "skills" / "note-taker")
    write_json(notes / "evals.json", {"queries": [
        {"id": "n1", "query": "take notes from this meeting transcript", "should_trigger": True},
        {"id": "n2", "query": "book a meeting room", "should_trigger": False}]})

    write_json(root / "evals" / "routing.json", {"cases": [
        {"id": "route-1", "prompt": "Fill in my visa application form.", "expected": "form-filler"},
        {"id": "route-2", "prompt": "Read the numbers off this photo.", "expected_skill": "ocr-reader",
         "unexpectedSkills": ["form-filler"]},
        {"id": "route-3", "prompt": "Tell me a joke.", "expected": None},
        {"id": "route-4", "prompt": "Do something.", "expected": "no-such-skill"}]})
    write_json(root / "evals" / "settings.json", {"model": "any"})
    return root
