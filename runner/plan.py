"""The plan: what a run will do and what it may cost, written before anything is spent.

Semantics §1 and §7. The plan fixes the selected cases, the library's content hash, the host
and its versions, the model, repeats and quorum, the cap and the surface audit. Its hash is
recorded in every attempt, so `--resume` and `merge` refuse to mix plans.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone

from pydantic import BaseModel, Field

from runner.corpus import Case, Library
from runner.floor import INVALID_CASE, FloorGate, Hold, describe
from runner.judge import prompt_version
from runner.prices import PriceTable
from runner.quarantine import QuarantineEntry
from runner.settings import Settings, TierSettings
from runner.surface import Surface

SCHEMA_VERSION = 1
# Claude Code's Read tool returns at most about 25,000 tokens of a file; a skill body or a
# reference read is bounded by it. The worst case of a session assumes every turn adds that much.
MAX_TOOL_RESULT_TOKENS = 25_000
CHARS_PER_TOKEN = 4  # the same rule of thumb Claude Code uses for its listing budget
API_HOST_NOTE = ("api host: a direct Messages API approximation of Claude Code (same listing format and Skill "
                 "tool schema, not Claude Code's system prompt or tools); results are not a measurement of the "
                 "real host")


class PlannedCase(BaseModel):
    uid: str
    skill: str
    file: str = Field(default="", description="The eval file, relative to the repository root.")
    line: int = Field(default=1, description="The case's line in that file (annotations point here).")
    kind: str
    target: str
    should_not_trigger: list[str] = []
    repeats: int
    quorum: int
    unrun_reason: str | None = Field(default=None, description="Set when the case cannot run at all.")
    unrun_detail: str | None = Field(default=None, description="floor-error / invalid-case: the floor's finding "
                                                               "that holds the case back (`file:line: [rule] "
                                                               "message`).")
    why: str = Field(description="Why the case was selected.")
    warnings: list[str] = []
    arms: list[str] = Field(default=[], description="Tier-2 probes: `control` and `treatment`, N repeats each, no "
                                                    "early stop (the rates are the result).")
    explicit_invocation: bool = Field(default=False, description="Probes: the treatment prompt starts with /<skill>.")
    calibration: str | None = Field(default=None, description="Probes: the calibration verdict and version used.")

    @property
    def sessions(self) -> int:
        return self.repeats * max(1, len(self.arms))


class CostEstimate(BaseModel):
    model: str
    price_input_per_mtok: float
    price_output_per_mtok: float
    price_read_on: str
    runnable_cases: int
    sessions_max: int = Field(description="Σ N over runnable cases: every repeat runs.")
    sessions_min: int = Field(description="Σ k: every case decided by its first k attempts.")
    first_turn_input_tokens: int
    token_basis: str
    expected_session_usd: float
    worst_session_usd: float = Field(description="What each session reserves against the cap before it starts.")
    expected_usd: float = Field(description="sessions_max × expected_session_usd")
    worst_usd: float = Field(description="sessions_max × worst_session_usd")
    judge_calls: int
    judge_note: str


class Plan(BaseModel):
    schema_version: int = SCHEMA_VERSION
    created_at: str
    tier: str
    host: str
    approximation: str | None = None
    versions: dict[str, str]
    model: str
    judge_model: str | None = None
    judge_prompt_version: str | None = None
    judge_unavailable: str | None = Field(default=None, description="Why prose assertions will stay UNRUN.")
    library: dict[str, str]
    repeats: int
    quorum: int
    max_turns: int
    timeout_s: float
    max_output_tokens: int
    concurrency: int
    early_stop: bool = Field(default=True, description="False: every repeat of every case runs (fixed N).")
    batch: bool = Field(default=False, description="Model turns (api host) and judge calls go through the Message "
                                                   "Batches API, at half the price the estimate shows.")
    rate_limit_pause_s: float = 30.0
    cap_usd: float
    listing_budget_chars: int | None
    allowed_tools: list[str]
    manual_only: list[str] = Field(default=[], description="Skills the host cannot auto-invoke: a pair against one "
                                                            "of them proves nothing.")
    surface: Surface | None
    quarantine: list[QuarantineEntry] = Field(default=[], description="Entries of .skill-evals/quarantine.json "
                                                                       "in force when the run was planned.")
    cases: list[PlannedCase]
    estimate: CostEstimate
    unrun_all: str | None = Field(default=None, description="kill-switch or no-credentials: nothing will start.")
    held_back: dict[str, str] = Field(default={}, description="Skills whose floor errors hold back their selected "
                                                             "cases (UNRUN floor-error): the first finding of "
                                                             "each.")
    not_read: dict[str, str] = Field(default={}, description="Skills the loader could not read at all (no SKILL.md, "
                                                            "a link out of the repository, a missing plugin path): "
                                                            "no case of theirs is in the plan. The first finding "
                                                            "of each.")

    def digest(self) -> str:
        """Stable hash of everything but the creation time."""
        body = self.model_dump_json(exclude={"created_at"})
        return hashlib.sha256(body.encode()).hexdigest()[:16]


class ProbeGate(BaseModel):
    """What `run` may do with one probe, from its calibration record (runner.probe_calibration)."""

    state: str = Field(description="calibrated | new-version | not-calibrated | in-progress | unreadable")
    verdict: str | None = None
    content_hash: str


def probe_unrun_reason(gate: ProbeGate | None, settings: Settings, judge_unavailable: str | None) -> str | None:
    """A probe runs only on a finished calibration of its current content, with a verdict the settings run,
    and with a judge to grade the act."""
    if gate is None or gate.state == "not-calibrated":
        return "probe-not-calibrated"
    if gate.state == "new-version":
        return "probe-new-version"  # edited since its calibration: the old record is not reused
    if gate.state == "in-progress":
        return "probe-calibration-unfinished"
    if gate.state == "unreadable":
        return "probe-calibration-unreadable"
    if gate.verdict not in settings.probes.run_verdicts:
        return f"probe-{gate.verdict}"
    if judge_unavailable:
        return f"probe-needs-judge ({judge_unavailable})"
    return None


def unrun_reason(case: Case, library: Library) -> str | None:
    if case.kind == "unknown":
        return "unknown-case-type"
    if case.kind == "invalid":
        return "invalid-case"
    target = library.skills.get(case.target)
    if target is not None and target.manual_only:
        return "manual-only-target"
    if not case.prompt.strip():
        return "invalid-case"
    return None


def apply_hold(planned: PlannedCase, held: Hold) -> None:
    """The floor's reason wins over the case's own, except that a case the loader already could not read
    keeps saying so (unknown-case-type is more precise than invalid-case); the finding is the detail."""
    already_broken = planned.unrun_reason in ("unknown-case-type", INVALID_CASE)
    if not (held.reason == INVALID_CASE and already_broken):
        planned.unrun_reason = held.reason
    planned.unrun_detail = held.detail


def surface_warnings(case: Case, surface: Surface | None) -> list[str]:
    if surface is None or surface.error:
        return []
    dropped = set(surface.name_only)
    out = []
    if case.target in dropped:
        out.append(f"target {case.target} was listed without its description")
    for name in case.should_not_trigger:
        if name in dropped:
            out.append(f"neighbour {name} was listed without its description")
    return out


def first_turn_tokens(library: Library, surface: Surface | None, prompt_chars: int) -> tuple[int, str]:
    if surface is not None and surface.request_chars:
        return (surface.request_chars + prompt_chars) // CHARS_PER_TOKEN, (
            f"the surface audit's captured first request ({surface.request_chars:,} characters) / {CHARS_PER_TOKEN}")
    listing = sum(len(s.name) + len(s.description or "") + 4 for s in library.skills.values() if not s.manual_only)
    return (listing + prompt_chars) // CHARS_PER_TOKEN, (
        f"the skill listing ({listing:,} characters) / {CHARS_PER_TOKEN}; no surface audit, so the host's own "
        "system prompt and tools are not counted")


def session_costs(first_turn: int, max_turns: int, expected_turns: int, max_output: int,
                  price_in: float, price_out: float) -> tuple[float, float]:
    """(expected, worst) USD of one session. Turn t re-sends everything before it."""
    def turns_cost(turns: int, growth: int, output: int) -> float:
        tokens_in = sum(first_turn + t * growth for t in range(turns))
        return (tokens_in * price_in + turns * output * price_out) / 1_000_000

    expected = turns_cost(expected_turns, 2_000, min(max_output, 1_000))
    worst = turns_cost(max_turns, max_output + MAX_TOOL_RESULT_TOKENS, max_output)
    return expected, worst


def build(library: Library, selected: list[tuple[Case, str]], settings: Settings, tier: str, tier_rule: TierSettings,
          host: str, versions: dict[str, str], prices: PriceTable, surface: Surface | None,
          unrun_all: str | None, judge_unavailable: str | None = None,
          quarantine: list[QuarantineEntry] | None = None, probe_gates: dict[str, ProbeGate] | None = None,
          batch: bool = False, floor: FloorGate | None = None) -> Plan:
    run = settings.run
    cases = []
    held_back: dict[str, str] = {}
    for case, why in selected:
        planned = PlannedCase(
            uid=case.uid, skill=case.skill, file=case.file, line=case.line, kind=case.kind, target=case.target,
            should_not_trigger=case.should_not_trigger, repeats=tier_rule.repeats, quorum=tier_rule.quorum,
            unrun_reason=unrun_reason(case, library), why=why, warnings=surface_warnings(case, surface))
        if case.kind == "probe":
            gate = (probe_gates or {}).get(case.uid)
            planned.arms = ["control", "treatment"]
            planned.explicit_invocation = settings.probes.explicit_invocation
            planned.unrun_reason = probe_unrun_reason(gate, settings, judge_unavailable)
            planned.calibration = f"{gate.verdict} (version {gate.content_hash[:12]})" if gate and gate.verdict else None
        if floor is not None and (held := floor.hold_case(case)) is not None:
            apply_hold(planned, held)
            if held.skill is not None:
                held_back.setdefault(held.skill, floor.skill_detail(held.skill))
        cases.append(planned)
    runnable = [c for c in cases if c.unrun_reason is None]
    by_uid = {case.uid: case for case, _ in selected}
    longest_prompt = max((len(by_uid[c.uid].prompt) for c in runnable), default=0)
    first_turn, basis = first_turn_tokens(library, surface, longest_prompt)
    price = prices.price(run.model)
    price_in, price_out = (price.input, price.output) if price else (0.0, 0.0)
    expected, worst = session_costs(first_turn, run.max_turns, run.expected_turns, run.max_output_tokens,
                                    price_in, price_out)
    sessions_max = sum(c.sessions for c in runnable)
    judged = sum(c.sessions for c in runnable if c.arms or any(a.assertion_class == "semantic"
                                                                for a in by_uid[c.uid].assertions))
    estimate = CostEstimate(
        model=run.model, price_input_per_mtok=price_in, price_output_per_mtok=price_out,
        price_read_on=prices.read_on, runnable_cases=len(runnable), sessions_max=sessions_max,
        sessions_min=sum(c.sessions if c.arms or not run.early_stop else c.quorum for c in runnable), first_turn_input_tokens=first_turn, token_basis=basis,
        expected_session_usd=round(expected, 6), worst_session_usd=round(worst, 6),
        expected_usd=round(expected * sessions_max, 4), worst_usd=round(worst * sessions_max, 4),
        judge_calls=judged if judge_unavailable is None else 0,
        judge_note=(f"at most one call per attempt of a case with prose assertions, {settings.judge.model}, "
                    "reserved against the same cap before each call" if judge_unavailable is None else
                    f"no judge calls: prose assertions stay UNRUN ({judge_unavailable})"),
    )
    return Plan(
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"), tier=tier, host=host,
        approximation=API_HOST_NOTE if host == "api" else None, versions=versions, model=run.model,
        judge_model=settings.judge.model if judge_unavailable is None else None,
        judge_prompt_version=prompt_version() if judge_unavailable is None else None,
        judge_unavailable=judge_unavailable,
        library={"root": library.root, "skills_dir": library.skills_dir, "content_hash": library.content_hash},
        repeats=tier_rule.repeats, quorum=tier_rule.quorum, max_turns=run.max_turns, timeout_s=run.timeout_s,
        max_output_tokens=run.max_output_tokens, concurrency=run.concurrency, early_stop=run.early_stop, batch=batch,
        rate_limit_pause_s=run.rate_limit_pause_s, cap_usd=run.max_usd,
        listing_budget_chars=settings.listing.budget_chars, allowed_tools=run.allowed_tools,
        manual_only=sorted(name for name, skill in library.skills.items() if skill.manual_only), surface=surface,
        cases=cases, estimate=estimate, unrun_all=unrun_all, quarantine=quarantine or [],
        held_back=dict(sorted(held_back.items())),
        not_read={name: describe(found) for name, found in sorted(floor.absent.items())} if floor else {},
    )
