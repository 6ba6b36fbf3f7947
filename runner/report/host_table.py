"""The host comparison (`run --host a,b,...`, results.json `hosts`) in words every report shares: the host x skill
cells, a host's line, a differing case's line. Each renderer lays them out its own way."""

from __future__ import annotations

from runner.core.states import AGAINST
from runner.report.versions import host_text
from runner.results.host_comparison import HostAccuracy, HostComparison, HostDifference, HostRun

# The grade of a host whose stream shows the skill call itself; any other is said in every cell it decides.
PLAIN_GRADE = "tool-event"
VERDICT_STATES = ("PASS", "FAIL", "UNDECIDED")  # what a grade qualifies (an ERROR or UNRUN is no verdict)
SHOWN_DIFFERENCES = 20  # differing cases listed in a comment or a terminal; results.json has them all

INTRO = ("The same selected cases ran on each host, one after another, each into its own run folder; the rest of this "
         "report is the first host's run. Trigger accuracy per skill: the attempts of its trigger and no_trigger "
         "cases that met their expectation (fired; stayed silent) over those the host observed, with the Wilson 95% "
         "interval. The activation grade says how a host shows an activation: tool-event (its skill tool call), "
         "file-read (a read of a SKILL.md: no skill event, so a verdict from it is labelled), none (trigger cases "
         "cannot be observed there).")


def grade_mark(grade: str) -> str:
    """What a cell says of its grade: nothing for a tool-event host, the grade in brackets for any other."""
    return "" if grade == PLAIN_GRADE else f" ({grade})"


def cell(accuracy: HostAccuracy) -> str:
    """`0.67 [0.21, 0.94] n=3 (file-read)`; `— (none)` when the host observed no attempt."""
    if accuracy.rate is None:
        return "—" + grade_mark(accuracy.grade)
    interval = "" if accuracy.interval_95 is None else \
        f" [{accuracy.interval_95[0]:.2f}, {accuracy.interval_95[1]:.2f}]"
    return f"{accuracy.rate:.2f}{interval} n={accuracy.trials}{grade_mark(accuracy.grade)}"


def column_head(run: HostRun) -> str:
    return f"{run.name} ({run.activation_grade})"


def counts_text(run: HostRun) -> str:
    shown = [f"{state} {n}" for state, n in run.counts.items() if n or state in ("PASS", "FAIL")]
    return " · ".join(shown)


def host_line(run: HostRun) -> str:
    """`api (api-approximation, anthropic 0.75.0), grade tool-event: PASS 2 · FAIL 1 · UNRUN 0; $0.0123 of $9.99
    cap; hosts/api/results.json` and the stop reason and refused records, when there are any."""
    parts = [f"{host_text(run.name, run.versions)}, grade {run.activation_grade}: {counts_text(run)}",
             f"${run.spend_usd:.4f} of ${run.cap_usd:.2f} cap"]
    if run.stop_reason:
        parts.append(f"stopped early: {run.stop_reason}")
    if run.refused_records:
        parts.append(f"{run.refused_records} attempt record(s) refused")
    parts.append(run.results)
    return "; ".join(parts)


def spend_line(comparison: HostComparison) -> str:
    return (f"{len(comparison.hosts)} hosts spent ${comparison.spend_usd:.4f} of the run's ${comparison.cap_usd:.2f} "
            "cap (each host's cap is what the hosts before it left)")


def state_text(difference: HostDifference, host: str) -> str:
    """The case's state on `host`, labelled `(file-read)` when it is a verdict read from SKILL.md reads."""
    state = difference.states[host]
    graded = difference.graded.get(host, PLAIN_GRADE)
    return f"{state}{grade_mark(graded)}" if state in VERDICT_STATES else state


def difference_line(difference: HostDifference) -> str:
    """`demo/evals.json/x (demo): claude-code PASS · codex FAIL (file-read) · api ERROR (api-error: ...)`."""
    states = " · ".join(f"{host} {state_text(difference, host)}"
                        + (f" ({difference.reasons[host]})" if host in difference.reasons else "")
                        for host in difference.states)
    return f"{difference.uid} ({difference.skill}): {states}"


def failing_elsewhere(comparison: HostComparison) -> list[tuple[HostDifference, str]]:
    """(difference, host) for every case that counts against the library on a host other than the first: the cases
    a report of the first host alone would not show failing (a case failing on every host is the first host's too)."""
    first = comparison.hosts[0].name if comparison.hosts else None
    return [(d, host) for d in comparison.differences for host, state in d.states.items()
            if host != first and state in AGAINST]
