"""results.json: the run's outcome, computed only from the plan and the attempts that really ran.

Every case starts UNRUN with a reason; only an attempt of this run can change that (semantics
§3). Rollup precedence FAIL > ERROR > JUDGE-ERROR > UNRUN > PASS. The file is the single source
for every report; its JSON Schema ships as runner/schemas/results.schema.json.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone

from pydantic import BaseModel, Field

from runner.core.host_traits import ActivationGrade, grade_of
from runner.core.kinds import LoadedKind, traits_of
from runner.core.observation import Usage
from runner.core.quorum import QuorumRule, VerdictRule
from runner.core.sequential import SequentialRule
from runner.core.states import CASE_STATES, RAN, CaseState
from runner.corpus.library import Case
from runner.execute.grading import TREATMENT, expectation
from runner.execute.rundir import AttemptRecord, TailRepair
from runner.floor.gate import EVAL_FILE_UNREADABLE
from runner.hosts.surface import Surface
from runner.hosts.wall import SessionWall
from runner.plan.plan import CachedFrom, KindBasis, LeftOut, Plan, PlannedCase, SequentialVerdict
from runner.plan.quarantine import QuarantineEntry
from runner.plan.sweep import REASON as SWEEP_REASON
from runner.probes.arms import ProbeRunResult, run_result
from runner.results import routing as routing_mod
from runner.results import sureness as sequential_mod
from runner.results.host_comparison import HostComparison
from runner.results.routing import Routing
from runner.results.uplift import SkillUplift, Uplift, case_uplift, skill_uplifts
from runner.results.verdicts import (
    ActivationResult,
    AssertionResult,
    PairResult,
    RoutingPartResult,
    activation_result,
    assertion_results,
    fired_instead,
    pair_results,
    rollup,
    routing_results,
    tally_of,
)
from runner.results.vetting import RefusedRecord, case_reason

SCHEMA_VERSION = 1
NOT_EXECUTED = ("{n} case(s) were not executed (UNRUN); no result is claimed for them.")


def not_executed(unrun: Mapping[str, int]) -> str:
    """The sentence every report carries; an entry that stands for an unreadable eval file is a file, not one
    case, so the sentence says how many of the UNRUN entries are files of unknown size."""
    files = unrun.get(EVAL_FILE_UNREADABLE, 0)
    return NOT_EXECUTED.format(n=sum(unrun.values())) + (
        f" {files} of them stand for an eval file none of whose cases could be read (eval-file-unreadable): how "
        "many cases it holds is not known." if files else "")


# The activation part of an output case run on a host that shows no activation: not observed, so never claimed.
UNOBSERVED = ActivationResult(state="UNRUN", fired_runs=0, observed_runs=0, rate=None, wilson_95=None)


class CaseResult(BaseModel):
    uid: str
    skill: str
    file: str = Field(default="", description="The eval file, relative to the repository root.")
    line: int = 1
    kind: LoadedKind
    label: str | None = Field(default=None, description="A category tag the file gives the case (`type` / `kind` "
                                                        "naming no kind): shown, never a kind.")
    target: str
    state: CaseState
    reason: str | None = None
    detail: str | None = Field(default=None, description="UNRUN floor-error / invalid-case: the floor's finding "
                                                         "that held the case back (`file:line: [rule] message`).")
    wins: int = 0
    losses: int = 0
    errors: int = 0
    repeats_run: int = 0
    repeats_planned: int = 0
    quorum: int = 0
    parts: dict[str, str] = Field(default={}, description="Refusal cases: activation and refusal, separately.")
    activation: ActivationResult | None = None
    fired_instead: dict[str, int] = {}
    pairs: list[PairResult] = []
    routing: list[RoutingPartResult] = Field(default=[], description="Routing cases: each routing assertion (must, "
                                                                     "must_not, max_skills, allow_extra, order) "
                                                                     "over the attempts, with what fired in each.")
    assertions: list[AssertionResult] = []
    attempts: list[str] = []
    cost_usd: float = 0.0
    warnings: list[str] = []
    underlying_state: CaseState | None = Field(default=None, description="For QUARANTINED: the state it had.")
    quarantine: QuarantineEntry | None = None
    calibration: str | None = Field(default=None, description="Tier-2 probes: the calibration verdict and version "
                                                              "the plan used, or `uncalibrated` ([probes] "
                                                              "allow_uncalibrated), whether or not the probe ran.")
    probe: ProbeRunResult | None = Field(default=None, description="Tier-2 probes: per-arm catch rates, the "
                                                                   "difference, band scores, cost per arm.")
    reused: CachedFrom | None = Field(default=None, description="Taken from the result cache: its attempts ran in "
                                                              "the run named here, not in this one, and cost this "
                                                              "run nothing (their spend there is given).")
    uplift: Uplift | None = Field(default=None, description="`run --baseline`: the case's rubric pass rate with the "
                                                            "skill (its own attempts) and without it (the control "
                                                            "arm), the difference, tokens, turns and duration per "
                                                            "arm (runner.results.uplift).")
    activation_grade: ActivationGrade | None = Field(
        default=None, description="How the host its attempts ran on showed an activation (tool-event, file-read), "
                                  "for a case whose verdict reads which skills fired: a file-read verdict rests on "
                                  "reads of a SKILL.md, and every report says so. None: the case reads no "
                                  "activation, or did not run.")
    sequential: sequential_mod.SequentialCase | None = Field(
        default=None, description="A case the sequential verdict decided (or left UNDECIDED): attempts used, the "
                                  "rate with its interval, the round, what fixed N = 3 would have said.")


class PlanSummary(BaseModel):
    hash: str
    tier: str
    host: str
    approximation: str | None
    versions: dict[str, str]
    model: str
    judge_model: str | None = None
    judge_prompt_version: str | None = None
    judge_unavailable: str | None = None
    repeats: int
    quorum: int
    activation_grade: ActivationGrade | None = Field(default=None, description="How the host shows an activation "
                                                                               "(runner.core.host_traits). None: a "
                                                                               "results.json from before grades.")
    sequential: SequentialVerdict | None = Field(default=None, description="Set when the cases (but probes and cases "
                                                                          "with arms) ran by the sequential verdict "
                                                                          "instead of k of N.")
    cap_usd: float
    library_hash: str
    listing_budget_chars: int | None
    surface: Surface | None
    batch: bool = Field(default=False, description="Model turns and judge calls went through the Message Batches API.")
    unrun_all: str | None = Field(default=None, description="no-credentials or kill-switch: no session started. The "
                                                            "cases that could have run are UNRUN for this reason; "
                                                            "the others keep the plan's own reason "
                                                            "(manual-only-target, floor-error, ...).")
    held_back: dict[str, str] = Field(default={}, description="Skills the floor held back (their cases are UNRUN "
                                                             "floor-error): the first finding of each.")
    not_read: dict[str, str] = Field(default={}, description="Skills that could not be read at all, so no case of "
                                                            "theirs was planned: the first finding of each.")
    floor_notes: list[str] = Field(default=[], description="What every report says of the floor besides what it "
                                                           "held back: the library's validator switched off by the "
                                                           "settings (validator-disabled).")
    session_wall: SessionWall | None = Field(default=None, description="claude-code: how the sessions' processes were "
                                                                      "confined (runner.hosts.wall); every "
                                                                      "report says when they were not.")


class ReconciledSpend(BaseModel):
    """A reservation a killed process left unsettled, reconciled by a later one (runner.execute.reconcile)."""

    reservation: str = Field(description="Its id in reservations.jsonl.")
    attempt: str | None = Field(default=None, description="The attempt it was for (None: a judge call's own).")
    reserved_usd: float = Field(description="Its worst case, what it counted before.")
    usd: float = Field(description="What it counts now: never below what the evidence shows billed, never above "
                                   "the reservation.")
    source: str = Field(description="attempt-record (its attempt's record), session-log (the CLI's own log in the "
                                    "killed session's folder), progress (the last figure the session journaled), "
                                    "none (no evidence: it stays at its worst case).")
    detail: str = ""


class Spend(BaseModel):
    usd: float = Field(description="Sessions and judge calls of the recorded attempts (finished, and cancelled ones "
                                   "at what they spent before they were cancelled).")
    bound_usd: float = Field(default=0.0, description="Of `usd`, the part that is an upper bound, not usage the API "
                                                      "reported: requests whose reply was lost (cut, reset, timed "
                                                      "out, cancelled, usage unreadable), each charged its bound, "
                                                      "capped at its attempt's reservation "
                                                      "(runner.hosts.billing).")
    lost_replies: int = Field(default=0, description="Requests whose reply was lost, charged at their bound.")
    judge_usd: float = 0.0
    judge_calls: int = 0
    cap_usd: float
    refused_reservations: int = 0
    lost_in_flight_usd: float = Field(
        default=0.0, description="Spend no attempt record shows, from the reservation journal: sessions and judge "
                                 "calls in flight when a process of this run was killed (or cancelled mid-judge), "
                                 "each at its reserved worst case since nothing says what it used, and sessions "
                                 "that settled but whose record was lost, at their real cost. Not in `usd`; "
                                 "counted against the same cap (usd + lost_in_flight_usd <= cap_usd).")
    lost_in_flight_reservations: int = Field(default=0, description="Reservations never settled (counted at their "
                                                                    "worst case).")
    lost_in_flight_attempts: list[str] = Field(default=[], description="The attempts whose session reservation was "
                                                                       "never settled (they run again on resume).")
    reconciled: list[ReconciledSpend] = Field(default=[], description="Reservations a killed process left "
                                                                      "unsettled, reconciled on resume with the "
                                                                      "best evidence there was (counted in "
                                                                      "lost_in_flight_usd at that figure).")


class FirstTurnSummary(BaseModel):
    """first-turn host: Claude Code's own first request sent directly, and what it decided
    (runner.hosts.first_turn)."""

    cli_version: str = Field(description="The Claude Code version whose first request was captured.")
    capture_hashes: list[str] = Field(description="Hash of each capture the attempts were built from (one per run).")
    decided: int = Field(description="Attempts the first reply decided: no Claude Code session ran.")
    handed_off: int = Field(description="Attempts whose first reply left the outcome open: a real Claude Code "
                                        "session ran them (the first turn is paid for too).")
    not_eligible: int = Field(description="Attempts that were not activation-only: run on Claude Code from the start.")


class CostSummary(BaseModel):
    """What the run's sessions cost against what the plan expected, and how much the prompt cache served."""

    sessions: int = Field(description="Sessions that ran (finished attempts, errored ones included).")
    planned_session_usd: float = Field(description="The plan's expected cost of one session.")
    spent_session_usd: float = Field(description="What a session cost on average (sessions only, no judge).")
    ratio: float | None = Field(description="planned_session_usd / spent_session_usd; None when nothing was spent.")
    planned_usd: float = Field(description="planned_session_usd x sessions.")
    spent_usd: float
    input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    output_tokens: int = 0
    cache_read_share: float = Field(default=0.0, description="cache_read_input_tokens / every input token.")
    prefixes: int = Field(default=0, description="Distinct prefix hashes among the sessions: how many different "
                                                 "texts before the case prompt the run sent (1 = one shared "
                                                 "prefix).")
    sessions_with_prefix_hash: int = 0
    session_path: dict[str, int] = Field(default={}, description="claude-code: sessions per session-path mode "
                                                                 "(runner.hosts.sessionpath).")
    token_scale: float = Field(default=1.0, description="The API's count of a first turn's input per token of the "
                                                        "plan's estimate of it (characters / 4): a later plan's "
                                                        "[cost] basis scales its token figures by it.")
    by_kind: list[KindBasis] = Field(default=[], description="Measured per case kind; a later plan's [cost] basis.")
    model_calls: int = Field(default=0, description="Requests the sessions' models answered (first-turn requests "
                                                    "included).")
    decided_early: int = Field(default=0, description="Sessions a host ended once their outcome could no longer "
                                                      "change ([run] decide_early; runner.corpus.decide).")
    first_turn: FirstTurnSummary | None = None


