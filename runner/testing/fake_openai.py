"""A scripted, offline fake of the OpenAI Responses API for tests (stdlib only): what Codex CLI speaks.

What the real Codex CLI sent (``@openai/codex`` 0.171.0, measured 2026-12-07 with ``codex exec --json
--ephemeral --skip-git-repo-check -c model_provider=fake -c model_providers.fake.base_url=<fake>/v1
-c model_providers.fake.env_key=FAKE_KEY -c model_providers.fake.wire_api="responses" ... PROMPT </dev/null``;
captures in the issue-36 notes). Codex speaks only this API (``wire_api = "chat"`` is refused at start).
- Paths: only ``POST /v1/responses`` (base_url + ``/responses``), one request per model turn; a ``shell`` call and
  the final answer = 2 requests. No /v1/models probe with a custom provider.
- Headers of note: ``authorization: Bearer <key>``, ``accept: text/event-stream``, ``originator: codex_exec``,
  ``user-agent: codex_exec/0.171.0 (...)``, ``session-id``, ``thread-id``, ``x-client-request-id``,
  ``x-codex-window-id``, ``x-codex-turn-metadata`` (JSON), ``accept-encoding: zstd,gzip``, ``content-length``.
- Body keys: ``model, stream (true), input, tools, tool_choice ("auto"), parallel_tool_calls (true), reasoning
  ({"summary": "auto"}), store (false), include (["reasoning.encrypted_content"]), prompt_cache_key,
  client_metadata``. No ``instructions``: the Codex prompt is ``input[0]``, a ``developer`` message.
- ``input``: developer (the Codex prompt), developer (``<skills_instructions>``: the skill listing, and
  ``<permissions instructions>``), user (``<environment_context>``: cwd, shell, date), user (the prompt); a later
  turn appends the model's items (``function_call`` with ``call_id``, assistant ``message``, ``reasoning``) and
  the tool results (``function_call_output``).
- ``tools``: function ``exec_command`` (``{"cmd": ...}``: how Codex runs a shell command, and so how it reads a
  SKILL.md), ``write_stdin``, ``request_user_input``, ``view_image``, goals, ``web_search``. No skill tool.
- What Codex consumes of the stream (its SSE reader, codex-rs ``codex-api/src/sse/responses.rs``):
  ``response.created``, ``response.output_item.added`` / ``.done`` (the items), ``response.output_text.delta``,
  reasoning deltas, ``response.failed`` (``response.error`` {code, message}: context_length_exceeded,
  insufficient_quota, ... else retryable) and ``response.completed`` (``response.id`` and ``usage`` {input_tokens,
  input_tokens_details.cached_tokens, output_tokens, output_tokens_details.reasoning_tokens, total_tokens}). A
  stream that ends without ``response.completed`` is an error ("stream closed before response.completed").
  The fake sends the API's whole sequence (also ``response.in_progress``, ``content_part.*``,
  ``output_text.done``, ``function_call_arguments.*``) with ``sequence_number``, as the API reference lists it.

Usage::

    from runner.testing.fake_openai import FakeOpenAI, text, function_call, read_skill, error, break_stream, hang

    with FakeOpenAI() as fake:
        fake.script("summarise the report", read_skill("report-summary"), text("final answer"))
        fake.script("flaky", error(500, times=1), text("ok"))
        ... codex exec -c model_providers.fake.base_url="{fake.url}/v1" ...
        assert fake.requests_for("summarise the report")[0].body["stream"] is True

Semantics
- A script is chosen by ``match`` being a substring of :func:`first_user_text`: the text of the ``user``
  messages at the start of ``input``, before the first model item (the prompt, and a skill Codex injected for a
  ``$name`` mention; not Codex's ``<environment_context>``, whose session path would match many a script). First
  registered match wins; otherwise the default
  script (``default(...)``; initially one ``text("ok")`` turn) is played.
- Turn index = the number of model turns already in ``input`` (:func:`turn_index_for`): runs of consecutive
  model items (assistant ``message``, ``function_call``, ``reasoning``, ...); one response's items stay together
  and its tool results come after them. Past the end of a script the reply is ``text("done")``.
- Faults (``error``, ``break_stream``, ``hang``, ``failed``, ``stream_error``) take ``times`` as in the Anthropic
  fake: ``None`` = every request for that turn index gets the fault; ``times=n`` = the first n do, then the NEXT
  item of the script answers that same turn index. Counters are per script and turn index.
- ``error(status)``: the API's error JSON ``{"error": {"message", "type", "param": null, "code"}}`` with that
  status (type and code default per status: 429 ``rate_limit_exceeded``, 500 ``server_error``...).
  ``break_stream``: HTTP 200, ``response.created``, the first item begun and half its text, then the connection
  is dropped (chunked, no terminating chunk). ``failed``: HTTP 200, ``response.created``, then
  ``response.failed`` with ``response.error``. ``stream_error``: HTTP 200, ``response.created``, then an SSE
  ``error`` event (the API's mid-stream error). ``hang(seconds)``: answers ``text("late")`` after ``seconds``
  (a client with a shorter timeout gives up first; closing the fake wakes it).
- A request without ``"stream": true`` gets the response object as JSON (Codex always streams).
- Usage (deterministic, :func:`input_tokens_for` / :func:`output_tokens_for`): ``input_tokens = max(1,
  len(json.dumps(input) + json.dumps(instructions)) // 4)``, ``output_tokens = 10 + len(reply) // 4`` where the
  reply is the text of each message plus the ``arguments`` string of each function call; cached and reasoning
  tokens 0, ``total_tokens`` the sum. ``script(..., usage=Usage(...))`` fixes them.
- Ids are ``resp_fake_<n>``, ``msg_fake_<n>``, ``fc_fake_<n>``, ``call_fake_<n>`` with n zero-padded to six
  digits (a fixed width: token counts never depend on which session got which id). Headers ``x-request-id``
  (``req_fake_<n>``) and ``openai-processing-ms``.
- Any other path -> 404 with the error JSON. ``requests`` records every request (method, path, lower-cased
  headers, parsed body, the script and turn played, the outcome).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Union
from urllib.parse import urlsplit

from runner.testing.scripted import FakeHandler, ScriptedFake, TurnScript

__all__ = [
    "FakeOpenAI", "Recorded", "Usage", "Text", "FunctionCall", "Items", "Error", "BreakStream", "Hang", "Failed",
    "StreamError", "Turn", "text", "function_call", "shell", "read_skill", "items", "error", "break_stream", "hang",
    "failed", "stream_error", "first_user_text", "turn_index_for", "input_tokens_for", "output_tokens_for",
    "SHELL_TOOL", "MODEL_ITEM_TYPES", "ENVIRONMENT_CONTEXT",
]

# Codex 0.171.0's shell tool: {"cmd": "<command>"} (its `tools` list, captured).
SHELL_TOOL = "exec_command"
# Items the model produced (a later request carries them back in `input`); everything else is the client's.
MODEL_ITEM_TYPES = frozenset({"function_call", "reasoning", "custom_tool_call", "local_shell_call",
                              "web_search_call", "tool_search_call", "image_generation_call", "compaction"})


# --------------------------------------------------------------------------------------------
# Turns
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class FunctionCall:
    name: str
    arguments: str  # the JSON text the model wrote, as the API sends it


@dataclass(frozen=True)
class Items:
    parts: tuple[Union[Text, FunctionCall], ...]


@dataclass(frozen=True)
class Error:
    status: int
    err_type: str
    code: str | None
    message: str
    retry_after: float | int | None = None
    times: int | None = None


@dataclass(frozen=True)
class BreakStream:
    times: int | None = None


@dataclass(frozen=True)
class Hang:
    seconds: float
    times: int | None = None


@dataclass(frozen=True)
class Failed:
    code: str
    message: str
    times: int | None = None


@dataclass(frozen=True)
class StreamError:
    code: str
    message: str
    times: int | None = None


Turn = Union[Text, FunctionCall, Items, Error, BreakStream, Hang, Failed, StreamError]
_FAULTS = (Error, BreakStream, Hang, Failed, StreamError)
_ANSWERS = (Text, FunctionCall, Items)


def text(s: str) -> Text:
    """One assistant message with one ``output_text`` part."""
    return Text(s)


def function_call(name: str, arguments: dict[str, Any] | str) -> FunctionCall:
    """One ``function_call`` item; ``arguments`` is sent as JSON text (a str is sent as given)."""
    return FunctionCall(name, arguments if isinstance(arguments, str) else json.dumps(arguments))


def shell(cmd: str) -> FunctionCall:
    """Codex's shell tool: ``exec_command {"cmd": cmd}``."""
    return function_call(SHELL_TOOL, {"cmd": cmd})


