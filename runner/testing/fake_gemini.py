"""A scripted, offline fake of the Gemini API (generativelanguage v1beta) for tests (stdlib only).

What the real Gemini CLI sent (``@google/gemini-cli`` 0.61.0, measured 2026-12-07 with ``gemini -m gemini-2.5-flash
--output-format stream-json -p PROMPT``, env = PATH, fresh HOME, GOOGLE_GEMINI_BASE_URL, GEMINI_API_KEY, system
settings with ``security.auth.selectedType = "gemini-api-key"``, requests recorded by a logging server):
- Paths: ``POST /v1beta/models/<model>:streamGenerateContent?alt=sse``, one request per model turn. With model
  ``auto`` (no ``-m``) the CLI first asks a routing classifier, ``POST /v1beta/models/gemini-3.5-flash-lite:
  generateContent`` (not streamed) and expects JSON back: a host always passes ``-m``. ``:countTokens`` and
  ``GET /v1beta/models`` are answered too (the SDK has them); nothing else is routed.
- Headers of note: ``x-goog-api-key: <key>``, ``x-goog-api-client: google-genai-sdk/1.30.0 gl-node/v20.20.2``,
  ``User-Agent: GeminiCLI-tui/0.61.0/<model> (linux; x64; terminal)``, ``Content-Type: application/json``.
- Body keys: ``contents``, ``systemInstruction`` ({"role": "user", "parts": [{"text": ...}]}, which holds the skill
  listing ``<available_skills>``), ``tools`` ([{"functionDeclarations": [{name, description, parametersJsonSchema}]}],
  ``activate_skill`` among them when the policy allows it), ``generationConfig`` ({temperature, topP, topK,
  thinkingConfig}). ``contents[0]`` is the user turn: a ``<session_context>`` text part, then the prompt.
- After a function call the CLI sends ``contents`` = user, model [functionCall], user [functionResponse].
- What the CLI reads back: ``candidates[0].content.parts`` (``text`` or ``functionCall {name, args}``),
  ``finishReason``, ``usageMetadata`` {promptTokenCount, candidatesTokenCount, totalTokenCount} (its stream-json
  ``result.stats`` are these figures) and ``modelVersion`` (the key of ``stats.models``).

Usage::

    from runner.testing.fake_gemini import FakeGemini, text, function_call, skill, error, break_stream, hang

    with FakeGemini() as fake:
        fake.script("summarise the report", skill("report-summary"), text("final answer"))
        fake.script("flaky", error(503, times=1), text("ok"))
        env = {"GOOGLE_GEMINI_BASE_URL": fake.url, "GEMINI_API_KEY": "test-key", ...}
        ...
        assert fake.requests_for("summarise the report")[0].model == "gemini-2.5-flash"

Semantics (the same scripting as runner.testing.fake_anthropic)
- A script is chosen by ``match`` being a substring of the text of the FIRST ``user`` content of the request's
  ``contents`` (every ``text`` part concatenated, so the CLI's ``<session_context>`` part is searched too). First
  registered match wins; otherwise the default script (``default(...)``; initially one ``text("ok")`` turn).
- Turn index = number of ``model`` contents already in ``contents``. Past the end of a script the reply is
  ``text("done")``.
- Faults (``error``, ``break_stream``, ``hang``) take ``times``: ``None`` = every request for that turn index gets
  the fault; ``times=n`` = the first n requests for that turn index get it, after which the NEXT item answers that
  same turn index. Counters are per script and turn index.
- ``error(status)`` answers with the API's error JSON ``{"error": {"code", "message", "status"}}`` (status
  INTERNAL for 500, UNAVAILABLE for 503, RESOURCE_EXHAUSTED for 429, ...); ``retry_delay`` adds a
  ``google.rpc.RetryInfo`` detail, as the API's 429s carry.
- Streamed replies (``:streamGenerateContent``, SSE when ``alt=sse``): ``data: <GenerateContentResponse>`` events
  separated by a blank line (``\\r\\n\\r\\n``, as the API sends them), sent with ``Transfer-Encoding: chunked`` so a
  cut stream is a detectable protocol error. A text part is split over several events; a functionCall part is sent
  whole in one event (the API never splits one); the last event carries ``finishReason: "STOP"``. Every event
  carries ``usageMetadata`` (promptTokenCount and totalTokenCount; the last one candidatesTokenCount too), as the
  API's do. ``:generateContent`` answers one GenerateContentResponse with the whole reply.
- ``break_stream``: streamed, the first event (half a text part) and then the connection is dropped without the
  terminating chunk; not streamed, the connection is dropped before any response. ``hang(seconds)`` sleeps, then
  answers ``text("late")`` (a client that timed out has gone by then).
- Usage (deterministic): ``promptTokenCount = max(1, len(json.dumps(contents) + json.dumps(systemInstruction))
  // 4)`` (:func:`prompt_tokens_for`), ``candidatesTokenCount = 10 + len(reply) // 4`` where the reply is the text
  parts plus ``json.dumps(args)`` of each functionCall (:func:`candidates_tokens_for`), ``totalTokenCount`` their
  sum. ``script(..., usage=Usage(...))`` fixes them (and may add ``thoughtsTokenCount``, thinking tokens, which the
  API bills as output and leaves out of candidatesTokenCount).
- ``POST .../<model>:countTokens`` -> ``{"totalTokens": prompt_tokens_for(body)}``; ``GET /v1beta/models`` -> an
  empty model list; anything else -> 404 with the API's error JSON. ``requests`` records every request (method,
  path without the query, query, headers with lower-cased names, parsed JSON body, the model named by the path, the
  script, turn and outcome played).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any, Union
from urllib.parse import parse_qs, urlsplit

from runner.testing.scripted import FakeHandler, ScriptedFake, TurnScript

__all__ = [
    "FakeGemini", "Recorded", "Usage", "Text", "FunctionCall", "Parts", "Error", "BreakStream", "Hang", "Turn",
    "text", "function_call", "skill", "parts", "error", "break_stream", "hang", "first_user_text",
    "prompt_tokens_for", "candidates_tokens_for", "model_turns", "STATUS_NAMES", "SKILL_TOOL",
]

# Gemini CLI's skill tool and the input that names the skill (its declaration: {"name": {"enum": [...]}}).
SKILL_TOOL = "activate_skill"
SKILL_INPUT = "name"


# --------------------------------------------------------------------------------------------
# Turns
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class FunctionCall:
    name: str
    args: dict[str, Any]


@dataclass(frozen=True)
class Parts:
    parts: tuple[Union[Text, FunctionCall], ...]


@dataclass(frozen=True)
class Error:
    status: int
    message: str = "..."
    retry_delay: str | None = None  # e.g. "2s": a google.rpc.RetryInfo detail
    times: int | None = None


@dataclass(frozen=True)
class BreakStream:
    times: int | None = None


@dataclass(frozen=True)
class Hang:
    seconds: float
    times: int | None = None


Turn = Union[Text, FunctionCall, Parts, Error, BreakStream, Hang]
_FAULTS = (Error, BreakStream, Hang)

# google.rpc.Code names the API puts in `error.status` for each HTTP status.
STATUS_NAMES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
                409: "ABORTED", 429: "RESOURCE_EXHAUSTED", 499: "CANCELLED", 500: "INTERNAL", 501: "NOT_IMPLEMENTED",
                503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}
_DEFAULT_MESSAGES = {400: "Request contains an invalid argument. (fake)",
                     429: "Resource has been exhausted (e.g. check quota). (fake)",
                     500: "An internal error has occurred. (fake)",
                     503: "The model is overloaded. Please try again later. (fake)"}


def text(s: str) -> Text:
    """One text part; finishReason STOP."""
    return Text(s)


def function_call(name: str, args: dict[str, Any] | None = None) -> FunctionCall:
    """One functionCall part ``{"functionCall": {"name": name, "args": args}}``."""
    return FunctionCall(name, dict(args or {}))


def skill(name: str) -> FunctionCall:
    """Gemini CLI's skill activation: ``activate_skill {"name": name}``."""
    return function_call(SKILL_TOOL, {SKILL_INPUT: name})


