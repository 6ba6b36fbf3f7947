"""The loop: rounds on train with the neighbour check inside them, then one scoring on the held-out test split.

Candidates run on train through runner.pipeline.run; one that breaks a neighbour's case is never accepted. The best
and the current description run once on test, compared by 95% Wilson intervals. One Ledger bounds all by --max-usd.

Design notes: docs/design/improve-loop.md.
"""

from __future__ import annotations

import asyncio
import difflib
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from runner.core.errors import UsageError
from runner.core.host_traits import traits
from runner.core.quorum import wilson_interval
from runner.core.states import BROKEN, VERDICTS
from runner.corpus import bounded
from runner.corpus.library import Case, Library
from runner.corpus.loader import load_library
from runner.corpus.settings import Settings
from runner.execute import grading
from runner.execute.budget import Ledger
from runner.execute.rundir import RunDir
from runner.hosts import listing
from runner.improve import split as split_mod
from runner.improve.model import (
    DESCRIPTION_LIMIT,
    Candidate,
    CandidateState,
    CaseScore,
    HeldOutComparison,
    Improve,
    NeighbourCheck,
    NeighbourState,
    Outcome,
    PlannedWork,
    ProposalCall,
    Round,
    Score,
    Spend,
    StopReason,
    Verdict,
)
from runner.improve.propose import NeighbourCase, ProposalRequest, Proposer, TrainCase, Tried
from runner.improve.skillmd import rewrite_description
from runner.pipeline import run as runs_mod
from runner.plan.select import SelectedCase, Selection
from runner.results.build import Results

RUNS = "runs"
IMPROVE_JSON = "improve.json"
DIFF = "SKILL.md.diff"


@dataclass(frozen=True)
class Bounds:
    host: str
    model: str
    proposer_model: str
    repeats: int
    quorum: int
    max_usd: float
    rounds: int = 3
    candidates: int = 3
    seed: int = 0
    holdout: float = split_mod.DEFAULT_HOLDOUT
    finalists: int = 2


@dataclass
class Inputs:
    library: Library
    library_path: Path  # as given on the command line: the copy is loaded from the same place inside it
    settings: Settings  # with the command line's options applied (runner.pipeline.run.apply_options)
    skill: str
    credentials: runs_mod.Credentials
    bounds: Bounds
    out: Path


# ---- the record --------------------------------------------------------------------------------------------------

def start_record(inputs: Inputs) -> tuple[Improve, split_mod.Split, list[Case]]:
    library, skill, bounds = inputs.library, inputs.skill, inputs.bounds
    the_split = split_mod.split_cases(split_mod.own_cases(library, skill), bounds.seed, bounds.holdout)
    near = split_mod.neighbour_cases(library, skill)
    record = Improve(
        skill=skill, skill_md=str(Path(library.skills[skill].dir) / "SKILL.md"),
        current_description=library.skills[skill].description or "", host=bounds.host,
        approximation=traits(bounds.host).approximation, model=bounds.model,
        proposer_model=bounds.proposer_model, repeats=bounds.repeats, quorum=bounds.quorum, rounds_max=bounds.rounds,
        candidates_per_round=bounds.candidates, listing_budget_chars=inputs.settings.listing.effective_budget,
        seed=bounds.seed, holdout=bounds.holdout, train=list(the_split.train), test=list(the_split.test),
        split_by_kind=the_split.by_kind, neighbours=split_mod.neighbours(library, skill),
        neighbour_cases=[c.uid for c in near], neighbour_checks_per_round=bounds.finalists,
        spend=Spend(cap_usd=bounds.max_usd, usd=0.0),
        outcome=Outcome(state="UNRUN", summary="not started"))
    return record, the_split, near


def write_record(out: Path, record: Improve) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / IMPROVE_JSON).write_text(record.model_dump_json(indent=2) + "\n", encoding="utf-8")
    if record.diff:
        (out / DIFF).write_text(record.diff, encoding="utf-8")


# ---- the library copy and one evaluation -------------------------------------------------------------------------