def read_skill(name: str, folder: str = ".agents/skills", reader: str = "cat") -> FunctionCall:
    """What Codex does to load a skill: a shell command that reads ``<folder>/<name>/SKILL.md`` (relative to the
    session's cwd unless ``folder`` is absolute)."""
    return shell(f"{reader} {folder}/{name}/SKILL.md")


def items(*parts: Text | FunctionCall | str) -> Items:
    """Several output items in one response (plain strings become messages)."""
    return Items(tuple(Text(p) if isinstance(p, str) else p for p in parts))


# The API's error types and codes by status (platform.openai.com/docs/guides/error-codes).
_ERROR_OF = {400: ("invalid_request_error", None), 401: ("invalid_request_error", "invalid_api_key"),
             403: ("invalid_request_error", "unsupported_country_region_territory"),
             404: ("invalid_request_error", "model_not_found"), 429: ("requests", "rate_limit_exceeded"),
             500: ("server_error", None), 503: ("service_unavailable", None)}
_MESSAGE_OF = {400: "Invalid request (fake).", 401: "Incorrect API key provided (fake).",
               403: "Country, region, or territory not supported (fake).", 404: "The model does not exist (fake).",
               429: "Rate limit reached (fake). Please try again in 20ms.",
               500: "The server had an error while processing your request (fake).",
               503: "The engine is currently overloaded, please try again later (fake)."}


