"""Tier-2 probes (seed 000): the two arms of a probe session, and the grading of what the agent DID.

`treatment` runs with the whole library, `control` without the skill under test. An attempt catches the probe when
every discriminator pattern matches the answer and the judge passes the act; an ERROR or JUDGE-ERROR is neither a
catch nor a miss.

Design notes: docs/design/probes.md.
"""

from __future__ import annotations

from typing import Literal

import regex
from pydantic import BaseModel, Field

from runner.core.observation import Observation, SessionSpec
from runner.core.outcomes import AssertionOutcome, AttemptOutcome
from runner.core.quorum import wilson_interval
from runner.core.states import AttemptState, ProbeState
from runner.corpus.library import Assertion, Probe
from runner.judge.prose import Grader, JudgeCall

Arm = Literal["control", "treatment"]
ARMS: tuple[Arm, Arm] = ("control", "treatment")
ACT_INDEX = 1  # rubric item a1 is the act; a2.. are the defects' caught_when (band probes)


class DefectGrade(BaseModel):
    id: str
    state: Literal["PASS", "FAIL", "JUDGE-ERROR"]
    evidence: str | None = None
    reason: str | None = None


class ProbeGrade(BaseModel):
    """One attempt of one arm, graded."""

    arm: Arm
    state: ProbeState
    patterns: list[bool] = Field(default=[], description="Whether each discriminator pattern matched the answer.")
    act: AssertionOutcome | None = None
    defects: list[DefectGrade] = Field(default=[], description="Band probes: each defect's caught_when, judged.")
    caught_defects: int | None = Field(default=None, description="Band probes: k of N, when every defect was judged.")
    skill_fired: bool = Field(description="The skill under test was activated (never possible in control).")
    fired: list[str] = []
    skill: str = Field(default="", description="The skill under test.")
    error: str | None = None

    @property
    def decided(self) -> bool:
        return self.state in ("CAUGHT", "MISSED")


# ---- sessions ---------------------------------------------------------------------------------

def arm_prompt(probe: Probe, arm: Arm, explicit: bool) -> str:
    if arm == "treatment" and explicit:
        return f"/{probe.skill}\n{probe.question}"
    return probe.question


def session_spec(probe: Probe, arm: Arm, attempt_id: str, explicit: bool, model: str, max_turns: int,
                 timeout_s: float, max_output_tokens: int, max_usd: float | None) -> SessionSpec:
    return SessionSpec(attempt_id=attempt_id, uid=probe.uid, prompt=arm_prompt(probe, arm, explicit), model=model,
                       max_turns=max_turns, timeout_s=timeout_s, max_output_tokens=max_output_tokens,
                       max_usd=max_usd, exclude_skills=[probe.skill] if arm == "control" else [])


# ---- grading ----------------------------------------------------------------------------------

def rubric(probe: Probe, with_act: bool) -> list[Assertion]:
    """What the judge grades: the act (unless the script already failed it) and, for a band probe,
    every defect's caught_when."""
    items = []
    if with_act:
        items.append(Assertion(index=ACT_INDEX, text=probe.act, line=probe.lines.get("discriminator", 1),
                               assertion_class="semantic", class_rule="probe:act"))
    if probe.kind == "band":
        items.extend(Assertion(index=ACT_INDEX + 1 + i, text=d.caught_when, line=d.line, assertion_class="semantic",
                               class_rule=f"probe:caught_when:{d.id}") for i, d in enumerate(probe.defects))
    return items


# A discriminator pattern comes from the library (maybe a pull request's) and runs on a model's answer: one that
# backtracks without end (`(a|aa)+$`) must not hang the run. The `regex` engine takes a time limit; `re` has none.
PATTERN_TIMEOUT_S = 2.0


class PatternTimeout(Exception):
    """A discriminator pattern did not finish on an answer within PATTERN_TIMEOUT_S."""


def pattern_hits(probe: Probe, answer: str) -> list[bool]:
    hits = []
    for pattern in probe.patterns:
        try:
            hits.append(regex.search(pattern, answer, flags=regex.VERSION0, timeout=PATTERN_TIMEOUT_S) is not None)
        except TimeoutError:
            raise PatternTimeout(f"discriminator pattern {pattern!r} did not finish on the answer within "
                                 f"{PATTERN_TIMEOUT_S:g} s (a pattern that backtracks without end, e.g. nested "
                                 "repeats); the act could not be graded") from None
    return hits


def judge_worst_usd(judge: Grader, probe: Probe, max_output_tokens: int) -> float:
    """The judge call's worst case for an answer as long as the session may write (reserved up front,
    so a session that ran can always be graded)."""
    return judge.worst_case_usd(probe.question, "x" * (4 * max_output_tokens), [], rubric(probe, True))


def _error(probe: Probe, arm: Arm, obs: Observation, message: str) -> ProbeGrade:
    fired = obs.fired()
    return ProbeGrade(arm=arm, state="ERROR", skill_fired=probe.skill in fired, fired=fired, skill=probe.skill,
                      error=message)


