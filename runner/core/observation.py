"""What the harness observed in one session, and what a session is given: the contract between a host and the rest.

A host never decides PASS or FAIL. It reports what happened: which skills and subagents were activated (by which
mechanism, in which turn), the tool calls, the final answer, usage and cost from the host's own figures, the bounds
it hit, and — when it could not observe a result — an error with its kind. runner.execute.grading turns
observations into attempt outcomes. The hosts (runner.hosts) write these; the plan, the records, the judge and
results read them, so they live below every stage.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, Field

ErrorKind = Literal[
    "api-error",      # the API answered with an error after the client's own transport retries
    "rate-limited",   # 429 that outlived the retries
    "spend-limit",    # spending must stop (runner.hosts.ratelimit.spend_limit_cause: 429 enforced_spend_limit_reached or
                      # without retry-after, 400 "...API usage limits", 402): the run stops
    "timeout",        # the session outlived its wall-clock bound
    "host-crash",     # the host process died or could not start
    "malformed",      # the host or API produced output the harness cannot read
    "ambiguous",      # the session ended in a way that does not show what happened
]
# How a cost was established (runner.hosts.billing): the API's usage figures; with a bound for lost replies;
# that bound capped at the reservation.
CostBasis = Literal["reported", "bound", "reservation"]
Mechanism = Literal["skill-tool", "skill-md-read", "subagent", "slash-command"]
Bound = Literal["max-turns", "timeout", "max-budget"]


class SessionSpec(BaseModel):
    """Everything a host needs for one attempt; nothing else leaks in."""

    attempt_id: str
    uid: str
    prompt: str
    model: str
    max_turns: int = Field(ge=1)
    timeout_s: float = Field(gt=0)
    max_output_tokens: int = Field(ge=1, default=4096)
    max_usd: float | None = Field(default=None, description="This session's reservation; a host may enforce it.")
    exclude_skills: list[str] = Field(default=[], description="Skills left out of the session (probe control arm).")
    case_files: list[str] = Field(default=[], description="Files copied into the session's folder, at these paths "
                                                        "relative to it.")
    case_files_dir: str | None = Field(default=None, description="The folder `case_files` are relative to in the "
                                                                 "library (the case's skill folder), absolute.")
    request_input_tokens: int | None = Field(
        default=None, description="The plan's estimate of a session's first request, in input tokens: what a request "
                                  "whose reply was lost is charged as when nothing the host saw shows its size "
                                  "(runner.hosts.billing). None: such a request is charged max_usd.")
    decide_when: list[list[str]] = Field(
        default=[], description="An activation-only attempt's outcome is certain once every name of one of these sets "
                                "fired (runner.corpus.decide): a host may end the session there. Empty: the session "
                                "runs to its end.")


class Activation(BaseModel):
    name: str = Field(description="A skill name, or `<agent> (subagent)`.")
    mechanism: Mechanism
    turn: int
    tool_use_id: str | None = None
    rejected: bool = Field(default=False, description="The host answered the call with an error (an unknown skill, a "
                                                      "Read of a SKILL.md that is not there, a refused Task/Agent "
                                                      "call): it never counts as fired (runner.hosts.activation).")


def fired_names(activations: Iterable[Activation]) -> list[str]:
    """The names these activations fired, in order, without repeats: the one rule of what counts as fired, read by
    Observation.fired and by a host that decides while its session runs (runner.hosts.claude_code). An
    activation the host rejected never fires (runner.hosts.activation)."""
    seen: list[str] = []
    for activation in activations:
        if not activation.rejected and activation.name not in seen:
            seen.append(activation.name)
    return seen


class ToolCall(BaseModel):
    name: str
    input: str = Field(description="The call's input as JSON, cut to a readable length.")
    turn: int
    is_error: bool | None = None


class Usage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    def add(self, other: "Usage") -> "Usage":
        return Usage(**{k: getattr(self, k) + getattr(other, k) for k in Usage.model_fields})


class Decided(BaseModel):
    """Why and where a host ended a session before the session ended itself (runner.corpus.decide)."""

    names: list[str] = Field(description="The set of SessionSpec.decide_when that had fired.")
    event: str = Field(description="The event the decision was taken at, e.g. `PostToolUse Skill(pdf), turn 0`.")
    turn: int


class FirstTurn(BaseModel):
    """The first-turn host's part in an attempt (runner.hosts.first_turn)."""

    capture_hash: str = Field(description="Hash of the Claude Code request the attempt's first turn was built from.")
    cli_version: str
    outcome: Literal["decided", "handed-off", "not-eligible"] = Field(
        description="decided: the first reply decided the attempt; handed-off: it did not, and a real Claude Code "
                    "session ran the attempt; not-eligible: not activation-only, run on Claude Code from the start.")
    reason: str = ""
    usage: Usage | None = Field(default=None, description="The first-turn request's own usage (also in the "
                                                          "attempt's usage, with the hand-off session's).")


class ListingSeen(BaseModel):
    """The skill listing a session's model received, when the host can tell."""

    with_description: list[str]
    name_only: list[str]


class Observation(BaseModel):
    attempt_id: str
    host: str
    error_kind: ErrorKind | None = None
    error_message: str | None = None
    activations: list[Activation] = []
    tool_calls: list[ToolCall] = []
    final_answer: str | None = None
    turns: int = 0
    usage: Usage = Usage()
    cost_usd: float = Field(default=0.0, description="From the run's price table and the host's usage figures.")
    host_cost_usd: float | None = Field(default=None, description="The host's own cost figure, when it gives one.")
    cost_basis: CostBasis = Field(default="reported", description="How cost_usd was established: reported (the API's "
                                                                  "usage figures), bound (with a bound for replies "
                                                                  "that were lost: runner.hosts.billing), "
                                                                  "reservation (that bound, capped at max_usd).")
    bound_usd: float = Field(default=0.0, description="Of cost_usd, the part that is a bound, not reported usage.")
    lost_replies: int = Field(default=0, description="Requests the API may have billed whose reply was not read whole "
                                                     "(cut, reset, timed out, usage unreadable).")
    bounds_hit: list[Bound] = []
    listing: ListingSeen | None = None
    duration_s: float = 0.0
    prefix_hash: str | None = Field(default=None, description="A hash of what the session's model received before "
                                                              "the case prompt, as far as the host can tell "
                                                              "(runner.hosts.claude_code.prefix_fingerprint, "
                                                              "runner.hosts.api.ApiHost.prefix_hash); sessions "
                                                              "with one hash can share one prompt cache.")
    model_calls: int | None = Field(default=None, description="Requests that got a reply from the model (the CLI's "
                                                              "`num_turns` counts otherwise): the turns of the "
                                                              "plan's cost model.")
    first_turn_input_tokens: int | None = Field(default=None, description="Input tokens of the session's first "
                                                                          "model call (all three input fields): "
                                                                          "what the plan's cost basis is made of.")
    session_path: str | None = Field(default=None, description="claude-code: how the session saw its folder "
                                                               "(runner.hosts.sessionpath: mount-namespace, "
                                                               "user-namespace, per-session-path).")
    decided: Decided | None = Field(default=None, description="Set when the host ended the session once its "
                                                              "outcome could no longer change.")
    first_turn: FirstTurn | None = Field(default=None, description="first-turn host: what its first turn did.")
    transcript: list[dict[str, Any]] = Field(default=[], description="The host's messages, secrets removed.")

    @property
    def ok(self) -> bool:
        return self.error_kind is None

    def fired(self) -> list[str]:
        """Names activated (accepted by the host), in order, without repeats."""
        return fired_names(self.activations)
