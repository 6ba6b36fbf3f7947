"""The api host: a direct Messages API APPROXIMATION of Claude Code's skill-selection surface.

It copies what decides skill selection as far as the public API allows (the listing, the Skill tool, a read-only
`Read`) under its own short system prompt. Cheaper, no CLI, not the real host. Errors become an Observation's
`error_kind`, never an exception.

Design notes: docs/design/api-host.md.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import shlex
import time
import typing
import weakref
from typing import TYPE_CHECKING, Any, TypeGuard

import anthropic
from anthropic.types import CacheControlEphemeralParam, TextBlockParam

from runner.core.host_traits import traits
from runner.core.observation import Activation, Bound, ErrorKind, ListingSeen, Observation, SessionSpec, ToolCall, Usage
from runner.corpus import frontmatter, slash
from runner.corpus.executables import without_shell
from runner.corpus.library import Library, Skill
from runner.corpus.settings import HOST_DEFAULT_LISTING_BUDGET
from runner.hosts import billing, listing
from runner.hosts.activation import recognise, slash_command
from runner.hosts.base import utf8_safe
from runner.hosts.prices import PriceTable
from runner.hosts.ratelimit import SpendLimitMiddleware, SpendLimitReached, spend_limit_cause
from runner.hosts.sessionpath import SessionPath
from runner.hosts.surface import LISTING_HEADER, Surface
from runner.hosts.wall import SessionWall
from runner.hosts.workspace import SKILLS_PARTS, LibraryFiles, LibraryView

if TYPE_CHECKING:  # the factory's inputs (runner.hosts.registry.make_host)
    from runner.hosts.registry import HostInputs

HOST_NAME = "api"
# The tool names this host offers and the recogniser reads (HostTraits.activation: Claude Code's).
ACTIVATION = traits(HOST_NAME).activation
HOST_VERSION = "api-approximation"
CHARS_PER_TOKEN = 4  # the estimate runner.plan.planner uses; only for the per-session budget check
READ_MAX_BYTES = 200 * 1024
TOOL_INPUT_CHARS = 300
SKILLS_PREFIX = SKILLS_PARTS
# The smallest minimum cacheable prefix the prompt-caching docs give (Sonnet 4.5/4.6, Opus 4/4.1:
# 1024 tokens; Haiku 4.5 and Opus 4.5/4.6: 4096). A shorter prefix is never cached by any model.
CACHE_MIN_TOKENS = 1024
EPHEMERAL: CacheControlEphemeralParam = {"type": "ephemeral"}
# A request's `system`: the text, or one text block marked for caching (ApiHost.system_param).
SystemParam = str | list[TextBlockParam]

# A slash command of a skill whose frontmatter says `user-invocable: false`: CLI 2.1.332 answers this itself and sends
# no request (measured).
NOT_USER_INVOCABLE = ('This skill can only be invoked by Claude, not directly by users. Ask Claude to use the "{name}" '
                      'skill for you.')
# Argument placeholders of a skill body (with_arguments).
INDEXED_ARGUMENT = re.compile(r"\$ARGUMENTS\[(\d+)\]|\$(\d+)")
ALL_ARGUMENTS = re.compile(r"\$ARGUMENTS(?!\[)")
PLACEHOLDER = re.compile(r"\$ARGUMENTS|\$\d")

BASE_PROMPT = (
    "You are Claude, an AI assistant helping a user with tasks in a software project. The project "
    "folder is your working directory; file paths are relative to it.\n"
    "Skills are packaged instructions for particular kinds of task. When one of the skills listed "
    "below is relevant to the user's request, use it by calling the Skill tool with its name before "
    "doing the task; otherwise answer directly. You can read files of the project with the Read tool."
)

SKILL_TOOL: dict[str, Any] = {
    "name": ACTIVATION.skill_tool,
    "description": (
        "Execute a skill within the main conversation. Skills provide specialised instructions for "
        "particular tasks. Call this tool with the skill's name (as listed) to load its instructions, "
        "then follow them. Optional `args` are passed to the skill. Only skills listed as available "
        "can be used."
    ),
    "input_schema": {"type": "object", "properties": {"skill": {"type": "string"}, "args": {"type": "string"}},
                     "required": ["skill"]},
}

READ_TOOL: dict[str, Any] = {
    "name": ACTIVATION.read_tool,
    "description": (
        "Read a text file of the project folder (read-only). `file_path` is a path relative to the "
        "project folder, or an absolute path inside it. Files larger than 200 KB cannot be read."
    ),
    "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}},
                     "required": ["file_path"]},
}

TOOLS: list[dict[str, Any]] = [SKILL_TOOL, READ_TOOL]
TOOLS_CHARS = len(json.dumps(TOOLS))


class SessionError(Exception):
    """An observed failure of the session (not a runner bug): becomes the Observation's error."""

    def __init__(self, kind: ErrorKind, message: str, bound: Bound | None = None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.bound = bound


def classify_error(exc: BaseException) -> SessionError | None:
    """The error kind of an exception from one `messages.create` call; None = not the API's doing."""
    if isinstance(exc, SpendLimitReached):
        return SessionError("spend-limit", exc.cause)
    if isinstance(exc, anthropic.APITimeoutError):
        return SessionError("timeout", f"the API request timed out after the client's retries: {exc}", "timeout")
    if isinstance(exc, anthropic.APIStatusError):
        # A client built without SpendLimitMiddleware still tells a spend limit apart (after its retries).
        cause = spend_limit_cause(exc.status_code, exc.response.headers, exc.body)
        if cause is not None:
            return SessionError("spend-limit", cause)
        if isinstance(exc, anthropic.RateLimitError):
            retry_after = exc.response.headers.get("retry-after-ms") or exc.response.headers.get("retry-after")
            return SessionError("rate-limited",
                                 f"HTTP 429 (retry-after {retry_after}) after the client's retries: {exc}")
        return SessionError("api-error", f"HTTP {exc.status_code}: {exc}")
    if isinstance(exc, anthropic.APIConnectionError):
        underlying = exc.__cause__ or exc.__context__
        detail = f" ({type(underlying).__name__}: {underlying})" if underlying else ""
        return SessionError("api-error", f"connection to the API failed after the client's retries: {exc}{detail}")
    if isinstance(exc, (anthropic.APIResponseValidationError, ValueError)):
        return SessionError("malformed", f"the API response could not be read: {type(exc).__name__}: {exc}")
    return None


# ---- reading a reply ---------------------------------------------------------------------------
# The SDK builds a 200 body into a Message WITHOUT validating it (the client's default): an error body, an
# event stream (left as text) or a Message with fields null arrive as they are. The runner reads only what
# these checks let through, so no reply can raise past them. Also used by runner.judge.prose.

STOP_REASONS = frozenset(typing.get_args(anthropic.types.StopReason))
# The blocks a reply to these requests can hold (thinking, should a model think unasked, is passed back as it
# came); any other type (a server tool's, ...) answers something no request asked for.
BLOCK_TYPES = frozenset({"text", "tool_use", "thinking", "redacted_thinking"})
_REQUIRED_COUNTS = ("input_tokens", "output_tokens")


def _is_count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def reply_usage(response: object) -> Usage | str:
    """The reply's token counts, or why they cannot be read (then the reply's cost is unknown)."""
    used = getattr(response, "usage", None)
    if used is None:
        return "the reply has no usage figures (its cost is unknown)"
    counts: dict[str, int] = {}
    for name in Usage.model_fields:
        value = getattr(used, name, None)
        if value is None and name not in _REQUIRED_COUNTS:
            value = 0  # the API leaves the cache fields null when nothing was cached
        if _is_count(value):
            counts[name] = value
        else:
            return f"usage.{name} is {value!r}, not a token count (the reply's cost is unknown)"
    return Usage(**counts)


def _error_text(error: object) -> str:
    """`type: message` of an API error object (a dict, or the SDK's attribute bag)."""
    def field(name: str) -> object:
        return error.get(name) if isinstance(error, dict) else getattr(error, name, None)
    return f"{field('type')}: {field('message')}"


def _stream_problem(body: str) -> str:
    """A body the SDK left as text: an event stream answering a request without `stream`, or anything else."""
    if not body.lstrip().startswith(("event:", "data:")):
        return f"a body that is not a Message: {body[:200]!r}"
    for event in body.split("\n\n"):
        lines = dict(line.split(":", 1) for line in event.splitlines() if ":" in line)
        if lines.get("event", "").strip() == "error":
            try:
                error = json.loads(lines.get("data", "")).get("error")
            except (ValueError, AttributeError):
                error = None
            return f"an event stream (not the JSON Message asked for) whose error event says {_error_text(error)}"
    return "an event stream, not the JSON Message asked for"


def _block_problem(block: object) -> str | None:
    kind = getattr(block, "type", None)
    if kind == "text":
        return None if isinstance(getattr(block, "text", None), str) else "a text block whose text is not a string"
    if kind == "tool_use":
        if not isinstance(getattr(block, "id", None), str) or not isinstance(getattr(block, "name", None), str):
            return "a tool_use block without a string id and name"
        tool_input = getattr(block, "input", None)
        if not isinstance(tool_input, dict):
            return f"a tool_use block whose input is {type(tool_input).__name__}, not an object"
        return None
    return None if kind in BLOCK_TYPES else f"a block of type {kind!r}, which no request asked for"


def reply_problem(response: object) -> str | None:
    """Why the result of `messages.create` is not an assistant Message this runner can read, or None."""
    if isinstance(response, str):
        return _stream_problem(response)
    kind, role = getattr(response, "type", None), getattr(response, "role", None)
    if kind == "error":
        return f"an error body with HTTP 200: {_error_text(getattr(response, 'error', None))}"
    if kind != "message" or role != "assistant":
        return f"not an assistant Message (type {kind!r}, role {role!r}): {type(response).__name__}"
    used = reply_usage(response)
    if isinstance(used, str):
        return used
    content = getattr(response, "content", None)
    if not isinstance(content, list):
        return f"its content is {type(content).__name__}, not a list of blocks"
    for index, block in enumerate(content):
        problem = _block_problem(block)
        if problem is not None:
            return f"content block {index} is {problem}"
    stop_reason = getattr(response, "stop_reason", None)
    if stop_reason not in STOP_REASONS:
        return f"its stop_reason {stop_reason!r} is not one the Messages API defines"
    return None


def reply_record(response: object) -> dict[str, Any]:
    """The reply as the transcript keeps it, readable or not."""
    if hasattr(response, "model_dump"):
        dumped: dict[str, Any] = response.model_dump(mode="json", exclude_none=False, warnings=False)
        return dumped
    return {"unreadable": str(response)[:4000]}


Clients = weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, anthropic.AsyncAnthropic]