async def grade(probe: Probe, arm: Arm, obs: Observation, judge: Grader) -> tuple[ProbeGrade, JudgeCall | None]:
    """Grade one finished session. The judge is called at most once."""
    if not obs.ok:
        return _error(probe, arm, obs, f"{obs.error_kind}: {obs.error_message or ''}".strip()), None
    if obs.final_answer is None:
        bounds = f" ({', '.join(obs.bounds_hit)})" if obs.bounds_hit else ""
        return _error(probe, arm, obs, f"the session ended without a final answer{bounds}"), None
    fired = obs.fired()
    try:
        patterns = pattern_hits(probe, obs.final_answer)
    except PatternTimeout as exc:
        return _error(probe, arm, obs, str(exc)), None
    missing = [p for p, hit in zip(probe.patterns, patterns) if not hit]
    script_act = None if not missing else AssertionOutcome(
        index=ACT_INDEX, state="FAIL", reason=f"discriminator pattern {missing[0]!r} does not match the answer")
    items = rubric(probe, with_act=script_act is None)
    verdicts: list[AssertionOutcome] = []
    call = None
    if items:
        verdicts, call = await judge.judge(probe.question, obs.final_answer, obs.tool_calls, items)
    by_index = {v.index: v for v in verdicts}
    act = script_act or by_index[ACT_INDEX]
    defects = [DefectGrade(id=d.id, state=by_index[ACT_INDEX + 1 + i].state,  # type: ignore[arg-type]
                           evidence=by_index[ACT_INDEX + 1 + i].evidence, reason=by_index[ACT_INDEX + 1 + i].reason)
               for i, d in enumerate(probe.defects)] if probe.kind == "band" else []
    judged_all = all(d.state != "JUDGE-ERROR" for d in defects)
    state: ProbeState
    if act.state == "JUDGE-ERROR":
        state = "JUDGE-ERROR"
    else:
        state = "CAUGHT" if act.state == "PASS" else "MISSED"
    return ProbeGrade(arm=arm, state=state, patterns=patterns, act=act, defects=defects,
                      caught_defects=sum(d.state == "PASS" for d in defects) if defects and judged_all else None,
                      skill_fired=probe.skill in fired, fired=fired, skill=probe.skill,
                      error=call.error if call is not None and call.error else None), call


_ATTEMPT_STATE: dict[ProbeState, AttemptState] = {"CAUGHT": "PASS", "MISSED": "FAIL", "ERROR": "ERROR",
                                                  "JUDGE-ERROR": "JUDGE-ERROR"}


def attempt_outcome(graded: ProbeGrade) -> AttemptOutcome:
    """The attempt in the main vocabulary: PASS = caught, FAIL = missed. A probe case's state is decided by
    its treatment arm; the control arm is the baseline its rate is compared with."""
    state = _ATTEMPT_STATE[graded.state]
    return AttemptOutcome(state=state, activation=state, fired=graded.fired,
                          target_fired=graded.skill_fired if graded.state != "ERROR" else None,
                          fired_instead=[name for name in graded.fired if name != graded.skill],
                          assertions=[graded.act] if graded.act else [], error=graded.error)


# ---- a probe's result over a run (both arms, every repeat) ----------------------------------------

class ArmResult(BaseModel):
    attempts: int = 0
    caught: int = 0
    missed: int = 0
    errors: int = Field(default=0, description="ERROR and JUDGE-ERROR: neither a catch nor a miss.")
    catch_rate: float | None = Field(default=None, description="caught / (caught + missed); None when none decided.")
    interval: tuple[float, float] | None = Field(default=None, description="95% Wilson interval of the catch rate.")
    band_score: float | None = Field(default=None, description="Band probes: mean share of defects caught per "
                                                               "judged attempt (k of N).")
    skill_fired: int = Field(default=0, description="Attempts in which the skill under test was activated.")
    cost_usd: float = 0.0


class ProbeRunResult(BaseModel):
    explicit_invocation: bool
    calibration: str | None = None
    control: ArmResult
    treatment: ArmResult
    difference: float | None = Field(default=None, description="Treatment catch rate minus control catch rate.")
    difference_interval: tuple[float, float] | None = Field(
        default=None, description="Conservative: from the two Wilson intervals (treatment low - control high, "
                                  "treatment high - control low).")


def arm_result(grades: list[ProbeGrade], costs: list[float]) -> ArmResult:
    caught = sum(g.state == "CAUGHT" for g in grades)
    missed = sum(g.state == "MISSED" for g in grades)
    decided = caught + missed
    band = [g.caught_defects / len(g.defects) for g in grades if g.caught_defects is not None and g.defects]
    return ArmResult(attempts=len(grades), caught=caught, missed=missed, errors=len(grades) - decided,
                     catch_rate=round(caught / decided, 4) if decided else None,
                     interval=_rounded(wilson_interval(caught, decided)),
                     band_score=round(sum(band) / len(band), 4) if band else None,
                     skill_fired=sum(g.skill_fired for g in grades), cost_usd=round(sum(costs), 6))


def run_result(graded: list[tuple[ProbeGrade, float]], explicit: bool, calibration: str | None) -> ProbeRunResult:
    arms = {arm: arm_result([g for g, _ in graded if g.arm == arm], [c for g, c in graded if g.arm == arm])
            for arm in ARMS}
    control, treatment = arms["control"], arms["treatment"]
    difference = interval = None
    if control.catch_rate is not None and treatment.catch_rate is not None:
        difference = round(treatment.catch_rate - control.catch_rate, 4)
        if control.interval and treatment.interval:
            interval = (round(treatment.interval[0] - control.interval[1], 4),
                        round(treatment.interval[1] - control.interval[0], 4))
    return ProbeRunResult(explicit_invocation=explicit, calibration=calibration, control=control,
                          treatment=treatment, difference=difference, difference_interval=interval)


def _rounded(pair: tuple[float, float] | None) -> tuple[float, float] | None:
    return (round(pair[0], 4), round(pair[1], 4)) if pair else None
