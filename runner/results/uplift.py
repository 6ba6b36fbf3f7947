"""Uplift (`run --baseline`): does the skill help? An output case's two arms, judged by the same rubric.

Per arm, passes / (passes + fails) on the case's rubric with a 95% Wilson interval; the difference gets a
conservative interval built from the two, so a claimed uplift is never an artefact of the interval. An interval
spanning 0 is "no measurable uplift".

Design notes: docs/design/probes.md.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal, TypeAlias

from pydantic import BaseModel, Field

from runner.core.quorum import wilson_interval
from runner.corpus.claims import rubric_indexes
from runner.corpus.library import Case
from runner.execute.grading import CONTROL, TREATMENT, rubric_state

if TYPE_CHECKING:  # the plan reads which cases are output cases without the run folder's modules
    from runner.execute.rundir import AttemptRecord

UpliftVerdict = Literal["uplift", "no measurable uplift", "worse with the skill", "not measured"]
NO_UPLIFT: UpliftVerdict = "no measurable uplift"
INTERVAL_RULE = ("conservative: treatment Wilson low - control Wilson high, treatment Wilson high - control "
                 "Wilson low")


# ---- results.json ---------------------------------------------------------------------------------

class UpliftArm(BaseModel):
    """One arm over its attempts."""

    attempts: int = 0
    passes: int = 0
    fails: int = 0
    undecided: int = Field(default=0, description="Attempts the rubric could not decide: ERROR, JUDGE-ERROR, an "
                                                 "assertion not judged. Neither a pass nor a fail.")
    pass_rate: float | None = Field(default=None, description="passes / (passes + fails); None when none decided.")
    wilson_95: tuple[float, float] | None = None
    cost_usd: float = Field(default=0.0, description="Sessions and judge calls of this arm.")
    input_tokens: int = Field(default=0, description="Every input token (cache writes and reads included).")
    output_tokens: int = 0
    turns: int = 0
    duration_s: float = 0.0
    mean_tokens: float | None = Field(default=None, description="Input + output tokens per attempt.")
    mean_turns: float | None = None
    mean_duration_s: float | None = None


class Uplift(BaseModel):
    """Treatment (the case's own attempts, whole library) against control (without the skill), same rubric."""

    rubric: list[int] = Field(default=[], description="The assertion indexes both arms are graded on (the answer's).")
    treatment: UpliftArm
    control: UpliftArm
    difference: float | None = Field(default=None, description="Treatment pass rate minus control pass rate.")
    difference_interval: tuple[float, float] | None = Field(default=None, description=INTERVAL_RULE + ".")
    verdict: UpliftVerdict = Field(description="uplift: the interval is above 0; worse with the skill: below 0; "
                                               "no measurable uplift: it spans 0; not measured: an arm decided "
                                               "no attempt.")


class SkillUplift(BaseModel):
    """A skill's baselined cases, their attempts pooled per arm (each attempt counted as one observation)."""

    skill: str
    cases: int
    uplift: Uplift


Graded: TypeAlias = "tuple[AttemptRecord, list[int]]"  # an attempt and the rubric of its case


def arm_of(graded: list[Graded]) -> UpliftArm:
    """One arm over its attempts, each graded on its own case's rubric."""
    states = [rubric_state(r.outcome, rubric) for r, rubric in graded if r.outcome is not None]
    records = [r for r, _ in graded]
    passes, fails = states.count("PASS"), states.count("FAIL")
    decided, n = passes + fails, len(records)
    tokens_in = sum(r.usage.input_tokens + r.usage.cache_creation_input_tokens + r.usage.cache_read_input_tokens
                    for r in records)
    tokens_out = sum(r.usage.output_tokens for r in records)
    turns, duration = sum(r.turns for r in records), sum(r.duration_s for r in records)
    interval = wilson_interval(passes, decided)
    return UpliftArm(
        attempts=n, passes=passes, fails=fails, undecided=n - decided,
        pass_rate=round(passes / decided, 4) if decided else None,
        wilson_95=(round(interval[0], 4), round(interval[1], 4)) if interval else None,
        cost_usd=round(sum(r.total_cost_usd for r in records), 6), input_tokens=tokens_in, output_tokens=tokens_out,
        turns=turns, duration_s=round(duration, 3),
        mean_tokens=round((tokens_in + tokens_out) / n, 1) if n else None,
        mean_turns=round(turns / n, 3) if n else None, mean_duration_s=round(duration / n, 3) if n else None)


def compare(treatment: UpliftArm, control: UpliftArm, rubric: list[int]) -> Uplift:
    difference = interval = None
    verdict: UpliftVerdict = "not measured"
    if treatment.pass_rate is not None and control.pass_rate is not None and treatment.wilson_95 \
            and control.wilson_95:
        difference = round(treatment.pass_rate - control.pass_rate, 4)
        low = round(treatment.wilson_95[0] - control.wilson_95[1], 4)
        high = round(treatment.wilson_95[1] - control.wilson_95[0], 4)
        interval = (low, high)
        verdict = "uplift" if low > 0 else ("worse with the skill" if high < 0 else NO_UPLIFT)
    return Uplift(rubric=rubric, treatment=treatment, control=control, difference=difference,
                  difference_interval=interval, verdict=verdict)


def case_uplift(case: Case, records: list[AttemptRecord]) -> Uplift:
    """A baselined case's uplift from its finished attempts of both arms."""
    rubric = rubric_indexes(case)
    return compare(arm_of([(r, rubric) for r in records if r.arm == TREATMENT]),
                   arm_of([(r, rubric) for r in records if r.arm == CONTROL]), rubric)


def skill_uplifts(cases: list[tuple[Case, list[AttemptRecord]]]) -> list[SkillUplift]:
    """Per skill: its baselined cases with their finished records, attempts pooled per arm."""
    by_skill: dict[str, list[tuple[Case, list[AttemptRecord]]]] = {}
    for case, records in cases:
        by_skill.setdefault(case.skill, []).append((case, records))
    out = []
    for skill in sorted(by_skill):
        arms = {arm: arm_of([(r, rubric_indexes(case)) for case, records in by_skill[skill] for r in records
                             if r.arm == arm]) for arm in (TREATMENT, CONTROL)}
        out.append(SkillUplift(skill=skill, cases=len(by_skill[skill]),
                               uplift=compare(arms[TREATMENT], arms[CONTROL], [])))
    return out


def describe(uplift: Uplift) -> str:
    """One cell: the difference with its interval, or what was not measured."""
    if uplift.difference is None or uplift.difference_interval is None:
        return "not measured"
    low, high = uplift.difference_interval
    # Whole points rounded outwards: the shown interval is never narrower than the computed one.
    text = f"{100 * uplift.difference:+.0f} pts [{math.floor(100 * low + 1e-9):+d}, {math.ceil(100 * high - 1e-9):+d}]"
    return f"{text} {uplift.verdict}" if uplift.verdict != "uplift" else text
