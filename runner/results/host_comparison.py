"""The same cases on several hosts (`run --host a,b,...`): each host's run, trigger accuracy per skill per host, and
the cases whose state differs between hosts.

Built only from each host's own results.json (a normal, complete run folder under `<out>/hosts/<host>/`): data
flows one way, and a host's folder can be resumed or reported on alone as any run. The comparison is carried in the
top results.json (`Results.hosts`), whose other fields are the first host's.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from runner.core.host_traits import ActivationGrade, traits
from runner.core.kinds import traits_of
from runner.core.quorum import wilson_interval
from runner.core.states import AGAINST, OPEN, RAN, CaseState

if TYPE_CHECKING:  # types only: build.py imports this module for Results.hosts
    from runner.results.build import CaseResult, Results

# Where each host's run folder is, under the folder the comparison is written to.
HOSTS_FOLDER = "hosts"


class HostRun(BaseModel):
    """One host's run, as its own results.json says."""

    name: str
    versions: dict[str, str]
    activation_grade: ActivationGrade = Field(description="How the host shows an activation (tool-event, file-read, "
                                                          "none): every trigger verdict of it is of this grade.")
    approximation: str | None = None
    results: str = Field(description="Its results.json, relative to the folder of the results.json holding this "
                                     "comparison (posix).")
    counts: dict[str, int] = Field(description="Its cases by state.")
    refused_records: int = Field(default=0, description="Attempt records its run refused (never a success).")
    spend_usd: float = Field(description="What its run spent: recorded, and lost in flight at a kill.")
    cap_usd: float = Field(description="Its cap: the run's cap minus what the hosts before it spent.")
    stop_reason: str | None = None


class HostAccuracy(BaseModel):
    """One skill's trigger accuracy on one host: the trigger and no_trigger cases' attempts that met their
    expectation (fired; stayed silent) over those the host observed."""

    host: str
    wins: int
    trials: int = Field(description="Attempts the host observed: wins + losses (errors are no trial).")
    rate: float | None = Field(description="wins / trials; None when no attempt was observed.")
    interval_95: tuple[float, float] | None = Field(description="Wilson 95 % of the rate.")
    grade: ActivationGrade


class SkillHosts(BaseModel):
    skill: str
    hosts: list[HostAccuracy] = Field(description="One per host, in the order the hosts ran.")


class HostDifference(BaseModel):
    """A case whose state is not the same on every host."""

    uid: str
    skill: str
    states: dict[str, CaseState] = Field(description="Host -> the case's state there (a host whose run has no such "
                                                     "case is left out).")
    reasons: dict[str, str] = Field(default={}, description="Host -> the case's reason there, when it has one.")
    graded: dict[str, ActivationGrade] = Field(default={}, description="Host -> the activation grade of the case's "
                                                                     "attempts there, when it read one: a file-read "
                                                                     "verdict is labelled where it is shown.")


class HostComparison(BaseModel):
    hosts: list[HostRun] = Field(description="In the order they ran; the first is the one this results.json's other "
                                             "fields are of.")
    skills: list[SkillHosts] = Field(description="Trigger accuracy per skill per host (skills with a trigger or "
                                                 "no_trigger case), by skill name.")
    differences: list[HostDifference] = Field(description="The cases whose state differs between hosts.")
    spend_usd: float = Field(description="What every host's run spent together.")
    cap_usd: float = Field(description="The cap of the whole run, across hosts.")


def spent(results: Results) -> float:
    """What a run spent against its cap: recorded, and lost in flight at a kill (runner.results.build.Spend)."""
    return results.spend.usd + results.spend.lost_in_flight_usd


def measures_trigger(case: CaseResult) -> bool:
    """A trigger or no_trigger case that counts: decided by the activation alone, its target firing or staying
    silent (the kinds' own traits say which), and not quarantined (never in a health figure)."""
    kind = traits_of(case.kind)
    return (kind is not None and kind.activation_only and kind.expects in ("target-fires", "target-silent")
            and case.state != "QUARANTINED")


def activation_wins(case: CaseResult) -> tuple[int, int]:
    """(attempts whose activation met the case's expectation, attempts whose activation was observed): the target
    fired for a trigger case, stayed silent for a no_trigger one. Read from the activation part alone: a trigger case
    whose answer an assertion failed still fired."""
    act = case.activation
    if act is None or act.state == "UNRUN" and act.observed_runs == 0:
        return 0, 0
    kind = traits_of(case.kind)
    silent = kind is not None and kind.expects == "target-silent"
    return (act.observed_runs - act.fired_runs if silent else act.fired_runs), act.observed_runs


