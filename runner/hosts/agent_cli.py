"""One session of an agent CLI that loads Agent Skills (OpenCode, Codex, Gemini CLI, Copilot CLI...), run as the real
program: the part every such host shares. A host module supplies an `AgentCli` (how to launch its CLI, how to read
its machine-readable output, how to capture its first request); `AgentCliHost` makes it a runner.hosts.base.Host.

Each session gets a fresh folder (HOME, config and data folders, the project with the library's skills where the
CLI looks: HostTraits.activation.skills_folder), an environment that holds only what the launch names (nothing of
the runner's), its own process group (killed whole at the session's bound), and the Landlock wall when the machine
gives one (runner.hosts.wall). What the CLI prints is read line by line by the host's `SessionReader`; the host
never decides PASS or FAIL.

Cost: the CLI's own token figures, priced with the run's table. A session that did not end as the CLI ends one (killed
at its bound, crashed, cut) may have been billed for requests no figure shows: it is charged up to its reservation
as a bound (runner.hosts.billing.charge), never less than what was reported.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import shutil
import signal
import sys
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Self

from runner.core.host_traits import traits
from runner.core.observation import Activation, Bound, ErrorKind, Observation, SessionSpec, ToolCall, Usage
from runner.hosts import billing, wall, workspace
from runner.hosts.base import utf8_safe
from runner.hosts.keyproxy import KeyProxy

if TYPE_CHECKING:
    import anthropic

    from runner.hosts.prices import PriceTable
    from runner.hosts.sessionpath import SessionPath
    from runner.hosts.surface import Surface

MINIMAL_PATH = "/usr/local/bin:/usr/bin:/bin"
# What is kept of a CLI's stderr for an error message, and of its output lines for the transcript.
STDERR_LINES = 200
STDOUT_LINE_LIMIT = 8 * 1024 * 1024  # one JSON event may carry a whole tool result
# How long a killed process group may take to go before the session is left to the OS.
KILL_GRACE_S = 5.0
INPUT_CHARS = 300  # a tool call's input as kept in the observation


@dataclass
class Launch:
    """How one session's CLI is started. `env` is the whole environment: nothing of the runner's is inherited."""

    argv: list[str]
    env: dict[str, str]
    stdin: bytes | None = None  # written, then closed; None: /dev/null
    cwd: Path | None = None  # default: the session's project folder
    # Beyond the system and the session's own folder, what the CLI must read (its install, a shared package cache):
    # the Landlock wall lets it read these and write only the session's folder and `writes`.
    reads: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)


@dataclass
class ReadOutcome:
    """What a host's reader made of one session's output."""

    activations: list[Activation]
    tool_calls: list[ToolCall]
    final_answer: str | None
    usage: Usage
    model_calls: int
    turns: int
    ended: bool  # the CLI printed the event that ends a session as it ends one
    error_kind: ErrorKind | None = None
    error_message: str | None = None
    host_cost_usd: float | None = None
    first_turn_input_tokens: int | None = None
    # Requests the API may have billed whose reply the CLI did not read whole (a cut stream it retried): each is
    # charged a bound, as a session that did not end is.
    lost_replies: int = 0
    transcript: list[dict[str, Any]] = field(default_factory=list)
    # Bounds the CLI itself ended the session at, as it ends one (its own turn limit, which it checks before the
    # request past it): no error and no lost reply. The base adds `timeout` and the reader's `over()` bound.
    bounds_hit: list[Bound] = field(default_factory=list)


class SessionReader(Protocol):
    """Reads one session's standard output."""

    def line(self, text: str) -> None:
        """One line as the CLI printed it (JSON or not), without its newline."""

    def outcome(self) -> ReadOutcome:
        """What the session showed, once its process has ended (or was killed)."""

    def over(self) -> Bound | None:
        """A bound the session has passed by what it printed so far (`max-turns`: the CLI started one model turn
        more than SessionSpec.max_turns; few CLIs can be told a turn limit), or None. The base then ends the
        session at once: its process group is killed and the bound recorded."""


class CaptureEndpoint(Protocol):
    """A 127.0.0.1 server in the CLI's API shape that records the requests and ends the session at once."""

    captured: list[dict[str, Any]]

    @property
    def url(self) -> str: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...


