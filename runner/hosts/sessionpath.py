"""One folder path for every Claude Code session of a run, each session still in its own folder.

The CLI writes its working directory before the case prompt; one path keeps that text identical across sessions.
Each folder is bind-mounted at `FIXED_PATH` in the session's own mount namespace (`detect`). Where no namespace can
be made (the action's hardened container: no capability, Docker's seccomp), each case's sessions take turns at one
path of the case's own (`CaseFolders`), made afresh for each session and removed after it. Isolation is the same.

Design notes: docs/design/hosts-claude-code.md.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shlex
import shutil
import stat
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

Mode = Literal["mount-namespace", "user-namespace", "per-case-path", "per-session-path"]
Setting = Literal["auto", "mount", "user", "case", "off"]
PER_CASE: Mode = "per-case-path"
FALLBACK: Mode = "per-session-path"
# The one path every session's folder is bound at. In /tmp, which every Linux has, so that runs on different
# machines (shards of one plan) send the same text too.
FIXED_PATH = Path("/tmp/skill-evals-session")
# Variable the SDK passes to the wrapper: the session's real folder. Not in the CLI's allowlist: the CLI never
# sees it.
ROOT_VARIABLE = "SKILL_EVALS_SESSION_ROOT"
PROJECT_IN_ROOT = "home/project"
UNSHARE_ARGS: dict[Mode, tuple[str, ...]] = {
    "mount-namespace": ("--mount", "--propagation", "private"),
    "user-namespace": ("--user", "--map-root-user", "--mount", "--propagation", "private"),
}
TRIED: dict[Setting, tuple[Mode, ...]] = {"auto": ("mount-namespace", "user-namespace"),
                                          "mount": ("mount-namespace",), "user": ("user-namespace",), "case": (),
                                          "off": ()}
# A case folder's name: this prefix, a digest of the case (and arm), the lowest free index.
CASE_PREFIX = "skill-evals-case-"
PROBE_TIMEOUT_S = 10.0


class SessionPath(BaseModel):
    """How a host's sessions see their folder: the mode detected, the fixed path (None in the fallback), and
    what detection found out about the modes it did not get."""

    mode: Mode
    path: str | None = Field(default=None, description="Where every session sees its folder; None: a folder per "
                                                       "case (per-case-path) or per session (the fallback).")
    detail: str = Field(default="", description="Why a better mode was not used (empty when none was better).")

    @property
    def case_shares_path(self) -> bool:
        """Whether every session of a case sees its folder at one path (so its later sessions can read its first
        turn from the prompt cache)."""
        return self.mode != FALLBACK

    @property
    def one_session_per_path(self) -> bool:
        """Whether two sessions of one case at once would need two paths (no namespace: per-case-path)."""
        return self.mode == PER_CASE

    def describe(self) -> str:
        """The plan's `Session path:` line."""
        why = f" ({self.detail})" if self.detail else ""
        if self.mode == PER_CASE:
            return (f"per-case-path: one path per case, no namespace here{why}; a case's sessions take turns at it, "
                    "each in a folder made afresh and removed after it, so its later sessions read its first turn")
        if self.mode == FALLBACK:
            return (f"per-session-path: a path of its own for every session{why}; a case's later sessions cannot "
                    "read its first turn from the prompt cache")
        return (f"{self.mode}: every session's own folder at {self.path}, in a namespace of its own{why}; a case's "
                "later sessions read its first turn")


def _tool(name: str) -> str | None:
    for folder in ("/usr/bin", "/bin", "/usr/sbin", "/sbin"):
        candidate = Path(folder) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which(name)


def mount_point_problem(path: Path) -> str | None:
    """Make the fixed path if needed; why it cannot be a mount point (a link, not a folder), or None."""
    try:
        path.mkdir(mode=0o755, exist_ok=True)
        info = os.lstat(path)
    except OSError as exc:
        return f"{path} cannot be made: {exc.strerror or exc}"
    if not stat.S_ISDIR(info.st_mode):
        return f"{path} is not a folder (a link or a file is never used as the mount point)"
    return None


