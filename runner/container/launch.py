"""Run `skill-evals` inside the runner image (the building blocks of `run --container`), hardened.

In: the repository (mounted read-only at ``/repo``), an output folder (``/out``), an environment allowlist
(:func:`container_env`). Out: the exit code and the logs, key scrubbed. Contract: the key never enters the container
(runner.container.apiproxy holds it), network mode ``none``; every hardening property is set here, so one file is
reviewed.

Design notes: docs/design/container-hardening.md.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import docker
import docker.errors
import docker.types

from runner.container.apiproxy import ApiProxy
from runner.container.apirelay import SOCKET_ENV
from runner.core.errors import UsageError

if TYPE_CHECKING:
    from runner.corpus.settings import Settings
    from runner.plan.plan import Plan

IMAGE_USER = "10001:10001"  # the Dockerfile's `evals` user
REPO_MOUNT = "/repo"
OUT_MOUNT = "/out"
CACHE_MOUNT = "/cache"  # the result cache (runner.cache): read-only for a run that may not add to it
API_MOUNT = "/run/skill-evals"  # the proxy's folder (read-only: the socket can be used, nothing written)
HOME = "/home/evals"
DEFAULT_UPSTREAM = "https://api.anthropic.com"
ENV_ALLOWLIST = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "SKILL_EVALS_DISABLED", "CI")
REDACTED = "[REDACTED:ANTHROPIC_API_KEY]"
TIMEOUT_EXIT = 124  # like timeout(1): the container was killed at the deadline
RECORD = "container.json"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# Limits (run_in_container's defaults).
NOFILE = 8192           # open files per process: sessions' CLIs, sockets, snapshot copies
NPROC = 4096            # per uid on the host kernel (see the design notes); pids_limit bounds the container
PIDS_LIMIT = 512
TMP_SIZE = "1g"         # session folders and the library snapshot; counted against the memory limit
HOME_SIZE = "64m"

# The deadline (PlanDeadline, plan_bound).
SURFACE_AUDIT_S = 120.0     # runner.hosts.claude_code's surface-audit session bound
PLANNING_MARGIN_S = 300.0   # starting the container, loading the library, the floor, counting tokens
RUN_MARGIN_S = 300.0        # at least; 10 % of the bound when that is more
BATCH_WINDOW_S = 86_400.0   # a Message Batch ends within 24 hours


class ContainerError(UsageError, RuntimeError):
    """The image could not be built, or the container could not be started."""


@dataclass
class ContainerOutcome:
    exit_code: int                  # skill-evals' exit code; TIMEOUT_EXIT when killed at the deadline
    stdout: str                     # scrubbed: the API key never appears
    stderr: str                     # scrubbed
    timed_out: bool = False
    key_scrubbed: bool = False      # True when the key (or the placeholder) was in the logs, replaced by REDACTED
    leaked_files: list[str] = field(default_factory=list)  # files under out_dir holding the key or the placeholder
    image: str = ""
    user: str = ""
    container_id: str = ""
    deadline: Deadline | None = None
    hardening: Hardening | None = None
    api_proxy: dict[str, Any] | None = None  # runner.container.apiproxy's counts, with the upstream's origin

    @property
    def logs(self) -> str:
        return self.stdout + self.stderr


def ensure_image(client: docker.DockerClient, repo_root: Path | str, base_image: str, tag: str,
                 network: str = "host", agent_clis: tuple[str, ...] = ()) -> str:
    """Build (or reuse from the daemon's cache) the runner image from ``repo_root/Dockerfile``; its id.

    ``network`` is the build's network mode: "host" lets pip reach the package index the way the host does.
    ``agent_clis``: the hosts whose agent CLIs the image installs (the Dockerfile's AGENT_CLIS; its own tag).
    Raises :class:`ContainerError` with the end of the build log when the build fails.
    """
    if agent_clis:
        tag = f"{tag}-{'-'.join(sorted(agent_clis))}"
    root = Path(repo_root).resolve()
    if not (root / "Dockerfile").is_file():
        raise ContainerError(f"no Dockerfile in {root}")
    try:
        image, _ = client.images.build(path=str(root), dockerfile="Dockerfile",
                                       buildargs={"BASE_IMAGE": base_image, "AGENT_CLIS": " ".join(sorted(agent_clis))},
                                       tag=tag, network_mode=network, rm=True, forcerm=True, pull=False)
    except docker.errors.BuildError as exc:
        tail = "".join(str(chunk.get("stream") or chunk.get("error") or "") for chunk in exc.build_log)[-3000:]
        raise ContainerError(f"building {tag} from {root}/Dockerfile (BASE_IMAGE={base_image}) failed: "
                             f"{exc.msg}\n{tail}") from exc
    except docker.errors.APIError as exc:
        raise ContainerError(f"building {tag}: {exc}") from exc
    return str(image.id)


def given_image(client: docker.DockerClient, environ: Mapping[str, str], name: str = "SKILL_EVALS_IMAGE") -> str | None:
    """The id of an image the caller already built or loaded (``environ[name]``), so nothing is built; None when
    the variable is unset. A CI job that built the runner image once (or pulled the released one) names it here."""
    named = environ.get(name)
    if not named:
        return None
    try:
        return str(client.images.get(named).id)
    except docker.errors.ImageNotFound as exc:
        raise ContainerError(f"{name}={named}: no such image on this Docker daemon; build, load or pull it first "
                             f"(`docker image ls` lists what is there), or unset {name} to build the runner image "
                             "from the Dockerfile") from exc
    except docker.errors.DockerException as exc:
        raise ContainerError(f"{name}={named}: {exc}") from exc


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


@dataclass(frozen=True)
class Deadline:
    """How long the container may run, counted from its start, and why."""

    seconds: float
    basis: str


def plan_bound(plan: Plan, judge_timeout_s: float, judge_retries: int) -> tuple[float, str]:
    """The longest the execution of ``plan`` can take (seconds) and the arithmetic, in words.

    Direct calls: the sessions run in waves of ``concurrency``; a slot holds one session (at most its
    ``timeout_s``), then its judge call (at most ``judge_timeout_s`` per attempt, ``judge_retries`` + 1 attempts),
    and a rate-limited session pauses starts for ``rate_limit_pause_s`` — one pause per wave is allowed for.
    Batches: each model turn and each judge round of each repeat may take a batch's whole 24-hour window."""
    sessions = 0 if plan.unrun_all else plan.estimate.sessions_max
    if sessions == 0:
        return 0.0, "nothing to execute"
    judged = plan.estimate.judge_calls > 0
    if plan.batch:
        rounds = plan.repeats * (plan.max_turns + (1 if judged else 0))
        return rounds * BATCH_WINDOW_S, (f"batch: {plan.repeats} repeat round(s) x ({plan.max_turns} turn(s)"
                                         f"{' + 1 judge round' if judged else ''}) x 24 h per batch")
    waves = math.ceil(sessions / plan.concurrency)
    judge_s = judge_timeout_s * (judge_retries + 1) if judged else 0.0
    per_wave = plan.timeout_s + judge_s + plan.rate_limit_pause_s
    return waves * per_wave, (f"{sessions} session(s) at concurrency {plan.concurrency} = {waves} wave(s) x "
                              f"({plan.timeout_s:g} s session + {judge_s:g} s judge + {plan.rate_limit_pause_s:g} s "
                              f"rate-limit pause)")


def _signature(path: Path) -> tuple[int, int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_ino, info.st_mtime_ns


@dataclass
class PlanDeadline:
    """The container's time limit when the caller does not fix one: ``planning`` until this run's ``plan.json``
    (a host path) appears, then the time it appeared + :func:`plan_bound` + a margin. ``ignore``: the signature
    of a plan.json that was there before the run (not this run's); a resumed run's plan is there from the
    start, and its planning allowance is added, since a resume plans (the floor, the validator) again."""

    planning: Deadline
    plan_file: Path
    judge_timeout_s: float
    judge_retries: int
    ignore: tuple[int, int] | None = None
    resumed: bool = False

    @classmethod
    def for_run(cls, settings: Settings, plan_file: Path, resumed: bool) -> PlanDeadline:
        """From the settings the run was given (the container reads the same file)."""
        allowance = settings.validator.timeout_s + SURFACE_AUDIT_S + PLANNING_MARGIN_S
        planning = Deadline(allowance, f"planning: until plan.json appears, {settings.validator.timeout_s:g} s "
                                       f"library validator + {SURFACE_AUDIT_S:g} s surface audit + "
                                       f"{PLANNING_MARGIN_S:g} s margin")
        return cls(planning, plan_file, settings.judge.timeout_s, settings.judge.max_retries,
                   ignore=None if resumed else _signature(plan_file), resumed=resumed)

    def from_plan(self, elapsed_s: float) -> Deadline | None:
        """The deadline once this run's plan.json can be read; None before."""
        signature = _signature(self.plan_file)
        if signature is None or signature == self.ignore:
            return None
        from runner.plan.plan import Plan

        try:
            plan = Plan.model_validate_json(self.plan_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None  # not this version's plan, or being replaced: the planning deadline stays
        bound, why = plan_bound(plan, self.judge_timeout_s, self.judge_retries)
        margin = max(RUN_MARGIN_S, bound / 10)
        start = elapsed_s + (self.planning.seconds if self.resumed else 0.0)
        where = (f"resumed plan.json + {self.planning.seconds:g} s planning allowance" if self.resumed else
                 f"plan.json appeared after {elapsed_s:.0f} s")
        return Deadline(start + bound + margin, f"{where}; {why} = {bound:.0f} s; + {margin:.0f} s margin")


def _fixed(deadline: float | PlanDeadline) -> Deadline:
    if isinstance(deadline, PlanDeadline):
        return deadline.planning
    return Deadline(float(deadline), "fixed by the caller")


def _wait(container: Any, deadline: float | PlanDeadline, started: float,
          on_deadline: Callable[[Deadline], None] | None) -> tuple[int, bool, Deadline]:
    """(exit code, timed out, the deadline in force at the end). The container is waited for in a thread (no
    polling of the daemon); plan.json is looked for once a second."""
    done = threading.Event()
    status: dict[str, Any] = {}

    def waiter() -> None:
        try:
            status.update(container.wait())
        except Exception as exc:  # noqa: BLE001 - the daemon went away: reported as exit code -1
            status["error"] = str(exc)
        finally:
            done.set()

    threading.Thread(target=waiter, name="skill-evals-container-wait", daemon=True).start()
    current = _fixed(deadline)
    watching = isinstance(deadline, PlanDeadline)
    while True:
        remaining = current.seconds - (time.monotonic() - started)
        if remaining <= 0:
            break
        if done.wait(timeout=min(remaining, 1.0)):
            if watching:  # it ended before the next look: the record still says what the plan allowed
                assert isinstance(deadline, PlanDeadline)
                current = deadline.from_plan(time.monotonic() - started) or current
            return int(status.get("StatusCode", -1)), False, current
        if watching:
            assert isinstance(deadline, PlanDeadline)
            found = deadline.from_plan(time.monotonic() - started)
            if found is not None:
                current, watching = found, False
                if on_deadline is not None:
                    on_deadline(found)
    try:
        container.kill()
    except docker.errors.DockerException:
        pass
    done.wait(timeout=30)
    return TIMEOUT_EXIT, True, current


def _numeric_user(user: str) -> tuple[int, int] | None:
    uid, _, gid = user.partition(":")
    return (int(uid), int(gid or uid)) if uid.isdigit() and (gid or uid).isdigit() else None


def _origin(url: str) -> str:
    """scheme://host[:port]/path of a base URL, without any user:password."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}{parts.path}"


@dataclass(frozen=True)
class Hardening:
    """What run_in_container asks Docker for (also written to the record)."""

    network: str
    read_only_root: bool
    tmpfs: dict[str, str]
    ulimits: dict[str, int]
    pids_limit: int
    memory: str
    nano_cpus: int
    user: str


def run_in_container(client: docker.DockerClient, image: str, repo_dir: Path | str, out_dir: Path | str,
                     args: list[str], env: dict[str, str], *, deadline: float | PlanDeadline,
                     mem_limit: str = "4g", nano_cpus: int | float = 2e9, pids_limit: int = PIDS_LIMIT,
                     nofile: int = NOFILE, nproc: int = NPROC, tmp_size: str = TMP_SIZE,
                     user: str | None = None, on_deadline: Callable[[Deadline], None] | None = None,
                     labels: dict[str, str] | None = None, cache: Path | None = None,
                     cache_writable: bool = False) -> ContainerOutcome:
    """Run ``skill-evals <args>`` in ``image`` until it ends or ``deadline`` passes (seconds, or a
    :class:`PlanDeadline`); ``on_deadline`` is told when the plan sets the deadline.

    ``env`` is passed as it is (build it with :func:`container_env`; this function never reads the host
    environment), except ``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL``: they go to the API proxy, never into
    the container (the design notes). ``user`` overrides the choice described in the design notes (it may
    not be root). ``labels`` are put on the container (a caller can find it while it runs). ``cache``: the result
    cache folder, mounted at /cache (read-only unless ``cache_writable``). The container is
    removed afterwards, also on a timeout or an error.
    """
    repo = Path(repo_dir).resolve()
    out = Path(out_dir).resolve()
    if not repo.is_dir():
        raise ContainerError(f"the repository {repo} is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    env = dict(env)
    secret = env.pop("ANTHROPIC_API_KEY", "") or None
    upstream = env.pop("ANTHROPIC_BASE_URL", "") or DEFAULT_UPSTREAM

    before = out.stat()
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
    cache_before = cache.stat() if cache is not None else None
    handed_over = False
    if user is None:
        user = IMAGE_USER if os.geteuid() == 0 else f"{os.getuid()}:{os.getgid()}"
    if user.split(":")[0] in ("0", "root"):
        raise ContainerError("the container never runs as root")
    owner = _numeric_user(user)
    env["HOME"] = HOME
    home_options = "rw,noexec,nosuid,nodev,size=" + HOME_SIZE + (
        f",mode=0700,uid={owner[0]},gid={owner[1]}" if owner else ",mode=1777")
    hardening = Hardening(network="none", read_only_root=True,
                          tmpfs={"/tmp": f"rw,exec,nosuid,nodev,size={tmp_size},mode=1777", HOME: home_options},
                          ulimits={"nofile": nofile, "nproc": nproc}, pids_limit=pids_limit, memory=mem_limit,
                          nano_cpus=int(nano_cpus), user=user)
    if os.geteuid() == 0 and user == IMAGE_USER:
        uid, gid = (int(part) for part in IMAGE_USER.split(":"))
        _hand_over(out, uid, gid)
        if cache is not None and cache_writable:
            _hand_over(cache, uid, gid)
        handed_over = True

    volumes = {str(repo): {"bind": REPO_MOUNT, "mode": "ro"}, str(out): {"bind": OUT_MOUNT, "mode": "rw"}}
    if cache is not None:
        volumes[str(cache.resolve())] = {"bind": CACHE_MOUNT, "mode": "rw" if cache_writable else "ro"}
    proxy: ApiProxy | None = None
    proxy_folder: Path | None = None
    container: Any = None
    outcome: ContainerOutcome | None = None
    try:
        if secret:
            # A unix socket's path has at most 107 bytes: a long TMPDIR is not used for it.
            short = None if len(tempfile.gettempdir()) <= 64 else "/tmp"
            proxy_folder = Path(tempfile.mkdtemp(prefix="skill-evals-api-", dir=short))
            other_user = owner is not None and owner != (os.getuid(), os.getgid())
            try:
                proxy = ApiProxy(upstream, secret, proxy_folder, owner=owner if other_user else None).start()
            except (RuntimeError, ValueError) as exc:
                raise ContainerError(f"the API proxy for the container could not start: {exc}") from exc
            env["ANTHROPIC_API_KEY"] = proxy.token
            env[SOCKET_ENV] = f"{API_MOUNT}/{proxy.socket_path.name}"
            volumes[str(proxy_folder)] = {"bind": API_MOUNT, "mode": "ro"}
        scrubbed_of = [s for s in (secret, proxy.token if proxy else None) if s]
        try:
            container = client.containers.run(
                image, command=list(args), detach=True, environment=env, volumes=volumes, working_dir=REPO_MOUNT,
                user=user, network_mode=hardening.network, read_only=True, tmpfs=hardening.tmpfs,
                ulimits=[docker.types.Ulimit(name=name, soft=value, hard=value)
                         for name, value in hardening.ulimits.items()],
                mem_limit=mem_limit, memswap_limit=mem_limit, nano_cpus=int(nano_cpus), pids_limit=pids_limit,
                security_opt=["no-new-privileges"], cap_drop=["ALL"], privileged=False, init=True,
                auto_remove=False, stdin_open=False, tty=False, labels={"skill-evals": "run", **(labels or {})})
        except docker.errors.DockerException as exc:
            raise ContainerError(f"starting {image}: {_scrub_all(str(exc), scrubbed_of)[0]}") from exc
        started = time.monotonic()
        exit_code, timed_out, final = _wait(container, deadline, started, on_deadline)
        stdout, scrubbed_out = _scrub_all(_decode(container.logs(stdout=True, stderr=False)), scrubbed_of)
        stderr, scrubbed_err = _scrub_all(_decode(container.logs(stdout=False, stderr=True)), scrubbed_of)
        container_id = str(container.id)
        _remove(container)
        container = None
        if proxy is not None:
            proxy.close()
        outcome = ContainerOutcome(
            exit_code=exit_code, stdout=stdout, stderr=stderr, timed_out=timed_out,
            key_scrubbed=scrubbed_out or scrubbed_err, image=image, user=user, container_id=container_id,
            deadline=final, hardening=hardening,
            api_proxy={"upstream": _origin(upstream), **proxy.stats.as_dict()} if proxy is not None else None)
        _write_record(out, outcome, (before.st_uid, before.st_gid))
    finally:
        if container is not None:
            _remove(container)
        if proxy is not None:
            proxy.close()
        if proxy_folder is not None:
            shutil.rmtree(proxy_folder, ignore_errors=True)
        if handed_over:
            _hand_over(out, before.st_uid, before.st_gid)
            if cache is not None and cache_before is not None and cache_writable:
                _hand_over(cache, cache_before.st_uid, cache_before.st_gid)
    outcome.leaked_files = sorted({*files_containing(out, secret),
                                   *files_containing(out, proxy.token if proxy else None)})
    return outcome


def host_paths(text: str, out_dir: Path | str, repo_dir: Path | str) -> str:
    """The container's output with its paths made the host's: ``/out/...`` is the run folder the user named
    (``Results: /out/results.json`` -> ``Results: runs/<time>/results.json``), ``/repo/...`` the repository.
    Only whole path starts are replaced (``/outer`` and ``x/out`` stay)."""
    mounts = {OUT_MOUNT: Path(out_dir).as_posix(), REPO_MOUNT: Path(repo_dir).as_posix()}
    pattern = re.compile(r"(?<![\w./~-])(" + "|".join(re.escape(m) for m in mounts) + r")(?![\w.-])")
    return pattern.sub(lambda found: mounts[found.group(1)], text)


def _remove(container: Any) -> None:
    try:
        container.remove(force=True)
    except docker.errors.DockerException:
        pass


def _scrub_all(text: str, secrets_: list[str]) -> tuple[str, bool]:
    found = False
    for secret in secrets_:
        text, hit = scrub(text, secret)
        found = found or hit
    return text, found


def _write_record(out: Path, outcome: ContainerOutcome, owner: tuple[int, int]) -> None:
    """``container.json``: what the container was given and how it ended (never a key); owned like the out
    folder."""
    record = {"exit_code": outcome.exit_code, "timed_out": outcome.timed_out,
              "deadline_s": round(outcome.deadline.seconds, 1) if outcome.deadline else None,
              "deadline_basis": outcome.deadline.basis if outcome.deadline else None,
              "hardening": asdict(outcome.hardening) if outcome.hardening else None,
              "api_proxy": outcome.api_proxy, "key_scrubbed_from_logs": outcome.key_scrubbed}
    try:
        (out / RECORD).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        if os.geteuid() == 0:
            os.lchown(out / RECORD, *owner)
    except OSError:
        pass  # the record is a courtesy: the outcome itself goes back to the caller