class AgentCli(Protocol):
    """What a host module supplies for its CLI."""

    name: str

    def versions(self) -> dict[str, str]:
        """The CLI's name and version (and anything else that decides behaviour), recorded in every result."""

    def launch(self, spec: SessionSpec, ws: workspace.Workspace, base_url: str | None, api_key: str) -> Launch:
        """Write the CLI's configuration into the session's folder and say how to start it."""

    def reader(self, spec: SessionSpec, ws: workspace.Workspace, aliases: dict[str, str]) -> SessionReader:
        """A reader for one session's output. Its `outcome()` is asked before the session's folder is removed, so
        it may read what the CLI left there (a session log with the token figures)."""

    def capture(self) -> CaptureEndpoint:
        """The surface audit's endpoint (not yet entered)."""

    def surface(self, bodies: list[dict[str, Any]], library_names: set[str], invocable: set[str]) -> Surface:
        """What the CLI's first model request listed of the library (`bodies`: every request captured, in order)."""


def redact(value: Any, secret: str | None) -> Any:
    """`value` (JSON-like) with every occurrence of `secret` replaced."""
    if not secret:
        return value
    text = json.dumps(value, default=str)
    return value if secret not in text else json.loads(text.replace(secret, "[redacted]"))


def cut_input(tool_input: object) -> str:
    """A tool call's input as the observation keeps it."""
    text = json.dumps(tool_input, default=str, ensure_ascii=False) if not isinstance(tool_input, str) else tool_input
    return text if len(text) <= INPUT_CHARS else text[:INPUT_CHARS] + "…"


def node_path() -> str:
    """PATH for a CLI that npm installed: its launcher is a node script."""
    node = shutil.which("node")
    parts = [str(Path(node).parent)] if node else []
    return ":".join(dict.fromkeys(parts + MINIMAL_PATH.split(":")))


def node_reads(path: str | None) -> list[str]:
    """Where the node that runs an npm-installed CLI's launcher really is (the image's comes from a Python wheel,
    outside the system folders the wall lets a session read)."""
    node = shutil.which("node", path=path)
    return [str(Path(os.path.realpath(node)).parent)] if node else []


@dataclass
class Ran:
    """What running the process showed, apart from what the reader read."""

    returncode: int | None
    timed_out: bool
    stderr: list[str]
    duration_s: float
    stopped_at: Bound | None = None  # the reader's bound the session passed (SessionReader.over): it was killed


async def _pump(stream: asyncio.StreamReader | None, take: Any, stop: Any = None) -> None:
    """Feed each line to `take` until the stream ends, or until `stop()` says a bound was passed."""
    if stream is None:
        return
    while True:
        try:
            raw = await stream.readline()
        except ValueError:  # a line beyond the limit: read past it, keep going
            raw = await stream.read(STDOUT_LINE_LIMIT)
            take(raw.decode("utf-8", "replace").rstrip("\n")[:2000])
            continue
        if not raw:
            return
        take(raw.decode("utf-8", "replace").rstrip("\r\n"))
        if stop is not None and stop() is not None:
            return