def script_line(mode: Mode, fixed: Path, final: str) -> str:
    """The shell line a session's wrapper runs: `final` (a command that may use "$@") in the session's own
    namespace, after binding the session's folder (`$SKILL_EVALS_SESSION_ROOT`) at `fixed` and going to its
    project; without a namespace (per-case-path, the fallback), `final` as it is. Exit 125 when the bind or the cd
    fails (the CLI never starts)."""
    if mode not in UNSHARE_ARGS:
        return final
    mount = _tool("mount") or "/bin/mount"
    unshare = _tool("unshare") or "/usr/bin/unshare"
    inner = "\n".join([f'{mount} --bind -- "${ROOT_VARIABLE}" {shlex.quote(str(fixed))} || exit 125',
                       f"cd {shlex.quote(str(fixed / PROJECT_IN_ROOT))} || exit 125", final])
    return f'exec {unshare} {" ".join(UNSHARE_ARGS[mode])} -- /bin/sh -c {shlex.quote(inner)} skill-evals-session "$@"'


def _probe(mode: Mode, fixed: Path) -> str | None:
    """Run what a session runs, with a check instead of the CLI: None when the session's folder shows at the
    fixed path and the working directory is its project there."""
    missing = [name for name in ("unshare", "mount") if _tool(name) is None]
    if missing:
        return f"no {' or '.join(missing)} binary"
    with tempfile.TemporaryDirectory(prefix="skill-evals-probe-") as root:
        project = Path(root) / PROJECT_IN_ROOT
        project.mkdir(parents=True)
        (project / "marker").write_text("probe", encoding="utf-8")
        check = f'test "$(pwd -P)" = {shlex.quote(str(fixed / PROJECT_IN_ROOT))} && test -f marker'
        try:
            done = subprocess.run(["/bin/sh", "-c", script_line(mode, fixed, check)], cwd=project,
                                  env={"PATH": "/usr/bin:/bin", ROOT_VARIABLE: root}, capture_output=True,
                                  text=True, timeout=PROBE_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{type(exc).__name__}: {exc}"
    if done.returncode == 0:
        return None
    said = " ".join((done.stderr or done.stdout).split())[:200]
    return f"exit {done.returncode}" + (f": {said}" if said else "")


@functools.lru_cache(maxsize=None)
def detect(setting: Setting = "auto", fixed: Path = FIXED_PATH, reuse_safe: bool = True) -> SessionPath:
    """The best mode this machine gives (docs/design/hosts-claude-code.md); the fallback with the reasons when none.

    `reuse_safe`: nothing a session started can outlive it into the next session at the same path (its processes
    are confined by Landlock, whose rules hold the folder itself, not its name; or no tool can start one). Without
    it a case path is never reused: per-case-path is not offered."""
    if setting == "off":
        return SessionPath(mode=FALLBACK, detail="[run] session_namespace = \"off\"")
    failures: list[str] = []
    problem = mount_point_problem(fixed) if TRIED[setting] else None
    if problem is not None:
        failures.append(problem)
    else:
        for mode in TRIED[setting]:
            failure = _probe(mode, fixed)
            if failure is None:
                return SessionPath(mode=mode, path=str(fixed), detail="; ".join(failures))
            failures.append(f"{mode}: {failure}")
    if setting in ("auto", "case"):
        if reuse_safe:
            return SessionPath(mode=PER_CASE, detail="; ".join(failures))
        failures.append("per-case-path: a tool that can start a program is allowed and the sessions are not "
                        "confined, so a path is never used by a second session")
    return SessionPath(mode=FALLBACK, detail="; ".join(failures))


def case_key(uid: str, exclude_skills: list[str]) -> str:
    """What names a case's folder: the case and the skills its arm leaves out (a probe's two arms send two
    different listings, so they need not share a path)."""
    text = "\0".join([uid, *sorted(exclude_skills)])
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:16]


class CaseFolders:
    """Session folders at one path per case, `<parent>/skill-evals-case-<key>-<n>`: a session takes the lowest
    `n` no live session holds and makes it afresh (never one that is already there: another process's, or a
    link); `release` once the folder is removed. A case's sessions one after another all get `-0`; two at once
    get `-0` and `-1` (the executor avoids that: Executor.one_per_arm)."""

    def __init__(self, parent: Path):
        self.parent = parent
        self._held: set[Path] = set()
        self._lock = threading.Lock()

    def claim(self, key: str) -> Path:
        """A new empty folder (mode 0700) at the case's first free path."""
        with self._lock:
            index = 0
            while True:
                root = self.parent / f"{CASE_PREFIX}{key}-{index}"
                index += 1
                if root in self._held:
                    continue
                try:
                    root.mkdir(mode=0o700)
                except FileExistsError:
                    continue  # left by a killed process, or another process's: never used
                self._held.add(root)
                return root

    def release(self, root: Path) -> None:
        """The folder was removed: its path is free for the case's next session."""
        with self._lock:
            self._held.discard(root)
