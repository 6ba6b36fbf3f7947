"""The plan: what a run will do and what it may cost, written before anything is spent.

Semantics §1 and §7. The plan fixes the selected cases, the library's content hash, the host
and its versions, the model, repeats and quorum, the cap and the surface audit. Its hash is
recorded in every attempt, so `--resume` and `merge` refuse to mix plans.

Cost. The worst case of a session (what it reserves against the cap) assumes no cache at all and every
turn as large as it may be: it is a bound, and a cache cannot be promised. The expected cost predicts
spend (issue 15): input tokens are nearly all of it, and cached input costs a tenth. So it follows the
host's cache layout, measured by the surface audit on the real first request (`Surface.cache_layout`,
`Surface.cached_prefix_chars`): Claude Code marks the shared prefix (tools and system) and the last block
of every turn, so a session reads the shared prefix another session wrote and each turn reads the turn
before it (`session_usd`); the api host marks only the shared prefix. The first wave of sessions (one per
concurrency slot) writes the shared prefix, later sessions read it within the cache's lifetime
(`cold_sessions`). Turns per session, growth per turn and output per turn come, per case kind, from what a
previous run measured (`[cost] basis`, results.json's `cost.by_kind`) or else from the settings' defaults;
prices, cache prices and the model's minimum cacheable prefix from the price table.

Without a surface audit (`plan --no-surface`, the kill switch) the first request is an estimate, and says so in
`token_basis`: the census's model of the listing (runner.hosts.listing) plus what the host sends besides it, as the audit
measured it once (runner.hosts.surface.KNOWN_REQUESTS for Claude Code; the api host's own prompt and tools), with the
host's known cache layout (`first_request`).

Judge calls: `judge_calls_planned` is what the plan's work would judge, the same with and without a key;
`judge_calls` is what this run will make (0 without a key, a judge, or a session that starts).

Why one long module: the plan's models and the cost arithmetic that fills them change together (a field of the
estimate and the formula behind it); selection, prices and quarantine live beside it in this package.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from runner.corpus import bounded, kind_words
from runner.corpus.files import path_problem
from runner.corpus.library import Case, Library, is_subagent
from runner.corpus.settings import CostSettings, Price, Settings, TierSettings
from runner.core.kinds import LoadedKind
from runner.hosts.registry import HOSTS, HostTraits, traits
from runner.hosts.sessionpath import SessionPath
from runner.hosts.wall import SessionWall
from runner.hosts import listing as listing_mod
from runner.floor.gate import INVALID_CASE, FloorGate, Hold, describe
from runner.hosts.surface import KNOWN_REQUESTS, LISTING_HEADER, CacheLayout, Surface
from runner.judge.prose import prompt_version
from runner.corpus import decide
from runner.hosts.prices import PriceTable
from runner.plan.quarantine import QuarantineEntry
from runner.corpus.claims import is_output_case

SCHEMA_VERSION = 1
# Claude Code's Read tool returns at most about 25,000 tokens of a file; a skill body or a
# reference read is bounded by it. The worst case of a session assumes every turn adds that much.
MAX_TOOL_RESULT_TOKENS = 25_000
CHARS_PER_TOKEN = 4  # the same rule of thumb Claude Code uses for its listing budget


class PlannedCase(BaseModel):
    uid: str
    skill: str
    file: str = Field(default="", description="The eval file, relative to the repository root.")
    line: int = Field(default=1, description="The case's line in that file (annotations point here).")
    kind: LoadedKind
    kind_rule: str | None = Field(default=None, description="Set when a rule of the runner, not a field of the file, "
                                                            "decided the kind (an id prefix, the words of the "
                                                            "expectations, a format's default): that rule.")
    label: str | None = Field(default=None, description="A category tag the file gives the case (`type` / `kind` "
                                                        "naming no kind).")
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
    arms: list[str] = Field(default=[], description="Tier-2 probes: `control` and `treatment`; a baselined output "
                                                    "case (`run --baseline`): `main` and `control` (without the "
                                                    "skill). N repeats each, no early stop (the rates are the "
                                                    "result).")
    explicit_invocation: bool = Field(default=False, description="Probes: the treatment prompt starts with /<skill>.")
    calibration: str | None = Field(default=None, description="Probes: the calibration verdict and version used, "
                                                             "or `uncalibrated` ([probes] allow_uncalibrated).")
    first_turn: bool = Field(default=False, description="The first-turn host may send this case's first request "
                                                        "itself (runner.corpus.decide.first_turn_ineligible).")
    decide_when: list[list[str]] = Field(default=[], description="Activation-only cases with [run] decide_early: "
                                                                 "the session ends once every name of one set "
                                                                 "fired (runner.corpus.decide).")

    @property
    def sessions(self) -> int:
        return self.repeats * max(1, len(self.arms))

    @property
    def baselined(self) -> bool:
        """An output case that also runs a control arm (runner.results.uplift)."""
        return self.kind != "probe" and "control" in self.arms



class KindEstimate(BaseModel):
    """The expected session of one case kind."""

    kind: str
    sessions_max: int
    sessions_per_case: float = Field(default=0.0, description="Expected sessions per case (and arm): N with fixed "
                                                              "N, else measured, else halfway from k to N.")
    turns: float
    growth_tokens_per_turn: int = Field(description="What one turn adds to the next turn's input.")
    output_tokens_per_turn: int
    basis: str = Field(description="`measured: <n> sessions of <run>` or `default` ([run] expected_turns, [cost]).")
    cold_session_usd: float = Field(description="A session of the first wave: it writes the shared prefix too.")
    first_session_usd: float = Field(description="A case's first session: it reads the shared prefix and writes "
                                                 "the rest of its first turn.")
    repeat_session_usd: float = Field(description="A case's later session: it reads the case's whole first turn "
                                                  "when the first turn is byte-identical (one session path), else "
                                                  "as a first session.")


class KindBasis(BaseModel):
    """What a run measured of its sessions of one case kind (results.json `cost.by_kind`)."""

    kind: str
    sessions: int
    sessions_per_case: float = Field(default=0.0, description="Sessions per case (and arm): N, or fewer with early "
                                                              "stop; 0 = not measured.")
    turns: float = Field(description="Model calls per session.")
    first_turn_input_tokens: float = Field(description="Input of a session's first model call (all three input "
                                                       "fields).")
    growth_tokens_per_turn: float
    output_tokens_per_turn: float
    usd_per_session: float


# What `[cost] basis` changes: left out of the plan's hash (Plan.digest).
PREDICTION_FIELDS = ("by_kind", "cost_basis", "token_scale", "cached_prefix_tokens", "expected_session_usd",
                     "expected_uncached_session_usd", "expected_usd")
# Left out of the hash too: judge_calls_planned follows from the cases and the library's content (both hashed), and
# a plan written before the field existed keeps the hash its attempts carry (resume, merge).
# So are the baseline figures: they follow from the cases' arms (hashed).
UNHASHED_ESTIMATE_FIELDS = (*PREDICTION_FIELDS, "judge_calls_planned", "baseline_cases", "baseline_sessions",
                            "baseline_worst_usd", "by_host")


class HostEstimate(BaseModel):
    """The plan's work on one host that runs Claude Code, so `plan` can compare them (issue 21)."""

    host: str
    sessions_max: int
    requests_per_session: float = Field(description="Expected requests per session (the kinds' expected turns; "
                                                    "one for an attempt the first-turn host sends directly).")
    expected_usd: float
    decided_cases: int = Field(description="claude-code: cases whose sessions end once their outcome is certain; "
                                           "first-turn: cases its first request may decide (activation-only).")
    note: str


