"""Installing the agent CLIs the hosts drive, each from the npm registry at its pinned version
(runner/data/agent_clis.json), and finding them.

Each CLI goes into its own npm prefix, `<folder>/<package>@<version>`, so two pinned versions never share a
node_modules and a result's recorded version is the one installed there. `<folder>` is $SKILL_EVALS_AGENT_CLIS,
else ~/.cache/skill-evals/agent-clis (the container image sets the variable to a folder inside the image).
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from runner.core.errors import UsageError

FOLDER_VARIABLE = "SKILL_EVALS_AGENT_CLIS"
INSTALL_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class PinnedCli:
    host: str
    package: str
    version: str
    bin: str

    @property
    def spec(self) -> str:
        return f"{self.package}@{self.version}"


class CliMissing(UsageError, RuntimeError):
    """A host's CLI is not installed (a usage error: one line naming the install command, exit 2)."""


def pinned() -> dict[str, PinnedCli]:
    raw = json.loads(resources.files("runner").joinpath("data", "agent_clis.json").read_text(encoding="utf-8"))
    return {host: PinnedCli(host=host, **entry) for host, entry in raw["clis"].items()}


def pin(host: str) -> PinnedCli:
    found = pinned().get(host)
    if found is None:
        raise ValueError(f"no agent CLI is pinned for the host {host!r}")
    return found


def folder() -> Path:
    configured = os.environ.get(FOLDER_VARIABLE)
    return Path(configured) if configured else Path.home() / ".cache" / "skill-evals" / "agent-clis"


def prefix(cli: PinnedCli, base: Path | None = None) -> Path:
    return (base or folder()) / cli.spec.replace("/", "+")


def install_command(hosts: list[str]) -> str:
    return f"skill-evals hosts install {' '.join(hosts)}".rstrip()


def locate(host: str, base: Path | None = None) -> Path:
    """The installed CLI of `host`; CliMissing, naming the command that installs it, when it is not there."""
    cli = pin(host)
    path = prefix(cli, base) / "node_modules" / ".bin" / cli.bin
    if not path.exists():
        raise CliMissing(f"the {host} host runs {cli.spec} from npm, which is not installed in {prefix(cli, base)}: "
                         f"run `{install_command([host])}` (needs node >= 20 and npm; ${FOLDER_VARIABLE} says where)")
    return path


def install(hosts: list[str], base: Path | None = None) -> list[Path]:
    """Install the pinned CLIs of `hosts` (all pinned ones when empty); the paths of their programs."""
    npm = shutil.which("npm")
    if npm is None:
        raise UsageError("installing the agent CLIs needs npm (node >= 20) on PATH")
    out = []
    for host in hosts or sorted(pinned()):
        cli = pin(host)
        target = prefix(cli, base)
        target.mkdir(parents=True, exist_ok=True)
        done = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--no-save", "--loglevel=error",
                               "--prefix", str(target), cli.spec], capture_output=True, text=True,
                              timeout=INSTALL_TIMEOUT_S, check=False)
        if done.returncode != 0:
            said = " ".join((done.stderr or done.stdout).split())[-800:]
            raise UsageError(f"npm could not install {cli.spec} into {target} (exit {done.returncode}): {said}")
        program = locate(host, base)
        prepare(host, program, target)
        out.append(program)
    return out


def prepare(host: str, program: Path, target: Path) -> None:
    """What the host's module does once after an install (Copilot CLI unpacks its package into a cache beside it),
    so that the install is complete when it ends: a later step that checks the install's digest sees no change."""
    from runner.core.host_traits import traits

    module = importlib.import_module(traits(host).module)
    after = getattr(module, "after_install", None)
    if after is not None:
        after(program, target)
