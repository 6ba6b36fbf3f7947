"""What a Claude Code session may run and reach: the walls between a session and the run (docs/security.md).

First wall: nothing of the library runs as a program (`SESSION_SETTINGS` switches hooks and inline shell off; no MCP
server, no settings file). Second wall: whatever runs anyway is confined with Landlock (`detect`,
runner.hosts.confine), or every report says it was not.

Design notes: docs/design/session-isolation.md.
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from runner.core.errors import UsageError
from runner.hosts import confine

# Flag settings of every session. `--settings` outranks project and user settings for these keys (measured on CLI
# 2.1.332, tests/test_session_wall.py): disableAllHooks stops every hook of settings files, skills and subagents,
# and the status line; the SDK's own callback hooks (runner.hosts.claude_code's early decision) still run.
# disableSkillShellExecution puts "[shell command execution disabled by policy]" where a skill or slash command has
# inline shell, instead of running it (without it the CLI refuses the whole skill when Bash is not allowed).
SESSION_SETTINGS: dict[str, object] = {"disableAllHooks": True, "disableSkillShellExecution": True}

Mode = Literal["landlock", "none"]
Setting = Literal["auto", "required", "off"]
CHECK_TIMEOUT_S = 10.0


class SessionWall(BaseModel):
    """How a host's sessions are confined (the module docstring's second wall), as detected for this run."""

    mode: Mode
    abi: int = Field(default=0, description="The kernel's Landlock ABI used (0: none).")
    detail: str = Field(default="", description="Why the sessions are not confined (empty when they are).")

    def describe(self) -> str:
        if self.mode == "landlock":
            return f"confined (Landlock ABI {self.abi}: a session reads the system and its own folder, writes only " \
                   "its own folder)"
        return f"NOT confined ({self.detail}): a program a session ran could read and write what this user can"


def script() -> Path:
    return Path(confine.__file__)


def command(python: str, write: str, read: list[str]) -> str:
    """The shell words that confine what follows them (`--` and the CLI come after): `write` may be a shell
    expression such as "$SKILL_EVALS_SESSION_ROOT" (left unquoted for the shell to expand inside double quotes)."""
    reads = " ".join(f"--read {shlex.quote(path)}" for path in read)
    return f'{shlex.quote(python)} -I -S {shlex.quote(str(script()))} --write "{write}" {reads}'


def cli_reads(cli: Path) -> list[str]:
    """What the CLI needs to read beyond the system: its own file and folder (the bundled binary has its version file
    beside it; an npm install has its package there), links resolved."""
    real = Path(os.path.realpath(cli))
    return sorted({str(real), str(real.parent)})


def _check(python: str) -> SessionWall:
    with tempfile.TemporaryDirectory(prefix="skill-evals-wall-") as root:
        inside = Path(root) / "session"
        inside.mkdir()
        outside = Path(root) / "run-folder-key"
        outside.write_text("secret", encoding="utf-8")
        argv = [python, "-I", "-S", str(script()), "--check", "--write", str(inside), "--denied", str(outside), "--"]
        try:
            done = subprocess.run(argv, env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                                  timeout=CHECK_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return SessionWall(mode="none", detail=f"the Landlock check could not run: {exc}")
    said = " ".join((done.stderr or done.stdout).split())[:300]
    if done.returncode != 0:
        return SessionWall(mode="none", detail=said.removeprefix("skill-evals confine: the session was not started: ")
                           or f"the Landlock check exited {done.returncode}")
    try:
        found = json.loads(done.stdout)
        abi = int(found["abi"])
        holds = found["write"] is True and found["denied"] == {str(outside): True}
    except (ValueError, KeyError, TypeError):
        return SessionWall(mode="none", detail=f"the Landlock check printed something unexpected: {said}")
    if not holds:
        return SessionWall(mode="none", detail=f"Landlock ABI {abi} is there but its rules did not hold: {said}")
    return SessionWall(mode="landlock", abi=abi)


@functools.lru_cache(maxsize=None)
def detect(setting: Setting = "auto", python: str = sys.executable) -> SessionWall:
    """The wall this machine gives sessions (once per process and setting): Landlock when its rules hold here.
    `required` makes a machine without it an error (WallUnavailable) rather than unconfined sessions."""
    if setting == "off":
        return SessionWall(mode="none", detail='[run] session_confinement = "off"')
    wall = _check(python)
    if setting == "required" and wall.mode != "landlock":
        raise WallUnavailable(f'[run] session_confinement = "required", but sessions cannot be confined here: '
                              f"{wall.detail}")
    return wall


class WallUnavailable(UsageError, RuntimeError):
    """`required` confinement on a machine that cannot give it (a usage error: one line, exit 2)."""