class CostEstimate(BaseModel):
    model: str
    price_input_per_mtok: float
    price_output_per_mtok: float
    price_cache_write_per_mtok: float = 0.0
    price_cache_read_per_mtok: float = 0.0
    cache_min_tokens: int = Field(default=1024, description="The model's shortest cacheable prefix.")
    price_read_on: str
    runnable_cases: int
    sessions_max: int = Field(description="Σ N over runnable cases: every repeat runs.")
    sessions_min: int = Field(description="Σ k: every case decided by its first k attempts.")
    first_turn_input_tokens: int
    token_basis: str
    cache_layout: CacheLayout = Field(default="none", description="How the host marks its requests for prompt "
                                                                  "caching (the surface audit; none without it).")
    cached_prefix_tokens: int = Field(default=0, description="The shared prefix every session may read (tools, "
                                                             "system), when at least the model's minimum.")
    cold_sessions: int = Field(default=0, description="Sessions expected to write the shared prefix: the first wave "
                                                      "(one per concurrency slot), or all when sessions may start "
                                                      "further apart than the cache lives.")
    cost_basis: str = Field(default="defaults", description="Where turns, growth and output per turn came from.")
    token_scale: float = Field(default=1.0, description="Tokens the basis run's API counted per token of this "
                                                        "estimate (characters / 4); 1 without a basis.")
    typical_first_turn_input_tokens: int = Field(default=0, description="A first turn with the mean prompt (the "
                                                                        "expected cost's; the worst case takes "
                                                                        "the longest).")
    repeats_read_first_turn: bool = Field(default=False, description="A case's later sessions read its first "
                                                                     "session's whole first turn (one session "
                                                                     "path, conversation caching).")
    by_kind: list[KindEstimate] = []
    expected_session_usd: float = Field(description="The mean expected session: cached as the host caches, "
                                                    "cold_sessions of them writing the shared prefix.")
    expected_uncached_session_usd: float = Field(default=0.0, description="The same sessions without any cache "
                                                                          "(what the estimate was before issue 15).")
    worst_session_usd: float = Field(description="What each session reserves against the cap before it starts: "
                                                 "max turns, no cache.")
    expected_usd: float = Field(description="sessions_max × expected_session_usd")
    worst_usd: float = Field(description="sessions_max × worst_session_usd")
    judge_calls: int = Field(description="Judge calls this run will make: judge_calls_planned when there is a judge "
                                         "and a session will start, else 0 (no key, the kill switch, --no-judge, "
                                         "an uncalibrated judge; judge_note and the plan's judge_unavailable / "
                                         "unrun_all say which).")
    judge_calls_planned: int = Field(default=0, description="Judge calls the plan's work holds, whether or not they "
                                                            "will be made: at most one per session of a runnable "
                                                            "case with prose assertions (probes: every session). "
                                                            "The same with and without a key.")
    judge_note: str
    baseline_cases: int = Field(default=0, description="`run --baseline`: runnable output cases that also run a "
                                                       "control arm (without the skill under test).")
    baseline_sessions: int = Field(default=0, description="The control arms' sessions (N per baselined case); "
                                                          "in sessions_max too.")
    baseline_worst_usd: float = Field(default=0.0, description="The control arms' worst case (in worst_usd too).")
    by_host: list[HostEstimate] = Field(default=[], description="The same work on claude-code and first-turn.")


