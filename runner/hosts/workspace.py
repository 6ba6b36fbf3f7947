"""A fresh, isolated folder for one session: the whole library as project skills, nothing else.

Layout (all under one temporary folder, removed after the session):

    home/.git/                 empty: the host's upward search for a repository stops here
    home/project/              the session's working directory
    home/project/.claude/skills/<every skill but the excluded ones, without its evals/ folder>
    home/project/.claude/agents/<subagents>
    config/                    CLAUDE_CONFIG_DIR: no user settings, no memory, no MCP servers

Only regular files inside the library are copied: a symlink that leaves the library is never
followed (validate reports it), so no host file can reach a session.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from runner.files import ReadPolicy


# A skill's own eval material (expected outputs, assertions, probe defects and their locators,
# calibration records) is the answer key: it never reaches a session. Case fixtures are copied
# one by one by `case_files`.
EVAL_FOLDERS = frozenset({"evals"})


@dataclass(frozen=True)
class Workspace:
    root: Path
    home: Path
    project: Path
    config: Path

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def _copy_tree(source: Path, target: Path, policy: ReadPolicy, skip_top: set[str], skip_second: set[str]) -> None:
    for dirpath, dirnames, filenames in os.walk(source, followlinks=False):
        here = Path(dirpath)
        relative = here.relative_to(source)
        if relative == Path(".") and skip_top:
            dirnames[:] = [d for d in dirnames if d not in skip_top]
        elif len(relative.parts) == 1 and skip_second:
            dirnames[:] = [d for d in dirnames if d not in skip_second]
        # Symlinked folders that stay inside the library are copied as real folders.
        for name in list(dirnames):
            path = here / name
            if path.is_symlink():
                dirnames.remove(name)
                if policy.inside(path) and path.is_dir():
                    _copy_tree(path, target / relative / name, policy, set(), set())
        (target / relative).mkdir(parents=True, exist_ok=True)
        for name in filenames:
            path = here / name
            if not policy.inside(path) or not path.is_file() or path.stat().st_size > policy.max_bytes:
                continue
            shutil.copyfile(path, target / relative / name)


def build(skills_dir: Path, agents_dir: Path | None, policy: ReadPolicy, exclude_skills: list[str],
          case_files: list[tuple[Path, str]], parent: Path | None = None) -> Workspace:
    """Create the session folder. `case_files` are (source, path relative to the project)."""
    root = Path(tempfile.mkdtemp(prefix="skill-evals-", dir=parent))
    home = root / "home"
    project = home / "project"
    config = root / "config"
    (home / ".git").mkdir(parents=True)
    config.mkdir()
    _copy_tree(skills_dir, project / ".claude" / "skills", policy, set(exclude_skills), EVAL_FOLDERS)
    if agents_dir is not None and agents_dir.is_dir():
        _copy_tree(agents_dir, project / ".claude" / "agents", policy, set(), set())
    for source, relative in case_files:
        destination = (project / relative).resolve()
        if project.resolve() not in destination.parents or not policy.inside(source) or not source.is_file():
            continue
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, destination)
    return Workspace(root=root, home=home, project=project, config=config)