def model_calls(record: AttemptRecord) -> int:
    """The session's calls to the API (records from before model_calls existed: its turns)."""
    return record.model_calls if record.model_calls is not None else record.turns


def kind_basis(kind: str, records: list[AttemptRecord], per_case: float) -> KindBasis:
    """Mean turns (model calls), first-turn input, growth per turn and output per turn of one kind's clean
    sessions. Growth: a session of T calls sends T x first + growth x T(T-1)/2 input tokens in all."""
    turns = [model_calls(r) for r in records]
    inputs = [r.usage.input_tokens + r.usage.cache_creation_input_tokens + r.usage.cache_read_input_tokens
              for r in records]
    firsts = [r.first_turn_input_tokens for r in records if r.first_turn_input_tokens is not None]
    first = sum(firsts) / len(firsts) if firsts else 0.0
    growths = [(total - t * (r.first_turn_input_tokens or 0)) / (t * (t - 1) / 2)
               for r, t, total in zip(records, turns, inputs) if t > 1 and r.first_turn_input_tokens is not None]
    return KindBasis(kind=kind, sessions=len(records), sessions_per_case=round(per_case, 3),
                     turns=round(sum(turns) / len(records), 3),
                     first_turn_input_tokens=round(first, 1),
                     growth_tokens_per_turn=round(sum(growths) / len(growths), 1) if growths else 0.0,
                     output_tokens_per_turn=round(sum(r.usage.output_tokens for r in records) / max(1, sum(turns)), 1),
                     usd_per_session=round(sum(r.cost_usd for r in records) / len(records), 6))