class PlanLibrary(BaseModel):
    """The library a plan was made for (plan.json `library`)."""

    root: str = Field(description="The library's folder, absolute.")
    skills_dir: str = Field(description="The first folder skills were read from, as shown.")
    content_hash: str = Field(description="The library's content hash: a run resumes and a run folder is judged "
                                          "again only against this content.")


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
    library: PlanLibrary
    repeats: int
    quorum: int
    max_turns: int
    timeout_s: float
    max_output_tokens: int
    concurrency: int
    early_stop: bool = Field(default=True, description="False: every repeat of every case runs (fixed N).")
    decide_early: bool = Field(default=False, description="[run] decide_early: activation-only sessions end once "
                                                          "their outcome is certain (PlannedCase.decide_when).")
    batch: bool = Field(default=False, description="Model turns (api host) and judge calls go through the Message "
                                                   "Batches API, at half the price the estimate shows.")
    rate_limit_pause_s: float = 30.0
    cap_usd: float
    listing_budget_chars: int | None
    allowed_tools: list[str]
    manual_only: list[str] = Field(default=[], description="Skills the host cannot auto-invoke: a pair against one "
                                                            "of them proves nothing.")
    surface: Surface | None
    session_path: SessionPath | None = Field(default=None, description="claude-code: how every session sees its "
                                                                      "folder (runner.hosts.sessionpath), as "
                                                                      "detected when the run was planned.")
    session_wall: SessionWall | None = Field(default=None, description="claude-code: how every session's processes "
                                                                      "are confined (runner.hosts.wall), as "
                                                                      "detected when the run was planned.")
    quarantine: list[QuarantineEntry] = Field(default=[], description="Entries of .skill-evals/quarantine.json "
                                                                       "in force when the run was planned.")
    cases: list[PlannedCase]
    estimate: CostEstimate
    unrun_all: str | None = Field(default=None, description="kill-switch or no-credentials: nothing will start.")
    held_back: dict[str, str] = Field(default={}, description="Skills whose floor errors hold back their cases "
                                                             "(the selected ones are UNRUN floor-error), "
                                                             "selected or not: the first finding of each.")
    not_read: dict[str, str] = Field(default={}, description="Skills the loader could not read at all (no SKILL.md, "
                                                            "a link out of the repository, a missing plugin path): "
                                                            "no case of theirs is in the plan. The first finding "
                                                            "of each.")
    record_mac: Literal["hmac-sha256"] | None = Field(
        default=None, description="Every attempt record of this plan carries an HMAC-SHA256 under its run folder's "
                                  "key (runner.execute.rundir): a record without one, or with a wrong one, is "
                                  "refused. None: a plan from before records were signed (its records are read "
                                  "unsigned, and results.json says so). Hashed: removing it changes the plan "
                                  "hash, so no signed record stays this plan's.")
    floor_notes: list[str] = Field(default=[], description="What every report says of the floor besides what it "
                                                           "held back: the library's validator switched off by the "
                                                           "settings (validator-disabled), as `file:line: [rule] "
                                                           "message`.")

    def digest(self) -> str:
        """Stable hash of everything but the creation time and the expected cost: a prediction that an earlier
        run in the same folder may change (`[cost] basis = "auto"`), so two shards of one plan, planned before
        and after another run finished, still merge. The worst case, what the cap reserves, stays in. A plan
        from before records were signed (record_mac None), or with no floor note, hashes as it did then. The
        session wall is what this machine gives (like the time): shards planned on two machines still merge."""
        unhashed = {"created_at", "session_wall"} | ({"record_mac"} if self.record_mac is None else set()) \
            | (set() if self.floor_notes else {"floor_notes"})
        body = self.model_dump_json(exclude={**dict.fromkeys(unhashed, True),
                                             "estimate": set(UNHASHED_ESTIMATE_FIELDS)})
        return hashlib.sha256(body.encode()).hexdigest()[:16]


class ProbeGate(BaseModel):
    """What `run` may do with one probe, from its calibration record (runner.probes.calibration)."""

    state: str = Field(description="calibrated | new-version | not-calibrated | in-progress | unreadable")
    verdict: str | None = None
    content_hash: str


UNCALIBRATED = "uncalibrated"
# Gate states of a probe with no finished calibration of its current content ([probes] allow_uncalibrated runs
# them); an unreadable calibration record is a file to repair, never read as "no calibration".
UNCALIBRATED_STATES = frozenset({"not-calibrated", "new-version", "in-progress"})


def is_uncalibrated(gate: ProbeGate | None, settings: Settings) -> bool:
    """The probe runs uncalibrated: the settings allow it and no finished calibration of this content exists."""
    return settings.probes.allow_uncalibrated and (gate is None or gate.state in UNCALIBRATED_STATES)


def probe_unrun_reason(gate: ProbeGate | None, settings: Settings, judge_unavailable: str | None) -> str | None:
    """A probe runs only on a finished calibration of its current content, with a verdict the settings run,
    and with a judge to grade the act."""
    if is_uncalibrated(gate, settings):
        return f"probe-needs-judge ({judge_unavailable})" if judge_unavailable else None
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


def judge_note(planned: int, model: str, judge_unavailable: str | None, unrun_all: str | None) -> str:
    """What the judge calls are and whether they will be made, in words (CostEstimate.judge_note)."""
    what = f"at most one call per attempt of a case with prose assertions, {model}"
    if planned == 0:
        return f"no attempt has prose assertions to judge ({model})"
    if unrun_all == "no-credentials" or judge_unavailable == "no-credentials":
        return (f"{what}; none will be made: no ANTHROPIC_API_KEY, so no session starts and prose assertions stay "
                "UNRUN (no-credentials)")
    if unrun_all is not None:
        return f"{what}; none will be made: nothing starts ({unrun_all})"
    if judge_unavailable is not None:
        return f"{what}; none will be made: prose assertions stay UNRUN ({judge_unavailable})"
    return f"{what}, reserved against the same cap before each call"


