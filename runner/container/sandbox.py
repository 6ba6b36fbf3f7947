"""Run the library's own validator in a throwaway container (`--validator-sandbox container`).

The validator is code under review: here it runs with no network, the repository read-only, no capabilities and an
environment built from nothing (no host variable, so no secret). Its output and exit status are read exactly as on
the host (runner.floor.validate.run_library_validator).

Design notes: docs/design/container-hardening.md.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import docker.errors
import docker.types
import requests.exceptions

import runner  # its __file__ locates the source checkout
from runner.container.launch import IMAGE_USER, REPO_MOUNT, ContainerError, ensure_image, given_image
from runner.core.errors import UsageError
from runner.floor.validate import LibraryValidator, ValidatorRun

DEFAULT_BASE_IMAGE = "python:3.12-slim"
LABEL = "skill-evals.sandbox"  # on every sandbox container (value: what runs in it), so leftovers can be found
TMP_MOUNT = "/tmp"
TMPFS = "rw,nosuid,nodev,size=256m,mode=1777"
MEM_LIMIT = "1g"
NANO_CPUS = 2_000_000_000
PIDS_LIMIT = 256
LOG_MAX = "4m"  # the log driver keeps the newest output; the findings keep its last 20,000 characters anyway
_LOCALE = re.compile(r"^(LANG|LANGUAGE|LC_[A-Z]+)$")
# The container's entrypoint: stderr joins stdout in ONE pipe, so the output interleaves exactly as on the host
# (two streams read by the daemon separately would not). A command that cannot start is said on the real stderr
# with exit 127, which is how it is told apart from a validator that ran and failed.
LAUNCHER = ('case "$1" in */*) [ -f "$1" ] && [ -x "$1" ] || { echo "$1: no such executable file" >&2; exit 127; } ;; '
            '*) command -v "$1" >/dev/null 2>&1 || { echo "$1: not found on PATH" >&2; exit 127; } ;; esac; '
            'exec "$@" 2>&1')
NOT_STARTED = 127
_DAEMON_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException, OSError)


class SandboxUnavailable(UsageError, RuntimeError):
    """No container can be run: no reachable daemon, or no image. The message is one line, for the user."""


def sandbox_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The container's environment: only the locale comes from the host; the image's own PATH applies."""
    env = {name: value for name, value in environ.items() if _LOCALE.match(name) and "\n" not in value}
    return env | {"HOME": TMP_MOUNT, "TMPDIR": TMP_MOUNT, "PYTHONDONTWRITEBYTECODE": "1"}


def container_command(root: Path, validator: LibraryValidator) -> list[str]:
    """The validator's command inside the container: the default script as `python3 /repo/<path>`; a configured
    command as written, with any host path inside the repository moved under /repo."""
    if validator.script is not None:
        return ["python3", f"{REPO_MOUNT}/{validator.script.resolve().relative_to(root.resolve()).as_posix()}"]
    prefix = str(root.resolve()).rstrip("/") + "/"
    return [REPO_MOUNT + "/" + part[len(prefix):] if part.startswith(prefix) else part
            for part in validator.command]


def sandbox_user() -> str:
    """The host's uid:gid (files only it can read stay readable), except root, which becomes the image's user."""
    if os.geteuid() == 0:
        return IMAGE_USER
    return f"{os.getuid()}:{os.getgid()}"


def _one_line(exc: BaseException) -> str:
    text = str(getattr(exc, "explanation", None) or exc).strip()
    return (text.splitlines() or [exc.__class__.__name__])[0][:300]


def connect() -> Any:
    """A client of a reachable Docker daemon, or SandboxUnavailable."""
    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except _DAEMON_ERRORS as exc:
        raise SandboxUnavailable(f"no Docker daemon is reachable ({_one_line(exc)}): start Docker (DOCKER_HOST "
                                 "names another daemon)") from exc
    return client


def source_root() -> Path:
    """skill-evals' own source (what the runner image is built from): the action's checkout, or this checkout."""
    return Path(os.environ.get("SKILL_EVALS_SOURCE") or Path(runner.__file__).resolve().parent.parent)


