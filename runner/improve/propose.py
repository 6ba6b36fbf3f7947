"""The proposer: one Messages API call that returns candidate descriptions (structured output).

What it sees is built here and nowhere else: train cases and verdicts, neighbours' descriptions, earlier candidates;
never a test case or a test score. The call reserves its worst case on the loop's Ledger; any failure is an ERROR
of the call, never a candidate.

Design notes: docs/design/improve-loop.md.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import anthropic
from pydantic import BaseModel, ConfigDict, ValidationError

from runner.core.kinds import expects
from runner.core.observation import Usage
from runner.execute.budget import Ledger
from runner.hosts.api import reply_problem, reply_usage
from runner.hosts.prices import PriceTable
from runner.hosts.ratelimit import SpendLimitMiddleware, SpendLimitReached
from runner.improve.model import DESCRIPTION_LIMIT, ProposalCall

# The first line of every proposer request's user message: how a reader of a request log (or the fake's scripts)
# tells a proposer call from a session.
PROPOSER_MATCH = "<description-task>"
CHARS_PER_TOKEN = 4  # the estimate the plan and the judge use for a worst case

SYSTEM_PROMPT = f"""You improve the `description` of an Agent Skill. The description is all a model sees when it \
decides whether to use the skill: it must make the skill fire for the requests it is for, and stay silent for \
requests it is not for — above all those a neighbouring skill handles.

You are given the skill's current description, its neighbours' descriptions, and training cases with what happened \
when each was run with the current description (PASS: right; FAIL: the skill fired when it should not, or did not \
fire when it should). Earlier candidates and their training scores may follow; a candidate marked rejected scored \
well on training but made a neighbour's own requests fire this skill: do not repeat what it claimed.

Write descriptions that generalise: describe the kind of request and the user's intent, not the wording of the \
examples. Never copy a case prompt. Do not claim a neighbour's territory: where a neighbour fits a request better, \
say so ("Do NOT use for ..."). Each description is at most {DESCRIPTION_LIMIT} characters, plain text, no XML tags.

Reply with JSON only, matching the schema: `candidates`, each with the `description` and a one-sentence \
`rationale`."""


class ProposedDescription(BaseModel):
    model_config = ConfigDict(extra="forbid")
    description: str
    rationale: str


class ProposerReply(BaseModel):
    model_config = ConfigDict(extra="forbid")
    candidates: list[ProposedDescription]


def reply_schema() -> dict[str, Any]:
    """The structured-output schema (strict: every key required, nothing else allowed)."""
    return {
        "type": "object", "additionalProperties": False, "required": ["candidates"],
        "properties": {"candidates": {"type": "array", "items": {
            "type": "object", "additionalProperties": False, "required": ["description", "rationale"],
            "properties": {"description": {"type": "string"}, "rationale": {"type": "string"}}}}},
    }


@dataclass(frozen=True)
class TrainCase:
    """One train case and its verdict with the description the proposal improves on."""
    uid: str
    kind: str
    prompt: str
    should_fire: str  # the skill that must fire ("" for no_trigger: the skill must stay silent)
    must_stay_silent: tuple[str, ...]
    state: str
    fired_instead: tuple[str, ...] = ()


@dataclass(frozen=True)
class NeighbourCase:
    """A neighbour's case that a rejected candidate made fail (the reason it was rejected)."""
    uid: str
    prompt: str
    expected: str  # e.g. "yak-groomer must fire"
    result: str  # with the candidate in place, e.g. "FAIL (fired instead: zoo-keeper)"


@dataclass(frozen=True)
class Tried:
    """An earlier candidate and its TRAIN score; `rejected` holds the neighbour cases it broke, when it was."""
    description: str
    passed: int
    failed: int
    rejected: tuple[NeighbourCase, ...] = ()


@dataclass(frozen=True)
class ProposalRequest:
    skill: str
    current: str
    train: tuple[TrainCase, ...]
    neighbours: dict[str, str]  # name -> description
    tried: tuple[Tried, ...] = ()
    count: int = 3


def _case_line(case: TrainCase) -> str:
    expectation = expects(case.kind)
    if expectation == "target-silent":
        expect = "the skill must NOT fire"
    elif expectation == "target-fires-neighbours-silent":
        expect = (f"{case.should_fire} must fire and {', '.join(case.must_stay_silent)} must not"
                  if case.must_stay_silent else f"{case.should_fire} must fire")
    else:
        expect = "the skill must fire"
    result = case.state + (f" (fired instead: {', '.join(case.fired_instead)})" if case.fired_instead else "")
    return json.dumps({"prompt": case.prompt, "expected": expect, "result": result}, ensure_ascii=False)


def _tried_line(tried: Tried) -> str:
    entry: dict[str, Any] = {"description": tried.description, "passed": tried.passed, "failed": tried.failed}
    if tried.rejected:
        entry["rejected"] = "it made these neighbour prompts fire it (a neighbour's case that passed now fails)"
        entry["neighbour_prompts"] = [{"prompt": c.prompt, "expected": c.expected, "result": c.result}
                                      for c in tried.rejected]
    return json.dumps(entry, ensure_ascii=False)