def cost_summary(plan: Plan, finished: list[AttemptRecord]) -> CostSummary:
    kinds = {c.uid: c.kind for c in plan.cases}
    total = Usage()
    for record in finished:
        total = total.add(record.usage)
    spent = sum(r.cost_usd for r in finished)
    sessions = len(finished)
    spent_each = spent / sessions if sessions else 0.0
    planned_each = plan.estimate.expected_session_usd
    all_input = total.input_tokens + total.cache_creation_input_tokens + total.cache_read_input_tokens
    hashes = [r.prefix_hash for r in finished if r.prefix_hash]
    clean: dict[str, list[AttemptRecord]] = {}
    for record in finished:
        if not record.error_kind and model_calls(record) > 0:
            clean.setdefault(kinds.get(record.uid, "unknown"), []).append(record)
    firsts = [r.first_turn_input_tokens for records in clean.values() for r in records
              if r.first_turn_input_tokens is not None]
    planned_first = plan.estimate.typical_first_turn_input_tokens
    scale = (sum(firsts) / len(firsts)) / planned_first if firsts and planned_first else 1.0
    return CostSummary(
        model_calls=sum(model_calls(r) for r in finished), decided_early=sum(1 for r in finished if r.decided),
        first_turn=first_turn_summary(finished),
        sessions=sessions, token_scale=round(scale, 4), planned_session_usd=planned_each, spent_session_usd=round(spent_each, 6),
        ratio=round(planned_each / spent_each, 4) if spent_each else None,
        planned_usd=round(planned_each * sessions, 6), spent_usd=round(spent, 6), input_tokens=total.input_tokens,
        cache_creation_input_tokens=total.cache_creation_input_tokens,
        cache_read_input_tokens=total.cache_read_input_tokens, output_tokens=total.output_tokens,
        cache_read_share=round(total.cache_read_input_tokens / all_input, 4) if all_input else 0.0,
        prefixes=len(set(hashes)), sessions_with_prefix_hash=len(hashes),
        session_path=dict(Counter(r.session_path for r in finished if r.session_path).most_common()),
        by_kind=[kind_basis(kind, records, sessions_per_case(kind, kinds, finished))
                 for kind, records in sorted(clean.items())])


