"""The plan: what a run will do and what it may cost, as plan.json holds it (semantics §1 and §7).

The plan fixes the selected cases, the library's content hash, the host and its versions, the model, repeats and
quorum, the cap, the surface audit and the cost estimate. Its hash is recorded in every attempt, so `--resume` and
`merge` refuse to mix plans. runner.plan.planner makes one; runner.plan.cost fills its estimate.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, Field

from runner.core.kinds import LoadedKind
from runner.core.quorum import QuorumRule, VerdictRule
from runner.core.sequential import SequentialRule
from runner.hosts.sessionpath import SessionPath
from runner.hosts.surface import CacheLayout, Surface
from runner.hosts.wall import SessionWall
from runner.plan.quarantine import QuarantineEntry

SCHEMA_VERSION = 1
class CachedFrom(BaseModel):
    """A case whose attempts this plan takes from the result cache (runner.cache): no session of it starts."""

    key: str = Field(description="The cache key of the case's attempts.")
    run: str = Field(description="The run folder they ran in.")
    label: str = Field(default="", description="Where that run ran, when it was told (--cache-label).")
    finished_at: str
    plan_hash: str = Field(description="That run's plan hash.")
    attempts: int = Field(description="The attempts taken.")
    spent_usd: float = Field(description="What they cost in that run (sessions and judge).")


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
    cached: CachedFrom | None = Field(default=None, description="Taken from the result cache: its attempts ran in "
                                                                "another run, and none of its sessions starts.")

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
UNHASHED_ESTIMATE_FIELDS = (*PREDICTION_FIELDS, "sessions_expected", "sessions_expected_from_history",
                            "judge_calls_planned", "baseline_cases", "baseline_sessions",
                            "baseline_worst_usd", "by_host", "cached_cases", "cached_attempts", "cached_spend_usd",
                            "sessions_left_max", "sessions_left_min")


class HostEstimate(BaseModel):
    """The plan's work on one host that runs Claude Code, so `plan` can compare them."""

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
    sessions_expected: float = Field(default=0.0, description="The sessions left to run that the plan expects: the "
                                                              "sequential verdict's expected attempts per case (at "
                                                              "the rate an earlier run observed, else over any "
                                                              "rate), each kind's expected sessions per case "
                                                              "otherwise (KindEstimate).")
    sessions_expected_from_history: int = Field(default=0, description="Sequential cases whose expectation is at "
                                                                       "the rate the earlier run ([cost] basis) "
                                                                       "observed.")
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
                                                                          "(the estimate before caching was counted).")
    worst_session_usd: float = Field(description="What each session reserves against the cap before it starts: "
                                                 "max turns, no cache.")
    expected_usd: float = Field(description="The sessions left × expected_session_usd: every repeat of them, or by the "
                                            "sequential verdict the sessions it expects (sessions_expected).")
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
    cached_cases: int = Field(default=0, description="Runnable cases taken from the result cache: none of their "
                                                     "sessions starts (they are still in sessions_max, the plan's "
                                                     "work, which the cache does not change; sessions_left_* leave "
                                                     "them out).")
    cached_attempts: int = Field(default=0, description="The attempts they take from the cache.")
    cached_spend_usd: float = Field(default=0.0, description="What those attempts cost in the runs they ran in.")
    sessions_left_max: int | None = Field(default=None, description="Sessions that may start: sessions_max without "
                                                                    "the cases from the cache (None: a plan from "
                                                                    "before the cache, sessions_max).")
    sessions_left_min: int | None = Field(default=None, description="The same for sessions_min.")


class LeftOut(BaseModel):
    """An assertion a routing sweep does not measure: it reads the answer (judged, or a shape a script checks)."""

    index: int
    assertion_class: str
    text: str


class SequentialVerdict(BaseModel):
    """The sequential verdict a plan runs its cases by (runner.core.sequential; [sequential] of the settings). A
    probe and a case with arms keep N repeats each: their rates are the result."""

    pass_rate: float = Field(description="θ: a case passes when the rate at which its attempts meet its expectation "
                                         "is above it.")
    indifference: float = Field(description="δ: the test decides between ≤ θ−δ and ≥ θ+δ.")
    alpha: float = Field(description="The chance of PASS at θ−δ, at most.")
    beta: float = Field(description="The chance of FAIL at θ+δ, at most.")
    max_repeats: int = Field(description="Attempts per case at most; still open then: UNDECIDED.")
    round_size: int = Field(description="Attempts started together.")

    def rule(self) -> SequentialRule:
        return SequentialRule(self.pass_rate, self.indifference, self.alpha, self.beta, self.max_repeats,
                              self.round_size)

    def bound_text(self) -> str:
        """For a plan's or a report's first line, where a quorum plan says N and k."""
        return f"sequential verdict, at most {self.max_repeats} attempts in rounds of {self.round_size}"


class RoutingSweep(BaseModel):
    """A routing sweep's plan (`route`, `plan --routing`; runner.plan.sweep): every case is measured for its
    activation part only (which skills fire), so its verdict is its activation verdict; the assertions that read
    the answer are left out, listed here, and every report shows them UNRUN (routing-sweep)."""

    left_out: dict[str, list[LeftOut]] = Field(default={}, description="uid -> the case's assertions the sweep "
                                                                       "does not measure (`run` measures them).")

    @property
    def assertions(self) -> int:
        return sum(len(found) for found in self.left_out.values())


