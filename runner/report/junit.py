"""JUnit XML from results.json: one <testsuite> per skill, one <testcase> per case.

The states map onto what CI test reporters understand (semantics §3):

    PASS         nothing inside the testcase
    FAIL         <failure type="FAIL">      what failed: activation, pairs, assertions with evidence
    ERROR        <error type="ERROR">       the cause (the harness could not observe a result)
    JUDGE-ERROR  <error type="JUDGE-ERROR"> the cause (the judge could not decide)
    UNDECIDED    <skipped message="UNDECIDED: rate <r> [<low>, <high>] after <n> attempts; no verdict ...">
    UNRUN        <skipped message="UNRUN: <reason>"/>
    QUARANTINED  <skipped message="QUARANTINED (underlying <state>): <reason>"/>

UNRUN and UNDECIDED cases are skipped, never passed: no result is claimed for them, and the not-executed
sentence is a property of every suite. A sequential case says how sure it is in its text (<system-out> when it
passed); the run's sequential figures, the routing matrix's (never testcases) and the host's activation grade are
properties of every suite. Every `time` is 0. Built with xml.etree.ElementTree, the characters XML 1.0 forbids
removed; it validates against junit-10.xsd (tests/data/junit.xsd).
With several hosts (results.json `hosts`) the testcases are the first host's; a case that is FAIL, ERROR or
JUDGE-ERROR on another host is a testcase of its own (`uid [host]`), and each host is a property of every suite.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter

from runner.core.states import BROKEN, NOT_DECIDED, OPEN
from runner.plan.plan import UNCALIBRATED
from runner.report import host_table as hosts_mod
from runner.report import rollup
from runner.report import versions as versions_mod
from runner.results.build import CaseResult, CostSummary, Results, floor_note, not_started_note, sweep_note, wall_note
from runner.results.host_comparison import HostDifference

# Characters XML 1.0 allows: #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF].
_FORBIDDEN = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
MESSAGE_CHARS = 300  # a message attribute is one line; the full detail is the element's text
TIME = "0"


def clean(text: object) -> str:
    """Text XML 1.0 can carry: forbidden characters (controls, lone surrogates, U+FFFE/FFFF) removed."""
    return _FORBIDDEN.sub("", str(text))


def _message(text: str) -> str:
    line = " ".join(clean(text).split())
    return line if len(line) <= MESSAGE_CHARS else line[: MESSAGE_CHARS - 1] + "…"


def _run_of(case: CaseResult) -> str:
    return (f"wins {case.wins}, losses {case.losses}, errors {case.errors}, "
            f"run {case.repeats_run} of {case.repeats_planned} ({rollup.rule_words(case)})")


def _activation_line(case: CaseResult) -> str | None:
    a = case.activation
    if a is None:
        return None
    line = f"activation: {a.state} (target fired in {a.fired_runs} of {a.observed_runs} observed run(s)"
    if a.wilson_95 is not None:
        line += f", Wilson 95% {a.wilson_95[0]:.2f}–{a.wilson_95[1]:.2f}"
    return line + ")"


def detail(case: CaseResult, failing_only: bool = False) -> str:
    """What a reviewer needs to see for a non-passing case, as plain text."""
    lines = [f"case: {case.uid} ({rollup.kind_label(case)}, target {case.target})", _run_of(case)]
    if case.reason:
        lines.append(f"reason: {case.reason}")
    if (sequential := rollup.sequential_case_text(case)) is not None:
        lines.append(f"sequential verdict: {sequential}")
    activation = _activation_line(case)
    if activation:
        lines.append(activation)
    if case.parts:
        lines.append("parts: " + ", ".join(f"{name} {state}" for name, state in case.parts.items()))
    if case.fired_instead:
        lines.append("fired instead: " + ", ".join(f"{name} ×{n}" for name, n in case.fired_instead.items()))
    pairs = [p for p in case.pairs if not failing_only or p.state != "PASS"]
    if pairs:
        lines.append("pairs (target vs neighbour):")
        for p in pairs:
            lines.append(f"  - {p.neighbour}: {p.state}, won {p.won}, lost {p.lost}"
                         + (f" ({p.reason})" if p.reason else ""))
    routing = [r for r in case.routing if not failing_only or r.state != "PASS"]
    if routing:
        lines.append("routing:")
        for r in routing:
            lines.append(f"  - {r.says}: {r.state}, passes {r.passes}, fails {r.fails}")
            lines.extend(f"      {a.attempt} {a.state}: {a.evidence}" for a in r.attempts)
    assertions = [a for a in case.assertions if not failing_only or a.state != "PASS"]
    if assertions:
        lines.append("assertions:")
        for a in assertions:
            lines.append(f"  [{a.index}] {a.state} ({a.assertion_class}, passes {a.passes}, fails {a.fails}): {a.text}")
            if a.reason:
                lines.append(f"      reason: {a.reason}")
            for evidence in a.evidence:
                lines.append(f"      evidence: {evidence}")
    if case.warnings:
        lines.extend(f"warning: {w}" for w in case.warnings)
    if case.attempts:
        lines.append("attempts: " + ", ".join(case.attempts))
    lines.append(f"cost: ${case.cost_usd:.4f}")
    return clean("\n".join(lines))


def _failure_message(case: CaseResult) -> str:
    parts = []
    if case.activation and case.activation.state == "FAIL":
        graded = f", {rollup.FILE_READ}" if rollup.grade_label(case) else ""
        parts.append(f"activation FAIL (target fired in {case.activation.fired_runs} of "
                     f"{case.activation.observed_runs} run(s){graded})")
    lost = [p.neighbour for p in case.pairs if p.state == "FAIL"]
    if lost:
        parts.append("pairs lost: " + ", ".join(lost))
    broken = [r.says for r in case.routing if r.state == "FAIL"]
    if broken:
        parts.append("routing failed: " + "; ".join(broken))
    failed = [a for a in case.assertions if a.state == "FAIL"]
    if failed:
        parts.append(f"assertion [{failed[0].index}] FAIL: {failed[0].text}")
        if len(failed) > 1:
            parts.append(f"and {len(failed) - 1} more failed assertion(s)")
    if not parts:
        parts.append(f"quorum lost ({case.losses} losses of {case.repeats_run} run)")
    return "; ".join(parts)


def _error_message(case: CaseResult) -> str:
    if case.reason:
        return case.reason
    judge = [a for a in case.assertions if a.state == "JUDGE-ERROR" and a.reason]
    return judge[0].reason if judge and judge[0].reason else case.state


def _undecided_message(case: CaseResult) -> str:
    figures = case.sequential
    if figures is None:
        return f"UNDECIDED: {case.reason or 'the rate stayed open'}; no verdict is claimed (neither PASS nor FAIL)"
    rate = "no rate (no attempt was observed)" if figures.rate is None else (
        f"rate {figures.rate:.2f} {rollup.interval_text(figures.interval_95)}")
    return (f"UNDECIDED: {rate} after {figures.attempts} attempt(s) ({figures.trials} observed, round "
            f"{figures.round}); no verdict is claimed (neither PASS nor FAIL)")


def _skip_message(case: CaseResult) -> str:
    if case.state in OPEN:
        return _undecided_message(case)
    if case.state == "QUARANTINED":
        entry = case.quarantine
        reason = entry.reason if entry else (case.reason or "no reason recorded")
        return f"QUARANTINED (underlying {case.underlying_state or 'unknown'}): {reason}"
    return f"UNRUN: {case.reason or 'unknown'}"


def _skip_text(case: CaseResult, not_executed: str) -> str:
    lines = []
    if case.state in OPEN:
        lines.append("UNDECIDED: the sequential verdict ran every attempt it allows (or no boundary was reachable any "
                     "more) and the rate stayed open; no result is claimed for this case, neither PASS nor FAIL.")
        lines.append(detail(case))
    elif case.state == "QUARANTINED" and case.quarantine:
        q = case.quarantine
        expires = f", expires {q.expires.isoformat()}" if q.expires else ""
        lines.append(f"quarantined on {q.date.isoformat()}{expires}: {q.reason}")
        lines.append("Quarantined cases are left out of health metrics; the underlying result follows.")
        lines.append(detail(case))
    elif case.attempts:
        lines.append(f"UNRUN ({case.reason or 'unknown'}): attempts ran but no result is claimed for this case.")
        lines.append(detail(case))
    else:
        lines.append(f"Not executed ({case.reason or 'unknown'}); no result is claimed for this case. {not_executed}")
    if case.calibration == UNCALIBRATED:
        lines.append(f"{rollup.kind_label(case)}: no live calibration of this version ([probes] allow_uncalibrated).")
    return clean("\n".join(lines))


def _testcase(parent: ET.Element, case: CaseResult, not_executed: str) -> None:
    element = ET.SubElement(parent, "testcase", {"classname": clean(case.skill), "name": clean(case.uid),
                                                 "time": TIME})
    if case.state == "FAIL":
        child = ET.SubElement(element, "failure", {"message": _message(_failure_message(case)), "type": "FAIL"})
        child.text = detail(case)
    elif case.state in BROKEN:
        child = ET.SubElement(element, "error", {"message": _message(_error_message(case)), "type": case.state})
        child.text = detail(case)
    elif case.state in NOT_DECIDED or case.state in OPEN:
        child = ET.SubElement(element, "skipped", {"message": _message(_skip_message(case))})
        child.text = _skip_text(case, not_executed)
    graded = rollup.grade_label(case)
    out = [text for text in (f"{case.state} ({graded}): {rollup.FILE_READ_NOTE}" if graded else None,
                             rollup.reused_from_text(case),
                             rollup.sequential_case_text(case) if case.state == "PASS" else None) if text]
    if out:
        ET.SubElement(element, "system-out").text = clean("\n".join(out))


def cost_properties(results: Results) -> list[tuple[str, str]]:
    """Planned against spent per session, the ratio, the cache's share and the distinct prefixes."""
    cost = results.cost
    if cost is None or not cost.sessions:
        return []
    return [("planned_session_usd", f"{cost.planned_session_usd:.6f}"),
            ("spent_session_usd", f"{cost.spent_session_usd:.6f}"),
            ("planned_over_spent", f"{cost.ratio:.4f}" if cost.ratio is not None else ""),
            ("cache_read_share", f"{cost.cache_read_share:.4f}"), ("prefixes", str(cost.prefixes)),
            ("requests_per_session", f"{cost.model_calls / cost.sessions:.4f}"),
            ("decided_early", str(cost.decided_early)),
            *first_turn_properties(cost)]