def parts(*items: Text | FunctionCall | str) -> Parts:
    """Several parts in one model reply (plain strings become text parts)."""
    return Parts(tuple(Text(p) if isinstance(p, str) else p for p in items))


def error(status: int, message: str = "...", retry_delay: str | None = None, times: int | None = None) -> Error:
    """An HTTP error with the API's body ``{"error": {"code": status, "message": message, "status": NAME}}``."""
    return Error(status, message, retry_delay, times)


def break_stream(times: int | None = None) -> BreakStream:
    """Streamed: one event with half a text part, then the connection is cut. Not streamed: cut, no response."""
    return BreakStream(times)


def hang(seconds: float, times: int | None = None) -> Hang:
    """Sleep ``seconds`` before answering (the client should time out first), then answer "late"."""
    return Hang(seconds, times)


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    candidates_tokens: int
    thoughts_tokens: int = 0  # sent as thoughtsTokenCount when not 0 (billed as output; not in candidatesTokenCount)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.candidates_tokens + self.thoughts_tokens


@dataclass
class Recorded:
    method: str
    path: str                       # without the query string, e.g. /v1beta/models/gemini-2.5-flash:streamGenerateContent
    headers: dict[str, str]         # header names lower-cased
    body: Any                       # parsed JSON, or None
    time: float                     # time.time() when received
    query: str = ""                 # e.g. "alt=sse"
    model: str | None = None        # the model the path names
    method_name: str | None = None  # generateContent, streamGenerateContent, countTokens
    script: str | None = None       # the matched script's `match` (None: the default script / not a model call)
    turn: int | None = None         # turn index played
    outcome: str = ""               # "text", "function_call", "error 500", "break_stream", "hang", ...