def user_message(request: ProposalRequest) -> str:
    """The whole user message; built from train cases only (docs/design/improve-loop.md)."""
    failing = [c for c in request.train if c.state != "PASS"]
    passing = [c for c in request.train if c.state == "PASS"]
    parts = [PROPOSER_MATCH,
             f"Skill: {request.skill}",
             f"Current description ({len(request.current)} characters):\n{request.current}",
             "Neighbouring skills (their territory; do not take it):\n" + (
                 "\n".join(f"- {name}: {text}" for name, text in sorted(request.neighbours.items())) or "(none)"),
             "<train-cases>",
             "Failing now:\n" + ("\n".join(_case_line(c) for c in failing) or "(none)"),
             "Passing now (keep them passing):\n" + ("\n".join(_case_line(c) for c in passing) or "(none)"),
             "</train-cases>"]
    if request.tried:
        parts.append("Earlier candidates and their training scores:\n" + "\n".join(
            _tried_line(t) for t in request.tried))
    parts.append(f"Propose {request.count} different descriptions, each at most {DESCRIPTION_LIMIT} characters.")
    return "\n\n".join(parts)


@dataclass
class Proposal:
    call: ProposalCall
    candidates: list[ProposedDescription] = field(default_factory=list)


class Proposer:
    """One AsyncAnthropic client per event loop (ANTHROPIC_BASE_URL through `base_url`)."""

    def __init__(self, model: str, api_key: str, base_url: str | None, prices: PriceTable, max_tokens: int = 4096,
                 timeout_s: float = 120.0, max_retries: int = 2):
        self.model, self.prices, self.max_tokens = model, prices, max_tokens
        self._client_args: dict[str, Any] = {"api_key": api_key, "base_url": base_url, "max_retries": max_retries,
                                             "timeout": timeout_s}
        self.timeout_s = timeout_s

    def __repr__(self) -> str:  # never show the key
        return f"Proposer(model={self.model!r})"

    def params(self, request: ProposalRequest) -> dict[str, Any]:
        return {"model": self.model, "max_tokens": self.max_tokens, "system": SYSTEM_PROMPT,
                "messages": [{"role": "user", "content": user_message(request)}],
                "output_config": {"format": {"type": "json_schema", "schema": reply_schema()}}}

    def worst_case_usd(self, params: dict[str, Any]) -> float:
        price = self.prices.price(self.model)
        if price is None:
            return 0.0
        chars = len(json.dumps(params, ensure_ascii=False))
        return (chars // CHARS_PER_TOKEN * price.input + self.max_tokens * price.output) / 1_000_000

    async def propose(self, request: ProposalRequest, ledger: Ledger, round_index: int) -> Proposal:
        params = self.params(request)
        call = ProposalCall(round=round_index, model=self.model, state="UNRUN",
                            train_uids=[c.uid for c in request.train],
                            neighbour_uids=[c.uid for t in request.tried for c in t.rejected])
        worst = self.worst_case_usd(params)
        reservation = await ledger.reserve(worst, f"proposer round {round_index}")
        if reservation is None:
            call.error = "budget-cap"
            return Proposal(call)
        call.reserved_usd = worst
        try:
            proposal = await self._call(params, call)
        finally:
            await ledger.settle(reservation, call.cost_usd)
        return proposal

    async def _call(self, params: dict[str, Any], call: ProposalCall) -> Proposal:
        # A spend limit is recognised from the first response (no SDK retries), as for sessions and the judge.
        client = anthropic.AsyncAnthropic(**self._client_args, middleware=[SpendLimitMiddleware()])
        try:
            async with asyncio.timeout(self.timeout_s):
                response = await client.messages.create(**params)
        except SpendLimitReached as exc:
            return _failed(call, f"spend limit: {exc.cause}")
        except (TimeoutError, anthropic.APITimeoutError):
            return _failed(call, f"timeout after {self.timeout_s:g} s")
        except anthropic.APIStatusError as exc:
            return _failed(call, f"HTTP {exc.status_code} after the SDK's retries")
        except anthropic.APIConnectionError as exc:
            return _failed(call, f"connection failed: {exc}")
        except ValueError as exc:  # the SDK lets a body that is not JSON through as a decode error
            return _failed(call, f"unreadable response: {exc}")
        finally:
            await client.close()
        return self._read(response, call)

    def _read(self, response: Any, call: ProposalCall) -> Proposal:
        usage = reply_usage(response)
        if isinstance(usage, Usage):  # counted even when the rest cannot be read: it was spent
            call.input_tokens, call.output_tokens = usage.input_tokens, usage.output_tokens
            call.cost_usd = self.prices.cost(self.model, usage) or 0.0
        problem = reply_problem(response)
        if problem is not None:
            return _failed(call, f"the reply could not be read: {problem}")
        if response.stop_reason == "refusal":
            return _failed(call, "the proposer refused")
        if response.stop_reason == "max_tokens":
            return _failed(call, "the reply was truncated (max_tokens)")
        text = "".join(block.text for block in response.content if block.type == "text")
        try:
            reply = ProposerReply.model_validate_json(text)
        except ValidationError as exc:
            return _failed(call, f"the reply does not match the schema: {exc.errors()[0]['msg']}")
        call.state, call.proposed = "ok", len(reply.candidates)
        return Proposal(call, reply.candidates)


def _failed(call: ProposalCall, cause: str) -> Proposal:
    call.state, call.error = "ERROR", cause
    return Proposal(call)