def _kill_group(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


async def run_process(launch: Launch, cwd: Path, timeout_s: float, reader: SessionReader) -> Ran:
    """Run the CLI as its own process group, feeding its output lines to `reader`; the whole group is killed at
    `timeout_s` or when the attempt is cancelled."""
    started = time.monotonic()
    stderr: list[str] = []
    process = await asyncio.create_subprocess_exec(
        *launch.argv, cwd=str(cwd), env=launch.env, start_new_session=True, limit=STDOUT_LINE_LIMIT,
        stdin=asyncio.subprocess.PIPE if launch.stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    timed_out = False
    try:
        if launch.stdin is not None and process.stdin is not None:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                process.stdin.write(launch.stdin)
                await process.stdin.drain()
            process.stdin.close()
        errors = asyncio.ensure_future(_pump(process.stderr, lambda line: stderr.append(line)
                                             if len(stderr) < STDERR_LINES else None))
        try:
            async with asyncio.timeout(timeout_s):
                await _pump(process.stdout, reader.line, reader.over)
                if reader.over() is None:
                    await errors
                    await process.wait()
        except TimeoutError:
            timed_out = True
        finally:
            errors.cancel()
    finally:
        if process.returncode is None:
            _kill_group(process)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(KILL_GRACE_S):
                    await process.wait()
        else:  # the CLI ended: whatever it started in its group ends with it
            _kill_group(process)
    stopped = reader.over()
    return Ran(returncode=None if timed_out or stopped else process.returncode, timed_out=timed_out, stderr=stderr,
               duration_s=time.monotonic() - started, stopped_at=None if timed_out else stopped)


def confined(launch: Launch, root: Path, session_wall: wall.SessionWall) -> list[str]:
    """The launch's argv, behind the Landlock wall when the machine gives one: the session writes only its folder."""
    if session_wall.mode != "landlock":
        return launch.argv
    reads = sorted({*launch.reads, *wall.cli_reads(Path(launch.argv[0])), *node_reads(launch.env.get("PATH"))})
    words = shlex.split(wall.command(sys.executable, str(root), reads))
    extra = [word for path in launch.writes for word in ("--write", path)]
    return [*words, *extra, "--", *launch.argv]


def session_error(outcome: ReadOutcome, ran: Ran, timeout_s: float) -> tuple[ErrorKind | None, str | None]:
    """The session's error, if any: the bound first, then what the CLI said, then how its process ended."""
    if ran.timed_out:
        return "timeout", f"the session outlived its {timeout_s:g} s bound"
    if ran.stopped_at is not None:  # a bound, not an error: what the session did up to it is graded
        return outcome.error_kind, outcome.error_message
    tail = " ".join(ran.stderr[-5:])[:500]
    if outcome.error_kind is not None:
        return outcome.error_kind, outcome.error_message
    if ran.returncode not in (0, None) and not outcome.bounds_hit:  # a CLI may exit non-zero at its own bound
        return "host-crash", f"the CLI exited {ran.returncode}" + (f" | stderr: {tail}" if tail else "")
    if not outcome.ended:
        return "ambiguous", "the CLI ended without the event that ends a session" + (f" | stderr: {tail}"
                                                                                    if tail else "")
    return None, None


class AgentCliHost:
    """A runner.hosts.base.Host for an agent CLI: one fresh folder and process per attempt."""

    def __init__(self, cli: AgentCli, files: workspace.LibraryFiles, prices: PriceTable, api_key: str,
                 base_url: str | None, work_parent: Path | None = None, aliases: dict[str, str] | None = None,
                 session_confinement: wall.Setting = "auto", key_proxy: KeyProxy | None = None):
        """`key_proxy`: the sessions reach the API through it, with its token instead of the key
        (runner.hosts.keyproxy: the CLI and the commands its model runs never hold the key)."""
        self.cli = cli
        self.key_proxy = key_proxy
        if key_proxy is not None:
            weakref.finalize(self, key_proxy.close)
        self.name = cli.name
        self.traits = traits(cli.name)
        self.files = files
        self.prices = prices
        self.api_key = api_key
        self.base_url = base_url
        self.aliases = aliases or {}
        self.work_parent = work_parent if work_parent is not None else workspace.default_parent()
        # The CLI makes its own requests: the run's rate limiter, put here by the executor, paces none of them.
        self.middleware: list[anthropic.MiddlewareInput] = []
        self.session_wall: wall.SessionWall | None = wall.detect(session_confinement)
        self._staging: workspace.Staging | None = None
        self._staging_lock = threading.Lock()

    @property
    def session_path(self) -> SessionPath | None:
        return None  # each session sees its own real folder

    def versions(self) -> dict[str, str]:
        return self.cli.versions()

    def staging(self) -> workspace.Staging:
        with self._staging_lock:
            if self._staging is None:
                self._staging = workspace.Staging(self.files, self.work_parent)
            return self._staging

    def close(self) -> None:
        with self._staging_lock:
            if self._staging is not None:
                self._staging.remove()
                self._staging = None

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    def build_workspace(self, spec: SessionSpec) -> workspace.Workspace:
        base = Path(spec.case_files_dir) if spec.case_files_dir else None
        case_files = [(base / f, f) for f in spec.case_files] if base is not None else []
        return workspace.build(self.files, spec.exclude_skills, case_files, self.work_parent, staging=self.staging(),
                               skills_folder=self.traits.activation.skills_folder, with_agents=False)

    async def run(self, spec: SessionSpec, base_url: str | None = None, api_key: str | None = None) -> Observation:
        started = time.monotonic()
        ws = await asyncio.to_thread(self.build_workspace, spec)
        key = api_key if api_key is not None else self.api_key
        if base_url is None and api_key is None and self.key_proxy is not None:
            proxy = self.key_proxy.start()
            base_url, key = proxy.url, proxy.token  # the key itself stays in this process (kept out of the output)
        # The attempt's tally: until the CLI's figures are read, the session counts at its reservation (a kill or
        # a cancellation leaves that bound charged: billing.Tally.give_up).
        tally = billing.current() or billing.Tally()
        start = tally.mark()
        tally.set_in_flight(spec.max_usd or 0.0)
        try:
            launch = self.cli.launch(spec, ws, base_url if base_url is not None else self.base_url, key)
            reader = self.cli.reader(spec, ws, self.aliases)
            argv = confined(launch, ws.root, self.session_wall) if self.session_wall else launch.argv
            try:
                ran = await run_process(Launch(argv=argv, env=launch.env, stdin=launch.stdin), launch.cwd or ws.project,
                                        spec.timeout_s, reader)
            except OSError as exc:  # the CLI could not be started at all
                ran = Ran(returncode=None, timed_out=False, stderr=[f"{type(exc).__name__}: {exc}"],
                          duration_s=time.monotonic() - started)
                obs = self.observe(spec, await asyncio.to_thread(reader.outcome), ran, "host-crash",
                                   f"the CLI could not start: {exc}", key)
                tally.set_in_flight(0.0)
                tally.settle_to(start, obs.cost_usd - obs.bound_usd, obs.bound_usd, obs.lost_replies)
                return obs
            outcome = await asyncio.to_thread(reader.outcome)  # before the folder goes: it may read a log there
        finally:
            await asyncio.to_thread(ws.remove)
        kind, message = session_error(outcome, ran, spec.timeout_s)
        obs = self.observe(spec, outcome, ran, kind, message, key)
        tally.set_in_flight(0.0)
        tally.settle_to(start, obs.cost_usd - obs.bound_usd, obs.bound_usd, obs.lost_replies)
        return obs

    def observe(self, spec: SessionSpec, outcome: ReadOutcome, ran: Ran, error_kind: ErrorKind | None,
                error_message: str | None, key: str) -> Observation:
        bounds: list[Bound] = ["timeout"] if ran.timed_out else [ran.stopped_at] if ran.stopped_at else []
        bounds += [bound for bound in outcome.bounds_hit if bound not in bounds]
        priced = self.prices.cost(spec.model, outcome.usage)
        reported = priced if priced is not None else (outcome.host_cost_usd or 0.0)
        # A session that did not end as the CLI ends one may have been billed for a request no figure shows.
        lost = outcome.lost_replies + (0 if outcome.ended and not ran.timed_out and not ran.stopped_at else 1)
        bound = lost * self.lost_reply_usd(spec, outcome, reported) if lost else 0.0
        charged, bound, basis = billing.charge(reported + bound, bound, spec.max_usd)
        return utf8_safe(Observation(
            attempt_id=spec.attempt_id, host=self.name, error_kind=error_kind,
            error_message=redact(error_message, key) if error_message else None,
            activations=outcome.activations, tool_calls=outcome.tool_calls,
            final_answer=outcome.final_answer if error_kind is None and not bounds else None, turns=outcome.turns,
            usage=outcome.usage, cost_usd=charged, cost_basis=basis, bound_usd=bound, lost_replies=lost,
            host_cost_usd=outcome.host_cost_usd, bounds_hit=bounds, duration_s=round(ran.duration_s, 3),
            model_calls=outcome.model_calls, first_turn_input_tokens=outcome.first_turn_input_tokens,
            transcript=redact(outcome.transcript, key)))

    def lost_reply_usd(self, spec: SessionSpec, outcome: ReadOutcome, reported: float) -> float:
        """What one lost reply may have cost: a request the size of the session's first (or the plan's estimate of
        it) with a whole reply; the rest of the reservation when neither size is known."""
        tokens = outcome.first_turn_input_tokens or spec.request_input_tokens
        output = self.traits.fixed_max_output_tokens or spec.max_output_tokens
        bound = billing.input_bound_usd(self.prices, spec.model, tokens, output) if tokens else None
        if bound is None or bound == billing.UNKNOWN:
            return max(0.0, (spec.max_usd or 0.0) - reported)
        return bound

    async def surface(self, model: str, library_names: set[str], invocable: set[str]) -> Surface:
        """Run one session against the CLI's capture endpoint: its real first request, no model, no key."""
        from runner.hosts.surface import Surface

        with self.cli.capture() as capture:
            with billing.metering(billing.Tally()):  # no model, nothing billed: never an attempt's spend
                obs = await self.run(SessionSpec(
                    attempt_id="surface-audit", uid="surface-audit", model=model, max_turns=1, timeout_s=120,
                    prompt="Surface audit: this session only records its first request."),
                    base_url=capture.url, api_key="skill-evals-surface-audit-no-key")
            bodies = list(capture.captured)
        if not bodies:
            return Surface(host=self.name, listing_budget_chars=None,
                           error=f"the CLI sent no request to the capture endpoint ({obs.error_kind}: "
                                 f"{obs.error_message})")
        return self.cli.surface(bodies, library_names, invocable)


def work_parent_for(run_folder: Path | None) -> Path | None:
    """Session folders under the run folder's own parent (workspace.claim_run_parent), else the default."""
    if run_folder is None:
        return None
    parent = workspace.claim_run_parent(run_folder)
    return parent


def keep_until_collected(host: object, parent: Path | None) -> None:
    """Remove the host's session-folder parent when the host goes (a clean end leaves nothing behind)."""
    if parent is not None:
        weakref.finalize(host, shutil.rmtree, str(parent), True)
