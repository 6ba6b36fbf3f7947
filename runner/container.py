"""Run `skill-evals` inside the runner image (the building blocks of `run --container`).

- :func:`ensure_image` builds the image from the repository's Dockerfile with the Docker SDK (the daemon's
  layer cache is reused: only a changed pyproject.toml reinstalls the dependencies).
- :func:`container_env` is the environment ALLOWLIST: from the host environment only
  ``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``, ``SKILL_EVALS_DISABLED`` and ``CI`` get in, plus what the
  caller passes on purpose (model settings). A GITHUB_TOKEN, cloud credentials, ... never do.
- :func:`run_in_container` runs ``skill-evals <args>`` with the repository mounted READ-ONLY at ``/repo``
  (the working directory), the output folder writable at ``/out``, no Docker socket, a non-root user,
  ``no-new-privileges``, every capability dropped, and memory / CPU / process limits. It returns the exit code
  and the logs, with the API key scrubbed out of them.

Paths in ``args`` are the container's: the library is under ``/repo`` and the run folder under ``/out``
(e.g. ``["run", "--library", "/repo", "--out", "/out/run"]``).

Who writes ``/out`` (so the host user can read the run folder afterwards):

- host user not root: the container runs as the host's uid:gid (``user="UID:GID"``), so every file is the
  host user's own. The image's HOME may not be writable by that uid, so HOME is set to ``/tmp``.
- host user root (CI): the container still runs as the image's non-root user (10001), never as root; the out
  folder is handed to 10001 for the run and the whole tree is handed back to its previous owner afterwards.

This assumes a local daemon (bind mounts are paths on the daemon's machine) without user-namespace remapping.
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
import requests.exceptions

IMAGE_USER = "10001:10001"  # the Dockerfile's `evals` user
REPO_MOUNT = "/repo"
OUT_MOUNT = "/out"
ENV_ALLOWLIST = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "SKILL_EVALS_DISABLED", "CI")
REDACTED = "[REDACTED:ANTHROPIC_API_KEY]"
TIMEOUT_EXIT = 124  # like timeout(1): the container was killed at the deadline
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ContainerError(RuntimeError):
    """The image could not be built, or the container could not be started."""


@dataclass
class ContainerOutcome:
    exit_code: int                  # skill-evals' exit code; TIMEOUT_EXIT when killed at the deadline
    stdout: str                     # scrubbed: the API key never appears
    stderr: str                     # scrubbed
    timed_out: bool = False
    key_scrubbed: bool = False      # True when the key appeared in the logs and was replaced by REDACTED
    leaked_files: list[str] = field(default_factory=list)  # files under out_dir that contain the key (should be [])
    image: str = ""
    user: str = ""

    @property
    def logs(self) -> str:
        return self.stdout + self.stderr


def ensure_image(client: docker.DockerClient, repo_root: Path | str, base_image: str, tag: str,
                 network: str = "host") -> str:
    """Build (or reuse from the daemon's cache) the runner image from ``repo_root/Dockerfile``; its id.

    ``network`` is the build's network mode: "host" lets pip reach the package index the way the host does.
    Raises :class:`ContainerError` with the end of the build log when the build fails.
    """
    root = Path(repo_root).resolve()
    if not (root / "Dockerfile").is_file():
        raise ContainerError(f"no Dockerfile in {root}")
    try:
        image, _ = client.images.build(path=str(root), dockerfile="Dockerfile", buildargs={"BASE_IMAGE": base_image},
                                       tag=tag, network_mode=network, rm=True, forcerm=True, pull=False)
    except docker.errors.BuildError as exc:
        tail = "".join(str(chunk.get("stream") or chunk.get("error") or "") for chunk in exc.build_log)[-3000:]
        raise ContainerError(f"building {tag} from {root}/Dockerfile (BASE_IMAGE={base_image}) failed: "
                             f"{exc.msg}\n{tail}") from exc
    except docker.errors.APIError as exc:
        raise ContainerError(f"building {tag}: {exc}") from exc
    return str(image.id)


def container_env(environ: Mapping[str, str], explicit: Mapping[str, str] | None = None) -> dict[str, str]:
    """The container's environment: the ALLOWLIST names taken from ``environ`` (non-empty values only), then
    ``explicit`` — settings the caller chose to pass (e.g. model settings), never read from the environment."""
    env = {name: environ[name] for name in ENV_ALLOWLIST if environ.get(name)}
    for name, value in (explicit or {}).items():
        if not _ENV_NAME.match(name):
            raise ValueError(f"not an environment variable name: {name!r}")
        env[name] = str(value)
    return env


def scrub(text: str, secret: str | None) -> tuple[str, bool]:
    """``text`` with every occurrence of ``secret`` replaced; whether there was one."""
    if not secret or secret not in text:
        return text, False
    return text.replace(secret, REDACTED), True


def _decode(raw: bytes | None) -> str:
    return (raw or b"").decode("utf-8", errors="replace")


def _hand_over(root: Path, uid: int, gid: int) -> None:
    """chown -R without following symlinks (a link written in the container must not redirect the chown)."""
    os.lchown(root, uid, gid)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            os.lchown(os.path.join(dirpath, name), uid, gid)


def files_containing(root: Path, secret: str | None) -> list[str]:
    """Files under ``root`` whose bytes contain ``secret`` (relative paths)."""
    if not secret:
        return []
    needle = secret.encode()
    found = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            try:
                if needle in path.read_bytes():
                    found.append(str(path.relative_to(root)))
            except OSError:
                continue
    return found


def run_in_container(client: docker.DockerClient, image: str, repo_dir: Path | str, out_dir: Path | str,
                     args: list[str], env: dict[str, str], *, network: str = "host", mem_limit: str = "4g",
                     nano_cpus: int | float = 2e9, pids_limit: int = 512, timeout_s: float,
                     user: str | None = None) -> ContainerOutcome:
    """Run ``skill-evals <args>`` in ``image`` and wait at most ``timeout_s`` seconds.

    ``env`` is passed as it is (build it with :func:`container_env`; this function never reads the host
    environment). ``user`` overrides the choice described in the module docstring (it may not be root).
    The container is removed afterwards, also on a timeout or an error.
    """
    repo = Path(repo_dir).resolve()
    out = Path(out_dir).resolve()
    if not repo.is_dir():
        raise ContainerError(f"the repository {repo} is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    secret = env.get("ANTHROPIC_API_KEY") or None
    env = dict(env)

    before = out.stat()
    handed_over = False
    if user is None:
        if os.geteuid() == 0:
            user = IMAGE_USER
        else:
            user = f"{os.getuid()}:{os.getgid()}"
    if user != IMAGE_USER:
        env.setdefault("HOME", "/tmp")  # the image's /home/evals belongs to 10001
    if user.split(":")[0] in ("0", "root"):
        raise ContainerError("the container never runs as root")
    if os.geteuid() == 0 and user == IMAGE_USER:
        uid, gid = (int(part) for part in IMAGE_USER.split(":"))
        _hand_over(out, uid, gid)
        handed_over = True

    volumes = {str(repo): {"bind": REPO_MOUNT, "mode": "ro"}, str(out): {"bind": OUT_MOUNT, "mode": "rw"}}
    container: Any = None
    try:
        try:
            container = client.containers.run(
                image, command=list(args), detach=True, environment=env, volumes=volumes, working_dir=REPO_MOUNT,
                user=user, network_mode=network, mem_limit=mem_limit, memswap_limit=mem_limit,
                nano_cpus=int(nano_cpus), pids_limit=pids_limit, security_opt=["no-new-privileges"],
                cap_drop=["ALL"], privileged=False, init=True, auto_remove=False, stdin_open=False, tty=False)
        except docker.errors.DockerException as exc:
            raise ContainerError(f"starting {image}: {scrub(str(exc), secret)[0]}") from exc
        timed_out = False
        try:
            status = container.wait(timeout=timeout_s)
            exit_code = int(status.get("StatusCode", -1))
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
            timed_out = True
            exit_code = TIMEOUT_EXIT
            try:
                container.kill()
                container.wait(timeout=30)
            except docker.errors.DockerException:
                pass
        stdout, scrubbed_out = scrub(_decode(container.logs(stdout=True, stderr=False)), secret)
        stderr, scrubbed_err = scrub(_decode(container.logs(stdout=False, stderr=True)), secret)
    finally:
        if container is not None:
            try:
                container.remove(force=True)
            except docker.errors.DockerException:
                pass
        if handed_over:
            _hand_over(out, before.st_uid, before.st_gid)
    return ContainerOutcome(exit_code=exit_code, stdout=stdout, stderr=stderr, timed_out=timed_out,
                            key_scrubbed=scrubbed_out or scrubbed_err, leaked_files=files_containing(out, secret),
                            image=image, user=user)