def error(status: int, code: str | None = "...", message: str = "...", err_type: str = "...",
          retry_after: float | int | None = None, times: int | None = None) -> Error:
    """An HTTP error with the API's body ``{"error": {"message", "type", "param": null, "code"}}``; type, code and
    message default per status."""
    default_type, default_code = _ERROR_OF.get(status, ("server_error" if status >= 500 else "invalid_request_error",
                                                        None))
    return Error(status, default_type if err_type == "..." else err_type, default_code if code == "..." else code,
                 _MESSAGE_OF.get(status, f"fake error {status}") if message == "..." else message, retry_after, times)


def break_stream(times: int | None = None) -> BreakStream:
    """HTTP 200, ``response.created``, an item begun with half its text, then the connection is dropped."""
    return BreakStream(times)


def hang(seconds: float, times: int | None = None) -> Hang:
    """Sleep ``seconds`` before answering (the client should time out first), then answer "late"."""
    return Hang(seconds, times)


def failed(code: str = "server_error", message: str = "The model failed to generate a response (fake).",
           times: int | None = None) -> Failed:
    """HTTP 200, ``response.created``, then ``response.failed`` whose ``response.error`` is {code, message}."""
    return Failed(code, message, times)


def stream_error(code: str = "server_error", message: str = "An error occurred mid-stream (fake).",
                 times: int | None = None) -> StreamError:
    """HTTP 200, ``response.created``, then an SSE ``error`` event {type: error, code, message, param}."""
    return StreamError(code, message, times)


@dataclass(frozen=True)
class Usage:
    input_tokens: int
    output_tokens: int
    cached_tokens: int = 0
    reasoning_tokens: int = 0

    def wire(self) -> dict[str, Any]:
        return {"input_tokens": self.input_tokens, "input_tokens_details": {"cached_tokens": self.cached_tokens},
                "output_tokens": self.output_tokens,
                "output_tokens_details": {"reasoning_tokens": self.reasoning_tokens},
                "total_tokens": self.input_tokens + self.output_tokens}


@dataclass
class Recorded:
    method: str
    path: str                       # without the query string
    headers: dict[str, str]         # header names lower-cased
    body: Any                       # parsed JSON, or None
    time: float                     # time.time() when received
    query: str = ""
    script: str | None = None       # the matched script's `match` (None: default script / not a responses call)
    turn: int | None = None         # turn index played
    outcome: str = ""               # "text", "function_call", "error 500", "break_stream", "hang", "failed", ...