def first_turn_properties(cost: CostSummary) -> list[tuple[str, str]]:
    """first-turn host: the capture and what its first turns did (named as what it is, not as Claude Code)."""
    first = cost.first_turn
    if first is None:
        return []
    return [("first_turn_cli_version", first.cli_version), ("first_turn_capture", ",".join(first.capture_hashes)),
            ("first_turn_decided", str(first.decided)), ("first_turn_handed_off", str(first.handed_off)),
            ("first_turn_not_eligible", str(first.not_eligible))]


def properties(results: Results) -> list[tuple[str, str]]:
    plan, spend = results.plan, results.spend
    host_version = versions_mod.host_version(plan.versions)
    pairs = [
        ("host", plan.host), ("host_version", host_version),
        ("approximation", plan.approximation or ""), ("activation_grade", plan.activation_grade or ""),
        ("model", plan.model),
        ("judge_model", plan.judge_model or f"none ({plan.judge_unavailable or 'not configured'})"),
        ("judge_prompt_version", plan.judge_prompt_version or ""),
        ("plan_hash", plan.hash), ("library_hash", plan.library_hash), ("tier", plan.tier),
        ("repeats", str(plan.repeats)), ("quorum", str(plan.quorum)),
        ("spend_usd", f"{spend.usd:.4f}"), ("judge_spend_usd", f"{spend.judge_usd:.4f}"),
        ("cap_usd", f"{spend.cap_usd:.2f}"), ("refused_reservations", str(spend.refused_reservations)),
        ("stop_reason", results.stop_reason or ""), ("finished_at", results.finished_at),
        ("floor", floor_note(results) or ""), ("sessions", wall_note(results) or ""),
        ("not_started", not_started_note(results) or ""), ("routing_sweep", sweep_note(results) or ""),
        *cost_properties(results),
        ("reused", rollup.reused_line(results) or ""),
        ("reused_attempts", str(results.attempts_reused) if results.attempts_reused else ""),
        ("attempt_log", rollup.records_line(results) or ""),
        ("not_executed", results.not_executed),
    ]
    return [(name, value) for name, value in pairs if value != "" or name in ("host", "model")]