def loop_client(clients: Clients, api_key: str, base_url: str | None, max_retries: int,
                middleware: list[anthropic.MiddlewareInput]) -> anthropic.AsyncAnthropic:
    """The running event loop's client, made on first use (an HTTP client belongs to the loop it was made in).
    SpendLimitMiddleware last = innermost: a spend limit raises before the rate limiter (runner.execute.executor adds
    it to the host's middleware) pauses for it and before the SDK retries it."""
    loop = asyncio.get_running_loop()
    client = clients.get(loop)
    if client is None:
        client = anthropic.AsyncAnthropic(api_key=api_key, base_url=base_url, max_retries=max_retries,
                                          middleware=[*middleware, SpendLimitMiddleware(),
                                                      billing.BillingMiddleware()])
        clients[loop] = client
    return client


class ApiHost:
    name = HOST_NAME
    session_path: SessionPath | None = None  # no session folder: the session's tools read the library in-process
    session_wall: SessionWall | None = None  # no process: nothing of the session runs outside the runner

    def __init__(self, library: Library, files: LibraryFiles, prices: PriceTable, api_key: str,
                 base_url: str | None, listing_budget_chars: int | None, max_description_chars: int = 1536,
                 max_retries: int = 2, prompt_caching: bool = True):
        self.library = library
        self.files = files
        # Other names Claude Code accepts in a Skill call (a frontmatter `name` that differs from the folder).
        self.aliases = library.aliases()
        # Every name a slash command may use for a skill -> its folder name (as the CLI resolves it, measured).
        self.slash_names = {**{name: name for name in library.skills}, **self.aliases}
        self.prices = prices
        self._api_key = api_key
        self.base_url = base_url
        self.listing_budget_chars = listing_budget_chars
        self.max_description_chars = max_description_chars
        self.max_retries = max_retries
        self.prompt_caching = prompt_caching
        # anthropic SDK client middleware (runner.execute.executor adds the run's rate limiter before the first call).
        self.middleware: list[anthropic.MiddlewareInput] = []
        # One client per event loop: a client is bound to the loop its connections were made in.
        self._clients: Clients = \
            weakref.WeakKeyDictionary()
        self._systems: dict[tuple[str, ...], tuple[SystemParam, list[str], list[str]]] = {}
        self._views: dict[frozenset[str], LibraryView] = {}

    def __repr__(self) -> str:  # never show the key
        return f"ApiHost(base_url={self.base_url!r}, listing_budget_chars={self.listing_budget_chars!r})"

    def versions(self) -> dict[str, str]:
        return {"anthropic": anthropic.__version__, "host": HOST_VERSION}

    # ---- the listing ---------------------------------------------------------------------------

    def _listed(self, skill: Skill, exclude: list[str]) -> bool:
        return (not skill.manual_only and skill.name not in exclude
                and skill.name in self.files.skills and (self.files.skills[skill.name] / "SKILL.md").is_file())

    def build_listing(self, exclude: list[str]) -> tuple[str, list[str], list[str]]:
        """(listing text, names with a description, names alone). Excluded skills are absent."""
        budget = self.listing_budget_chars or HOST_DEFAULT_LISTING_BUDGET
        listed = [s for s in self.library.skills.values() if self._listed(s, exclude)]
        fitted = listing.fit(listed, budget, self.max_description_chars)
        return "\n".join([LISTING_HEADER, *fitted.lines]), fitted.with_description, fitted.name_only

    def _system(self, listing_text: str) -> str:
        return BASE_PROMPT + "\n\n" + listing_text

    def system_param(self, exclude: list[str]) -> tuple[SystemParam, list[str], list[str]]:
        """The request's `system` (marked for caching when it can be cached), names with a description,
        names alone. Built once per exclusion set: every session of a run sends the same prefix."""
        key = tuple(sorted(exclude))
        if key not in self._systems:
            text, with_description, name_only = self.build_listing(exclude)
            prompt = self._system(text)
            system: SystemParam = prompt
            if self.prompt_caching and (len(prompt) + TOOLS_CHARS) // CHARS_PER_TOKEN >= CACHE_MIN_TOKENS:
                system = [{"type": "text", "text": prompt, "cache_control": EPHEMERAL}]
            self._systems[key] = (system, with_description, name_only)
        return self._systems[key]

    def view(self, exclude: list[str]) -> LibraryView:
        """The read-only project every session with this exclusion set sees: one per set, since what it
        blocks (every answer key, the excluded skills) is resolved once, not per session."""
        key = frozenset(exclude)
        if key not in self._views:
            self._views[key] = LibraryView(self.files, key)
        return self._views[key]

    def client(self) -> anthropic.AsyncAnthropic:
        """This event loop's client (per-request timeouts are passed with each call)."""
        return loop_client(self._clients, self._api_key, self.base_url, self.max_retries, self.middleware)

    async def aclose(self) -> None:
        """Close this event loop's client (call it before the loop ends)."""
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.close()

    async def surface(self, model: str, library_names: set[str], invocable: set[str]) -> Surface:
        """The listing and tools this host sends, built as a session builds them (the library's own names are
        the host's already; the model does not change the request)."""
        text, with_description, name_only = self.build_listing([])
        system = self._system(text)
        own_invocable = sorted(s.name for s in self.library.skills.values() if not s.manual_only)
        listed = set(with_description) | set(name_only)
        marked, _, _ = self.system_param([])
        cached = 0 if isinstance(marked, str) else len(json.dumps(marked)) + len(json.dumps(TOOLS))
        return Surface(host=HOST_NAME, listing_budget_chars=self.listing_budget_chars,
                       with_description=with_description, name_only=name_only,
                       missing=[name for name in own_invocable if name not in listed], listing_chars=len(text),
                       request_chars=len(system) + len(json.dumps(TOOLS)), tools=[t["name"] for t in TOOLS],
                       cached_prefix_chars=cached, cache_layout="prefix" if cached else "none")

    # ---- one session ---------------------------------------------------------------------------

    async def run(self, spec: SessionSpec) -> Observation:
        started = time.monotonic()
        system, with_description, name_only = self.system_param(spec.exclude_skills)
        view = self.view(spec.exclude_skills)
        session = _Session(self, spec, system, set(with_description) | set(name_only), view)
        obs = Observation(attempt_id=spec.attempt_id, host=HOST_NAME,
                          listing=ListingSeen(with_description=with_description, name_only=name_only))
        session.expand_command()
        with billing.metering(session.tally):
            try:
                async with asyncio.timeout(spec.timeout_s):
                    await session.loop(self.client())
            except TimeoutError:
                session.tally.abandon()  # the request the wall clock cut short was billed all the same
                session.fail(SessionError("timeout", f"the session outlived its {spec.timeout_s:g} s wall-clock "
                                                      "bound", "timeout"))
        session.fill(obs)
        obs.duration_s = time.monotonic() - started
        return _scrub(utf8_safe(obs), self._api_key)