# --------------------------------------------------------------------------------------------
# Helpers (public so tests can compute expected figures)
# --------------------------------------------------------------------------------------------

def _is_model_item(item: Any) -> bool:
    if not isinstance(item, dict):
        return False
    kind = item.get("type", "message")
    return kind in MODEL_ITEM_TYPES or (kind == "message" and item.get("role") == "assistant")


def _message_text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))


# Codex's own user message before the prompt (cwd, shell, date): its session path would match many a script.
ENVIRONMENT_CONTEXT = "<environment_context>"


def first_user_text(body: Any) -> str:
    """The text of the ``user`` messages at the start of ``input``, before its first model item, without Codex's
    ``<environment_context>`` message ('' if none)."""
    if not isinstance(body, dict):
        return ""
    given = body.get("input")
    if isinstance(given, str):
        return given
    parts: list[str] = []
    for item in given if isinstance(given, list) else []:
        if _is_model_item(item):
            break
        text_ = _message_text(item) if isinstance(item, dict) and item.get("role") == "user" else ""
        if text_ and not text_.startswith(ENVIRONMENT_CONTEXT):
            parts.append(text_)
    return "\n".join(parts)


def turn_index_for(body: Any) -> int:
    """How many model turns ``input`` already holds: runs of consecutive model items."""
    given = body.get("input") if isinstance(body, dict) else None
    runs, inside = 0, False
    for item in given if isinstance(given, list) else []:
        model = _is_model_item(item)
        runs += model and not inside
        inside = model
    return runs