def accuracy(host: str, cases: Sequence[CaseResult]) -> HostAccuracy:
    counted = [activation_wins(case) for case in cases]
    wins = sum(w for w, _ in counted)
    trials = sum(t for _, t in counted)
    interval = wilson_interval(wins, trials)
    return HostAccuracy(host=host, wins=wins, trials=trials, rate=round(wins / trials, 4) if trials else None,
                        interval_95=None if interval is None else (round(interval[0], 4), round(interval[1], 4)),
                        grade=traits(host).activation_grade)


def host_run(name: str, results: Results, path: str) -> HostRun:
    return HostRun(name=name, versions=results.plan.versions, activation_grade=traits(name).activation_grade,
                   approximation=results.plan.approximation, results=path, counts=dict(results.counts),
                   refused_records=len(results.refused_records), spend_usd=round(spent(results), 6),
                   cap_usd=results.spend.cap_usd, stop_reason=results.stop_reason)


def skill_rows(runs: Sequence[tuple[str, Results]]) -> list[SkillHosts]:
    skills = sorted({case.skill for _, results in runs for case in results.cases if measures_trigger(case)})
    return [SkillHosts(skill=skill, hosts=[
        accuracy(name, [c for c in results.cases if c.skill == skill and measures_trigger(c)])
        for name, results in runs]) for skill in skills]


def differences(runs: Sequence[tuple[str, Results]]) -> list[HostDifference]:
    """Every case some host ran whose state is not the same on every host that has it, in the first host's order."""
    by_host = {name: {case.uid: case for case in results.cases} for name, results in runs}
    order = list(dict.fromkeys(case.uid for _, results in runs for case in results.cases))
    found = []
    for uid in order:
        held: dict[str, CaseResult] = {name: cases[uid] for name, cases in by_host.items() if uid in cases}
        if len({case.state for case in held.values()}) > 1:
            first = next(iter(held.values()))
            found.append(HostDifference(uid=uid, skill=first.skill,
                                        states={name: case.state for name, case in held.items()},
                                        reasons={name: case.reason for name, case in held.items() if case.reason},
                                        graded={name: case.activation_grade for name, case in held.items()
                                                if case.activation_grade is not None}))
    return found


def compare(runs: Sequence[tuple[str, Results, str]], cap_usd: float) -> HostComparison:
    """The comparison of (host name, its results, its results.json's path relative to the comparison) in the order
    the hosts ran; `cap_usd`: the cap of the whole run."""
    named = [(name, results) for name, results, _ in runs]
    return HostComparison(hosts=[host_run(name, results, path) for name, results, path in runs],
                          skills=skill_rows(named), differences=differences(named),
                          spend_usd=round(sum(spent(results) for _, results in named), 6), cap_usd=cap_usd)


def results_path(name: str) -> str:
    """A host's results.json relative to the comparison's folder."""
    return str(PurePosixPath(HOSTS_FOLDER, name, "results.json"))


def host_folder(out: Path, name: str) -> Path:
    """The run folder of host `name` in a comparison written to `out`."""
    return out / HOSTS_FOLDER / name


def combined(runs: Sequence[tuple[str, Results]], cap_usd: float) -> Results:
    """The top results.json: the first host's results, with the comparison of all of them."""
    comparison = compare([(name, results, results_path(name)) for name, results in runs], cap_usd)
    return runs[0][1].model_copy(update={"hosts": comparison})


def first_folder(folder: Path, results: Results) -> Path:
    """The run folder whose attempts and transcripts `results` (read from `folder`) describes: the first host's, for
    a comparison; else `folder` itself."""
    if results.hosts is None or not results.hosts.hosts:
        return folder
    return (folder / results.hosts.hosts[0].results).parent


# ---- what a comparison means for a check ---------------------------------------------------------------------------

def against(run: HostRun) -> int:
    """Its cases that count against the library (FAIL, ERROR, JUDGE-ERROR)."""
    return sum(run.counts.get(state, 0) for state in AGAINST)


def counted(run: HostRun) -> int:
    """Its cases that really ran to a state (quarantined ones never count)."""
    return sum(run.counts.get(state, 0) for state in RAN)


def open_cases(run: HostRun) -> int:
    return sum(run.counts.get(state, 0) for state in OPEN)