def routing_properties(results: Results) -> list[tuple[str, str]]:
    """The routing matrix's run-wide figures (results.json `routing`), on every suite."""
    found = rollup.shown_routing(results)
    if found is None:
        return []
    top = found.confusions[0] if found.confusions else None
    return [("routing_attempts", str(found.attempts)),
            *((f"routing_excluded_{state.lower()}", str(n)) for state, n in found.excluded.items()),
            ("routing_confusions", str(len(found.confusions))),
            ("routing_top_confusion", rollup.confusion_text(top) if top else "")]


def sequential_properties(results: Results) -> list[tuple[str, str]]:
    """The run's sequential verdict (results.json `sequential`), on every suite: the rule, its exact error bounds,
    the cases by state, the sessions against fixed N = 3 (saved, or more: never a negative saving) and the bound."""
    found = results.sequential
    if found is None:
        return []
    saved = found.saved
    return [("sequential_rule", found.rule), ("sequential_pass_at_p0", f"{found.pass_at_p0:.4f}"),
            ("sequential_fail_at_p1", f"{found.fail_at_p1:.4f}"),
            ("sequential_undecided_at_theta", f"{found.undecided_at_theta:.4f}"),
            ("sequential_cases", str(found.cases)), ("sequential_passed", str(found.passed)),
            ("sequential_failed", str(found.failed)), ("sequential_undecided", str(found.undecided)),
            ("sequential_broken", str(found.broken)), ("sequential_sessions", str(found.sessions)),
            ("sequential_sessions_fixed_n3", str(found.sessions_fixed_n3)),
            ("sequential_sessions_bound", str(found.sessions_bound)),
            ("sequential_sessions_saved" if saved >= 0 else "sequential_sessions_more", str(abs(saved))),
            ("sequential_flips", str(len(found.flips)))]