def first_turn_summary(finished: list[AttemptRecord]) -> FirstTurnSummary | None:
    """What the first-turn host's first turns did, when it ran the attempts; None on any other host. An attempt whose
    first request failed has no first_turn record: it is ERROR like any other, counted with the errors."""
    mine = [r.first_turn for r in finished if r.first_turn is not None]
    if not mine:
        return None
    outcomes = Counter(f.outcome for f in mine)
    return FirstTurnSummary(cli_version=mine[0].cli_version, capture_hashes=sorted({f.capture_hash for f in mine if f.capture_hash}),
                            decided=outcomes["decided"], handed_off=outcomes["handed-off"],
                            not_eligible=outcomes["not-eligible"])


def sessions_per_case(kind: str, kinds: Mapping[str, str], finished: list[AttemptRecord]) -> float:
    """Sessions that ran per case (and arm) of a kind, errored ones included."""
    mine = [r for r in finished if kinds.get(r.uid, "unknown") == kind]
    cases = {(r.uid, r.arm) for r in mine}
    return len(mine) / len(cases) if cases else 0.0


@dataclass(frozen=True)
class LostInFlight:
    """Spend the reservation journal shows and no record does (runner.pipeline.run.lost_in_flight)."""

    usd: float = 0.0
    reservations: int = 0
    attempts: tuple[str, ...] = ()
    reconciled: tuple[ReconciledSpend, ...] = ()


class ReusedRun(BaseModel):
    run: str
    label: str = ""
    finished_at: str
    cases: int
    attempts: int
    spent_usd: float = Field(description="What those attempts cost in that run.")


class ReusedSummary(BaseModel):
    cases: int
    attempts: int
    spent_usd: float = Field(description="What the reused attempts cost in the runs they ran in (not spent here).")
    runs: list[ReusedRun]


def reused_from(records: list[AttemptRecord]) -> CachedFrom | None:
    """The run a case's attempts came from, when every one of them was taken from the result cache."""
    if not records or any(r.reused is None for r in records):
        return None
    first = records[0].reused
    assert first is not None
    return CachedFrom(key=first.key, run=first.run, label=first.label, finished_at=first.finished_at,
                      plan_hash=first.plan_hash, attempts=len(records),
                      spent_usd=round(sum(r.reused.cost_usd for r in records if r.reused), 6))


def reused_summary(cases: list[CaseResult]) -> ReusedSummary | None:
    taken = [c.reused for c in cases if c.reused is not None]
    if not taken:
        return None
    runs: dict[str, list[CachedFrom]] = {}
    for one in taken:
        runs.setdefault(one.run, []).append(one)
    return ReusedSummary(cases=len(taken), attempts=sum(t.attempts for t in taken),
                         spent_usd=round(sum(t.spent_usd for t in taken), 6),
                         runs=[ReusedRun(run=run, label=same[0].label, finished_at=same[0].finished_at,
                                         cases=len(same), attempts=sum(t.attempts for t in same),
                                         spent_usd=round(sum(t.spent_usd for t in same), 6))
                               for run, same in sorted(runs.items())])


class Results(BaseModel):
    schema_version: int = SCHEMA_VERSION
    finished_at: str
    shard: str | None = Field(default=None, description="`i/n` when this run executed one shard of the plan.")
    plan: PlanSummary
    stop_reason: str | None = None
    counts: dict[str, int]
    unrun_by_reason: dict[str, int]
    attempts_finished: int = Field(description="Attempts that ran in this run and finished (the reused ones apart).")
    attempts_errored: int
    attempts_reused: int = Field(default=0, description="Attempts taken from the result cache: they ran in an "
                                                        "earlier run (`reused`), not in this one.")
    reused: ReusedSummary | None = Field(default=None, description="What this run took from the result cache: "
                                                                   "cases, attempts, and the runs they ran in with "
                                                                   "their spend there. None: nothing.")
    cases: list[CaseResult]
    assertion_counts: dict[str, int] = Field(default={}, description="Assertions of executed cases by how they were "
                                                                      "decided: judged, checked by script or by the "
                                                                      "harness, unjudgeable, JUDGE-ERROR, not judged.")
    spend: Spend
    cost: CostSummary | None = Field(default=None, description="Planned against spent per session, the prompt "
                                                               "cache's share, the run's distinct prefixes.")
    not_executed: str
    uplift: list[SkillUplift] = Field(default=[], description="`run --baseline`: per skill with baselined cases, "
                                                              "both arms' attempts pooled (runner.results.uplift).")
    repairs: list[TailRepair] = Field(default=[], description="Torn last lines cut from the run folder's "
                                                              "append-only files before appending (a process killed "
                                                              "mid-write): which file, where, how many bytes, and "
                                                              "where the cut bytes are kept; or a whole last record "
                                                              "completed with its missing newline. Every repair of "
                                                              "the folder.")
    records_signed: bool | None = Field(default=None, description="True: every attempt record was checked against "
                                                                  "its run folder's key (plan.json signs them). "
                                                                  "False: the run folder is from before records "
                                                                  "were signed, so a record the runner did not "
                                                                  "write could not be told apart (ids, costs and "
                                                                  "the plan were still checked). None: this "
                                                                  "results.json is from before records were "
                                                                  "checked.")
    refused_records: list[RefusedRecord] = Field(default=[], description="Lines of the attempt log that were not "
                                                                         "counted (runner.results.vetting): a "
                                                                         "missing or wrong MAC, a duplicate attempt "
                                                                         "id, a negative or non-finite cost, an id "
                                                                         "the plan cannot produce. Each is listed "
                                                                         "with its line and why; the case it claims "
                                                                         "is ERROR.")
    routing: Routing | None = Field(default=None, description="The routing matrix over every attempt of the "
                                                              "trigger, refusal, no_trigger and discrimination "
                                                              "cases that ran (runner.results.routing). None: a "
                                                              "results.json from before it existed.")
    sequential: sequential_mod.SequentialSummary | None = Field(
        default=None, description="Set when the plan ran the sequential verdict: the rule and its exact error "
                                  "bounds, sessions used against fixed N = 3, the cases fixed N = 3 would have "
                                  "given another state (runner.results.sureness).")
    hosts: HostComparison | None = Field(
        default=None, description="`run --host a,b,...`: each host's run (its own results.json), trigger accuracy "
                                  "per skill per host and the cases whose state differs between hosts "
                                  "(runner.results.host_comparison). The other fields are the first host's.")


