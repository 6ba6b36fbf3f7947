"""A fresh, isolated folder for one session: the whole library as project skills, nothing else.

Skills arrive flat (`.claude/skills/<name>/`), never with their answer key, and nothing outside the repository is
reached. Sessions are hard links to one read-only `Staging` snapshot per run (copies when a tool can write);
`LibraryView` serves the same files to a host that only reads.

Design notes: docs/design/session-isolation.md.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import shutil
import stat
import tempfile
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from runner.core.host_traits import CLAUDE_CODE_ACTIVATION, CLAUDE_SKILLS_FOLDER
from runner.corpus.executables import reserved_path
from runner.corpus.files import ReadPolicy, make_policy
from runner.corpus.settings import READ_ONLY_TOOLS

if TYPE_CHECKING:
    from runner.corpus.library import Library


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
    """The parent of session folders when the host was given none (the design notes); None = tempfile's."""
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


RUN_PARENT_PREFIX = "skill-evals-run-"


def run_parent_name(run_folder: Path) -> str:
    """`skill-evals-run-<uid>-<hash of the run folder's real path>`: one name per user and run folder."""
    real = os.path.realpath(run_folder).encode("utf-8", "surrogateescape")
    return f"{RUN_PARENT_PREFIX}{os.getuid()}-{hashlib.sha256(real).hexdigest()[:16]}"


def _is_own_folder(path: Path) -> bool:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()


def claim_run_parent(run_folder: Path, base: Path | None = None) -> Path:
    """The parent of one run folder's session folders, snapshot and CLI wrapper, emptied of what an earlier
    process of that run folder left there (a SIGKILL runs no cleanup).

    Call it only while holding the run folder's lock (runner.execute.rundir.RunDir.claim): then no live process uses
    this folder, and a run of another run folder has another name, so nothing live is ever removed. `base`:
    default_parent() or tempfile's folder (TMPDIR)."""
    base = base if base is not None else (default_parent() or Path(tempfile.gettempdir()))
    parent = base / run_parent_name(run_folder)
    if os.path.lexists(parent) and not _is_own_folder(parent):
        # A link or another user's folder in a shared /tmp: never removed, never used.
        return Path(tempfile.mkdtemp(prefix=RUN_PARENT_PREFIX, dir=base))
    shutil.rmtree(parent, ignore_errors=True)
    parent.mkdir(mode=0o700, exist_ok=True)
    if not _is_own_folder(parent):  # replaced between the check and here
        return Path(tempfile.mkdtemp(prefix=RUN_PARENT_PREFIX, dir=base))
    return parent


@dataclass(frozen=True)
class Workspace:
    root: Path
    home: Path
    project: Path
    config: Path

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def seen_at(self, fixed: Path) -> "Workspace":
        """The same folders as a session sees them when its root is bound at `fixed` (runner.hosts.sessionpath)."""
        return Workspace(root=fixed, home=fixed / self.home.relative_to(self.root),
                         project=fixed / self.project.relative_to(self.root),
                         config=fixed / self.config.relative_to(self.root))


@dataclass(frozen=True)
class LibraryFiles:
    """What sessions receive of a library: skill folders and subagent files by name, and per skill the paths
    (relative to its folder) that never leave the library: its answer key."""

    skills: dict[str, Path]
    agents: dict[str, Path]
    hidden: dict[str, frozenset[str]]
    policy: ReadPolicy

    @classmethod
    def of(cls, library: "Library", max_bytes: int) -> "LibraryFiles":
        """A library's skills and subagents, read anywhere in its repository but .git (runner.corpus.files)."""
        root = Path(library.root)
        return cls(skills=library.skill_paths(), agents=library.agent_paths(), hidden=library.hidden_files(),
                   policy=make_policy([root], root, max_bytes))

    def blocked(self, exclude: Iterable[str] = ()) -> frozenset[str]:
        """Real paths no session may receive: every skill's answer key, and the excluded skills' folders."""
        out = {os.path.realpath(folder / relative) for name, folder in self.skills.items()
               for relative in self.hidden.get(name, ())}
        out |= {os.path.realpath(self.skills[name]) for name in exclude if name in self.skills}
        return frozenset(out)


def _is_blocked(path: Path | str, blocked: frozenset[str]) -> bool:
    """Whether the path, once links are resolved, is or lies inside a blocked path (a set lookup per level)."""
    real = os.path.realpath(path)
    while True:
        if real in blocked:
            return True
        parent = os.path.dirname(real)
        if parent == real:
            return False
        real = parent


def _copy_folder(source: Path, target: Path, policy: ReadPolicy, blocked: frozenset[str],
                 seen: set[str] | None = None) -> None:
    """Copy one folder of the library: regular files inside the repository, nothing blocked. Symlinked
    folders that stay inside the repository are copied as real folders (once: a link cycle ends)."""
    seen = seen if seen is not None else {os.path.realpath(source)}
    for dirpath, dirnames, filenames in os.walk(source, followlinks=False):
        here = Path(dirpath)
        relative = here.relative_to(source)
        kept = []
        for name in dirnames:
            path = here / name
            if _is_blocked(path, blocked):
                continue
            if path.is_symlink():
                real = os.path.realpath(path)
                if policy.inside(path) and path.is_dir() and real not in seen:
                    seen.add(real)
                    _copy_folder(path, target / relative / name, policy, blocked, seen)
                continue
            kept.append(name)
        dirnames[:] = kept
        (target / relative).mkdir(parents=True, exist_ok=True)
        for name in filenames:
            path = here / name
            if _is_blocked(path, blocked) or not policy.inside(path) or not path.is_file() \
                    or path.stat().st_size > policy.max_bytes:
                continue
            shutil.copyfile(path, target / relative / name)