class _Session:
    """The state of one session's conversation."""

    def __init__(self, host: ApiHost, spec: SessionSpec, system: SystemParam, listed: set[str],
                 view: LibraryView):
        self.host = host
        self.spec = spec
        self.system = system
        self.system_chars = len(system) if isinstance(system, str) else sum(len(b["text"]) for b in system)
        self.listed = listed
        self.view = view
        self.messages: list[dict[str, Any]] = [{"role": "user", "content": spec.prompt}]
        shown = system if isinstance(system, str) else "".join(block["text"] for block in system)
        self.transcript: list[dict[str, Any]] = [{"role": "system", "content": shown},
                                                 {"role": "user", "content": spec.prompt}]
        self.activations: list[Activation] = []
        self.tool_calls: list[ToolCall] = []
        self.usage = Usage()
        self.turns = 0
        self.final_answer: str | None = None
        self.bounds: list[Bound] = []
        self.error: SessionError | None = None
        self.last_input_tokens = 0
        self.chars_at_last_call = 0
        self.first_turn_input: int | None = None
        # The attempt's tally when the executor opened one (its requests, lost replies included); from here on
        # this session's figures are what it adds (runner.hosts.billing).
        self.tally = billing.current() or billing.Tally()
        self.start = self.tally.mark()

    def fail(self, error: SessionError) -> None:
        self.error = error
        if error.bound and error.bound not in self.bounds:
            self.bounds.append(error.bound)

    def cost(self) -> float | None:
        return self.host.prices.cost(self.spec.model, self.usage)

    def request_chars(self) -> int:
        return self.system_chars + TOOLS_CHARS + len(json.dumps(self.messages))

    def input_estimate(self, chars: int) -> int:
        """The next request's input tokens: its characters / 4, or the last reply's input plus what was added since,
        whichever is more."""
        input_tokens = chars // CHARS_PER_TOKEN + 1
        if self.turns:
            input_tokens = max(input_tokens,
                               self.last_input_tokens + (chars - self.chars_at_last_call) // CHARS_PER_TOKEN + 1)
        return input_tokens

    def request_bound(self, chars: int) -> float:
        """What one HTTP attempt of the next request could cost (billing.input_bound_usd)."""
        return billing.input_bound_usd(self.host.prices, self.spec.model, self.input_estimate(chars),
                                       self.spec.max_output_tokens)

    def over_budget(self) -> bool:
        """Would the spent cost plus the worst case of one more call pass spec.max_usd?"""
        if self.spec.max_usd is None:
            return False
        chars = self.request_chars()
        input_tokens = self.input_estimate(chars)
        spent = self.cost()
        worst = self.host.prices.cost(self.spec.model, Usage(input_tokens=input_tokens,
                                                             output_tokens=self.spec.max_output_tokens))
        if spent is None or worst is None:
            return False  # price unknown: the budget cannot be enforced here (the plan says so)
        return spent + worst > self.spec.max_usd + 1e-12

    async def loop(self, client: anthropic.AsyncAnthropic) -> None:
        if self.final_answer is not None:
            return  # answered before the first turn, as the CLI answers it (expand_command)
        deadline = time.monotonic() + self.spec.timeout_s
        while True:
            if self.turns >= self.spec.max_turns:
                self.bounds.append("max-turns")
                return
            if self.over_budget():
                self.bounds.append("max-budget")
                return
            chars = self.request_chars()  # the budget check's and a lost reply's bound
            self.tally.open_request(self.request_bound(chars))
            try:
                response = await client.messages.create(
                    model=self.spec.model, max_tokens=self.spec.max_output_tokens, system=self.system,
                    tools=TOOLS, messages=self.messages,  # type: ignore[arg-type]
                    timeout=max(0.05, deadline - time.monotonic()))
            except Exception as exc:  # noqa: BLE001 - classified below; anything else is a runner bug
                error = classify_error(exc)
                # An HTTP error status is not billed; a connection lost, a timeout or an unreadable body may be.
                self.tally.close_request(None, billed=not isinstance(exc, (anthropic.APIStatusError,
                                                                           SpendLimitReached)) and error is not None)
                if error is None:
                    raise
                self.fail(error)
                return
            problem = self.take_reply(response, chars)
            if problem is not None:
                self.fail(SessionError("malformed", f"the API's reply could not be read: {problem}"))
                return
            turn = self.turns
            self.turns += 1
            content = [block.model_dump(mode="json", exclude_none=True) for block in response.content]
            self.messages.append({"role": "assistant", "content": content})
            tool_uses = [block for block in response.content if block.type == "tool_use"]
            if response.stop_reason != "tool_use" or not tool_uses:
                self.final_answer = "".join(block.text for block in response.content if block.type == "text")
                return
            results = [self.answer(block.id, block.name, block.input, turn) for block in tool_uses]
            user = {"role": "user", "content": results}
            self.messages.append(user)
            self.transcript.append(user)

    def take_reply(self, response: object, chars: int) -> str | None:
        """Count the reply's usage (whatever else is wrong with it, what it cost is spent) and keep it in the
        transcript; why the rest cannot be read, or None."""
        used = reply_usage(response)
        # A reply whose usage cannot be read was billed all the same: its bound (billing).
        self.tally.close_request((self.host.prices.cost(self.spec.model, used) or 0.0) if isinstance(used, Usage)
                                 else None)
        if isinstance(used, Usage):
            self.usage = self.usage.add(used)
            if self.first_turn_input is None:
                self.first_turn_input = used.input_tokens + used.cache_creation_input_tokens + used.cache_read_input_tokens
            self.last_input_tokens = used.input_tokens + used.cache_creation_input_tokens + used.cache_read_input_tokens
            self.chars_at_last_call = chars
        self.transcript.append(reply_record(response))
        return reply_problem(response)

    # ---- tools ---------------------------------------------------------------------------------

    def answer(self, tool_use_id: str, name: str, tool_input: Any, turn: int) -> dict[str, Any]:
        tool_input = tool_input if isinstance(tool_input, dict) else {}
        if name == ACTIVATION.skill_tool:
            content, is_error = self.skill(tool_input)
        elif name == ACTIVATION.read_tool:
            content, is_error = self.read(tool_input)
        else:
            content, is_error = f"No such tool available: {name}", True
        shown = json.dumps(tool_input, ensure_ascii=False)[:TOOL_INPUT_CHARS]
        self.tool_calls.append(ToolCall(name=name, input=shown, turn=turn, is_error=is_error))
        activation = recognise(name, tool_input, tool_use_id, turn, is_error=is_error, aliases=self.host.aliases,
                               names=ACTIVATION)
        if activation is not None:
            self.activations.append(activation)
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id, "content": content}
        if is_error:
            result["is_error"] = True
        return result

    def expand_command(self) -> None:
        """A prompt that is a slash command naming a skill (runner.corpus.slash: the name up to the first whitespace,
        the rest the arguments): the skill is loaded before the first turn, in the blocks Claude Code sends for it
        (measured on CLI 2.1.332). A skill that is not user-invocable is refused with the CLI's own answer
        and no request; any other `/word` is sent to the model as written."""
        command = slash.parse(self.spec.prompt)
        name = slash.invoked_skill(self.spec.prompt, self.host.slash_names)
        if command is None or name is None or name in self.spec.exclude_skills:
            return
        body = self.skill_body(name, command.args)
        if body is None:
            return
        if self.host.library.skills[name].fields.get("user-invocable") is False:
            self.final_answer = NOT_USER_INVOCABLE.format(name=name)
            return
        text = f"<command-message>{name}</command-message>\n<command-name>/{name}</command-name>\n"
        if command.args:
            text += f"<command-args>{command.args}</command-args>\n"
        content = [{"type": "text", "text": text}, {"type": "text", "text": body}]
        self.messages[0] = {"role": "user", "content": content}
        self.transcript[1] = {"role": "user", "content": content}
        # Recognised from the tag as the claude-code and replay hosts recognise it (a name the tag cannot carry,
        # with `<`, is still the command this host expanded).
        self.activations.append(slash_command(text) or Activation(name=name, mechanism="slash-command", turn=0))

    def skill_body(self, name: str, args: str | None = None) -> str | None:
        """`Base directory ...` and the SKILL.md body the session sees, or None when there is none. `args`: a slash
        command's arguments, put in as Claude Code puts them (with_arguments); None for a Skill tool call."""
        skill_md = self.view.file((*SKILLS_PREFIX, name, "SKILL.md"))
        if skill_md is None:
            return None
        text = skill_md.read_text(encoding="utf-8", errors="replace")
        parts = frontmatter.split(text, name)
        body = parts[2] if isinstance(parts, tuple) else text
        # Inline shell as Claude Code shows it in eval sessions (runner.hosts.wall): never run, a placeholder.
        body = without_shell(body) if args is None else with_arguments(without_shell(body), args)
        return f"Base directory for this skill: {'/'.join((*SKILLS_PREFIX, name))}\n\n{body}"

    def skill(self, tool_input: dict[str, Any]) -> tuple[Any, bool]:
        # Which skill the call loads is this host's answer, as the CLI's is: like CLI 2.1.332 it trims the name and
        # drops a leading `/`, and refuses `plugin:name` for a project skill (measured: "Unknown skill:
        # plugin:migration-planner"). The activation is recorded by `answer` (runner.hosts.activation).
        raw = tool_input.get("skill")
        name = raw.strip().removeprefix("/") if isinstance(raw, str) else ""
        name = self.host.aliases.get(name, name)
        skill_md = self.view.file((*SKILLS_PREFIX, name, "SKILL.md")) if name else None
        if name not in self.listed or skill_md is None:
            return f"Unknown skill: {name or raw}", True
        return [{"type": "text", "text": f"Launching skill: {name}"},
                {"type": "text", "text": self.skill_body(name) or ""}], False

    def read(self, tool_input: dict[str, Any]) -> tuple[str, bool]:
        raw = tool_input.get("file_path")
        if not isinstance(raw, str) or not raw.strip():
            return "Error: file_path must be a non-empty string", True
        try:
            return self._read(raw)
        except (OSError, ValueError) as exc:  # a path the OS refuses (too long, NUL byte, ...)
            return f"Error: {raw} cannot be read: {type(exc).__name__}", True

    def _read(self, raw: str) -> tuple[str, bool]:
        relative = self.view.parts(raw.strip())  # an absolute file_path replaces the project part
        if relative is None:
            return f"Error: {raw} is outside the project folder; only files of the project can be read", True
        path = self.view.file(relative)
        if path is None:
            return f"Error: file does not exist: {raw}", True
        size = path.stat().st_size
        if size > READ_MAX_BYTES:
            return f"Error: {raw} is {size:,} bytes, over the {READ_MAX_BYTES:,}-byte read limit", True
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            return f"Error: {raw} is not a UTF-8 text file", True
        return text, False

    def fill(self, obs: Observation) -> None:
        obs.activations = self.activations
        obs.tool_calls = self.tool_calls
        obs.turns = self.turns
        obs.usage = self.usage
        fill_cost(obs, self.tally.since(self.start), self.spec.max_usd)
        obs.host_cost_usd = None
        obs.bounds_hit = self.bounds
        obs.transcript = self.transcript
        obs.prefix_hash = prefix_hash(self.spec.model, self.system)
        obs.first_turn_input_tokens = self.first_turn_input
        obs.model_calls = self.turns
        if self.error is not None:
            obs.error_kind = self.error.kind
            obs.error_message = self.error.message
            obs.final_answer = None
        else:
            obs.final_answer = self.final_answer