def subagents_callable(host: str, allowed_tools: list[str]) -> bool:
    """Whether a session can start a subagent at all: only Claude Code has subagents (HostTraits.runs_claude_code),
    and only with the Agent (or Task) tool allowed; otherwise the model is not even offered the tool."""
    known = traits(host)
    return known.runs_claude_code and any(tool in allowed_tools for tool in known.activation.subagent_tools)


def unrun_reason(case: Case, library: Library, subagents: bool = True) -> str | None:
    """The case's own reason not to run, or None. `subagents`: whether the host can start one (see
    subagents_callable)."""
    if case.kind == "unknown":
        return "unknown-case-type"
    if case.kind == "invalid":
        return "invalid-case"
    target = library.skills.get(case.target)
    # A manual-only skill cannot be picked by the model, but a prompt that invokes it by hand (`/name ...`) is
    # expanded by the host: such a case runs (runner.corpus.slash).
    if target is not None and target.manual_only and not library.invoked_by_hand(case):
        return "manual-only-target"
    # Like a manual-only target (semantics §2): a subagent the host cannot start can neither activate (a trigger
    # case would FAIL for the harness's configuration, not the skill) nor fail to (a no-trigger case would pass
    # proving nothing). Since a refused call is no activation (runner.hosts.activation), it is UNRUN, never FAIL.
    if is_subagent(case.target) and not subagents:
        return "subagent-not-callable"
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


@dataclass(frozen=True)
class FirstRequest:
    """A session's first request without its case prompt: measured by the surface audit, or else modelled."""

    chars: int
    shared_chars: int  # the prefix every session shares, marked for the cache (0 when nothing is)
    layout: CacheLayout
    basis: str  # where `chars` came from, in words (CostEstimate.token_basis)


def first_request(library: Library, settings: Settings, host: str, surface: Surface | None,
                  versions: dict[str, str] | None = None) -> FirstRequest:
    """The surface audit's captured request when there is one. Without it (`plan --no-surface`, the kill switch),
    an estimate: the census's model of the listing this library gets (runner.hosts.listing, the same rule the audit is
    checked against) plus what the host sends besides it — Claude Code's system prompt, tools and context as the
    audit measured them once (runner.hosts.surface.KNOWN_REQUESTS), the api host's own prompt and tools — with the
    host's known cache layout."""
    if surface is not None and surface.request_chars:
        layout: CacheLayout = surface.cache_layout if not surface.error else "none"
        return FirstRequest(surface.request_chars, surface.cached_prefix_chars if layout != "none" else 0, layout,
                            f"the surface audit's captured first request ({surface.request_chars:,} characters) / "
                            f"{CHARS_PER_TOKEN}")
    allowed = settings.run.allowed_tools
    # The first-turn host sends Claude Code's own first request: its request model is the claude-code host's.
    model = traits(host).request_model
    known = KNOWN_REQUESTS.get(model) if model is not None else None
    if known is not None:
        shown = listing_mod.estimate(library, settings.listing, host)
        entries = shown.listed + len(shown.host_entries)
        chars = known.request_chars(allowed, shown.estimated_listing_chars, entries)
        _, unmeasured = known.tools(allowed)
        running = (versions or {}).get("claude-code-cli")
        caveats = [f"tools {', '.join(unmeasured)} not measured (counted at the mean tool)"] if unmeasured else []
        if running and running != known.cli_version:
            caveats.append(f"this host runs CLI {running}")
        return FirstRequest(chars, known.cached_prefix_chars(allowed), known.cache_layout, (
            f"an estimate, no surface audit: Claude Code {known.cli_version}'s first request as measured "
            f"{known.measured_on} without its listing ({chars - shown.estimated_listing_chars:,} characters: system "
            f"prompt, tools, context) plus the census's model of this library's listing "
            f"({shown.estimated_listing_chars:,} characters), / {CHARS_PER_TOKEN}"
            + (f" ({'; '.join(caveats)})" if caveats else "")))
    if model == "api-prompt":
        from runner.hosts import api as api_host  # the approximation's own prompt and tools (imports the SDK)

        shown = listing_mod.estimate(library, settings.listing, host)
        system = len(api_host.BASE_PROMPT) + 2 + len(LISTING_HEADER) + shown.estimated_listing_chars
        chars = system + api_host.TOOLS_CHARS
        cached = chars // CHARS_PER_TOKEN >= api_host.CACHE_MIN_TOKENS
        # Marked, the system is a JSON block: its newlines escaped (one a listed skill) and the block around it.
        marked = system + shown.listed + api_host.BASE_PROMPT.count("\n") + len(json.dumps(
            [{"type": "text", "text": "", "cache_control": api_host.EPHEMERAL}])) + api_host.TOOLS_CHARS
        return FirstRequest(chars, marked if cached else 0, "prefix" if cached else "none", (
            f"an estimate, no surface audit: the api host's prompt and tools ({chars - shown.estimated_listing_chars:,}"
            f" characters) plus its listing of this library ({shown.estimated_listing_chars:,} characters), / "
            f"{CHARS_PER_TOKEN}"))
    listing = sum(len(s.name) + len(s.description or "") + 4 for s in library.skills.values() if not s.manual_only)
    return FirstRequest(listing, 0, "none", (
        f"an estimate, no surface audit: the skill listing ({listing:,} characters) / {CHARS_PER_TOKEN}; the "
        f"{host} host's own system prompt and tools are not known, so not counted"))


def request_tokens(request: FirstRequest, prompt_chars: int) -> int:
    """A first turn's input tokens: the request and the case prompt, 4 characters a token."""
    return (request.chars + prompt_chars) // CHARS_PER_TOKEN