def input_tokens_for(body: Any) -> int:
    body = body if isinstance(body, dict) else {}
    return max(1, len(json.dumps(body.get("input", [])) + json.dumps(body.get("instructions") or "")) // 4)


def _parts(turn: Text | FunctionCall | Items) -> tuple[Text | FunctionCall, ...]:
    return turn.parts if isinstance(turn, Items) else (turn,)


def output_tokens_for(turn: Text | FunctionCall | Items) -> int:
    reply = "".join(p.text if isinstance(p, Text) else p.arguments for p in _parts(turn))
    return 10 + len(reply) // 4


def _chunks(s: str, size: int) -> list[str]:
    return [s[i:i + size] for i in range(0, len(s), size)] or [""]


# --------------------------------------------------------------------------------------------
# Scripts
# --------------------------------------------------------------------------------------------

class _Script(TurnScript[Turn]):
    def __init__(self, match: str | None, turns: tuple[Turn, ...], usage: Usage | None):
        super().__init__(match, turns, usage, _ANSWERS, _FAULTS, Text("done"))


def _outcome(turn: Turn) -> str:
    if isinstance(turn, Error):
        return f"error {turn.status}"
    if isinstance(turn, BreakStream):
        return "break_stream"
    if isinstance(turn, Hang):
        return "hang"
    if isinstance(turn, Failed):
        return "failed"
    if isinstance(turn, StreamError):
        return "stream_error"
    return "function_call" if any(isinstance(p, FunctionCall) for p in _parts(turn)) else "text"


# --------------------------------------------------------------------------------------------
# Server
# --------------------------------------------------------------------------------------------

class _Handler(FakeHandler):
    def send_bytes(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_whole(status, body, headers)

    def start_stream(self, headers: dict[str, str]) -> None:
        self.send_response(200)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")  # so that a cut stream is a detectable protocol error
        self.end_headers()
        self.wfile.flush()

    def event(self, data: dict[str, Any]) -> None:
        self.chunk(f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode())

    def end_stream(self) -> None:
        self.end_chunked()


class _Stream:
    """One SSE response: numbers the events as the API does (``sequence_number`` from 0)."""

    def __init__(self, h: _Handler):
        self.h = h
        self.n = 0

    def send(self, kind: str, **fields: Any) -> None:
        self.h.event({"type": kind, **fields, "sequence_number": self.n})
        self.n += 1


class FakeOpenAI(ScriptedFake[Turn, Recorded]):
    """``with FakeOpenAI() as fake:`` serves the Responses API on ``fake.url`` until the block ends."""

    handler = _Handler
    thread_name = "fake-openai"

    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        super().__init__(host, port)
        self._ids = {"resp": 0, "msg": 0, "fc": 0, "call": 0, "req": 0}

    # -- what was asked -------------------------------------------------------------------------
    @property
    def response_requests(self) -> list[Recorded]:
        """Recorded ``POST /v1/responses`` calls."""
        with self._lock:
            return [r for r in self.requests if r.turn is not None]

    # -- internals ----------------------------------------------------------------------------
    def _next_id(self, kind: str) -> str:
        with self._lock:
            self._ids[kind] += 1
            return f"{kind}_fake_{self._ids[kind]:06d}"

    def _handle_inner(self, h: _Handler) -> None:
        parts = urlsplit(h.path)
        raw = h.read_body()
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        record = Recorded(h.command, parts.path, {k.lower(): v for k, v in h.headers.items()}, body, time.time(),
                          query=parts.query)
        headers = {"x-request-id": self._next_id("req"), "openai-processing-ms": "1"}
        route = parts.path.rstrip("/")
        if h.command == "POST" and route in ("/v1/responses", "/responses") and isinstance(body, dict):
            with self._lock:
                user = first_user_text(body)
                script = next((s for s in self._scripts if s.match is not None and s.match in user), self._default)
                turn_index = turn_index_for(body)
                turn = script.pick(turn_index)
                record.script, record.turn, record.outcome = script.match, turn_index, _outcome(turn)
                self.requests.append(record)
            return self._answer(h, body, turn, script.usage, headers)
        with self._lock:
            self.requests.append(record)
        json_headers = {**headers, "Content-Type": "application/json"}
        if h.command == "POST" and route in ("/v1/responses", "/responses"):
            record.outcome = "error 400"
            return h.send_bytes(400, _error_body("invalid_request_error", None, "The body is not a JSON object."),
                                json_headers)
        record.outcome = "error 404"
        return h.send_bytes(404, _error_body("invalid_request_error", None, f"fake: no route for {h.command} "
                                                                            f"{parts.path}"), json_headers)

    def _answer(self, h: _Handler, body: dict[str, Any], turn: Turn, usage: Usage | None,
                headers: dict[str, str]) -> None:
        stream = body.get("stream") is True
        if isinstance(turn, Error):
            extra = {**headers, "Content-Type": "application/json"}
            if turn.retry_after is not None:
                extra["retry-after"] = str(turn.retry_after)
            return h.send_bytes(turn.status, _error_body(turn.err_type, turn.code, turn.message), extra)
        if isinstance(turn, Hang):
            if self._stop.wait(turn.seconds):
                return h.cut()
            turn = Text("late")
        if isinstance(turn, (BreakStream, Failed, StreamError)):
            return self._answer_broken(h, body, turn, headers, stream)
        response = self._response(body, turn, usage)
        if not stream:
            return h.send_bytes(200, json.dumps(response).encode(), {**headers, "Content-Type": "application/json"})
        return self._stream(h, response, headers)

    def _answer_broken(self, h: _Handler, body: dict[str, Any], turn: BreakStream | Failed | StreamError,
                       headers: dict[str, str], stream: bool) -> None:
        """The replies that begin and then fail (a request without stream gets the matching failure as JSON)."""
        if not stream:
            if isinstance(turn, BreakStream):
                return h.cut()
            return h.send_bytes(500, _error_body("server_error", turn.code, turn.message),
                                {**headers, "Content-Type": "application/json"})
        begun = self._base(body)
        h.start_stream(headers)
        out = _Stream(h)
        out.send("response.created", response=begun)
        out.send("response.in_progress", response=begun)
        if isinstance(turn, BreakStream):
            item_id = self._next_id("msg")
            out.send("response.output_item.added", output_index=0,
                     item={"id": item_id, "type": "message", "status": "in_progress", "role": "assistant",
                           "content": []})
            out.send("response.output_text.delta", item_id=item_id, output_index=0, content_index=0,
                     delta="Partial ans", logprobs=[])
            return h.cut()
        if isinstance(turn, Failed):
            out.send("response.failed", response={**begun, "status": "failed",
                                                  "error": {"code": turn.code, "message": turn.message}})
        else:
            out.send("error", code=turn.code, message=turn.message, param=None)
        return h.end_stream()

    def _base(self, body: dict[str, Any]) -> dict[str, Any]:
        """A response object as ``response.created`` carries it: in progress, no output, no usage yet."""
        return {"id": self._next_id("resp"), "object": "response", "created_at": int(time.time()),
                "status": "in_progress", "error": None, "incomplete_details": None, "instructions": None,
                "model": body.get("model") or "gpt-fake", "output": [],
                "parallel_tool_calls": bool(body.get("parallel_tool_calls", True)), "previous_response_id": None,
                "store": bool(body.get("store", False)), "tool_choice": body.get("tool_choice", "auto"),
                "tools": [], "usage": None}

    def _response(self, body: dict[str, Any], turn: Text | FunctionCall | Items, usage: Usage | None
                  ) -> dict[str, Any]:
        output: list[dict[str, Any]] = []
        for p in _parts(turn):
            if isinstance(p, Text):
                output.append({"id": self._next_id("msg"), "type": "message", "status": "completed",
                               "role": "assistant",
                               "content": [{"type": "output_text", "text": p.text, "annotations": []}]})
            else:
                output.append({"id": self._next_id("fc"), "type": "function_call", "status": "completed",
                               "arguments": p.arguments, "call_id": self._next_id("call"), "name": p.name})
        used = usage or Usage(input_tokens_for(body), output_tokens_for(turn))
        return {**self._base(body), "status": "completed", "output": output, "usage": used.wire()}

    @staticmethod
    def _stream(h: _Handler, response: dict[str, Any], headers: dict[str, str]) -> None:
        """The API's event sequence for a completed response (the Responses streaming reference)."""
        h.start_stream(headers)
        out = _Stream(h)
        begun = {**response, "status": "in_progress", "output": [], "usage": None}
        out.send("response.created", response=begun)
        out.send("response.in_progress", response=begun)
        for index, item in enumerate(response["output"]):
            if item["type"] == "message":
                _stream_message(out, index, item)
            else:
                _stream_call(out, index, item)
        out.send("response.completed", response=response)
        h.end_stream()

    # -- what runner.testing.scripted.ScriptedFake asks of a fake ---------------------------------------------------
    def new_script(self, match: str | None, turns: tuple[Turn, ...], usage: Usage | None) -> _Script:
        return _Script(match, turns, usage)

    def new_text(self, text: str) -> Turn:
        return Text(text)

    def first_user_text(self, body: Any) -> str:
        return first_user_text(body)


def _stream_message(out: _Stream, index: int, item: dict[str, Any]) -> None:
    part = item["content"][0]
    out.send("response.output_item.added", output_index=index,
             item={**item, "status": "in_progress", "content": []})
    out.send("response.content_part.added", item_id=item["id"], output_index=index, content_index=0,
             part={**part, "text": ""})
    for piece in _chunks(part["text"], 16):
        out.send("response.output_text.delta", item_id=item["id"], output_index=index, content_index=0,
                 delta=piece, logprobs=[])
    out.send("response.output_text.done", item_id=item["id"], output_index=index, content_index=0,
             text=part["text"], logprobs=[])
    out.send("response.content_part.done", item_id=item["id"], output_index=index, content_index=0, part=part)
    out.send("response.output_item.done", output_index=index, item=item)


def _stream_call(out: _Stream, index: int, item: dict[str, Any]) -> None:
    out.send("response.output_item.added", output_index=index,
             item={**item, "status": "in_progress", "arguments": ""})
    for piece in _chunks(item["arguments"], 12):
        out.send("response.function_call_arguments.delta", item_id=item["id"], output_index=index, delta=piece)
    out.send("response.function_call_arguments.done", item_id=item["id"], output_index=index,
             arguments=item["arguments"])
    out.send("response.output_item.done", output_index=index, item=item)


def _error_body(err_type: str, code: str | None, message: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": err_type, "param": None, "code": code}}).encode()