class Workspace:
    """One temporary copy of the repository for the whole loop; each evaluation writes its description into it,
    loads it and runs (evaluations are sequential, and a run reads the library only while it runs)."""

    def __init__(self, inputs: Inputs, folder: Path):
        self.inputs = inputs
        original_root = Path(inputs.library.root).resolve()
        out = inputs.out.resolve()

        def ignore(src: str, names: list[str]) -> set[str]:
            # Never the repository's history, this improve folder, nor any earlier run or improve folder left in the
            # repository (they hold no library content and can be large).
            return {n for n in names if n == ".git" or (Path(src) / n).resolve() == out
                    or any((Path(src) / n / marker).is_file() for marker in (IMPROVE_JSON, "plan.json"))}

        self.root = folder / "library"
        shutil.copytree(original_root, self.root, symlinks=True, ignore=ignore)
        self.library_path = self.root / inputs.library_path.resolve().relative_to(original_root)
        skill = inputs.library.skills[inputs.skill]
        self.skill_md = self.root / Path(skill.path).resolve().relative_to(original_root) / "SKILL.md"
        try:
            self.original = bounded.read_text(self.skill_md, inputs.settings.limits.max_file_bytes)
        except (OSError, UnicodeDecodeError) as exc:  # the loader reported it; a usage error here, never a hang
            raise UsageError(f"{skill.skill_md}: cannot be read to improve ({exc})") from None

    def load(self, description: str | None) -> Library:
        """The copy with `description` in place (None: the current SKILL.md), activation assertions only."""
        text = self.original if description is None else rewrite_description(self.original, description)
        self.skill_md.write_text(text, encoding="utf-8")
        library, _ = load_library(self.library_path, self.inputs.settings)
        return activation_only(library)


def activation_only(library: Library) -> Library:
    """Cases keep the assertions the harness decides from activation; the others depend on the body (module
    docstring)."""
    cases = [c.model_copy(update={"assertions": [a for a in c.assertions if a.assertion_class == "activation"]})
             for c in library.cases]
    return library.model_copy(update={"cases": cases})


def remaining_usd(ledger: Ledger) -> float:
    cap = ledger.cap_usd if ledger.cap_usd is not None else 0.0
    return max(0.0, cap - ledger.spent_usd - ledger.reserved_usd)


def run_cases(inputs: Inputs, workspace: Workspace, ledger: Ledger, description: str | None, uids: list[str],
              label: str) -> Score:
    """One ordinary run of `uids` with `description` in place, capped at what the ledger has left."""
    library = workspace.load(description)
    run_dir = inputs.out / RUNS / label
    selection_file = inputs.out / RUNS / f"{label}.selection.json"
    selection_file.parent.mkdir(parents=True, exist_ok=True)
    selection = Selection(tier="full", cases=[SelectedCase(uid=u, skill=next(c.skill for c in library.cases
                                                                               if c.uid == u), why=f"improve {label}")
                                              for u in uids])
    selection_file.write_text(selection.model_dump_json(indent=2), encoding="utf-8")
    bounds = inputs.bounds
    options = runs_mod.Options(host=bounds.host, model=bounds.model, repeats=bounds.repeats, quorum=bounds.quorum,
                               max_usd=remaining_usd(ledger), no_judge=True, selection_file=selection_file)
    rundir = RunDir(run_dir)
    prepared = runs_mod.prepare(library, inputs.settings, options, inputs.credentials, audit=False, rundir=rundir)
    runs_mod.write_plan(rundir, prepared)
    results = runs_mod.execute(prepared, rundir)
    spent = results.spend.usd + results.spend.lost_in_flight_usd
    ledger.record_prior(spent)
    return score_of(results, uids, str(run_dir), spent)


def score_of(results: Results, uids: list[str], run_dir: str, spent: float) -> Score:
    by_uid = {c.uid: c for c in results.cases}
    cases = []
    for uid in uids:
        result = by_uid[uid]
        state = result.underlying_state if result.state == "QUARANTINED" and result.underlying_state else result.state
        cases.append(CaseScore(uid=uid, kind=result.kind, state=state, reason=result.reason, wins=result.wins,
                               losses=result.losses, errors=result.errors, fired_instead=result.fired_instead))
    passed = sum(1 for c in cases if c.state == "PASS")
    failed = sum(1 for c in cases if c.state == "FAIL")
    errored = sum(1 for c in cases if c.state in BROKEN)
    unrun = len(cases) - passed - failed - errored
    return Score(run_dir=run_dir, passed=passed, failed=failed, errored=errored, unrun=unrun,
                 rate=passed / (passed + failed) if passed + failed else None,
                 wilson_95=wilson_interval(passed, passed + failed), spend_usd=round(spent, 6),
                 stop_reason=results.stop_reason, cases=cases)