# --------------------------------------------------------------------------------------------
# Helpers (public so tests can compute expected figures)
# --------------------------------------------------------------------------------------------

def _texts(content: Any) -> str:
    if not isinstance(content, dict) or not isinstance(content.get("parts"), list):
        return ""
    return "".join(p["text"] for p in content["parts"] if isinstance(p, dict) and isinstance(p.get("text"), str))


def first_user_text(body: Any) -> str:
    """Concatenated text parts of the first ``user`` content of a generateContent body ('' if none)."""
    if not isinstance(body, dict):
        return ""
    for content in body.get("contents") or []:
        if isinstance(content, dict) and content.get("role", "user") == "user":
            return _texts(content)
    return ""


def model_turns(body: Any) -> int:
    """How many ``model`` contents the request already holds (the turn index it asks for)."""
    if not isinstance(body, dict):
        return 0
    return sum(1 for c in body.get("contents") or [] if isinstance(c, dict) and c.get("role") == "model")


def prompt_tokens_for(body: Any) -> int:
    body = body if isinstance(body, dict) else {}
    return max(1, len(json.dumps(body.get("contents", [])) + json.dumps(body.get("systemInstruction", ""))) // 4)


def _parts(turn: Text | FunctionCall | Parts) -> tuple[Text | FunctionCall, ...]:
    return turn.parts if isinstance(turn, Parts) else (turn,)


def candidates_tokens_for(turn: Text | FunctionCall | Parts) -> int:
    reply = "".join(p.text if isinstance(p, Text) else json.dumps(p.args) for p in _parts(turn))
    return 10 + len(reply) // 4


def _error_body(status: int, message: str, retry_delay: str | None = None) -> bytes:
    error_: dict[str, Any] = {"code": status, "message": message if message != "..." else _DEFAULT_MESSAGES.get(
        status, f"fake error {status}"), "status": STATUS_NAMES.get(status, "UNKNOWN")}
    if retry_delay is not None:
        error_["details"] = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry_delay}]
    return json.dumps({"error": error_}).encode()


def _chunks(s: str, size: int) -> list[str]:
    return [s[i:i + size] for i in range(0, len(s), size)] or [""]


# The path of a model method: /v1beta/models/<model>:<method> (v1 and v1alpha too).
_MODEL_PATH = re.compile(r"^/(v1|v1beta|v1alpha)/models/(?P<model>[^/:]+):(?P<method>[A-Za-z]+)$")
_MODEL_METHODS = ("generateContent", "streamGenerateContent")


