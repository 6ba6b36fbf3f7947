"""A fresh, isolated folder for one session: the whole library as project skills, nothing else.

Layout (all under one temporary folder, removed after the session):

    home/.git/                 empty: the host's upward search for a repository stops here
    home/project/              the session's working directory
    home/project/.claude/skills/<every skill but the excluded ones, without its evals/ folder>
    home/project/.claude/agents/<subagents>
    config/                    CLAUDE_CONFIG_DIR: no user settings, no memory, no MCP servers

Only regular files inside the library are copied: a symlink that leaves the library is never
followed (validate reports it), so no host file can reach a session; nor is one whose target is a
skill's evals/ folder or an excluded skill (checked on the link's real target).

Sessions do not copy the library each time. A host builds one `Staging` snapshot per run (the
same filter: no evals/ folders, no file from outside the library, symlinks inside it made real
files; every file read-only), and each session's tree is made of hard links to that snapshot:
one link per file instead of a copy, and removing a link frees no data block. The session never
touches the library itself, only the snapshot. Links are used only when the session's tools
cannot write (`READ_ONLY_TOOLS`): with a writing tool a session could change a linked file for
the sessions after it, so each file is copied from the snapshot instead. A link the filesystem
refuses (another device, too many links) falls back to a copy.

Where session folders go (`default_parent`): a session folder is hundreds of folders made and
removed; on a disk filesystem each is a journaled metadata write (and a discard on `discard`
mounts) that queues behind every other process's I/O (measured on Aegis: 95 ms to 1 s to remove one
on a busy ext4 disk, 7 ms on tmpfs). So when TMPDIR is not set, the snapshot and the session folders
go to /dev/shm if it is a tmpfs mounted without noexec with at least `SHM_MIN_FREE` free; otherwise
to tempfile's folder.

A host whose tools only read (the api host) needs no folder at all: `LibraryView` answers its reads
straight from the library under the same rules (no evals/ folder, no excluded skill, nothing that
resolves outside the library, no file over the size limit), at a virtual project path.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import stat
import tempfile
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from runner.files import ReadPolicy


# A skill's own eval material (expected outputs, assertions, probe defects and their locators,
# calibration records) is the answer key: it never reaches a session. Case fixtures are copied
# one by one by `case_files`.
EVAL_FOLDERS = frozenset({"evals"})
# Claude Code tools that never write a file: only then may sessions share linked files.
READ_ONLY_TOOLS = frozenset({"Skill", "Read", "Glob", "Grep", "LS", "TodoWrite"})
READ_ONLY_FILE = stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH


SHM = Path("/dev/shm")
SHM_MIN_FREE = 512 * 1024 * 1024


def tools_are_read_only(tools: Iterable[str]) -> bool:
    return set(tools) <= READ_ONLY_TOOLS


def _mount_options(path: Path) -> tuple[str, list[str]] | None:
    """(filesystem type, options) of the mount point `path`, from /proc/mounts."""
    try:
        lines = Path("/proc/mounts").read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for line in reversed(lines):  # the last mount on a point is the one in force
        fields = line.split()
        if len(fields) >= 4 and fields[1] == str(path):
            return fields[2], fields[3].split(",")
    return None


def default_parent() -> Path | None:
    """The parent of session folders when the host was given none (module docstring); None = tempfile's."""
    if os.environ.get("TMPDIR"):
        return None  # the user chose where temporary files go
    mount = _mount_options(SHM)
    if mount is None or mount[0] != "tmpfs" or "noexec" in mount[1] or not os.access(SHM, os.W_OK | os.X_OK):
        return None
    try:
        stats = os.statvfs(SHM)
    except OSError:
        return None
    return SHM if stats.f_bavail * stats.f_frsize >= SHM_MIN_FREE else None


@dataclass(frozen=True)
class Workspace:
    root: Path
    home: Path
    project: Path
    config: Path

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def _hidden_behind_link(path: Path, root: Path, skip_top: set[str], skip_second: set[str]) -> bool:
    """A symlink whose target, seen from the top of the tree, is a skipped skill or an evals/ folder."""
    real, top = Path(os.path.realpath(path)), Path(os.path.realpath(root))
    if top not in real.parents:
        return False  # outside the tree: the read policy decides
    parts = real.relative_to(top).parts
    return parts[0] in skip_top or (len(parts) >= 2 and parts[1] in skip_second)


def _copy_tree(source: Path, target: Path, policy: ReadPolicy, skip_top: set[str], skip_second: set[str],
               root: tuple[Path, set[str], set[str]] | None = None) -> None:
    # `root`: the top of the tree and its skip sets, checked on every symlink's target, so a link inside
    # the library cannot bring another skill's evals/ folder (or an excluded skill) into a session.
    top = root or (source, skip_top, skip_second)
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
                if policy.inside(path) and path.is_dir() and not _hidden_behind_link(path, *top):
                    _copy_tree(path, target / relative / name, policy, set(), set(), top)
        (target / relative).mkdir(parents=True, exist_ok=True)
        for name in filenames:
            path = here / name
            if not policy.inside(path) or not path.is_file() or path.stat().st_size > policy.max_bytes:
                continue
            if path.is_symlink() and _hidden_behind_link(path, *top):
                continue
            shutil.copyfile(path, target / relative / name)