# ---- vetting a proposal before anything is spent on it -----------------------------------------------------------

def with_description(library: Library, skill: str, description: str) -> Library:
    old = library.skills[skill]
    new = old.model_copy(update={"description": description, "fields": {**old.fields, "description": description}})
    return library.model_copy(update={"skills": {**library.skills, skill: new}})


def listing_problem(library: Library, settings: Settings, host: str, skill: str, description: str) -> str | None:
    """Why the candidate would cost a listed description (its own or another skill's), or None."""
    before = set(listing.estimate(library, settings.listing, host).with_description)
    after = set(listing.estimate(with_description(library, skill, description), settings.listing,
                                 host).with_description)
    lost = sorted(before - after)
    if skill in before and skill not in after:
        return f"past the listing budget ({settings.listing.effective_budget:,} characters) the skill would be " \
               "listed by name only"
    if lost:
        return f"the listing budget would drop the description of {', '.join(lost)}"
    return None


def vet(text: str, seen: set[str], inputs: Inputs) -> tuple[CandidateState, str | None]:
    """(state, reason) for a proposed description: `evaluated` means it may be run."""
    description = text.strip()
    if not description:
        return "empty", "the proposer returned an empty description"
    if len(description) > DESCRIPTION_LIMIT:
        return "too-long", f"{len(description):,} characters; the limit is {DESCRIPTION_LIMIT:,}"
    if description in seen:
        return "duplicate", "already evaluated in this loop"
    problem = listing_problem(inputs.library, inputs.settings, inputs.bounds.host, inputs.skill, description)
    if problem:
        return "listing-budget", problem
    return "evaluated", None


# ---- the proposer's view: train only -----------------------------------------------------------------------------

def train_view(library: Library, score: Score) -> tuple[TrainCase, ...]:
    """The train cases with the verdicts of `score` (a train run): the only cases a proposer request holds."""
    by_uid = {c.uid: c for c in library.cases}
    return tuple(TrainCase(uid=s.uid, kind=s.kind, prompt=by_uid[s.uid].prompt, should_fire=by_uid[s.uid].target,
                           must_stay_silent=tuple(by_uid[s.uid].should_not_trigger), state=s.state,
                           fired_instead=tuple(s.fired_instead)) for s in score.cases)


def neighbour_descriptions(library: Library, skill: str, score: Score) -> dict[str, str]:
    """The named neighbours, and any library skill that fired instead on a train case."""
    names = set(split_mod.neighbours(library, skill))
    names |= {n for c in score.cases for n in c.fired_instead if n in library.skills and n != skill}
    return {n: library.skills[n].description or "" for n in sorted(names)}


def tried_view(library: Library, record: Improve) -> tuple[Tried, ...]:
    """Every candidate with a train score; a rejected one with the neighbour cases it broke. Any uid of this skill's
    own cases is dropped: split.neighbour_cases already leaves them out, and this keeps a test case out of the
    proposer's sight whatever that selection becomes."""
    own = set(record.train) | set(record.test)
    by_uid = {c.uid: c for c in library.cases}
    made = []
    for candidate in record.candidates:
        if candidate.train is None:
            continue
        check = candidate.neighbours
        broke = check.broke if check is not None and check.state == "rejected" else []
        shown = tuple(neighbour_case(by_uid[u], check.score if check else None) for u in broke if u not in own)
        made.append(Tried(candidate.description, candidate.train.passed, candidate.train.failed, shown))
    return tuple(made)