class PlanLibrary(BaseModel):
    """The library a plan was made for (plan.json `library`)."""

    root: str = Field(description="The library's folder, absolute.")
    skills_dir: str = Field(description="The first folder skills were read from, as shown.")
    content_hash: str = Field(description="The library's content hash: a run resumes and a run folder is judged "
                                          "again only against this content.")
    read_from: Literal["root", "skills_dir"] | None = Field(
        default=None, description="What a resume or re-judge reads again without --library: the root (the run was "
                                  "given the repository, whose own eval files, e.g. a routing set at evals/, are "
                                  "part of the library) or root/skills_dir (it was given a skills folder); None: a "
                                  "plan from before, read as root/skills_dir. Not hashed: where, not what.")
    root_in_hash: bool = Field(default=True, description="False (every plan made now): `root` is left out of the "
                                                         "plan hash, so the shards of one run made in different "
                                                         "checkouts (each CI job has a workspace of its own) still "
                                                         "merge; the content hash says it is the same library. True: "
                                                         "a plan from before, hashed as it was then, so its run "
                                                         "folder still resumes and merges.")


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
    routing_sweep: RoutingSweep | None = Field(default=None, description="Set in a routing sweep (`route`): its "
                                                                       "cases are measured for their activation "
                                                                       "part only; the assertions left out. Hashed "
                                                                       "when set: a sweep is another measurement.")
    sequential: SequentialVerdict | None = Field(default=None, description="Set when the plan's cases are decided "
                                                                          "by the sequential verdict ([run] "
                                                                          "verdict); a case's `repeats` is then its "
                                                                          "bound and `quorum` unused. Hashed when "
                                                                          "set.")
    floor_notes: list[str] = Field(default=[], description="What every report says of the floor besides what it "
                                                           "held back: the library's validator switched off by the "
                                                           "settings (validator-disabled), as `file:line: [rule] "
                                                           "message`.")

    def rule(self, planned: PlannedCase) -> VerdictRule:
        return rule_of(planned, self.sequential)

    def early_rule(self, planned: PlannedCase) -> VerdictRule | None:
        return early_rule(planned, self.early_stop, self.sequential)

    def digest(self) -> str:
        """Stable hash of everything but the creation time and the expected cost: a prediction that an earlier
        run in the same folder may change (`[cost] basis = "auto"`), so two shards of one plan, planned before
        and after another run finished, still merge. The worst case, what the cap reserves, stays in. A plan
        from before records were signed (record_mac None), or with no floor note, or no routing sweep, hashes as it
        did then. The session wall is what this machine gives (like the time): shards planned on two machines still
        merge, and so does the library's absolute folder (shards planned in two checkouts), except in a plan from
        before that (library.root_in_hash)."""
        unhashed = {"created_at", "session_wall"} | ({"record_mac"} if self.record_mac is None else set()) \
            | (set() if self.floor_notes else {"floor_notes"}) \
            | (set() if self.routing_sweep is not None else {"routing_sweep"}) \
            | (set() if self.sequential is not None else {"sequential"})
        library: set[str] = {"read_from"} | ({"root_in_hash"} if self.library.root_in_hash else {"root"})
        # Which cases the result cache held is not the plan's identity (shards that found different entries merge;
        # a plan from before the cache hashes as it did).
        body = self.model_dump_json(exclude={**dict.fromkeys(unhashed, True), "library": library,
                                             "estimate": set(UNHASHED_ESTIMATE_FIELDS),
                                             "cases": {"__all__": {"cached"}}})
        return hashlib.sha256(body.encode()).hexdigest()[:16]


def rule_of(planned: PlannedCase, sequential: SequentialVerdict | None) -> VerdictRule:
    """The rule that decides `planned`: the sequential verdict when the plan has one, except for a case with arms (a
    probe, a baselined case: every repeat runs, the rates are the result); else its k of N."""
    if sequential is not None and not planned.arms and planned.kind != "probe":
        return sequential.rule()
    return QuorumRule(planned.repeats, planned.quorum)


def early_rule(planned: PlannedCase, early_stop: bool, sequential: SequentialVerdict | None) -> VerdictRule | None:
    """The rule that stops a case's starts once it decides; None when every repeat runs (a case with arms, or a plan
    without early stop)."""
    if planned.arms or not early_stop:
        return None
    return rule_of(planned, sequential)


# A case's early rule (early_rule with the plan's settings bound), for what runs before the plan exists.
RuleOf = Callable[[PlannedCase], VerdictRule | None]


class ProbeGate(BaseModel):
    """What `run` may do with one probe, from its calibration record (runner.probes.calibration)."""

    state: str = Field(description="calibrated | new-version | not-calibrated | in-progress | unreadable")
    verdict: str | None = None
    content_hash: str


UNCALIBRATED = "uncalibrated"
# Gate states of a probe with no finished calibration of its current content ([probes] allow_uncalibrated runs
# them); an unreadable calibration record is a file to repair, never read as "no calibration".
UNCALIBRATED_STATES = frozenset({"not-calibrated", "new-version", "in-progress"})