class Staging:
    """One read-only snapshot of the library for all sessions of a host (see the module docstring).

    Removed by `remove()`, or when the object is collected or the interpreter exits."""

    def __init__(self, skills_dir: Path, agents_dir: Path | None, policy: ReadPolicy, parent: Path | None = None):
        self.root = Path(tempfile.mkdtemp(prefix="skill-evals-staging-", dir=parent))
        self._finalizer = weakref.finalize(self, shutil.rmtree, str(self.root), True)
        self.skills = self.root / "skills"
        self.agents: Path | None = None
        _copy_tree(skills_dir, self.skills, policy, set(), EVAL_FOLDERS)
        if agents_dir is not None and agents_dir.is_dir():
            self.agents = self.root / "agents"
            _copy_tree(agents_dir, self.agents, policy, set(), set())
        # The folders and files of each tree, listed once: a session then only makes folders and links.
        self.manifest: dict[Path, list[tuple[str, list[str]]]] = {}
        for tree in (self.skills, self.agents):
            if tree is None:
                continue
            self.manifest[tree] = [(os.path.relpath(dirpath, tree), sorted(filenames))
                                   for dirpath, _, filenames in os.walk(tree)]
            for dirpath, _, filenames in os.walk(tree):
                for name in filenames:
                    os.chmod(os.path.join(dirpath, name), READ_ONLY_FILE)

    def remove(self) -> None:
        self._finalizer()

    def mirror(self, tree: Path, target: Path, skip_top: set[str], link: bool) -> None:
        """Recreate `tree` at `target` with hard links (or copies when `link` is False)."""
        for relative, filenames in self.manifest[tree]:
            if relative != "." and relative.split(os.sep, 1)[0] in skip_top:
                continue
            here = target if relative == "." else target / relative
            here.mkdir(parents=True, exist_ok=True)
            for name in filenames:
                origin, destination = tree / relative / name, here / name
                if link:
                    try:
                        os.link(origin, destination)
                        continue
                    except OSError:  # another device, too many links, links refused: copy instead
                        pass
                shutil.copyfile(origin, destination)


def build(skills_dir: Path, agents_dir: Path | None, policy: ReadPolicy, exclude_skills: list[str],
          case_files: list[tuple[Path, str]], parent: Path | None = None, staging: Staging | None = None,
          link: bool = False) -> Workspace:
    """Create the session folder. `case_files` are (source, path relative to the project).

    With `staging`, the library part comes from that snapshot (hard links when `link`), not from
    the library."""
    root = Path(tempfile.mkdtemp(prefix="skill-evals-", dir=parent))
    home = root / "home"
    project = home / "project"
    config = root / "config"
    (home / ".git").mkdir(parents=True)
    config.mkdir()
    if staging is not None:
        staging.mirror(staging.skills, project / ".claude" / "skills", set(exclude_skills), link)
        if staging.agents is not None:
            staging.mirror(staging.agents, project / ".claude" / "agents", set(), link)
    else:
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


SKILLS_PARTS = (".claude", "skills")


@dataclass(frozen=True)
class LibraryView:
    """A session's project folder, read-only and virtual: `.claude/skills/...` maps to the library."""

    skills_dir: Path
    policy: ReadPolicy
    exclude: frozenset[str] = frozenset()
    root: PurePosixPath = PurePosixPath("/project")

    def parts(self, raw: str) -> tuple[str, ...] | None:
        """The path's parts relative to the project (lexically normalised); None when outside it."""
        joined = posixpath.normpath(posixpath.join(str(self.root), raw))
        if joined == str(self.root):
            return ()
        prefix = str(self.root) + "/"
        return tuple(joined[len(prefix):].split("/")) if joined.startswith(prefix) else None

    def _hidden(self, relative: tuple[str, ...]) -> bool:
        """An excluded skill, or a skill's evals/ folder (relative to the skills folder)."""
        return (not relative or relative[0] in self.exclude
                or (len(relative) >= 3 and relative[1] in EVAL_FOLDERS))

    def file(self, parts: tuple[str, ...]) -> Path | None:
        """The library file a session sees at these project parts; None when it sees none there."""
        if len(parts) < 3 or parts[:2] != SKILLS_PARTS or self._hidden(parts[2:]):
            return None
        real = Path(os.path.realpath(self.skills_dir.joinpath(*parts[2:])))
        skills_real = Path(os.path.realpath(self.skills_dir))
        # Checked again after symlinks: a link inside the library must not reach an evals/ folder.
        if skills_real not in real.parents or self._hidden(real.relative_to(skills_real).parts):
            return None
        if not self.policy.inside(real) or not real.is_file() or real.stat().st_size > self.policy.max_bytes:
            return None
        return real