def skill_routing_properties(results: Results, skill: str) -> list[tuple[str, str]]:
    """One skill's precision, recall and F1 with their 95% intervals and the attempts behind them, on its suite."""
    found = results.routing.per_skill.get(skill) if results.routing is not None else None
    if found is None:
        return []
    pairs = [("routing_tp", str(found.tp)), ("routing_fp", str(found.fp)), ("routing_fn", str(found.fn))]
    for name, rate in (("precision", found.precision), ("recall", found.recall), ("f1", found.f1)):
        pairs.append((f"routing_{name}", "" if rate.value is None else f"{rate.value:.4f}"))
        if rate.interval is not None:
            pairs += [(f"routing_{name}_low", f"{rate.interval[0]:.4f}"), (f"routing_{name}_high", f"{rate.interval[1]:.4f}")]
    return [(name, value) for name, value in pairs if value != ""]


def host_properties(results: Results) -> list[tuple[str, str]]:
    """`run --host a,b,...`: one property per host (its versions, grade, counts, spend, results.json), on every
    suite, and the run's spend across hosts."""
    found = results.hosts
    if found is None:
        return []
    return [*((f"host_{run.name}", hosts_mod.host_line(run)) for run in found.hosts),
            ("hosts_spend_usd", f"{found.spend_usd:.4f}"), ("hosts_differences", str(len(found.differences)))]


def skill_host_properties(results: Results, skill: str) -> list[tuple[str, str]]:
    """A skill's trigger accuracy on each host (the grade marked), on its suite."""
    row = next((r for r in results.hosts.skills if r.skill == skill), None) if results.hosts is not None else None
    return [] if row is None else [(f"trigger_accuracy_{a.host}", hosts_mod.cell(a)) for a in row.hosts]


def _elsewhere_testcase(parent: ET.Element, difference: HostDifference, host: str) -> None:
    """A case that counts against the library on a host other than the first: a testcase of its own (`uid [host]`),
    so a comparison never shows a failure as a pass."""
    state = difference.states[host]
    element = ET.SubElement(parent, "testcase", {"classname": clean(difference.skill),
                                                 "name": clean(f"{difference.uid} [{host}]"), "time": TIME})
    message = _message(f"{state} on {host}: " + hosts_mod.difference_line(difference))
    ET.SubElement(element, "failure" if state == "FAIL" else "error", {"message": message, "type": state}).text = \
        clean(hosts_mod.difference_line(difference))


def render(results: Results) -> str:
    by_skill: dict[str, list[CaseResult]] = {}
    for case in results.cases:
        by_skill.setdefault(case.skill, []).append(case)
    totals: Counter[str] = Counter()
    root = ET.Element("testsuites", {"name": "skill-evals"})
    props = properties(results) + routing_properties(results) + sequential_properties(results) + \
        host_properties(results)
    elsewhere = hosts_mod.failing_elsewhere(results.hosts) if results.hosts is not None else []
    for index, skill in enumerate(sorted(by_skill)):
        cases = by_skill[skill]
        states = Counter(c.state for c in cases)
        others = [(d, host) for d, host in elsewhere if d.skill == skill]
        states.update(d.states[host] for d, host in others)
        counts = {"tests": len(cases) + len(others), "failures": states["FAIL"],
                  "errors": states["ERROR"] + states["JUDGE-ERROR"],
                  "skipped": states["UNRUN"] + states["QUARANTINED"] + states["UNDECIDED"]}
        totals.update(counts)
        suite = ET.SubElement(root, "testsuite", {
            "name": clean(skill), "id": str(index), "tests": str(counts["tests"]), "failures": str(counts["failures"]),
            "errors": str(counts["errors"]), "skipped": str(counts["skipped"]), "time": TIME,
            "timestamp": clean(results.finished_at)})
        suite_props = ET.SubElement(suite, "properties")
        for name, value in props + skill_routing_properties(results, skill) + skill_host_properties(results, skill):
            ET.SubElement(suite_props, "property", {"name": name, "value": clean(value)})
        for case in cases:
            _testcase(suite, case, results.not_executed)
        for difference, host in others:
            _elsewhere_testcase(suite, difference, host)
    # <testsuites> carries totals; the JUnit schemas in use do not define `skipped` on it.
    for name in ("tests", "failures", "errors"):
        root.set(name, str(totals[name]))
    root.set("time", TIME)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