def with_arguments(body: str, args: str) -> str:
    """A skill body with a slash command's arguments put in as CLI 2.1.332 puts them (measured): `$ARGUMENTS[n]` and
    `$n` become the n-th argument (split as a shell splits words) where there is one and stay as written where there is
    none, `$ARGUMENTS` becomes all of them; a body with no such placeholder gets `ARGUMENTS: <args>` appended when
    there are arguments. Not copied: the CLI escapes a leading `!` and splits words with backticks its own way
    (measured: `!x y` is put in as `\\!x y`, `` `x y` z `` gives `$0` = `x`); here they are put in as written."""
    try:
        words = shlex.split(args)
    except ValueError:  # an unbalanced quote: the CLI takes the whole text as one word (measured: `it's fine`)
        words = [args]
    placeholder = PLACEHOLDER.search(body) is not None

    def word(match: re.Match[str]) -> str:
        index = int(match.group(1) or match.group(2))
        return words[index] if index < len(words) else match.group(0)
    body = INDEXED_ARGUMENT.sub(word, body)
    body = ALL_ARGUMENTS.sub(lambda _: args, body)
    return body if placeholder or not args else f"{body}\n\nARGUMENTS: {args}"


def fill_cost(obs: Observation, spent: billing.Mark, max_usd: float | None) -> None:
    """The observation's cost: what the session's requests reported, plus the bounds of its lost replies, capped
    at the session's budget (its reservation) unless reported usage alone is more (billing.charge)."""
    obs.cost_usd, obs.bound_usd, obs.cost_basis = billing.charge(spent.reported_usd + spent.bound_usd,
                                                                 spent.bound_usd, max_usd)
    obs.lost_replies = spent.lost


def prefix_hash(model: str, system: SystemParam) -> str:
    """16 hex characters over what every request of a session sends before its messages (model, tools, system):
    sessions with one hash can read one cached prefix. Built once per exclusion set (`system_param`), so every
    session of a run without excluded skills has the same."""
    payload = json.dumps([model, TOOLS, system], sort_keys=True)
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _scrub(obs: Observation, secret: str) -> Observation:
    """The observation with every occurrence of the API key replaced (defence in depth)."""
    if len(secret) < 8:
        return obs
    dumped = obs.model_dump_json()
    if secret not in dumped:
        return obs
    return Observation.model_validate_json(dumped.replace(json.dumps(secret)[1:-1], "[redacted]"))


def make(inputs: HostInputs) -> ApiHost:
    from runner.hosts.workspace import LibraryFiles

    settings = inputs.settings
    files = LibraryFiles.of(inputs.library, settings.limits.max_file_bytes)
    return ApiHost(inputs.library, files, inputs.prices, inputs.api_key, inputs.base_url,
                   settings.listing.budget_chars, settings.listing.max_description_chars,
                   max_retries=settings.run.host_max_retries)