def neighbour_case(case: Case, score: Score | None) -> NeighbourCase:
    """A broken neighbour case as the proposer reads it: its prompt, what it expects, what the candidate did."""
    result = next((s for s in score.cases if s.uid == case.uid), None) if score is not None else None
    state = result.state if result is not None else "FAIL"
    fired = f" (fired instead: {', '.join(result.fired_instead)})" if result is not None and result.fired_instead \
        else ""
    return NeighbourCase(uid=case.uid, prompt=case.prompt, expected=expectation(case), result=state + fired)


def expectation(case: Case) -> str:
    expects = grading.expectation(case)
    if expects == "target-silent":
        return f"{case.skill} must not fire"
    if expects == "target-fires-neighbours-silent" and case.should_not_trigger:
        return f"{case.target} must fire and {', '.join(case.should_not_trigger)} must not"
    return f"{case.target} must fire"


# ---- the loop ----------------------------------------------------------------------------------------------------

@dataclass
class State:
    record: Improve
    ledger: Ledger
    best: Candidate
    stop: StopReason | None = None


def improve(inputs: Inputs, proposer: Proposer) -> Improve:
    record, the_split, near = start_record(inputs)
    ledger = Ledger(cap_usd=inputs.bounds.max_usd)
    with tempfile.TemporaryDirectory(prefix="skill-evals-improve-") as folder:
        workspace = Workspace(inputs, Path(folder))
        current = Candidate(id="current", round=0, description=record.current_description,
                            chars=len(record.current_description), state="evaluated")
        current.train = run_cases(inputs, workspace, ledger, None, list(the_split.train), "r0-current-train")
        record.candidates.append(current)
        state = State(record=record, ledger=ledger, best=current)
        if current.train.decided == 0:
            return finish(inputs, state, ledger, undecided_baseline(current.train))
        rounds(inputs, workspace, state, proposer, near)
        # The best so far passed the neighbour check inside its round (promote), so it is the one put to the test.
        chosen = state.best if state.best is not current else None
        if chosen is not None:
            record.test_comparison = held_out(inputs, workspace, ledger, chosen, list(the_split.test))
            record.diff = unified_diff(workspace.original, chosen.description, record.skill_md)
    return finish(inputs, state, ledger, None)


def rounds(inputs: Inputs, workspace: Workspace, state: State, proposer: Proposer, near: list[Case]) -> None:
    record = state.record
    for index in range(1, inputs.bounds.rounds + 1):
        assert state.best.train is not None
        if state.best.train.failed == 0 and state.best.train.errored == 0:
            state.stop = "all-train-pass"
            return
        request = ProposalRequest(
            skill=inputs.skill, current=state.best.description, train=train_view(inputs.library, state.best.train),
            neighbours=neighbour_descriptions(inputs.library, inputs.skill, state.best.train),
            tried=tried_view(inputs.library, record), count=inputs.bounds.candidates)
        proposal = asyncio.run(proposer.propose(request, state.ledger, index))
        fresh = take_proposals(inputs, record, index, [p.description for p in proposal.candidates],
                               [p.rationale for p in proposal.candidates])
        stop = run_round(inputs, workspace, state, index, fresh, proposal.call, near)
        if stop is not None:
            state.stop = stop
            return
    state.stop = "round-limit"


def take_proposals(inputs: Inputs, record: Improve, index: int, texts: list[str], rationales: list[str]
                   ) -> list[Candidate]:
    seen = {c.description for c in record.candidates}
    made = []
    for n, (text, rationale) in enumerate(zip(texts, rationales), start=1):
        vetted, reason = vet(text, seen, inputs)
        candidate = Candidate(id=f"r{index}c{n}", round=index, description=text.strip(), chars=len(text.strip()),
                              rationale=rationale, state=vetted, reason=reason)
        seen.add(candidate.description)
        record.candidates.append(candidate)
        made.append(candidate)
    return made