def kill_note(results: Results) -> str | None:
    """One line for every report when a process of this run was killed (spend no record shows, reservations
    reconciled, torn lines cut) or part of its spend is an upper bound (lost replies charged their bound)."""
    parts = []
    spend = results.spend
    if spend.lost_in_flight_usd > 0:
        parts.append(f"${spend.lost_in_flight_usd:.4f} spent in flight when a process of this run was killed (no "
                     f"attempt record shows it; {spend.lost_in_flight_reservations} reservation(s) counted at their "
                     f"worst case), counted against the cap with the ${spend.usd:.4f} recorded")
    if spend.reconciled:
        saved = sum(r.reserved_usd - r.usd for r in spend.reconciled)
        parts.append(f"{len(spend.reconciled)} reservation(s) left in flight by a kill reconciled on resume from the "
                     f"evidence left ({', '.join(sorted({r.source for r in spend.reconciled}))}): ${saved:.4f} below "
                     f"their worst case (results.json spend.reconciled)")
    if spend.bound_usd > 0:
        parts.append(f"${spend.bound_usd:.4f} of the spend is an upper bound: {spend.lost_replies} request(s) whose "
                     f"reply was lost (cut, reset, timed out, cancelled, usage unreadable) were charged what they "
                     f"could have cost")
    cuts = [r for r in results.repairs if r.kind == "cut"]
    if cuts:
        parts.append(f"{len(cuts)} torn line(s) cut from the run folder's files before appending "
                     f"(results.json `repairs`)")
    if len(cuts) < len(results.repairs):
        parts.append(f"{len(results.repairs) - len(cuts)} whole last record(s) completed with their missing newline "
                     f"(results.json `repairs`)")
    return "; ".join(parts) if parts else None


def refuse_cases(cases: list[CaseResult], refused: list[RefusedRecord], mine: set[str] | None = None
                 ) -> list[CaseResult]:
    """Every case a refused record claims is ERROR, whatever its accepted attempts say: the log of that case was
    tampered with, so the harness could not observe its result (semantics §3). A quarantined case keeps being shown
    QUARANTINED, with ERROR as its underlying state. `mine`: only this shard's cases (another shard's case is
    decided where it ran)."""
    claims: dict[str, list[RefusedRecord]] = {}
    for record in refused:
        if record.uid is not None and (mine is None or record.uid in mine):
            claims.setdefault(record.uid, []).append(record)
    out = []
    for case in cases:
        mine_refused = claims.get(case.uid)
        if not mine_refused:
            out.append(case)
            continue
        update: dict[str, object] = {"reason": case_reason(mine_refused), "detail": None}
        update["underlying_state" if case.state == "QUARANTINED" else "state"] = "ERROR"
        out.append(case.model_copy(update=update))
    return out


def wall_note(results: Results) -> str | None:
    """One line for every report when the sessions ran unconfined (runner.hosts.wall): the first wall (no
    program of the library runs) still stood, the second did not."""
    found = results.plan.session_wall
    if found is None or found.mode != "none":
        return None
    return (f"sessions ran without the Landlock wall ({found.detail}): nothing of the library could run in them, but "
            "a program that did would have reached what this user can (docs/security.md)")


def not_started_note(results: Results) -> str | None:
    """One line for every report when no session could start at all (plan.unrun_all): why, and what to do. Without
    it a page of UNRUN cases would not say that the missing key, not the library, is the cause."""
    if results.plan.unrun_all == "no-credentials":
        return ("no ANTHROPIC_API_KEY reached this run, so no session started and nothing was judged. Set the key (in "
                "CI: a repository secret passed to the action) and `skill-evals run --resume <run folder>` executes "
                "this plan")
    if results.plan.unrun_all == "kill-switch":
        return ("the kill switch was on ([run] disabled or SKILL_EVALS_DISABLED), so no session started and nothing "
                "was judged")
    return None