def _copy_library(files: LibraryFiles, skills: Path, agents: Path | None, exclude: Iterable[str] = ()) -> None:
    excluded = set(exclude)
    blocked = files.blocked(excluded)
    skills.mkdir(parents=True, exist_ok=True)
    for name, folder in sorted(files.skills.items()):
        if name not in excluded:
            _copy_folder(folder, skills / name, files.policy, blocked)
    if agents is None:
        return
    for name, file in sorted(files.agents.items()):
        if files.policy.inside(file) and file.is_file() and file.stat().st_size <= files.policy.max_bytes \
                and not _is_blocked(file, blocked):
            agents.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(file, agents / f"{name}.md")


class Staging:
    """One read-only snapshot of the library for all sessions of a host (see docs/design/session-isolation.md).

    Removed by `remove()`, or when the object is collected or the interpreter exits."""

    def __init__(self, files: LibraryFiles, parent: Path | None = None):
        self.root = Path(tempfile.mkdtemp(prefix="skill-evals-staging-", dir=parent))
        self._finalizer = weakref.finalize(self, shutil.rmtree, str(self.root), True)
        self.skills = self.root / "skills"
        self.agents: Path | None = self.root / "agents" if files.agents else None
        _copy_library(files, self.skills, self.agents)
        if self.agents is not None and not self.agents.is_dir():
            self.agents = None
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


# HOME's `.git`: the CLI's upward search for a repository stops at any `.git` (so the session's gitStatus is the
# same empty one on every machine), and git itself stops at a `.git` file whose gitdir does not exist. An empty
# `.git` folder stopped only the CLI: git walked on past it, and a session folder inside a repository (a TMPDIR
# there, no namespace) sent that repository's branch and commits to the model (tests/test_session_prefix.py).
NO_REPOSITORY = "gitdir: no-repository\n"


def build(files: LibraryFiles, exclude_skills: list[str], case_files: list[tuple[Path, str]],
          parent: Path | None = None, staging: Staging | None = None, link: bool = False,
          root: Path | None = None, skills_folder: str = CLAUDE_SKILLS_FOLDER, with_agents: bool = True) -> Workspace:
    """Create the session folder. `case_files` are (source, path relative to the project).

    With `staging`, the library part comes from that snapshot (hard links when `link`), not from
    the library. `root`: an empty folder the caller made for it (runner.hosts.sessionpath.CaseFolders), else a new
    one in `parent`. `skills_folder`: where the host looks for a project's skills (HostTraits.activation);
    `with_agents`: the library's subagents too, beside the skills (Claude Code's `.claude/agents`)."""
    root = root if root is not None else Path(tempfile.mkdtemp(prefix="skill-evals-", dir=parent))
    home = root / "home"
    project = home / "project"
    config = root / "config"
    home.mkdir(parents=True)
    (home / ".git").write_text(NO_REPOSITORY, encoding="utf-8")
    config.mkdir()
    skills = project.joinpath(*skills_folder.split("/"))
    agents = skills.parent / "agents" if with_agents else None
    if staging is not None:
        staging.mirror(staging.skills, skills, set(exclude_skills), link)
        if staging.agents is not None and agents is not None:
            staging.mirror(staging.agents, agents, set(), link)
    else:
        _copy_library(files, skills, agents, exclude_skills)
    for source, relative in case_files:
        destination = (project / relative).resolve()
        if project.resolve() not in destination.parents or not files.policy.inside(source) or not source.is_file():
            continue
        if reserved_path(os.path.relpath(destination, project.resolve())) is not None:
            continue  # host configuration (.claude/, .git/, .mcp.json): the floor holds such a case back
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, destination)
    return Workspace(root=root, home=home, project=project, config=config)


SKILLS_PARTS = CLAUDE_CODE_ACTIVATION.skills_folder_parts  # the registry's one spelling of the folder


@dataclass(frozen=True)
class LibraryView:
    """A session's project folder, read-only and virtual: `.claude/skills/<name>/...` maps to the skill's
    folder in the library."""

    files: LibraryFiles
    exclude: frozenset[str] = frozenset()
    root: PurePosixPath = PurePosixPath("/project")

    @property
    def policy(self) -> ReadPolicy:
        return self.files.policy

    @cached_property
    def _blocked(self) -> frozenset[str]:
        return self.files.blocked(self.exclude)

    def parts(self, raw: str) -> tuple[str, ...] | None:
        """The path's parts relative to the project (lexically normalised); None when outside it."""
        joined = posixpath.normpath(posixpath.join(str(self.root), raw))
        if joined == str(self.root):
            return ()
        prefix = str(self.root) + "/"
        return tuple(joined[len(prefix):].split("/")) if joined.startswith(prefix) else None

    def file(self, parts: tuple[str, ...]) -> Path | None:
        """The library file a session sees at these project parts; None when it sees none there."""
        if len(parts) < 4 or parts[:2] != SKILLS_PARTS:
            return None
        name, rest = parts[2], parts[3:]
        folder = self.files.skills.get(name)
        hidden = self.files.hidden.get(name, frozenset())
        if folder is None or name in self.exclude or any("/".join(rest[:n]) in hidden for n in range(1, len(rest) + 1)):
            return None
        real = Path(os.path.realpath(folder.joinpath(*rest)))
        # Checked again after symlinks: a link must not reach an answer key or an excluded skill.
        if _is_blocked(real, self._blocked):
            return None
        if not self.policy.inside(real) or not real.is_file() or real.stat().st_size > self.policy.max_bytes:
            return None
        return real