def run_round(inputs: Inputs, workspace: Workspace, state: State, index: int, fresh: list[Candidate],
              call: ProposalCall, near: list[Case]) -> StopReason | None:
    record = state.record
    if call.state != "ok":
        record.rounds.append(Round(index=index, proposal=call, candidates=[], best=state.best.id, improved=False))
        return "budget-cap" if call.state == "UNRUN" else "proposer-error"
    capped = run_on_train(inputs, workspace, state, fresh)
    promotion = promote(inputs, workspace, state, fresh, near, index)
    if promotion.accepted is not None:
        state.best = promotion.accepted
    record.rounds.append(Round(index=index, proposal=call, candidates=[c.id for c in fresh], best=state.best.id,
                               improved=promotion.accepted is not None))
    if capped or promotion.capped:
        return "budget-cap"
    if not any(c.state == "evaluated" for c in fresh):
        return "no-proposals"
    if promotion.accepted is not None or promotion.turned_down:
        return None  # a turned-down candidate is news for the proposer: the next request says what it broke
    return "no-improvement"


def run_on_train(inputs: Inputs, workspace: Workspace, state: State, fresh: list[Candidate]) -> bool:
    """Each runnable candidate on train; True when the cap cut the round short."""
    capped = False
    for candidate in (c for c in fresh if c.state == "evaluated"):
        if remaining_usd(state.ledger) <= 0:
            candidate.state, candidate.reason, capped = "unrun", "budget-cap", True
            continue
        candidate.train = run_cases(inputs, workspace, state.ledger, candidate.description, state.record.train,
                                    f"{candidate.id}-train")
        capped = capped or candidate.train.stop_reason == "budget-cap"
        unrun = [c for c in candidate.train.cases if c.state == "UNRUN"]
        why = next((c.reason for c in unrun if c.reason), None)
        if unrun and len(unrun) == len(candidate.train.cases):  # its run started nothing: no score to claim
            candidate.state, candidate.reason = "unrun", why
        elif unrun:  # a partial score is not compared with complete ones (promote() skips it)
            candidate.reason = f"partial: {len(unrun)} train case(s) UNRUN ({why}); not eligible"
    return capped


# ---- the neighbour check, inside each round ----------------------------------------------------------------------

ACCEPTED: tuple[NeighbourState, ...] = ("passed", "partial", "no-cases")


@dataclass(frozen=True)
class Promotion:
    accepted: Candidate | None  # the round's new best, checked against the neighbours
    turned_down: int  # candidates better on train that the check rejected or could not pass
    capped: bool  # the cap left no room for a check


def promote(inputs: Inputs, workspace: Workspace, state: State, fresh: list[Candidate], near: list[Case],
            index: int) -> Promotion:
    """The round's candidates that beat the best so far on train (complete runs only), best first, at most
    `finalists` of them, get the neighbour check; the first it accepts is the new best. The check comes before a
    candidate counts, so one that takes a neighbour's cases can neither be the round's best nor end the loop."""
    assert state.best.train is not None
    floor = state.best.train.key()
    better = sorted((c for c in fresh if c.train is not None and c.train.unrun == 0 and c.train.key() > floor),
                    key=lambda c: c.train.key() if c.train else (0, 0), reverse=True)  # stable: earlier first
    limit = inputs.bounds.finalists
    for candidate in better[limit:]:  # said, so a reader does not take a missing check for a pass
        candidate.reason = f"better on train, but past the {limit} neighbour check(s) of round {index}: not checked"
    turned_down = 0
    for candidate in better[:limit]:
        candidate.neighbours = check_neighbours(inputs, workspace, state, near, candidate)
        if candidate.neighbours.state in ACCEPTED:
            return Promotion(candidate, turned_down, capped=False)
        if candidate.neighbours.state == "unrun":
            return Promotion(None, turned_down, capped=True)
        turned_down += 1
    return Promotion(None, turned_down, capped=False)


def check_neighbours(inputs: Inputs, workspace: Workspace, state: State, near: list[Case], candidate: Candidate
                     ) -> NeighbourCheck:
    uids = [c.uid for c in near]
    if not uids:
        return NeighbourCheck(state="no-cases")
    record = state.record
    if remaining_usd(state.ledger) <= 0:
        return NeighbourCheck(state="unrun")
    if record.neighbour_baseline is None:  # once per loop: the current description does not change
        record.neighbour_baseline = run_cases(inputs, workspace, state.ledger, None, uids, "neighbours-current")
        record.neighbour_unchecked = [c.uid for c in record.neighbour_baseline.cases if c.state not in VERDICTS]
    if record.neighbour_baseline.stop_reason == "budget-cap" or remaining_usd(state.ledger) <= 0:
        return NeighbourCheck(state="unrun")  # a baseline the cap cut short would leave most cases unchecked
    score = run_cases(inputs, workspace, state.ledger, candidate.description, uids, f"{candidate.id}-neighbours")
    check = neighbour_check(record.neighbour_baseline, score)
    if score.stop_reason == "budget-cap" and check.state != "rejected":  # a break seen before the cap still counts
        check.state = "unrun"
    return check