def resolve_image(client: Any, tag: str) -> str:
    """SKILL_EVALS_VALIDATOR_IMAGE, else SKILL_EVALS_IMAGE, else the runner image built (from the daemon's cache
    when nothing changed)."""
    for name in ("SKILL_EVALS_VALIDATOR_IMAGE", "SKILL_EVALS_IMAGE"):
        try:
            given = given_image(client, os.environ, name)
        except ContainerError as exc:
            raise SandboxUnavailable(_one_line(exc)) from exc
        if given:
            return given
    source = source_root()
    if not (source / "Dockerfile").is_file():
        raise SandboxUnavailable(f"no Dockerfile in {source} to build the sandbox image from: set SKILL_EVALS_SOURCE "
                                 "to skill-evals' checkout, or SKILL_EVALS_IMAGE to a built runner image")
    base = os.environ.get("SKILL_EVALS_BASE_IMAGE") or DEFAULT_BASE_IMAGE
    try:
        return ensure_image(client, source, base, tag)
    except ContainerError as exc:
        raise SandboxUnavailable(f"{_one_line(exc)} (see the build log with `docker build --build-arg "
                                 f"BASE_IMAGE={base} {source}`)") from exc


@dataclass
class ContainerSandbox:
    """An Executor (runner.floor.validate) that runs the validator in a throwaway container of `image`."""
    client: Any
    image: str
    started: list[str] = field(default_factory=list)  # ids of the containers it created (all removed)

    def __call__(self, root: Path, validator: LibraryValidator, timeout_s: float) -> ValidatorRun:
        try:
            command = container_command(root, validator)
        except ValueError:
            return ValidatorRun(returncode=None, start_error=f"its script {validator.script} is outside {root}")
        container: Any = None
        try:
            try:
                container = self.client.containers.create(self.image, **self.options(root, command))
                self.started.append(str(container.id))
                container.start()
            except docker.errors.DockerException as exc:
                return ValidatorRun(returncode=None, start_error=_one_line(exc))
            try:
                status = container.wait(timeout=timeout_s)
            except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
                return ValidatorRun(returncode=None, timed_out=True)
            code = int(status.get("StatusCode", -1))
            launcher = container.logs(stdout=False, stderr=True).decode("utf-8", "replace").strip()
            if code == NOT_STARTED and launcher:
                return ValidatorRun(returncode=None, start_error=launcher.splitlines()[-1][:300])
            return ValidatorRun(returncode=code, output=container.logs(stdout=True, stderr=False))
        finally:
            if container is not None:
                try:
                    container.remove(force=True)  # kills it first when it is still running (a timeout)
                except docker.errors.DockerException:
                    pass

    @staticmethod
    def options(root: Path, command: list[str]) -> dict[str, Any]:
        """Everything the container is allowed (see docs/design/container-hardening.md)."""
        return {
            "entrypoint": ["/bin/sh", "-c", LAUNCHER, "sh"], "command": command, "working_dir": REPO_MOUNT,
            "volumes": {str(root.resolve()): {"bind": REPO_MOUNT, "mode": "ro"}},
            "environment": sandbox_env(os.environ), "user": sandbox_user(), "network_mode": "none",
            "read_only": True, "tmpfs": {TMP_MOUNT: TMPFS}, "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"], "privileged": False, "ipc_mode": "private",
            "mem_limit": MEM_LIMIT, "memswap_limit": MEM_LIMIT, "nano_cpus": NANO_CPUS, "pids_limit": PIDS_LIMIT,
            "labels": {LABEL: "library-validator"}, "stdin_open": False, "tty": False,
            "log_config": docker.types.LogConfig(type="json-file", config={"max-size": LOG_MAX, "max-file": "1"}),
        }


def open_sandbox(tag: str) -> ContainerSandbox:
    """A sandbox ready to run validators (the daemon reached, the image there), or SandboxUnavailable."""
    client = connect()
    return ContainerSandbox(client=client, image=resolve_image(client, tag))
