"""Eval files outside a skill's own `evals/`: which are a skill's, and which are only found.

`survey` walks the repository once, never entering a skill folder, and sorts each eval-looking file: a skill's (read
like one in its own `evals/`), or found and not read, with the reason.

Design notes: docs/design/library-layouts.md.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from runner.corpus.files import ReadPolicy
from runner.corpus.layout import SKIPPED

EVAL_FOLDERS = frozenset({"evals", "eval", "evaluations", "evaluation"})
DATA_SUFFIXES = frozenset({".json", ".jsonl", ".yaml", ".yml", ".csv", ".toml"})
# Hidden folders at the repository top that hold a library's skills; every other hidden folder is a tool's.
HIDDEN_OK = frozenset({".claude", ".agents"})
# No library keeps eval files deeper than this below its root (categories of categories, then evals/<skill>/).
MAX_DEPTH = 8
WORKSPACE_SUFFIX = "-workspace"

WHY_SUFFIX = {
    ".yaml": "a YAML file: the runner reads eval files written in JSON",
    ".yml": "a YAML file: the runner reads eval files written in JSON",
    ".csv": "a CSV file: the runner reads eval files written in JSON",
    ".jsonl": "JSON Lines: the runner reads eval files that are one JSON document",
    ".toml": "a TOML file: the runner reads eval files written in JSON",
}
WHY_WORKSPACE = ("a skill-creator workspace (run artifacts such as eval_metadata.json and grading results, not "
                 "eval definitions)")


@dataclass
class Survey:
    by_skill: dict[str, list[Path]] = field(default_factory=dict)  # skill -> JSON files of `…/evals/<skill>/`
    loose: list[Path] = field(default_factory=list)  # other eval-looking JSON files: tried by shape
    unread: list[tuple[Path, str]] = field(default_factory=list)  # found, and why they are not read


def looks_like_eval(path: Path) -> bool:
    """A data file whose name says it holds evals or triggers."""
    stem = path.name.lower()
    return path.suffix.lower() in DATA_SUFFIXES and ("eval" in stem or "trigger" in stem)


def _in_eval_folder(path: Path) -> bool:
    return path.parent.name.lower() in EVAL_FOLDERS or path.parent.parent.name.lower() in EVAL_FOLDERS


def survey(root: Path, skill_dirs: list[Path], names: dict[str, str], policy: ReadPolicy) -> Survey:
    """Eval-looking files of the repository outside the skill folders (`names`: every name of a skill -> its
    folder name)."""
    out = Survey()
    skills = {os.path.realpath(d) for d in skill_dirs}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        depth = len(here.relative_to(root).parts)
        kept = []
        for name in sorted(dirnames):
            child = here / name
            hidden = name.startswith(".") and (name == ".git" or depth > 0 or name not in HIDDEN_OK)
            if name in SKIPPED or hidden or depth >= MAX_DEPTH or os.path.realpath(child) in skills or (
                    child / "SKILL.md").exists():
                continue  # a skill folder the layout did not read (a duplicate, a rival root) is the layout's to name
            if name.endswith(WORKSPACE_SUFFIX) and any(looks_like_eval(Path(f)) for _, _, files in
                                                        os.walk(child) for f in files):
                out.unread.append((child, WHY_WORKSPACE))
                continue
            kept.append(name)
        dirnames[:] = kept
        for name in sorted(filenames):
            path = here / name
            if name.startswith(".") or path.suffix.lower() not in DATA_SUFFIXES or not (_in_eval_folder(path) or looks_like_eval(path)):
                continue
            if path.is_symlink() and not policy.inside(path):
                continue  # the file scan reports a link that leaves the repository
            if path.suffix.lower() != ".json":
                out.unread.append((path, WHY_SUFFIX[path.suffix.lower()]))
            elif here.parent.name.lower() in EVAL_FOLDERS and here.name in names:
                out.by_skill.setdefault(names[here.name], []).append(path)
            else:
                out.loose.append(path)
    return out


def in_skill(folder: Path) -> list[Path]:
    """Eval-looking files of a skill folder that a loader may leave unread: data files directly in its `evals/` or
    `evaluations/` and eval-named data files at its root. Files deeper in evals/ are its cases' fixtures."""
    out: list[Path] = []
    for place in (folder / "evals", folder / "evaluations"):
        if place.is_dir() and not place.is_symlink():
            out += sorted(p for p in place.iterdir() if p.suffix.lower() in DATA_SUFFIXES and p.is_file())
    out += sorted(p for p in folder.iterdir() if looks_like_eval(p) and p.is_file()) if folder.is_dir() else []
    return out


def why_unmapped(path: Path, root: Path, why_shape: str) -> str:
    """Why a JSON file outside the skill folders is not read, in words an author can act on."""
    if path.parent.parent.name.lower() in EVAL_FOLDERS and path.parent != root / "evals":
        return (f"it is in {path.parent.parent.name}/{path.parent.name}/, and no skill of this library is named "
                f"{path.parent.name!r}: name the folder after the skill its cases are for")
    if path.parent.name.lower() in EVAL_FOLDERS and path.parent.parent != root:
        return (f"it is in {path.parent.parent.name}/{path.parent.name}/, and {path.parent.parent.name}/ holds no "
                "SKILL.md, so it is no skill's eval file (a SKILL.md there would make it one)")
    if path.parent == root / "evals":
        return (f"it is {why_shape}; the repository's evals/ holds routing sets (`{{cases: [{{id, prompt, "
                "expected}]}`) or files whose cases name their skill (`checks.skill_invoked`); a skill's own eval "
                "files belong in <skill>/evals/ or evals/<skill>/")
    return (f"it is {why_shape} outside any skill folder, and nothing in it names a skill of this library: keep it "
            "in <skill>/evals/ or evals/<skill>/")