def neighbour_check(baseline: Score, candidate: Score) -> NeighbourCheck:
    before = {c.uid: c.state for c in baseline.cases}
    broke = [c.uid for c in candidate.cases if before.get(c.uid) == "PASS" and c.state == "FAIL"]
    unsure = [c.uid for c in candidate.cases if before.get(c.uid) == "PASS" and c.state not in VERDICTS]
    # No result with the current description: whether the candidate breaks the case cannot be told.
    unchecked = [c.uid for c in candidate.cases if before.get(c.uid) not in VERDICTS]
    state: NeighbourState = "rejected" if broke else "error" if unsure else "partial" if unchecked else "passed"
    return NeighbourCheck(state=state, broke=broke, unsure=unsure, unchecked=unchecked, score=candidate)


# ---- after the rounds: the test split ----------------------------------------------------------------------------

def held_out(inputs: Inputs, workspace: Workspace, ledger: Ledger, chosen: Candidate, test: list[str]
             ) -> HeldOutComparison:
    current = run_cases(inputs, workspace, ledger, None, test, "test-current")
    proposed = run_cases(inputs, workspace, ledger, chosen.description, test, f"test-{chosen.id}")
    verdict, why = compare(current, proposed)
    return HeldOutComparison(candidate=chosen.id, current=current, proposed=proposed, verdict=verdict, why=why)


def compare(current: Score, proposed: Score) -> tuple[Verdict, str]:
    """The verdict the two Wilson intervals allow (docs/design/improve-loop.md)."""
    if current.errored or current.unrun or proposed.errored or proposed.unrun \
            or current.wilson_95 is None or proposed.wilson_95 is None:
        return "undecided", "a test case has no result in one of the two runs (error, or not run)"
    (c_low, c_high), (p_low, p_high) = current.wilson_95, proposed.wilson_95
    shown = f"candidate {proposed.passed}/{proposed.decided} [{p_low:.2f}, {p_high:.2f}] vs current " \
            f"{current.passed}/{current.decided} [{c_low:.2f}, {c_high:.2f}]"
    if p_low > c_high:
        return "better", f"{shown}: the intervals do not overlap"
    if p_high < c_low:
        return "worse", f"{shown}: the intervals do not overlap"
    return "no better", f"{shown}: the intervals overlap, so no improvement is shown"


def unified_diff(original: str, description: str, shown: str) -> str:
    new = rewrite_description(original, description)
    return "".join(difflib.unified_diff(original.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=f"a/{shown}", tofile=f"b/{shown}"))


def undecided_baseline(score: Score) -> Outcome:
    """The current description decided no train case: UNRUN when nothing ran (the cap), else ERROR."""
    if score.unrun == len(score.cases):
        reason = next((c.reason for c in score.cases if c.reason), None) or "not-run"
        return Outcome(state="UNRUN", reason=reason, summary=f"UNRUN ({reason}): the current description's train "
                                                             "run started no session; no result is claimed")
    cause = "the current description could not be evaluated on train: no train case was decided"
    return Outcome(state="ERROR", reason=cause, summary=f"ERROR: {cause}")


def finish(inputs: Inputs, state: State, ledger: Ledger, fixed: Outcome | None) -> Improve:
    record = state.record
    record.stop_reason = state.stop
    proposer_usd = sum(r.proposal.cost_usd for r in record.rounds)
    record.spend = Spend(cap_usd=inputs.bounds.max_usd, usd=round(ledger.spent_usd, 6),
                         sessions_usd=round(ledger.spent_usd - proposer_usd, 6), proposer_usd=round(proposer_usd, 6),
                         refused=ledger.refused)
    record.outcome = fixed if fixed is not None else outcome_of(record)
    write_record(inputs.out, record)
    return record