def sweep_note(results: Results) -> str | None:
    """One line for every report of a routing sweep whose cases ran (runner.plan.sweep): the assertions it left
    out, so a page of PASS is never read as their verdict."""
    cases = [c for c in results.cases if any(a.reason == SWEEP_REASON for a in c.assertions)]
    if not cases:
        return None
    left = sum(1 for c in cases for a in c.assertions if a.reason == SWEEP_REASON)
    return (f"a routing sweep measured which skills fire: {left} prose/shape assertion(s) of {len(cases)} case(s) "
            f"were not judged (UNRUN {SWEEP_REASON}), and each case's state is its activation verdict; `skill-evals "
            "run` judges them")


def floor_note(results: Results) -> str | None:
    """One line for every report when the floor was not the whole floor (the library's validator switched off by
    the settings): said where it was switched off, never left to a count of warnings."""
    notes = results.plan.floor_notes
    return "; ".join(notes) if notes else None


def _unrun(planned: PlannedCase, reason: str, warnings: list[str]) -> CaseResult:
    # The floor's finding explains only the plan's own reason, not a run-wide one (no-credentials, ...).
    detail = planned.unrun_detail if reason == planned.unrun_reason else None
    return CaseResult(uid=planned.uid, skill=planned.skill, file=planned.file, line=planned.line, kind=planned.kind,
                      label=planned.label, target=planned.target, state="UNRUN", reason=reason, detail=detail,
                      repeats_planned=planned.repeats, quorum=planned.quorum, warnings=warnings)


def case_result(planned: PlannedCase, case: Case, records: list[AttemptRecord], stop_reason: str | None,
                unrun_all: str | None, manual_only: set[str], left_out: list[LeftOut] | None = None,
                rule: VerdictRule | None = None) -> CaseResult:
    """`left_out`: the case's assertions a routing sweep did not measure (Plan.routing_sweep): shown UNRUN
    (routing-sweep) beside those it measured, never part of its state. `rule`: what decides it (Plan.rule), else
    its k of N."""
    rule = rule if rule is not None else QuorumRule(planned.repeats, planned.quorum)
    result = _case_result(planned, case, records, stop_reason, unrun_all, manual_only, rule)
    if left_out and result.attempts:  # a case that ran (an UNRUN case lists no assertion, as in any run)
        shown = result.assertions + [
            AssertionResult(index=a.index, text=a.text, assertion_class=a.assertion_class, state="UNRUN",
                            reason=SWEEP_REASON) for a in left_out]
        result.assertions = sorted(shown, key=lambda a: a.index)
    result.calibration = planned.calibration  # an uncalibrated probe says so in every state, UNRUN included
    if result.attempts:
        result.reused = reused_from([r for r in records if r.attempt_id in set(result.attempts)])
    return result


def _case_result(planned: PlannedCase, case: Case, records: list[AttemptRecord], stop_reason: str | None,
                 unrun_all: str | None, manual_only: set[str], rule: VerdictRule) -> CaseResult:
    warnings = list(planned.warnings)
    # The plan's own reason is about the case itself (the floor held it back, its target is manual-only, its probe
    # is not calibrated, ...): it would not run with a key or without the kill switch either, so it keeps that
    # reason. Only the cases that could have run are UNRUN for the run-wide one (no-credentials, kill-switch).
    if planned.unrun_reason:
        return _unrun(planned, planned.unrun_reason, warnings)
    if unrun_all:
        return _unrun(planned, unrun_all, warnings)
    finished = [r for r in records if r.status == "finished" and r.outcome is not None]
    if not finished:
        return _unrun(planned, stop_reason or "not-started", warnings)
    if planned.kind == "probe":
        return probe_case_result(planned, finished, stop_reason, warnings)
    # A baselined case's control attempts (runner.results.uplift) never count towards its state.
    every_arm, finished = finished, [r for r in finished if r.arm == TREATMENT]
    if not finished:
        return _unrun(planned, stop_reason or "not-started", warnings)
    finished = sorted(finished, key=lambda r: r.repeat)  # the order the rule saw them in
    outcomes = [r.outcome for r in finished if r.outcome is not None]
    tally = tally_of(outcomes)
    verdict = rule.decide(tally)
    finished_all = len(finished) >= planned.repeats
    # On a host that shows no activation only output cases run, on their answers (grading.unobserved_outcome).
    unobserved = any(r.activation_grade == "none" for r in finished)
    activation = UNOBSERVED if unobserved else activation_result(outcomes, rule, finished_all)
    assertions = assertion_results(case, outcomes, rule)
    judged = [a.state for a in assertions if a.state != "UNJUDGEABLE"]
    parts: dict[str, str] = {}
    if case.kind == "refusal":
        parts = {"activation": activation.state, "refusal": rollup(judged) if judged else "UNRUN"}
    state: CaseState
    reason: str | None
    if verdict == "loss":
        state, reason = "FAIL", None
    elif verdict == "error":
        # Errors of the host are ERROR; attempts only the judge could not decide are JUDGE-ERROR.
        host_errors = sum(1 for o in outcomes if o.state == "ERROR")
        state = "ERROR" if host_errors else "JUDGE-ERROR"
        reason = "errors left too few attempts to decide the quorum"
    elif verdict == "undecided":
        state, reason = "UNDECIDED", (f"the rate stayed open after {len(finished)} attempt(s): neither PASS nor FAIL "
                                      "is claimed")
    elif verdict == "pending":
        state, reason = "UNRUN", stop_reason or "not-started"
    else:
        state = rollup(judged if unobserved else [activation.state, *judged])
        pending = [a for a in assertions if a.state == "UNRUN"]
        reason = (pending[0].reason if pending else None) if state == "UNRUN" else None
    errors = [r.outcome.error for r in finished if r.outcome and r.outcome.error]
    if state == "ERROR" and errors:
        reason = errors[0]
    return CaseResult(
        uid=planned.uid, skill=planned.skill, file=planned.file, line=planned.line, kind=planned.kind,
        label=planned.label, target=planned.target, state=state, reason=reason,
        wins=tally.wins, losses=tally.losses, errors=tally.errors, repeats_run=len(finished),
        repeats_planned=planned.repeats, quorum=planned.quorum, parts=parts, activation=activation,
        fired_instead=fired_instead(outcomes),
        pairs=pair_results(case, outcomes, rule, finished_all, manual_only)
        if expectation(case) == "target-fires-neighbours-silent" and not unobserved else [],
        routing=routing_results(case, [(r.attempt_id, r.outcome) for r in finished if r.outcome is not None], rule,
                                finished_all) if case.routing is not None and not unobserved else [],
        assertions=assertions, attempts=[r.attempt_id for r in every_arm],
        activation_grade=next((r.activation_grade for r in finished if r.activation_grade), None)
        if traits_of(planned.kind) is not None else None,
        cost_usd=round(sum(r.total_cost_usd for r in every_arm), 6),
        warnings=warnings, uplift=case_uplift(case, every_arm) if "control" in planned.arms else None,
        sequential=sequential_mod.case_figures(rule, outcomes, tally) if isinstance(rule, SequentialRule) else None)