# --------------------------------------------------------------------------------------------
# Scripts
# --------------------------------------------------------------------------------------------

class _Script(TurnScript[Turn]):
    def __init__(self, match: str | None, turns: tuple[Turn, ...], usage: Usage | None):
        super().__init__(match, turns, usage, (Text, FunctionCall, Parts), _FAULTS, Text("done"))


def _outcome(turn: Turn) -> str:
    if isinstance(turn, Error):
        return f"error {turn.status}"
    if isinstance(turn, BreakStream):
        return "break_stream"
    if isinstance(turn, Hang):
        return "hang"
    return "function_call" if any(isinstance(p, FunctionCall) for p in _parts(turn)) else "text"


# --------------------------------------------------------------------------------------------
# Server
# --------------------------------------------------------------------------------------------

class _Handler(FakeHandler):
    def send_bytes(self, status: int, body: bytes, content_type: str = "application/json; charset=UTF-8") -> None:
        self.send_whole(status, body, {"Content-Type": content_type})

    def start_chunked(self, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()


class FakeGemini(ScriptedFake[Turn, Recorded]):
    """``with FakeGemini() as fake:`` serves on ``fake.url`` (the base URL, no path) until the block ends."""

    handler = _Handler
    thread_name = "fake-gemini"

    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        super().__init__(host, port)
        self._responses = 0

    # -- the record ---------------------------------------------------------------------------
    @property
    def model_requests(self) -> list[Recorded]:
        """Recorded generateContent / streamGenerateContent calls (not countTokens, not 404s)."""
        with self._lock:
            return [r for r in self.requests if r.method_name in _MODEL_METHODS]

    # -- serving ------------------------------------------------------------------------------
    def _sleep(self, seconds: float) -> bool:
        """Sleep unless the fake is closing; False when interrupted."""
        return not self._stop.wait(seconds) if seconds > 0 else True

    def _handle_inner(self, h: _Handler) -> None:
        split = urlsplit(h.path)
        raw = h.read_body()
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        record = Recorded(h.command, split.path, {k.lower(): v for k, v in h.headers.items()}, body, time.time(),
                          query=split.query)
        found = _MODEL_PATH.match(split.path)
        if found:
            record.model, record.method_name = found.group("model"), found.group("method")
        if h.command == "POST" and record.method_name in _MODEL_METHODS and isinstance(body, dict):
            with self._lock:
                user = first_user_text(body)
                script = next((s for s in self._scripts if s.match is not None and s.match in user), self._default)
                turn_index = model_turns(body)
                turn = script.pick(turn_index)
                record.script, record.turn, record.outcome = script.match, turn_index, _outcome(turn)
                self.requests.append(record)
            stream = record.method_name == "streamGenerateContent"
            sse = stream and parse_qs(split.query).get("alt") == ["sse"]
            return self._answer(h, body, str(record.model), turn, script.usage, stream, sse)
        with self._lock:
            self.requests.append(record)
        if h.command == "POST" and record.method_name == "countTokens" and isinstance(body, dict):
            record.outcome = "count_tokens"
            return h.send_bytes(200, json.dumps({"totalTokens": prompt_tokens_for(body)}).encode())
        if h.command == "GET" and split.path.rstrip("/") in ("/v1beta/models", "/v1/models"):
            record.outcome = "models"
            return h.send_bytes(200, b'{"models": []}')
        if h.command == "POST" and record.method_name is not None and not isinstance(body, dict):
            record.outcome = "error 400"
            return h.send_bytes(400, _error_body(400, "Invalid JSON payload received. (fake)"))
        record.outcome = "error 404"
        return h.send_bytes(404, _error_body(404, f"fake: no route for {h.command} {split.path}"))

    def _answer(self, h: _Handler, body: dict[str, Any], model: str, turn: Turn, usage: Usage | None,
                stream: bool, sse: bool) -> None:
        if isinstance(turn, Error):
            return h.send_bytes(turn.status, _error_body(turn.status, turn.message, turn.retry_delay))
        if isinstance(turn, BreakStream):
            if stream:
                h.start_chunked("text/event-stream" if sse else "application/json; charset=UTF-8")
                reply = self._reply(body, model, Text("Partial answer, cut off before its end."), usage)
                first = self._event(reply, [{"text": "Partial ans"}], last=False)
                h.chunk(self._frame(first, sse, first=True))
            return h.cut()
        if isinstance(turn, Hang):
            if not self._sleep(turn.seconds):
                return h.cut()
            turn = Text("late")
        reply = self._reply(body, model, turn, usage)
        if not stream:
            return h.send_bytes(200, json.dumps(reply).encode())
        h.start_chunked("text/event-stream" if sse else "application/json; charset=UTF-8")
        pieces = self._pieces(reply)
        for i, part_list in enumerate(pieces):
            event = self._event(reply, part_list, last=i == len(pieces) - 1)
            h.chunk(self._frame(event, sse, first=i == 0))
        if not sse:
            h.chunk(b"]")
        h.end_chunked()
        return None

    @staticmethod
    def _frame(event: dict[str, Any], sse: bool, first: bool) -> bytes:
        """One streamed event: SSE ``data:`` + blank line, or (without alt=sse) an element of one JSON array."""
        data = json.dumps(event).encode()
        if sse:
            return b"data: " + data + b"\r\n\r\n"
        return (b"[" if first else b",\r\n") + data

    def _reply(self, body: dict[str, Any], model: str, turn: Text | FunctionCall | Parts,
               usage: Usage | None) -> dict[str, Any]:
        """The whole GenerateContentResponse for `turn`."""
        with self._lock:
            self._responses += 1
            number = self._responses
        used = usage or Usage(prompt_tokens_for(body), candidates_tokens_for(turn))
        out_parts: list[dict[str, Any]] = [
            {"text": p.text} if isinstance(p, Text) else {"functionCall": {"name": p.name, "args": p.args}}
            for p in _parts(turn)]
        usage_metadata: dict[str, Any] = {
            "promptTokenCount": used.prompt_tokens, "candidatesTokenCount": used.candidates_tokens,
            "totalTokenCount": used.total_tokens,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": used.prompt_tokens}]}
        if used.thoughts_tokens:
            usage_metadata["thoughtsTokenCount"] = used.thoughts_tokens
        return {
            "candidates": [{"content": {"parts": out_parts, "role": "model"}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": usage_metadata,
            "modelVersion": model,
            "responseId": f"fake-response-{number:06d}",
        }

    @staticmethod
    def _pieces(reply: dict[str, Any]) -> list[list[dict[str, Any]]]:
        """The parts of each streamed event: a text part in pieces of 16 characters, a functionCall whole."""
        events: list[list[dict[str, Any]]] = []
        for part in reply["candidates"][0]["content"]["parts"]:
            if "text" in part:
                events.extend([{"text": piece}] for piece in _chunks(part["text"], 16))
            else:
                events.append([part])
        return events or [[]]

    @staticmethod
    def _event(reply: dict[str, Any], event_parts: list[dict[str, Any]], last: bool) -> dict[str, Any]:
        """One streamed GenerateContentResponse: these parts; the finish reason and the output count on the last."""
        usage = reply["usageMetadata"]
        candidate: dict[str, Any] = {"content": {"parts": event_parts, "role": "model"}, "index": 0}
        event_usage: dict[str, Any] = {"promptTokenCount": usage["promptTokenCount"],
                                       "totalTokenCount": usage["promptTokenCount"],
                                       "promptTokensDetails": usage["promptTokensDetails"]}
        if last:
            candidate["finishReason"] = "STOP"
            event_usage = dict(usage)
        return {"candidates": [candidate], "usageMetadata": event_usage, "modelVersion": reply["modelVersion"],
                "responseId": reply["responseId"]}

    # -- what runner.testing.scripted.ScriptedFake asks of a fake ---------------------------------------------------
    def new_script(self, match: str | None, turns: tuple[Turn, ...], usage: Usage | None) -> _Script:
        return _Script(match, turns, usage)

    def new_text(self, text: str) -> Turn:
        return Text(text)

    def first_user_text(self, body: Any) -> str:
        return first_user_text(body)


