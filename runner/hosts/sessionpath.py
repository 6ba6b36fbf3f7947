"""One folder path for every Claude Code session of a run, each session still in its own folder.

The CLI writes its working directory before the case prompt; one path keeps that text identical across sessions.
Each folder is bind-mounted at `FIXED_PATH` in the session's own mount namespace (`detect`), else keeps its own
path; isolation is the same.

Design notes: docs/design/hosts-claude-code.md.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

Mode = Literal["mount-namespace", "user-namespace", "per-session-path"]
Setting = Literal["auto", "mount", "user", "off"]
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
                                          "mount": ("mount-namespace",), "user": ("user-namespace",), "off": ()}
PROBE_TIMEOUT_S = 10.0


class SessionPath(BaseModel):
    """How a host's sessions see their folder: the mode detected, the fixed path (None in the fallback), and
    what detection found out about the modes it did not get."""

    mode: Mode
    path: str | None = Field(default=None, description="Where every session sees its folder; None: a random "
                                                       "folder per session (the fallback).")
    detail: str = Field(default="", description="Why a better mode was not used (empty when none was better).")


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
    project; in the fallback, `final` as it is. Exit 125 when the bind or the cd fails (the CLI never starts)."""
    if mode == FALLBACK:
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
def detect(setting: Setting = "auto", fixed: Path = FIXED_PATH) -> SessionPath:
    """The best mode this machine gives (docs/design/hosts-claude-code.md); the fallback with the reasons when none."""
    if setting == "off":
        return SessionPath(mode=FALLBACK, detail="[run] session_namespace = \"off\"")
    problem = mount_point_problem(fixed)
    if problem is not None:
        return SessionPath(mode=FALLBACK, detail=problem)
    failures: list[str] = []
    for mode in TRIED[setting]:
        failure = _probe(mode, fixed)
        if failure is None:
            return SessionPath(mode=mode, path=str(fixed), detail="; ".join(failures))
        failures.append(f"{mode}: {failure}")
    return SessionPath(mode=FALLBACK, detail="; ".join(failures))