def probe_case_result(planned: PlannedCase, finished: list[AttemptRecord], stop_reason: str | None,
                      warnings: list[str]) -> CaseResult:
    """A probe's state is its treatment arm by the quorum rule (caught = a win); the control arm is the
    baseline, reported beside it as a rate, never folded into the state."""
    treatment = [r for r in finished if r.arm == "treatment"]
    outcomes = [r.outcome for r in treatment if r.outcome is not None]
    rule = QuorumRule(planned.repeats, planned.quorum)
    tally = tally_of(outcomes)
    verdict = rule.decide(tally)
    reason = None
    if verdict == "win":
        state: CaseState = "PASS"
    elif verdict == "loss":
        state = "FAIL"
    elif verdict == "error":
        state = "ERROR" if any(o.state == "ERROR" for o in outcomes) else "JUDGE-ERROR"
        reason = next((o.error for o in outcomes if o.error), "errors left too few attempts to decide the quorum")
    else:
        state, reason = "UNRUN", stop_reason or "not-started"
    graded = [(r.probe, r.total_cost_usd) for r in finished if r.probe is not None]
    return CaseResult(
        uid=planned.uid, skill=planned.skill, file=planned.file, line=planned.line, kind=planned.kind,
        label=planned.label, target=planned.target, state=state, reason=reason, wins=tally.wins, losses=tally.losses,
        errors=tally.errors,
        repeats_run=len(treatment), repeats_planned=planned.repeats, quorum=planned.quorum,
        attempts=[r.attempt_id for r in finished], cost_usd=round(sum(r.total_cost_usd for r in finished), 6),
        warnings=warnings, probe=run_result(graded, planned.explicit_invocation, planned.calibration))


def moment(stamp: str) -> datetime:
    """A results file's timestamp as an aware datetime (the earliest possible when unreadable)."""
    try:
        parsed = datetime.fromisoformat(stamp)
    except ValueError:
        return datetime.min.replace(tzinfo=timezone.utc)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def quarantine(result: CaseResult, entry: QuarantineEntry | None) -> CaseResult:
    if entry is None:
        return result
    return result.model_copy(update={"state": "QUARANTINED", "underlying_state": result.state, "quarantine": entry})


def assertion_counts(results: list[CaseResult]) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for result in results:
        if result.state == "UNRUN" and not result.assertions:
            continue
        for assertion in result.assertions:
            if assertion.state == "UNJUDGEABLE":
                counts["unjudgeable"] += 1
            elif assertion.state == "JUDGE-ERROR":
                counts["judge_error"] += 1
            elif assertion.state == "UNRUN":
                counts[f"unrun:{assertion.reason}"] += 1
            elif assertion.assertion_class == "semantic" or (assertion.assertion_class == "artifact_shape"
                                                             and assertion.reason is not None):
                counts["judged"] += 1
            elif assertion.assertion_class == "activation":
                counts["checked_by_harness"] += 1
            else:
                counts["checked_by_script"] += 1
    return dict(sorted(counts.items()))