def first_turn_tokens(library: Library, surface: Surface | None, prompt_chars: int) -> tuple[int, str]:
    """The listing-only count of a first turn without a surface audit (what `calibrate` bounds a probe session by;
    the plan uses `first_request`, which models the host's whole request)."""
    if surface is not None and surface.request_chars:
        return (surface.request_chars + prompt_chars) // CHARS_PER_TOKEN, (
            f"the surface audit's captured first request ({surface.request_chars:,} characters) / {CHARS_PER_TOKEN}")
    listing = sum(len(s.name) + len(s.description or "") + 4 for s in library.skills.values() if not s.manual_only)
    return (listing + prompt_chars) // CHARS_PER_TOKEN, (
        f"the skill listing ({listing:,} characters) / {CHARS_PER_TOKEN}; no surface audit, so the host's own "
        "system prompt and tools are not counted")


def worst_session_usd(first_turn: int, max_turns: int, max_output: int, price_in: float, price_out: float) -> float:
    """The worst case of one session, in USD: every turn at the output bound plus the largest tool result, no
    cache. Turn t re-sends everything before it. (The expected cost is estimate_expected's.)"""
    tokens_in = sum(first_turn + t * (max_output + MAX_TOOL_RESULT_TOKENS) for t in range(max_turns))
    return (tokens_in * price_in + max_turns * max_output * price_out) / 1_000_000


@dataclass(frozen=True)
class SessionShape:
    """One expected session, in tokens: turn t (0-based) sends first_turn + t × growth."""

    first_turn: float
    cached_prefix: float  # the part of the first turn every session shares, marked for the cache
    growth: float
    turns: float
    output_per_turn: float

    @property
    def input_tokens(self) -> float:
        return self.turns * self.first_turn + self.growth * self.turns * (self.turns - 1) / 2


def cache_prices(price: Price) -> tuple[float, float, int]:
    """(write, read, minimum prefix) of a model: the price table's, else 1.25x / 0.1x input and 1,024 tokens."""
    write = price.cache_write if price.cache_write is not None else price.input * 1.25
    read = price.cache_read if price.cache_read is not None else price.input * 0.1
    return write, read, price.cache_min_tokens if price.cache_min_tokens is not None else 1024


SessionKind = Literal["cold", "first", "repeat"]


def session_usd(shape: SessionShape, layout: CacheLayout, price: Price, which: SessionKind) -> float:
    """One session's expected USD.

    `conversation` (Claude Code): turn 0 reads the shared prefix and writes the rest of its input; a `cold`
    session (the first wave) writes the shared prefix too; a `repeat` (a later session of a case whose first
    turn, head and prompt, an earlier session of the case already sent byte for byte) reads its whole first
    turn. Turn t >= 1 reads turn t-1's whole input and writes the growth. `prefix` (the api host): every turn
    reads the shared prefix (a cold session's first turn writes it), the rest is plain input. A prefix under the
    model's minimum is never cached; `none` caches nothing."""
    write_price, read_price, minimum = cache_prices(price)
    t, first = shape.turns, shape.first_turn
    shared = shape.cached_prefix if shape.cached_prefix >= minimum else 0.0
    total = shape.input_tokens
    read = written = 0.0
    if layout == "conversation" and first >= minimum:
        later = (t - 1) * first + shape.growth * (t - 1) * (t - 2) / 2  # turns 1.. read the turn before
        read = later + {"cold": 0.0, "first": shared, "repeat": first}[which]
        written = total - read
    elif layout == "prefix" and shared:
        read = t * shared - (shared if which == "cold" else 0.0)
        written = shared if which == "cold" else 0.0
    plain = total - read - written
    return (plain * price.input + written * write_price + read * read_price
            + t * shape.output_per_turn * price.output) / 1_000_000


def cold_sessions(sessions: int, concurrency: int, timeout_s: float, ttl_s: float) -> int:
    """Sessions expected to write the shared prefix: the first wave starts before any response could have
    written it; later ones read it, unless sessions may start further apart than the cache lives."""
    if timeout_s / max(1, concurrency) > ttl_s:
        return sessions
    return min(sessions, concurrency)


@dataclass(frozen=True)
class Basis:
    """What a previous run measured: per case kind, and how its token counts compare to the plan's estimate."""

    kinds: dict[str, KindBasis]
    token_scale: float  # measured first-turn input / the plan's chars / 4 for it
    described: str


def read_basis(path_text: str, root: Path, runs_folder: Path | None = None, host: str = "",
               model: str = "") -> Basis:
    """The figures a previous run measured (its folder or its results.json); empty, with why, when none.
    `auto`: the newest run in `runs_folder` (where this run's folder is made) of the same host and model that
    measured any session (`auto_basis`)."""
    if not path_text:
        return Basis({}, 1.0, "defaults")
    if path_text == "auto":
        found = auto_basis(runs_folder, host, model)
        if found is None:
            where = f"{runs_folder}" if runs_folder is not None else "no runs folder"
            return Basis({}, 1.0, f"defaults (no earlier {host} run of {model} with measured sessions in {where})")
        path = found
    elif problem := path_problem(path_text):  # the settings may come from the repository under review
        return Basis({}, 1.0, f"defaults ([cost] basis is not a usable path: {problem})")
    else:
        path = Path(path_text) if Path(path_text).is_absolute() else root / path_text
    if path.is_dir():
        path = path / "results.json"
    try:
        # [cost] basis may come from the repository under review: a FIFO or /dev/zero is refused unopened.
        cost = json.loads(bounded.read_text(path, bounded.RUN_FILE_MAX_BYTES)).get("cost") or {}
        rows = [KindBasis.model_validate(row) for row in cost.get("by_kind", [])]
        scale = float(cost.get("token_scale") or 1.0)
    except (OSError, ValueError, AttributeError, TypeError, RecursionError) as exc:
        return Basis({}, 1.0, f"defaults ([cost] basis {path} could not be read: {str(exc).splitlines()[0][:120]})")
    kinds = {row.kind: row for row in rows if row.sessions > 0}
    if not kinds:
        return Basis({}, 1.0, f"defaults ([cost] basis {path} has no measured sessions)")
    return Basis(kinds, scale if 0.1 <= scale <= 10 else 1.0, f"measured in {path}")


