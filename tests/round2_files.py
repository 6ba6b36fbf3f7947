"""Synthetic libraries for issue 29, part "files": one eval file read twice (item 0) and eval files kept outside
`<skill>/evals/` (item 7).

Every text here is written for these tests; the layouts and key names follow what public libraries do, the words do
not. `LIBRARIES` maps a name to a builder that writes a library into an empty folder and returns the path to pass as
--library. `NAMINGS` are the documented ways of naming one trigger set, each a builder that also returns where the
file is, so a test can hold every one of them to "one file, one set of cases".
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from tests.compat_libraries import git_init, skill, write_json

SKILL = "pdf-tools"
NEIGHBOUR = "sheet-tools"
QUERIES = [{"query": "Merge these two PDF reports into one file", "should_trigger": True},
           {"query": "Split the scanned contract into single pages", "should_trigger": True},
           {"query": "What is a good name for a goldfish?", "should_trigger": False}]


def _skills(parent: Path, *names: str) -> None:
    for name in names:
        skill(parent / name)


def _settings(root: Path, path: str, name: str = SKILL) -> None:
    (root / ".skill-evals.toml").write_text(f'[[trigger_set]]\nskill = "{name}"\npath = "{path}"\n', encoding="utf-8")


class Named(NamedTuple):
    library: Path  # what --library names
    file: Path  # the one trigger set, as written
    uid_prefix: str  # the uid every case of it gets: `<prefix><id>`


# ---- item 0: one file, every way of naming it --------------------------------------------------------

def _in_skill(file_name: str, in_evals: bool = True, uid: str = "") -> Callable[[Path], Named]:
    """.claude/skills/pdf-tools/[evals/]<file_name>, also named by [[trigger_set]]."""
    def build(root: Path) -> Named:
        git_init(root)
        _skills(root / ".claude" / "skills", SKILL, NEIGHBOUR)
        relative = f".claude/skills/{SKILL}/" + ("evals/" if in_evals else "") + file_name
        write_json(root / relative, QUERIES)
        _settings(root, relative)
        return Named(root, root / relative, uid or f"{SKILL}/trigger/")
    return build


def _skills_folder(root: Path) -> Named:
    git_init(root)
    _skills(root / "skills", SKILL, NEIGHBOUR)
    write_json(root / "skills" / SKILL / "evals" / "trigger-set.json", QUERIES)
    _settings(root, f"skills/{SKILL}/evals/trigger-set.json")
    return Named(root, root / "skills" / SKILL / "evals" / "trigger-set.json", f"{SKILL}/trigger/trigger-set:")


def _marketplace(root: Path) -> Named:
    git_init(root)
    plugin = root / "plugins" / "doc-kit"
    _skills(plugin / "skills", SKILL, NEIGHBOUR)
    write_json(plugin / ".claude-plugin" / "plugin.json", {"name": "doc-kit"})
    write_json(root / ".claude-plugin" / "marketplace.json",
               {"name": "docs", "owner": {"name": "tests"}, "plugins": [{"name": "doc-kit", "source": "./plugins/doc-kit"}]})
    file = plugin / "skills" / SKILL / "evals" / "trigger-evals.json"
    write_json(file, QUERIES)
    _settings(root, f"plugins/doc-kit/skills/{SKILL}/evals/trigger-evals.json")
    return Named(root, file, f"{SKILL}/trigger/")


def _plugin(root: Path) -> Named:
    git_init(root)
    _skills(root / "skills", SKILL, NEIGHBOUR)
    write_json(root / ".claude-plugin" / "plugin.json", {"name": "doc-kit"})
    file = root / "skills" / SKILL / "evals" / "trigger_evals.json"
    write_json(file, QUERIES)
    _settings(root, f"skills/{SKILL}/evals/trigger_evals.json")
    return Named(root, file, f"{SKILL}/trigger/")


def _single_skill_root_evals(root: Path) -> Named:
    """--library at one skill folder that has no evals/: the repository's evals/ is read as its."""
    git_init(root)
    _skills(root / "skills", SKILL, NEIGHBOUR)
    file = write_json(root / "evals" / "trigger-set.json", QUERIES)
    _settings(root, "evals/trigger-set.json")
    return Named(root / "skills" / SKILL, file, f"{SKILL}/trigger/trigger-set:")


def _symlinked_skill(root: Path) -> Named:
    """.claude/skills/pdf-tools is a link to skills/pdf-tools; [[trigger_set]] names the file through the link."""
    git_init(root)
    _skills(root / "skills", SKILL, NEIGHBOUR)
    (root / ".claude" / "skills").mkdir(parents=True)
    os.symlink(f"../../skills/{SKILL}", root / ".claude" / "skills" / SKILL)
    file = write_json(root / "skills" / SKILL / "evals" / "trigger-set.json", QUERIES)
    _settings(root, f".claude/skills/{SKILL}/evals/trigger-set.json")
    return Named(root, file, f"{SKILL}/trigger/trigger-set:")


def _linked_file(root: Path) -> Named:
    """The skill's root evals.json is a link to its evals/evals.json: two names the loader reads, one file."""
    git_init(root)
    _skills(root / ".claude" / "skills", SKILL, NEIGHBOUR)
    file = write_json(root / ".claude" / "skills" / SKILL / "evals" / "evals.json", QUERIES)
    os.symlink("evals/evals.json", root / ".claude" / "skills" / SKILL / "evals.json")
    return Named(root, file, f"{SKILL}/trigger/")