def build(plan: Plan, plan_hash: str, cases: dict[str, Case], records: list[AttemptRecord], stop_reason: str | None,
          refused: int = 0, mine: set[str] | None = None, shard: tuple[int, int] | None = None,
          lost: LostInFlight = LostInFlight(), repairs: list[TailRepair] | None = None,
          refused_records: list[RefusedRecord] | None = None) -> Results:
    """`records`: the accepted records only (runner.results.vetting); `refused_records`: the lines it refused,
    whose cases are ERROR."""
    by_uid: dict[str, list[AttemptRecord]] = {}
    for record in records:
        by_uid.setdefault(record.uid, []).append(record)
    manual_only = set(plan.manual_only)
    quarantined = {entry.uid: entry for entry in plan.quarantine}
    left_out = plan.routing_sweep.left_out if plan.routing_sweep is not None else {}
    results = [quarantine(case_result(p, cases[p.uid], by_uid.get(p.uid, []), stop_reason, plan.unrun_all,
                                      manual_only, left_out.get(p.uid), plan.rule(p)), quarantined.get(p.uid))
               if mine is None or p.uid in mine else _unrun(p, "other-shard", list(p.warnings))
               for p in plan.cases]
    results = refuse_cases(results, refused_records or [], mine)
    counts = Counter(r.state for r in results)
    unrun = Counter(r.reason or "unknown" for r in results
                    if r.state == "UNRUN" or r.underlying_state == "UNRUN")
    finished = [r for r in records if r.status == "finished"]
    spent = finished + [r for r in records if r.status == "cancelled"]  # a cancelled session spent too
    ran = [r for r in finished if r.reused is None]  # the reused attempts ran in another run
    baselined = [(cases[p.uid], [r for r in by_uid.get(p.uid, []) if r.status == "finished" and r.outcome])
                 for p, result in zip(plan.cases, results) if result.uplift is not None]
    routing = routing_mod.build(routing_cases(plan, cases, results, by_uid))
    return Results(
        finished_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        shard=f"{shard[0]}/{shard[1]}" if shard else None,
        plan=PlanSummary(hash=plan_hash, tier=plan.tier, host=plan.host, approximation=plan.approximation,
                         versions=plan.versions, model=plan.model, judge_model=plan.judge_model,
                         judge_prompt_version=plan.judge_prompt_version, judge_unavailable=plan.judge_unavailable,
                         repeats=plan.repeats, quorum=plan.quorum, sequential=plan.sequential,
                         activation_grade=grade_of(plan.host),
                         cap_usd=plan.cap_usd, library_hash=plan.library.content_hash,
                         listing_budget_chars=plan.listing_budget_chars, surface=plan.surface, batch=plan.batch,
                         unrun_all=plan.unrun_all, held_back=plan.held_back, not_read=plan.not_read,
                         floor_notes=plan.floor_notes, session_wall=plan.session_wall),
        stop_reason=stop_reason,
        counts={state: counts.get(state, 0) for state in CASE_STATES},
        unrun_by_reason=dict(unrun.most_common()),
        attempts_finished=len(ran),
        attempts_errored=sum(1 for r in ran if r.outcome and r.outcome.state == "ERROR"),
        attempts_reused=len(finished) - len(ran),
        reused=reused_summary(results),
        cases=results,
        assertion_counts=assertion_counts(results),
        spend=Spend(usd=round(sum(r.total_cost_usd for r in spent), 6),
                    bound_usd=round(sum(r.bound_usd + (r.judge.bound_usd if r.judge else 0.0) for r in spent), 6),
                    lost_replies=sum(r.lost_replies for r in spent), reconciled=list(lost.reconciled),
                    judge_usd=round(sum(r.judge.cost_usd for r in finished if r.judge), 6),
                    judge_calls=sum(1 for r in ran if r.judge), cap_usd=plan.cap_usd,
                    refused_reservations=refused, lost_in_flight_usd=round(lost.usd, 6),
                    lost_in_flight_reservations=lost.reservations, lost_in_flight_attempts=list(lost.attempts)),
        cost=cost_summary(plan, ran),
        not_executed=not_executed(unrun),
        uplift=skill_uplifts(baselined),
        repairs=repairs or [],
        records_signed=plan.record_mac is not None,
        refused_records=refused_records or [],
        routing=routing,
        sequential=sequential_summary(plan.sequential, results),
    )


def sequential_summary(verdict: SequentialVerdict | None, results: list[CaseResult]
                       ) -> sequential_mod.SequentialSummary | None:
    """The run's sequential figures from its cases (a shard's, or the merged ones): those that ran by it."""
    if verdict is None:
        return None
    return sequential_mod.summary(verdict, [(c.uid, c.state, c.sequential) for c in results
                                            if c.sequential is not None and c.state in RAN])


def routing_cases(plan: Plan, cases: Mapping[str, Case], results: list[CaseResult],
                  by_uid: Mapping[str, list[AttemptRecord]]) -> list[routing_mod.CaseAttempts]:
    """Every planned case with a routing claim, as the matrix reads it: its main-arm attempts that finished with an
    outcome (a baselined case's control arm ran without the skill: no routing). Another shard's case is UNRUN here."""
    out = []
    for planned, result in zip(plan.cases, results):
        case = cases.get(planned.uid)
        claim = routing_mod.claim_of(case) if case is not None else None
        if claim is None:
            continue
        mine = result.reason != "other-shard"
        outcomes = tuple(r.outcome for r in by_uid.get(planned.uid, []) if mine and r.status == "finished"
                         and r.outcome is not None and r.arm == TREATMENT)
        state = result.underlying_state if result.state == "QUARANTINED" and result.underlying_state else result.state
        out.append(routing_mod.CaseAttempts(uid=planned.uid, claim=claim, state=state, reason=result.reason,
                                            quarantined=result.state == "QUARANTINED", planned=planned.repeats,
                                            outcomes=outcomes))
    return out