def outcome_of(record: Improve) -> Outcome:
    errored = next((r.proposal for r in record.rounds if r.proposal.state == "ERROR"), None)
    comparison = record.test_comparison
    if comparison is not None:
        return Outcome(state="DONE", verdict=comparison.verdict, chosen=comparison.candidate,
                       summary=f"{comparison.candidate} on the held-out test cases (counted in cases, not attempts): "
                               f"{comparison.verdict} ({comparison.why}){partial_note(record, comparison.candidate)}")
    if errored is not None and not any(c.train for c in record.candidates[1:]):
        return Outcome(state="ERROR", reason=f"proposer: {errored.error}",
                       summary=f"ERROR: the proposer call of round {errored.round} failed ({errored.error}); no "
                               "candidate was evaluated, so nothing is claimed")
    rejected = [c.id for c in record.candidates if c.neighbours and c.neighbours.state == "rejected"]
    note = f"; rejected by the neighbour check: {', '.join(rejected)}" if rejected else ""
    return Outcome(state="DONE", summary=f"no candidate was better than the current description on train and safe "
                                         f"for the neighbours{note} (stop: {record.stop_reason}); the test split "
                                         "was not run")


def partial_note(record: Improve, chosen: str) -> str:
    """Said with the verdict when the chosen candidate's neighbour check could not cover every case."""
    check = next((c.neighbours for c in record.candidates if c.id == chosen), None)
    if check is None or check.state != "partial":
        return ""
    return f"; the neighbour check was partial: {len(check.unchecked)} neighbour case(s) had no result with the " \
           f"current description and are unchecked ({', '.join(check.unchecked)})"


# ---- without a key: the plan -------------------------------------------------------------------------------------

def plan_only(inputs: Inputs, reason: str, proposer: Proposer) -> Improve:
    """What the loop would run, with every part UNRUN (`reason`: no-credentials or kill-switch)."""
    record, the_split, near = start_record(inputs)
    bounds = inputs.bounds
    inputs.out.mkdir(parents=True, exist_ok=True)
    selection_file = inputs.out / "plan-selection.json"
    by_uid = {c.uid: c for c in inputs.library.cases}
    selection = Selection(tier="full", cases=[SelectedCase(uid=u, skill=by_uid[u].skill, why="improve train")
                                              for u in the_split.train])
    selection_file.write_text(selection.model_dump_json(indent=2), encoding="utf-8")
    options = runs_mod.Options(host=bounds.host, model=bounds.model, repeats=bounds.repeats, quorum=bounds.quorum,
                               max_usd=bounds.max_usd, no_judge=True, selection_file=selection_file)
    no_key = runs_mod.Credentials(api_key=None, base_url=inputs.credentials.base_url)
    prepared = runs_mod.prepare(activation_only(inputs.library), inputs.settings, options, no_key, audit=False)
    estimate = prepared.plan.estimate
    request = ProposalRequest(skill=inputs.skill, current=record.current_description, neighbours={},
                              train=tuple(TrainCase(uid=c.uid, kind=c.kind, prompt=c.prompt, should_fire=c.target,
                                                    must_stay_silent=tuple(c.should_not_trigger), state="UNRUN")
                                          for c in (by_uid[u] for u in the_split.train)), count=bounds.candidates)
    record.planned = PlannedWork(
        train_cases=len(the_split.train), test_cases=len(the_split.test), neighbour_cases=len(near),
        sessions_per_train_evaluation=(estimate.sessions_min, estimate.sessions_max),
        worst_session_usd=estimate.worst_session_usd, expected_session_usd=estimate.expected_session_usd,
        train_evaluations_max=1 + bounds.rounds * bounds.candidates,
        neighbour_runs_max=(1 + bounds.rounds * bounds.finalists) if near else 0, test_runs=2, proposer_calls_max=bounds.rounds,
        proposer_worst_usd=round(proposer.worst_case_usd(proposer.params(request)), 6))
    record.outcome = Outcome(state="UNRUN", reason=reason,
                             summary=f"UNRUN ({reason}): nothing was run or proposed; no result is claimed")
    write_record(inputs.out, record)
    return record