def _root_evals_folder(root: Path) -> Named:
    """evals/pdf-tools/trigger-eval.json at the repository root (item 7), also named by [[trigger_set]]."""
    git_init(root)
    _skills(root / "skills", SKILL, NEIGHBOUR)
    file = write_json(root / "evals" / SKILL / "trigger-eval.json", QUERIES)
    _settings(root, f"evals/{SKILL}/trigger-eval.json")
    return Named(root, file, f"{SKILL}/trigger/trigger-eval:")


def _utility_folder(root: Path) -> Named:
    """misc/evals/pdf-tools/triggering.json (item 7), also named by [[trigger_set]]."""
    git_init(root)
    _skills(root / "skills", SKILL, NEIGHBOUR)
    file = write_json(root / "misc" / "evals" / SKILL / "triggering.json", QUERIES)
    _settings(root, f"misc/evals/{SKILL}/triggering.json")
    return Named(root, file, f"{SKILL}/trigger/triggering:")


NAMINGS: dict[str, Callable[[Path], Named]] = {
    "evals/trigger-evals.json": _in_skill("trigger-evals.json"),
    "evals/trigger-queries.json": _in_skill("trigger-queries.json"),
    "evals/trigger_evals.json": _in_skill("trigger_evals.json"),
    "evals/eval.json": _in_skill("eval.json"),
    "evals/evals.json": _in_skill("evals.json"),
    "evals/<other>.json": _in_skill("trigger-set.json", uid=f"{SKILL}/trigger/trigger-set:"),
    "skill-root evals.json": _in_skill("evals.json", in_evals=False),
    "skill-root eval.json": _in_skill("eval.json", in_evals=False),
    "skill-root trigger_evals.json": _in_skill("trigger_evals.json", in_evals=False),
    "skill-root trigger-eval.json": _in_skill("trigger-eval.json", in_evals=False,
                                              uid=f"{SKILL}/trigger/trigger-eval:"),
    "skills/ folder": _skills_folder,
    "marketplace plugin": _marketplace,
    "plugin.json": _plugin,
    "--library at one skill, root evals/": _single_skill_root_evals,
    "symlinked skill folder": _symlinked_skill,
    "symlinked eval file": _linked_file,
    "root evals/<skill>/": _root_evals_folder,
    "misc/evals/<skill>/": _utility_folder,
}


# ---- item 7: eval files outside <skill>/evals/ --------------------------------------------------------

def outside_layouts(root: Path) -> Path:
    """Every outside layout of item 7 in one repository, plus files that look like eval files and map to no skill,
    and a folder of scripts beside the skills."""
    git_init(root)
    _skills(root / "skills", SKILL, NEIGHBOUR, "memo-writer")
    write_json(root / "evals" / SKILL / "evals.json", {"skill_name": SKILL, "evals": [
        {"id": "merge", "prompt": "Merge report-a.pdf and report-b.pdf", "expectations": ["One PDF is produced."]}]})
    write_json(root / "evals" / SKILL / "trigger-eval.json", QUERIES[:2])
    write_json(root / "misc" / "evals" / NEIGHBOUR / "triggering.json",
               [{"query": "Sum column C of budget.xlsx", "should_trigger": True},
                {"query": "Write a limerick about rain", "should_trigger": False}])
    write_json(root / "evals" / "scenarios" / "routing-checks.json", {"scenario_name": "who answers", "evals": [
        {"id": "memo", "prompt": "Draft a memo announcing the office move", "checks": {"skill_invoked": "memo-writer"}},
        {"id": "sheet", "prompt": "Pivot the sales sheet by region", "checks": {"skill_invoked": NEIGHBOUR}}]})
    write_json(root / "evals" / "scenarios" / "own-skill.json", {"scenario_name": "negative control",
                                                                 "skill": "memo-writer", "evals": [
        {"id": "weather", "prompt": "Will it rain tomorrow in Lisbon?", "checks": {"skill_invoked": False}}]})
    # Found and not read, each for a reason the census states.
    write_json(root / "evals" / "ghost-skill" / "evals.json", [{"prompt": "Do the ghost thing"}])
    write_json(root / "evals" / "notes.json", {"owner": "docs team"})
    (root / "evals" / "cases.yaml").write_text("- prompt: Merge the files\n", encoding="utf-8")
    write_json(root / "benchmarks" / "trigger_results.json", {"runs": 3})
    workspace = root / "pdf-tools-workspace" / "iteration-1"
    write_json(workspace / "eval_metadata.json", {"eval_id": 1})
    (root / "skills" / SKILL / "evals").mkdir()
    (root / "skills" / SKILL / "evals" / "extra.csv").write_text("prompt,should_trigger\nMerge,true\n",
                                                                 encoding="utf-8")
    # A folder of scripts next to the skills, with an evals/ of harness code: not a skill missing SKILL.md.
    (root / "scripts" / "evals").mkdir(parents=True)
    (root / "scripts" / "run_evals.py").write_text("print('harness')\n", encoding="utf-8")
    (root / "scripts" / "evals" / "grade.sh").write_text("echo grade\n", encoding="utf-8")
    (root / "tools").mkdir()
    (root / "tools" / "check.sh").write_text("echo check\n", encoding="utf-8")
    return root


def _naming(name: str) -> Callable[[Path], Path]:
    return lambda root: NAMINGS[name](root).library


LIBRARIES: dict[str, Callable[[Path], Path]] = {
    "outside-layouts": outside_layouts,
    "trigger-set-named-twice": _naming("evals/<other>.json"),
    "symlinked-skill-named-twice": _naming("symlinked skill folder"),
    "root-evals-skill-folder": _naming("root evals/<skill>/"),
}