def auto_basis(runs_folder: Path | None, host: str, model: str) -> Path | None:
    """The results.json of the newest finished run in `runs_folder` with this host and model and measured
    sessions. A run of another model or host measured other token counts, so it is never used; an unreadable
    folder is passed over (it is not this plan's to judge)."""
    if runs_folder is None or not runs_folder.is_dir():
        return None
    best: tuple[str, Path] | None = None
    for path in runs_folder.glob("*/results.json"):
        try:
            data = json.loads(bounded.read_text(path, bounded.RUN_FILE_MAX_BYTES))
            plan, cost = data.get("plan") or {}, data.get("cost") or {}
            finished = str(data.get("finished_at") or "")
            measured = any(int(row.get("sessions") or 0) > 0 for row in cost.get("by_kind") or [])
        except (OSError, ValueError, AttributeError, TypeError, RecursionError):
            continue
        if plan.get("host") == host and plan.get("model") == model and measured and (best is None or
                                                                                     finished > best[0]):
            best = (finished, path)
    return best[1] if best else None


def default_growth(library: Library, cost: CostSettings) -> int:
    """[cost] growth_tokens_per_turn, else a skill loaded per turn: the mean SKILL.md body / 4 + 100."""
    if cost.growth_tokens_per_turn is not None:
        return cost.growth_tokens_per_turn
    bodies = [len(s.body) for s in library.skills.values() if not s.manual_only]
    return (sum(bodies) // len(bodies) if bodies else 0) // CHARS_PER_TOKEN + 100


def kind_shape(kind: str, basis: Basis, first_turn: float, shared: float, default_turns: int, growth: int,
               output: int) -> tuple[SessionShape, str]:
    """The expected session of a kind: measured when the basis has the kind (token counts scaled as the basis
    run's API counted them), else the defaults."""
    measured = basis.kinds.get(kind)
    scale = basis.token_scale
    if measured is None:
        return SessionShape(first_turn * scale, shared * scale, growth, default_turns, output), "default"
    return (SessionShape(first_turn * scale, shared * scale, max(0.0, measured.growth_tokens_per_turn),
                         max(1.0, measured.turns), measured.output_tokens_per_turn),
            f"measured: {measured.sessions} sessions")


def expected_sessions_per_case(planned: PlannedCase, early_stop: bool, basis: Basis) -> float:
    """N with fixed N (and for probes); with early stop, what the basis measured for the kind, else halfway from
    k (every case decided by its first k) to N."""
    if planned.arms or not early_stop:
        return float(planned.repeats)
    measured = basis.kinds.get(planned.kind)
    if measured is not None and measured.sessions_per_case > 0:
        return min(float(planned.repeats), max(float(planned.quorum), measured.sessions_per_case))
    return (planned.quorum + planned.repeats) / 2


@dataclass(frozen=True)
class Expected:
    by_kind: list[KindEstimate]
    session_usd: float  # the mean expected session, cached
    uncached_session_usd: float
    cold: int
    basis: str
    token_scale: float
    repeats_read: bool


def estimate_expected(runnable: list[PlannedCase], library: Library, settings: Settings, price: Price | None,
                      first_turn: float, shared: int, layout: CacheLayout, repeats_read: bool,
                      runs_folder: Path | None = None) -> Expected:
    """The expected cost of every planned session of the runnable cases (module docstring). `repeats_read`: a
    case's later sessions send its first session's first turn byte for byte (one session path), so they read it.
    `runs_folder`: where `[cost] basis = "auto"` looks for the previous run."""
    run, cost = settings.run, settings.cost
    basis = read_basis(cost.basis, Path(library.root), runs_folder, run.host, run.model)
    growth, output = default_growth(library, cost), min(run.max_output_tokens, cost.output_tokens_per_turn)
    sessions_max: dict[str, int] = {}
    cases: dict[str, int] = {}  # cases and arms: each has a first session, which writes the case's first turn
    per_case: dict[str, float] = {}
    for planned in runnable:
        sessions_max[planned.kind] = sessions_max.get(planned.kind, 0) + planned.sessions
        cases[planned.kind] = cases.get(planned.kind, 0) + max(1, len(planned.arms))
        per_case.setdefault(planned.kind, expected_sessions_per_case(planned, run.early_stop, basis))
    expected_sessions = {kind: cases[kind] * per_case[kind] for kind in cases}
    total = sum(expected_sessions.values())
    cold = cold_sessions(round(total), run.concurrency, run.timeout_s, cost.cache_ttl_s)
    repeat_kind: SessionKind = "repeat" if repeats_read and layout == "conversation" else "first"
    rows, expected, uncached = [], 0.0, 0.0
    for kind, count in sorted(expected_sessions.items()):
        shape, source = kind_shape(kind, basis, first_turn, shared, run.expected_turns, growth, output)
        usd = {which: session_usd(shape, layout, price, which) if price else 0.0
               for which in ("cold", "first", "repeat")}
        cold_here = cold * count / total if total else 0.0  # the first wave mixes kinds as the plan does
        first_here = max(0.0, cases[kind] - cold_here)
        repeats_here = max(0.0, count - cold_here - first_here)
        expected += cold_here * usd["cold"] + first_here * usd["first"] + repeats_here * usd[repeat_kind]
        uncached += session_usd(shape, "none", price, "first") * count if price else 0.0
        rows.append(KindEstimate(kind=kind, sessions_max=sessions_max[kind], sessions_per_case=round(per_case[kind], 3),
                                 turns=round(shape.turns, 3),
                                 growth_tokens_per_turn=round(shape.growth),
                                 output_tokens_per_turn=round(shape.output_per_turn), basis=source,
                                 cold_session_usd=round(usd["cold"], 6), first_session_usd=round(usd["first"], 6),
                                 repeat_session_usd=round(usd[repeat_kind], 6)))
    mean = expected / total if total else 0.0
    return Expected(rows, mean, uncached / total if total else 0.0, cold, basis.described, basis.token_scale,
                    repeat_kind == "repeat")


def first_turn_eligible(planned: PlannedCase, case: Case) -> bool:
    """Whether the first-turn host may send this case's first request itself (the host's own rule)."""
    return decide.first_turn_ineligible(planned.decide_when, [], case.files, case.prompt) is None


def host_estimates(runnable: list[PlannedCase], found: Expected, estimate: CostEstimate,
                   price: Price | None, first_turn: float, shared: int, layout: CacheLayout,
                   decide_early: bool) -> list[HostEstimate]:
    """Every registered host that runs Claude Code (HostTraits.runs_claude_code: claude-code and first-turn), side
    by side: the same sessions, the requests and the expected cost of each. An attempt of a host that sends the
    first request itself (HostTraits.extra_first_request: first-turn) is one request (a first turn that reads the
    shared prefix) unless its reply hands it off, which the plan cannot know: the note says so and the worst case
    reserves a whole session more."""
    sessions = sum(c.sessions for c in runnable)
    kinds = {row.kind: row for row in found.by_kind}
    turns = {c.uid: kinds[c.kind].turns if c.kind in kinds else 1.0 for c in runnable}
    cc_requests = sum(turns[c.uid] * c.sessions for c in runnable)
    decided = [c for c in runnable if c.decide_when]
    eligible = [c for c in runnable if c.first_turn]  # first_turn implies decide_when (first_turn_ineligible)
    one_turn = SessionShape(first_turn * found.token_scale, shared * found.token_scale, 0.0, 1.0,
                            min(kinds[eligible[0].kind].output_tokens_per_turn, 1000) if eligible else 0)
    one_usd = session_usd(one_turn, layout, price, "first") if price else 0.0
    eligible_sessions = sum(c.sessions for c in eligible)
    others = sessions - eligible_sessions
    ft_requests = eligible_sessions + sum(turns[c.uid] * c.sessions for c in runnable if not c.first_turn)

    def per(requests: float) -> float:
        return round(requests / sessions, 3) if sessions else 0.0

    def row(host: str, known: HostTraits) -> HostEstimate:
        if known.extra_first_request:
            return HostEstimate(
                host=host, sessions_max=sessions, requests_per_session=per(ft_requests),
                expected_usd=round(eligible_sessions * one_usd + others * estimate.expected_session_usd, 4),
                decided_cases=len(eligible),
                note=(f"{len(eligible)} activation-only case(s) sent as Claude Code's first request, one request "
                      "each unless the first reply leaves the outcome open (then a Claude Code session runs the "
                      f"attempt too, not in this figure); {len(runnable) - len(eligible)} other case(s) on "
                      "Claude Code"))
        return HostEstimate(host=host, sessions_max=sessions, requests_per_session=per(cc_requests),
                            expected_usd=estimate.expected_usd, decided_cases=len(decided),
                            note=("activation-only sessions end once their outcome is certain" if decide_early
                                  else "every session runs to its end ([run] decide_early = false)")
                            + f"; turns per kind: {found.basis}")

    return [row(host, entry.traits) for host, entry in HOSTS.items() if entry.traits.runs_claude_code]


def build(library: Library, selected: list[tuple[Case, str]], settings: Settings, tier: str, tier_rule: TierSettings,
          host: str, versions: dict[str, str], prices: PriceTable, surface: Surface | None,
          unrun_all: str | None, judge_unavailable: str | None = None,
          quarantine: list[QuarantineEntry] | None = None, probe_gates: dict[str, ProbeGate] | None = None,
          batch: bool = False, floor: FloorGate | None = None, session_path: SessionPath | None = None,
          session_wall: SessionWall | None = None,
          runs_folder: Path | None = None) -> Plan:
    run = settings.run
    known = traits(host)
    subagents = subagents_callable(host, run.allowed_tools)
    names = library.names()
    cases = []
    held_back: dict[str, str] = {}
    for case, why in selected:
        planned = PlannedCase(
            uid=case.uid, skill=case.skill, file=case.file, line=case.line, kind=case.kind, target=case.target,
            kind_rule=case.kind_rule if kind_words.by_heuristic(case.kind_rule) else None, label=case.label,
            should_not_trigger=case.should_not_trigger, repeats=tier_rule.repeats, quorum=tier_rule.quorum,
            unrun_reason=unrun_reason(case, library, subagents), why=why, warnings=surface_warnings(case, surface))
        if case.kind == "probe":
            gate = (probe_gates or {}).get(case.uid)
            planned.arms = ["control", "treatment"]
            planned.explicit_invocation = settings.probes.explicit_invocation
            # No key holds every case already (unrun_all): a probe's own reason is about the probe, so the plan of
            # work is the same with and without a key.
            planned.unrun_reason = probe_unrun_reason(gate, settings, None if judge_unavailable == "no-credentials"
                                                      else judge_unavailable)
            planned.calibration = UNCALIBRATED if is_uncalibrated(gate, settings) else (
                f"{gate.verdict} (version {gate.content_hash[:12]})" if gate and gate.verdict else None)
        elif tier_rule.baseline and is_output_case(case):
            planned.arms = ["main", "control"]  # both arms every repeat: their pass rates are the result
        if run.decide_early and not planned.arms:
            planned.decide_when = decide.decide_when(case, names)
            planned.first_turn = first_turn_eligible(planned, case)
        if floor is not None and (held := floor.hold_case(case)) is not None:
            apply_hold(planned, held)
            if held.skill is not None:
                held_back.setdefault(held.skill, floor.skill_detail(held.skill))
        cases.append(planned)
    runnable = [c for c in cases if c.unrun_reason is None]
    by_uid = {case.uid: case for case, _ in selected}
    longest_prompt = max((len(by_uid[c.uid].prompt) for c in runnable), default=0)
    mean_prompt = sum(len(by_uid[c.uid].prompt) for c in runnable) // len(runnable) if runnable else 0
    request = first_request(library, settings, host, surface, versions)
    first_turn, basis = request_tokens(request, longest_prompt), request.basis
    typical_first_turn = request_tokens(request, mean_prompt)
    price = prices.price(run.model)
    price_in, price_out = (price.input, price.output) if price else (0.0, 0.0)
    write_price, read_price, minimum = cache_prices(price) if price else (0.0, 0.0, 1024)
    # The first-turn host may send a case's first request itself and then hand the attempt to a whole session.
    turns_at_most = run.max_turns + (1 if known.extra_first_request else 0)
    worst = worst_session_usd(first_turn, turns_at_most, run.max_output_tokens, price_in, price_out)
    layout, shared = request.layout, request.shared_chars // CHARS_PER_TOKEN
    fixed_path = known.runs_claude_code and session_path is not None and session_path.path is not None
    found = estimate_expected(runnable, library, settings, price, typical_first_turn, shared, layout, fixed_path,
                              runs_folder)
    sessions_max = sum(c.sessions for c in runnable)
    expected = found.session_usd
    judged = sum(c.sessions for c in runnable if c.kind == "probe" or any(a.assertion_class == "semantic"
                                                                           for a in by_uid[c.uid].assertions))
    baseline_sessions = sum(c.repeats for c in runnable if c.baselined)
    estimate = CostEstimate(
        model=run.model, price_input_per_mtok=price_in, price_output_per_mtok=price_out,
        price_cache_write_per_mtok=write_price, price_cache_read_per_mtok=read_price, cache_min_tokens=minimum,
        price_read_on=prices.read_on, runnable_cases=len(runnable), sessions_max=sessions_max,
        sessions_min=sum(c.sessions if c.arms or not run.early_stop else c.quorum for c in runnable),
        first_turn_input_tokens=first_turn, token_basis=basis, cache_layout=layout,
        cached_prefix_tokens=round(shared * found.token_scale) if shared * found.token_scale >= minimum else 0,
        cold_sessions=found.cold, cost_basis=found.basis, token_scale=round(found.token_scale, 4),
        typical_first_turn_input_tokens=typical_first_turn, repeats_read_first_turn=found.repeats_read,
        by_kind=found.by_kind, expected_session_usd=round(expected, 6),
        expected_uncached_session_usd=round(found.uncached_session_usd, 6),
        worst_session_usd=round(worst, 6),
        expected_usd=round(expected * sessions_max, 4), worst_usd=round(worst * sessions_max, 4),
        judge_calls=judged if judge_unavailable is None and unrun_all is None else 0, judge_calls_planned=judged,
        judge_note=judge_note(judged, settings.judge.model, judge_unavailable, unrun_all),
        baseline_cases=sum(1 for c in runnable if c.baselined), baseline_sessions=baseline_sessions,
        baseline_worst_usd=round(worst * baseline_sessions, 4),
    )
    if known.runs_claude_code:
        estimate.by_host = host_estimates(runnable, found, estimate, price, typical_first_turn, shared,
                                          layout, run.decide_early)
    return Plan(
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"), tier=tier, host=host,
        approximation=known.approximation, versions=versions, model=run.model,
        judge_model=settings.judge.model if judge_unavailable is None else None,
        judge_prompt_version=prompt_version() if judge_unavailable is None else None,
        judge_unavailable=judge_unavailable,
        library=PlanLibrary(root=library.root, skills_dir=library.skills_dir, content_hash=library.content_hash),
        repeats=tier_rule.repeats, quorum=tier_rule.quorum, max_turns=run.max_turns, timeout_s=run.timeout_s,
        max_output_tokens=run.max_output_tokens, concurrency=run.concurrency, early_stop=run.early_stop,
        decide_early=run.decide_early, batch=batch,
        rate_limit_pause_s=run.rate_limit_pause_s, cap_usd=run.max_usd,
        listing_budget_chars=settings.listing.budget_chars, allowed_tools=run.allowed_tools,
        manual_only=sorted(name for name, skill in library.skills.items() if skill.manual_only), surface=surface,
        session_path=session_path if known.runs_claude_code else None,
        session_wall=session_wall if known.runs_claude_code else None,
        cases=cases, estimate=estimate, unrun_all=unrun_all, quarantine=quarantine or [],
        # Every skill the floor holds back, selected or not: "held back: listed below" lists what it counts.
        held_back=dict(sorted((held_back | ({name: floor.skill_detail(name) for name in floor.skills}
                                            if floor else {})).items())),
        not_read={name: describe(found) for name, found in sorted(floor.absent.items())} if floor else {},
        record_mac="hmac-sha256",
        floor_notes=[describe([found]) for found in floor.announced] if floor else [],
    )
