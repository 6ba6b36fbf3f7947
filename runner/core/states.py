"""Every state a verdict can have, in one place: an attempt's, an assertion's, a case's, a probe's.

The states are Literal types so that mypy catches a misspelled state and a str where a state is wanted; the named
groups below say what a state means to a rule, so that no rule spells out a list of states of its own.
"""

from __future__ import annotations

from typing import Literal, get_args

# An attempt's combined outcome: its activation part and every assertion a script or the judge decided.
# JUDGE-ERROR here means the host observed fine but the judge could not decide: never PASS, never FAIL.
# UNRUN: every part it decided passed, but an assertion was never judged (no judge, the cap, no final answer).
AttemptState = Literal["PASS", "FAIL", "ERROR", "JUDGE-ERROR", "UNRUN"]
AssertionState = Literal["PASS", "FAIL", "ERROR", "UNRUN", "UNJUDGEABLE", "JUDGE-ERROR", "UNDECIDED"]
# UNDECIDED: the sequential verdict ran every attempt it allows and the rate stayed open (runner.core.sequential).
CaseState = Literal["PASS", "FAIL", "UNDECIDED", "ERROR", "JUDGE-ERROR", "QUARANTINED", "UNRUN"]
# Every case state, in the order reports count and list them (results.json `counts`, tables, filters).
CASE_STATES: tuple[CaseState, ...] = get_args(CaseState)
# Semantics §3: the first present wins.
ROLLUP_ORDER: tuple[CaseState, ...] = ("FAIL", "ERROR", "JUDGE-ERROR", "UNDECIDED", "UNRUN", "PASS")
# What a run of a tier-2 probe's arm found (runner.probes.arms) and an uplift arm's rubric state (runner.results.uplift).
ProbeState = Literal["CAUGHT", "MISSED", "ERROR", "JUDGE-ERROR"]
RubricState = Literal["PASS", "FAIL", "ERROR", "JUDGE-ERROR", "UNRUN"]

# The named groups. A verdict: the case was decided either way.
VERDICTS: tuple[CaseState, ...] = ("PASS", "FAIL")
# Nothing could be decided because something broke: the host (ERROR) or the judge (JUDGE-ERROR). Never a verdict.
BROKEN: tuple[CaseState, ...] = ("ERROR", "JUDGE-ERROR")
# Not decided and nothing broke: not run, or held back by the quarantine list.
NOT_DECIDED: tuple[CaseState, ...] = ("UNRUN", "QUARANTINED")
# Counts against the library in a check: lost, or broken.
AGAINST: tuple[CaseState, ...] = ("FAIL", *BROKEN)
# Ran every attempt its rule allows and no verdict holds: never PASS, never FAIL, never success (a flake to look at).
OPEN: tuple[CaseState, ...] = ("UNDECIDED",)
# Really ran to a state: a verdict, open, or broken while running.
RAN: tuple[CaseState, ...] = (*VERDICTS, *OPEN, *BROKEN)
