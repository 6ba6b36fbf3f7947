"""One self-contained HTML page from results.json (and, when given, the run folder's transcripts).

Everything is inline and a Content-Security-Policy forbids any fetch. Every text of the run is user text: escaped
server-side, and inserted by the page's script with textContent only. The CSS and script are string constants here,
beside the Python that fills them.

Design notes: docs/design/reports.md.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import math
import re
from pathlib import Path
from typing import Any

from runner.core.states import RAN, VERDICTS, CaseState
from runner.execute.rundir import ATTEMPTS, TRANSCRIPTS, AttemptRecord, RunDir, safe_name
from runner.report import host_table as hosts_mod
from runner.report import rollup
from runner.report.history import History, TrendPoint
from runner.results.build import CaseResult, Results, floor_note, kill_note, not_started_note, sweep_note, wall_note
from runner.results.uplift import describe as uplift_text

TRANSCRIPT_CAP = 200_000       # bytes of embedded JSON per attempt's transcript
TOTAL_CAP = 25_000_000         # bytes of embedded transcripts for the whole page
READ_LIMIT = 64_000_000        # a transcript file bigger than this is not parsed, only its start is shown
TEXT_CAP = 20_000              # final answers and error messages
DATA_ID = "skill-evals-data"

# Characters HTML text should not carry: C0 controls other than tab/newline/CR, lone surrogates.
_FORBIDDEN = re.compile("[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f\ud800-\udfff]")


def _clean(text: object) -> str:
    return _FORBIDDEN.sub("\ufffd", str(text))


def e(text: object) -> str:
    """User text as HTML text or attribute value: escaped, never markup."""
    return html.escape(_clean("" if text is None else text), quote=True)


def _cut(text: str | None, limit: int = TEXT_CAP) -> str | None:
    if text is None:
        return None
    text = _clean(text)
    return text if len(text) <= limit else text[:limit] + f"\n[… cut: {len(text) - limit} more characters]"


def script_json(data: Any) -> str:
    """JSON that is safe inside <script type="application/json">: no `<`, `>` or `&` survive."""
    text = json.dumps(data, ensure_ascii=True, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _kb(n: int) -> str:
    return f"{n / 1000:.0f} KB" if n >= 1000 else f"{n} bytes"


def _size(data: Any) -> int:
    return len(json.dumps(data, ensure_ascii=True, separators=(",", ":")))


# ---- transcripts from the run folder --------------------------------------------------------------

def _records(run_dir: Path, wanted: set[str], refused: set[int]) -> dict[str, AttemptRecord]:
    """The record shown for each wanted attempt: its first finished one (a later one for the same id is refused,
    runner.results.vetting), else its last cancelled one. `refused`: the lines results.json lists as refused."""
    records: dict[str, AttemptRecord] = {}
    for line in RunDir(run_dir).iter_lines():
        record = line.record
        if record is None or line.number in refused or record.attempt_id not in wanted:
            continue
        kept = records.get(record.attempt_id)
        if kept is None or kept.status != "finished":
            records[record.attempt_id] = record
    return records


def _transcript_path(run_dir: Path, record: AttemptRecord) -> tuple[str, Path | None]:
    relative = record.transcript or f"{TRANSCRIPTS}/{safe_name(record.attempt_id)}.json"
    root = run_dir.resolve()
    path = (root / relative).resolve()
    if root not in path.parents:
        return relative, None  # a path out of the run folder is never read
    return relative, path


def load_transcript(run_dir: Path, record: AttemptRecord, cap: int) -> dict[str, Any]:
    """The transcript as embedded: messages (cut to `cap` bytes), or a note saying why not."""
    relative, path = _transcript_path(run_dir, record)
    out: dict[str, Any] = {"file": relative}
    if path is None or not path.is_file():
        out["note"] = ("no transcript was recorded for this attempt" if record.transcript is None
                       else f"transcript file not found in the run folder: {relative}")
        return out
    size = path.stat().st_size
    out["bytes"] = size
    if size > READ_LIMIT:
        with open(path, "rb") as handle:
            head = handle.read(cap).decode("utf-8", errors="replace")
        out.update(raw=_clean(head), truncated=True,
                   note=f"transcript cut: the file is {_kb(size)}; showing its first {_kb(cap)} "
                        f"as text. Full transcript: {relative}")
        return out
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        messages = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's stack
        out.update(raw=_clean(text[:cap]), truncated=len(text) > cap,
                   note=f"the transcript file is not valid JSON; showing it as text. Full transcript: {relative}")
        return out
    if not isinstance(messages, list):
        messages = [messages]
    kept: list[Any] = []
    used = 0
    for message in messages:
        size_of = _size(message) + 1
        if used + size_of > cap:
            break
        kept.append(message)
        used += size_of
    out["messages"] = kept
    out["total_messages"] = len(messages)
    if len(kept) < len(messages):
        out["truncated"] = True
        note = (f"transcript cut at {_kb(cap)}: showing the first {len(kept)} of {len(messages)} "
                f"messages. Full transcript: {relative}")
        if not kept:
            out["raw"] = _clean(json.dumps(messages[0], ensure_ascii=False, indent=1, default=str)[:cap])
            note = (f"transcript cut at {_kb(cap)}: its first message alone is larger, shown as text "
                    f"from its start ({len(messages)} messages in all). Full transcript: {relative}")
        out["note"] = note
    return out


def _attempt_data(record: AttemptRecord | None, attempt_id: str) -> dict[str, Any]:
    if record is None:
        return {"id": attempt_id, "note": f"no line for this attempt in {ATTEMPTS}"}
    outcome = record.outcome
    data: dict[str, Any] = {
        "id": attempt_id, "status": record.status, "turns": record.turns, "duration_s": round(record.duration_s, 2),
        "cost_usd": round(record.total_cost_usd, 6), "bounds_hit": list(record.bounds_hit),
        "error": _cut(" ".join(x for x in (record.error_kind, record.error_message) if x) or None, 2000),
        "final_answer": _cut(record.final_answer),
    }
    if outcome is not None:
        data.update(state=outcome.state, activation=outcome.activation, fired=outcome.fired,
                    fired_instead=outcome.fired_instead, pairs=outcome.pairs,
                    routing=[f"{r.part} {r.state}: {_cut(r.evidence, 2000)}" for r in outcome.routing],
                    assertions=[{"index": a.index, "state": a.state, "reason": _cut(a.reason, 2000),
                                 "evidence": _cut(a.evidence, 4000)} for a in outcome.assertions])
    if record.judge is not None:
        data["judge"] = {"model": record.judge.model, "prompt_version": record.judge.prompt_version,
                         "error": _cut(record.judge.error, 2000), "cost_usd": record.judge.cost_usd}
    return data


# ---- what the review mode needs (labels in the format `calibrate-judge` reads) ----------------------

JUDGED_CLASSES = ("semantic", "artifact_shape")  # the classes the judge decides (runner.results.verdicts)
TOOL_CALLS_CAP = 50            # tool calls embedded per attempt for the labels (the judge sees them)
TOOL_INPUT_CAP = 2_000         # characters of each tool call's input


def _text_of(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [str(b["text"]) for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)]
        return "\n".join(texts) if texts else None
    return None


def prompt_of(messages: list[Any]) -> str | None:
    """The case prompt as the session received it: the transcript's first user text (the api host writes
    `{"role": "user", ...}`, claude-code's SDK messages `{"_type": "UserMessage", "content": ...}`)."""
    for message in messages:
        if not isinstance(message, dict):
            continue
        if message.get("role") == "user" or message.get("_type") == "UserMessage":
            text = _text_of(message.get("content"))
            if text is not None:
                return text
    return None


def _read_prompt(run_dir: Path, record: AttemptRecord) -> str | None:
    _, path = _transcript_path(run_dir, record)
    if path is None or not path.is_file() or path.stat().st_size > READ_LIMIT:
        return None
    try:
        messages = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (ValueError, RecursionError):
        return None
    return prompt_of(messages if isinstance(messages, list) else [messages])


def judged_by_the_judge(assertion_class: str, outcome_state: str, reason: str | None) -> bool:
    """Whether the judge gave this attempt's verdict on the assertion (what a person can agree with). The judge
    always gives a reason (a string, maybe empty); an artifact-shape assertion the script decided (its literal
    missing, or shape only) has none."""
    if assertion_class not in JUDGED_CLASSES or outcome_state not in VERDICTS:
        return False
    return assertion_class == "semantic" or reason is not None


def _add_review(entry: dict[str, Any], record: AttemptRecord, case: CaseResult, run_dir: Path) -> None:
    """What a label needs beyond the final answer (already in the entry): the assertion's text and class,
    the prompt (from the transcript file, whole, whatever the page embeds of it) and the tool calls, capped."""
    if record.judge is None or record.outcome is None:
        return
    texts = {a.index: a for a in case.assertions}
    reviewable = 0
    for item in entry.get("assertions", []):
        known = texts.get(item["index"])
        if known is None:
            continue
        item["class"] = known.assertion_class
        item["text"] = _cut(known.text, 4000)
        item["judged"] = judged_by_the_judge(known.assertion_class, item["state"], item.get("reason"))
        reviewable += item["judged"]
    if not reviewable:
        return
    entry["prompt"] = _cut(_read_prompt(run_dir, record))
    entry["tool_calls"] = [{"name": _clean(c.name), "input": _cut(c.input, TOOL_INPUT_CAP)}
                           for c in record.tool_calls[:TOOL_CALLS_CAP]]
    if len(record.tool_calls) > TOOL_CALLS_CAP:
        entry["tool_calls_cut"] = len(record.tool_calls) - TOOL_CALLS_CAP


_PRIORITY: dict[CaseState, int] = {"FAIL": 0, "ERROR": 1, "JUDGE-ERROR": 1, "QUARANTINED": 2, "UNDECIDED": 3,
                                   "UNRUN": 4, "PASS": 5}


def attempts_data(results: Results, run_dir: Path | None, transcript_cap: int, total_cap: int
                  ) -> dict[str, list[dict[str, Any]]]:
    """Per case index: its attempts, with transcripts. Failing cases get the page budget first."""
    if run_dir is None:
        return {}
    wanted = {a for case in results.cases for a in case.attempts}
    records = _records(run_dir, wanted, {r.line for r in results.refused_records if r.file == ATTEMPTS})
    out: dict[str, list[dict[str, Any]]] = {}
    used = 0
    order = sorted(range(len(results.cases)), key=lambda i: (_PRIORITY.get(results.cases[i].state, 6), i))
    for index in order:
        case = results.cases[index]
        if not case.attempts:
            continue
        entries = []
        for attempt_id in case.attempts:
            record = records.get(attempt_id)
            entry = _attempt_data(record, attempt_id)
            if record is not None:
                _add_review(entry, record, case, run_dir)
                if used >= total_cap:
                    relative, _ = _transcript_path(run_dir, record)
                    entry["transcript"] = {"file": relative, "truncated": True,
                                           "note": f"not embedded: the page's transcript budget "
                                                   f"({total_cap // 1_000_000} MB) is used up. "
                                                   f"Full transcript: {relative}"}
                else:
                    entry["transcript"] = load_transcript(run_dir, record, min(transcript_cap, total_cap - used))
                    used += _size(entry["transcript"])
            entries.append(entry)
        out[str(index)] = entries
    return out


# ---- server-side HTML (every user text through e()) -----------------------------------------------

def _badge(state: str | None) -> str:
    state = state or "UNRUN"
    return f'<span class="badge st-{e(state)}">{e(state)}</span>'


def _grade(case: CaseResult) -> str:
    """The label beside a verdict read from a file-read host's attempts (rollup.grade_label), or nothing."""
    label = rollup.grade_label(case)
    return f' <span class="grade" title="{e(rollup.FILE_READ_NOTE)}">({e(label)})</span>' if label else ""


def _dl(items: list[tuple[str, str]]) -> str:
    return "<dl>" + "".join(f"<dt>{e(k)}</dt><dd>{v}</dd>" for k, v in items) + "</dl>"


def _header(results: Results, roll: rollup.Rollup) -> str:
    plan, spend, h = results.plan, results.spend, roll.header
    judge = e(h["judge_model"]) + (f" (prompt {e(plan.judge_prompt_version)})" if plan.judge_prompt_version else "")
    pct = f"{100 * spend.usd / spend.cap_usd:.0f}%" if spend.cap_usd else "no cap"
    items = [
        ("Host", e(h["host_text"])),
        ("Model", e(plan.model)),
        ("Judge", judge),
        (("Repeats N / quorum k", f"{plan.repeats} / {plan.quorum}") if plan.sequential is None else
         ("Verdict", e(rollup.verdict_text(results)))),
        ("Spend vs cap", f'<meter id="spend-meter" min="0" max="{spend.cap_usd or 1}" value="{spend.usd}"></meter> '
                         f'<span id="spend">${spend.usd:.2f} of ${spend.cap_usd:.2f} cap ({pct})</span>'
                         f' · judge ${spend.judge_usd:.2f} in {spend.judge_calls} call(s)'
                         + (f" · {spend.refused_reservations} reservation(s) refused"
                            if spend.refused_reservations else "")),
        ("Tier", e(plan.tier)),
        ("Coverage", e(h["coverage"])),
        ("Attempts", f"{results.attempts_finished} finished, {results.attempts_errored} errored"),
        *([("Cost", f'<span id="cost">{e(roll.cost_line)}</span>')] if roll.cost_line else []),
        *([("Host", f'<span id="first-turn">{e(roll.first_turn_line)}</span>')] if roll.first_turn_line else []),
        ("Plan", f"<code>{e(plan.hash)}</code> · library <code>{e(plan.library_hash[:12])}</code>"),
        ("Finished", e(results.finished_at)),
    ]
    if results.stop_reason:
        items.append(("Stopped", e(results.stop_reason)))
    if roll.records_line:
        items.append(("Attempt log", f'<span id="attempt-log" class="warn">{e(roll.records_line)}</span>'))
    if (note := kill_note(results)) is not None:
        items.append(("Killed before", e(note)))
    if (note := floor_note(results)) is not None:
        items.append(("Floor", f'<span class="warn" id="floor-note">{e(note)}</span>'))
    if (note := wall_note(results)) is not None:
        items.append(("Sessions", f'<span class="warn" id="wall-note">{e(note)}</span>'))
    if (note := sweep_note(results)) is not None:
        items.append(("Routing sweep", f'<span class="warn" id="routing-sweep">{e(note)}</span>'))
    if (note := not_started_note(results)) is not None:
        items.append(("Not started", f'<span class="warn" id="not-started">{e(note)}</span>'))
    banner = ""
    if plan.approximation:
        banner = f'<p class="warn" id="approximation">Approximation: {e(plan.approximation)}</p>'
    if (graded := rollup.grade_line(results)) is not None:
        banner += f'<p class="warn" id="activation-grade">Activation grade: {e(graded)}</p>'
    return (f'<header><h1>Skill evals: {e(plan.tier)} run</h1>{banner}'
            f'<section id="run-header">{_dl(items)}</section>'
            f'<p class="not-executed" id="not-executed">{e(results.not_executed)}</p></header>')


def _counts(results: Results, roll: rollup.Rollup) -> str:
    cells = "".join(f'<li class="st-{s}"><button type="button" class="count" data-state="{s}" '
                    f'title="Show only {s} cases"><b>{results.counts.get(s, 0)}</b> {s}</button></li>'
                    for s in roll.shown_states)
    return f'<section><h2>States</h2><ul id="counts" class="counts">{cells}</ul></section>'


def _unrun(results: Results) -> str:
    if not results.unrun_by_reason:
        return ('<section><h2>UNRUN by reason</h2><p id="unrun-by-reason">Every case was executed.</p></section>')
    rows = "".join(f"<tr><td>{e(reason)}</td><td class=num>{n}</td></tr>"
                   for reason, n in results.unrun_by_reason.items())
    return (f'<section><h2>UNRUN by reason</h2><table id="unrun-by-reason"><thead><tr><th>reason</th>'
            f'<th class=num>cases</th></tr></thead><tbody>{rows}</tbody></table></section>')


def _skills(roll: rollup.Rollup) -> str:
    rows = []
    for s in roll.skills:
        states = " ".join(f'<span class="mini st-{st}">{st} {n}</span>' for st, n in s.states.items() if n)
        trigger = "–"
        if s.trigger_run:
            trigger = f"{s.trigger_wins}/{s.trigger_run}"
            if s.trigger_wilson:
                trigger += f" <small>(95% {s.trigger_wilson[0]:.2f}–{s.trigger_wilson[1]:.2f})</small>"
        pairs = f"{s.pairs_won} won / {s.pairs_lost} lost" if s.pairs_won or s.pairs_lost else "–"
        refusal = f"{s.refusal_compliant}/{s.refusal_run}" if s.refusal_run else "–"
        # run --baseline only: the uplift column (runner.results.uplift), absent without baseline data.
        up = f"<td>{e(uplift_text(s.uplift)) if s.uplift else '–'}</td>" if roll.baselined else ""
        rows.append(f"<tr><td>{e(s.skill)}</td><td>{states}</td><td>{trigger}</td><td>{pairs}</td>"
                    f"<td>{refusal}</td>{up}</tr>")
    up_head = "<th>uplift (with − without the skill, conservative 95%)</th>" if roll.baselined else ""
    return ('<section><h2>Per skill</h2><p class="hint">Health numbers leave quarantined cases out; counts do '
            'not.</p><table id="skills"><thead><tr><th>skill</th><th>cases by state</th>'
            f'<th>trigger accuracy{" (file-read)" if roll.file_read else ""}</th>'
            f'<th>discrimination pairs</th><th>refusal compliance</th>{up_head}</tr></thead><tbody>'
            + "".join(rows) + "</tbody></table></section>")


def _notes(results: Results, roll: rollup.Rollup) -> str:
    parts = []
    rate = "–" if roll.judge_error_rate is None else f"{100 * roll.judge_error_rate:.1f}%"
    counts = ", ".join(f"{e(k)} {v}" for k, v in results.assertion_counts.items()) or "–"
    parts.append(_dl([("Judge-error rate (semantic assertions)", rate), ("Assertions by how decided", counts)]))
    if roll.quarantined:
        items = "".join(
            f"<li><code>{e(c.uid)}</code> ("
            + (f"underlying {_badge(c.underlying_state)}" if c.underlying_state in RAN else
               f"not executed: {_badge('UNRUN')} {e(c.reason or 'unknown')}") + "): "
            + (f"{e(c.quarantine.reason)} <small>since {e(c.quarantine.date.isoformat())}"
               + (f", expires {e(c.quarantine.expires.isoformat())}" if c.quarantine.expires else "") + "</small>"
               if c.quarantine else "no entry recorded") + "</li>" for c in roll.quarantined)
        parts.append(f'<h3>Quarantined ({len(roll.quarantined)})</h3><ul id="quarantine">{items}</ul>')
    for title, notes, ident in (("Unjudgeable assertions", roll.unjudgeable, "unjudgeable"),
                                ("Surface warnings", roll.surface_warnings, "surface-warnings"),
                                ("Held back by the floor (UNRUN, not failed)", roll.held_back, "held-back"),
                                ("Uncalibrated probes", roll.uncalibrated, "uncalibrated"),
                                ("From the result cache (not run again)", roll.reused, "reused-cases")):
        if notes:
            items = "".join(f"<li><code>{e(n.uid)}</code>: {e(n.text)}</li>" for n in notes)
            parts.append(f'<details id="{ident}"><summary>{title} ({len(notes)})</summary><ul>{items}</ul></details>')
    return "<section><h2>Corpus</h2>" + "".join(parts) + "</section>"


def _sequential(results: Results) -> str:
    """The run's sequential verdict (results.json `sequential`): the rule, its exact error bounds, the cases by state,
    the sessions against fixed N = 3 and the bound, and every case fixed N = 3 would have given another state."""
    found = results.sequential
    if found is None:
        return ""
    items = [("Rule", e(found.rule)), ("Error bounds", e(rollup.sequential_bounds_text(found, results))),
             ("Cases", e(rollup.sequential_cases_text(found))),
             ("Sessions", e(rollup.sequential_sessions_text(found)))]
    rows = "".join(f"<tr><td><code>{e(f.uid)}</code></td><td>{_badge(f.state)}</td><td>{_badge(f.fixed_n3)}</td></tr>"
                   for f in found.flips)
    flips = (f'<table id="sequential-flips"><thead><tr><th>case</th><th>state</th><th>fixed N = 3 would have said</th>'
             f"</tr></thead><tbody>{rows}</tbody></table>" if rows else "<p>None.</p>")
    return (f'<section id="sequential"><h2>Sequential verdict</h2><p class="hint">Each case runs in rounds until its '
            f"rate was decided above or below the band, or until the bound; a case still open then is UNDECIDED: "
            f"neither PASS nor FAIL is claimed.</p>{_dl(items)}<h3>{e(rollup.flips_intro(found))}</h3>{flips}"
            f"</section>")


def _hosts(results: Results) -> str:
    """`run --host a,b,...` (results.json `hosts`): each host's run, trigger accuracy per skill per host with the
    grade marked, and every case whose state differs between hosts."""
    found = results.hosts
    if found is None:
        return ""
    runs = "".join(f"<li>{e(hosts_mod.host_line(run))}</li>" for run in found.hosts)
    heads = "".join(f"<th>{e(hosts_mod.column_head(run))}</th>" for run in found.hosts)
    rows = "".join(f"<tr><td>{e(row.skill)}</td>" + "".join(f"<td>{e(hosts_mod.cell(a))}</td>" for a in row.hosts)
                   + "</tr>" for row in found.skills)
    skills = (f'<table id="host-skills"><thead><tr><th>skill</th>{heads}</tr></thead><tbody>{rows}</tbody></table>'
              if rows else "<p>No trigger or no_trigger case.</p>")
    differing = "".join(f"<tr><td><code>{e(d.uid)}</code></td><td>{e(d.skill)}</td>"
                        + "".join(f"<td>{_badge(d.states[run.name]) if run.name in d.states else '—'}"
                                  + (e(hosts_mod.grade_mark(d.graded[run.name]))
                                     if run.name in d.graded and d.states.get(run.name) in hosts_mod.VERDICT_STATES
                                     else "")
                                  + (f" {e(d.reasons[run.name])}" if run.name in d.reasons else "") + "</td>"
                                  for run in found.hosts) + "</tr>" for d in found.differences)
    differences = (f'<table id="host-differences"><thead><tr><th>case</th><th>skill</th>{heads}</tr></thead>'
                   f"<tbody>{differing}</tbody></table>" if differing
                   else "<p>Every case has the same state on every host.</p>")
    return (f'<section id="hosts"><h2>Hosts</h2><p class="hint">{e(hosts_mod.INTRO)}</p><ul>{runs}'
            f"<li>{e(hosts_mod.spend_line(found))}</li></ul><h3>Trigger accuracy per skill per host (Wilson 95%)</h3>"
            f"{skills}<h3>Cases whose state differs between hosts ({len(found.differences)})</h3>{differences}"
            f"</section>")


def _candidates(history: History | None) -> str:
    """The history's quarantine candidates, each with why: PASS↔FAIL flips across runs, or UNDECIDED in this run."""
    if history is None or not history.candidates:
        return ""
    from runner.report.history import NEVER_AUTOMATIC, candidate_why
    items = "".join(f"<li><code>{e(c.uid)}</code>: {e(candidate_why(c, history.flip_threshold))}</li>" for c in history.candidates)
    return (f'<section id="quarantine-candidates"><h2>Quarantine candidates ({len(history.candidates)})</h2>'
            f'<ul>{items}</ul><p class="hint">{e(NEVER_AUTOMATIC)}</p></section>')


def _activation(case: CaseResult) -> str:
    a = case.activation
    if a is None:
        return "–"
    text = f"{_badge(a.state)} target fired in {a.fired_runs} of {a.observed_runs} observed run(s)"
    if a.wilson_95 is not None:
        text += f" (Wilson 95% {a.wilson_95[0]:.2f}–{a.wilson_95[1]:.2f})"
    return text


def _case_detail(case: CaseResult, index: int, has_run_dir: bool) -> str:
    items = [("Kind", e(rollup.kind_label(case))), ("Target", e(case.target)),
             ("State", _badge(case.state) + (f" underlying {_badge(case.underlying_state)}"
                                             if case.underlying_state else "") + _grade(case)
              + (f' <span class="reason">{e(case.reason)}</span>' if case.reason else "")),
             ("Repeats", f"wins {case.wins}, losses {case.losses}, errors {case.errors}; run {case.repeats_run} of "
                         f"{case.repeats_planned} ({rollup.rule_words(case)})"),
             ("Activation", _activation(case))]
    if (sequential := rollup.sequential_case_text(case)) is not None:
        items.append(("Sequential verdict", f'<span class="sequential">{e(sequential)}</span>'))
    if case.parts:
        items.append(("Parts", ", ".join(f"{e(k)} {_badge(v)}" for k, v in case.parts.items())))
    if case.fired_instead:
        items.append(("Fired instead", ", ".join(f"{e(k)} ×{v}" for k, v in case.fired_instead.items())))
    items.append(("Cost", f"${case.cost_usd:.4f}"))
    if (reused := rollup.reused_from_text(case)) is not None:
        items.append(("Reused", e(reused) + f" <small>(its spend there ${case.reused.spent_usd:.4f})</small>"
                      if case.reused else e(reused)))
    if case.quarantine:
        q = case.quarantine
        items.append(("Quarantine", e(q.reason) + f" <small>since {e(q.date.isoformat())}"
                      + (f", expires {e(q.expires.isoformat())}" if q.expires else "") + "</small>"))
    for warning in case.warnings:
        items.append(("Warning", e(warning)))
    if case.detail:
        items.append(("Held back by the floor", e(case.detail)))
    out = [_dl(items)]
    if case.state == "UNRUN" and not case.attempts:
        out.append(f'<p class="not-executed">Not executed ({e(case.reason or "unknown")}); no result is claimed '
                   f'for this case.</p>')
    if case.pairs:
        pair_rows = "".join(f"<tr><td>{e(p.neighbour)}</td><td>{_badge(p.state)}</td><td class=num>{p.won}</td>"
                       f"<td class=num>{p.lost}</td><td>{e(p.reason or '')}</td></tr>" for p in case.pairs)
        out.append("<h4>Pairs (target vs neighbour)</h4><table class=pairs><thead><tr><th>neighbour</th>"
                   "<th>state</th><th class=num>won</th><th class=num>lost</th><th>reason</th></tr></thead>"
                   f"<tbody>{pair_rows}</tbody></table>")
    if case.routing:
        routing_rows = "".join(
            f"<tr><td>{e(r.says)}</td><td>{_badge(r.state)}</td><td class=num>{r.passes}/{r.fails}</td><td>"
            + "".join(f'<blockquote class="evidence">{e(a.attempt)} {e(a.state)}: {e(a.evidence)}</blockquote>'
                      for a in r.attempts) + "</td></tr>" for r in case.routing)
        out.append("<h4>Routing assertions</h4><table class=routing><thead><tr><th>assertion</th><th>state</th>"
                   "<th class=num>pass/fail</th><th>what fired, per attempt</th></tr></thead>"
                   f"<tbody>{routing_rows}</tbody></table>")
    if case.assertions:
        rows = []
        for a in case.assertions:
            evidence = "".join(f'<blockquote class="evidence">{e(x)}</blockquote>' for x in a.evidence) or "–"
            rows.append(f'<tr class="assertion st-{e(a.state)}"><td class=num>{a.index}</td><td>{e(a.assertion_class)}'
                        f'</td><td>{_badge(a.state)}</td><td class="text">{e(a.text)}</td>'
                        f'<td class=num>{a.passes}/{a.fails}</td><td>{e(a.reason or "")}</td>'
                        f'<td class="evidence-cell">{evidence}</td></tr>')
        out.append("<h4>Assertions and the judge's evidence</h4><table class=assertions><thead><tr><th>#</th>"
                   "<th>class</th><th>state</th><th>assertion</th><th class=num>pass/fail</th><th>reason</th>"
                   "<th>evidence</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")
    if case.attempts:
        if has_run_dir:
            out.append(f'<h4>Attempts</h4><div class="attempts" data-index="{index}"></div>')
        else:
            ids = "".join(f"<li><code>{e(a)}</code></li>" for a in case.attempts)
            out.append(f"<h4>Attempts</h4><p class=hint>Transcripts are not embedded: the page was rendered "
                       f"without the run folder.</p><ul>{ids}</ul>")
    return "".join(out)


def breakable(uid: str) -> str:
    """A case uid, escaped, that wraps after its `/` and `-` separators (a `<wbr>` after each), not mid-word; only a
    single part longer than the column still breaks where it must."""
    return "".join(e(ch) + ("<wbr>" if ch in "/-" else "") for ch in uid)


def _case_rows(results: Results, has_run_dir: bool) -> str:
    rows = []
    for i, case in enumerate(results.cases):
        reason = f'<div class="reason">{e(case.reason)}</div>' if case.reason else ""
        if case.quarantine:
            reason = f'<div class="reason">{e(case.quarantine.reason)}</div>'
        rows.append(
            f'<tr class="case" id="c{i}" data-index="{i}" data-skill="{e(case.skill)}" data-state="{e(case.state)}" '
            f'data-uid="{e(case.uid)}">'
            f'<td><button type="button" class="open" aria-expanded="false" aria-controls="d{i}">open</button></td>'
            f'<td class="uid"><code>{breakable(case.uid)}</code></td><td>{e(case.skill)}</td><td>{e(rollup.kind_label(case))}</td>'
            f'<td>{_badge(case.state)}{" " + _badge(case.underlying_state) if case.underlying_state else ""}'
            f'{_grade(case)}{reason}</td>'
            f'<td class=num>{case.wins}/{case.losses}/{case.errors} · {case.repeats_run} of {case.repeats_planned}</td>'
            f'<td class=num>${case.cost_usd:.2f}</td></tr>'
            f'<tr class="detail" id="d{i}" hidden><td colspan="7">{_case_detail(case, i, has_run_dir)}</td></tr>')
    return "".join(rows)


def _filters(results: Results, roll: rollup.Rollup) -> str:
    skills = sorted({c.skill for c in results.cases})
    options = '<option value="">all skills</option>' + "".join(
        f'<option value="{e(s)}">{e(s)}</option>' for s in skills)
    boxes = "".join(f'<label class="st-{s}"><input type="checkbox" name="state" value="{s}" checked> {s} '
                    f'({results.counts.get(s, 0)})</label>' for s in roll.shown_states)
    return (f'<div id="filters" role="search"><label>Skill <select id="skill-filter">{options}</select>'
            f'</label><fieldset id="state-filter"><legend>States</legend>{boxes}</fieldset>'
            f'<label>Case <input type="search" id="uid-filter" placeholder="uid contains…"></label>'
            f'<button type="button" id="reset-filters">show all</button></div>'
            f'<p id="shown" aria-live="polite"></p>')


SVG_W, SVG_H, SVG_PAD = 180, 46, 6


def trend_svg(points: list[TrendPoint], metric: str, title: str) -> str:
    """A small line chart of one metric (0–1) across the runs, built here and escaped: one <circle> per run, its
    value in data-value (empty where the run had nothing to count: a hollow mark on the axis, no line)."""
    n = len(points)
    step = (SVG_W - 2 * SVG_PAD) / max(1, n - 1)
    inner = SVG_H - 2 * SVG_PAD
    marks, line = [], []
    for i, point in enumerate(points):
        value = getattr(point, metric)
        x = SVG_PAD + (i * step if n > 1 else (SVG_W - 2 * SVG_PAD) / 2)
        y = SVG_PAD + inner * (1 - value) if value is not None else SVG_H - SVG_PAD
        shown = "nothing to count" if value is None else f"{100 * value:.0f}%"
        label = f"{point.run}{' (this run)' if point.current else ''}, {point.finished_at}: {title} {shown}"
        fill = "none" if value is None else ("#0969da" if point.current else "#1b1f24")
        marks.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{fill}" stroke="#1b1f24" '
                     f'data-run="{e(point.run)}" data-value="{"" if value is None else value}">'
                     f"<title>{e(label)}</title></circle>")
        if value is not None:
            line.append(f"{x:.1f},{y:.1f}")
    path = f'<polyline points="{" ".join(line)}" fill="none" stroke="#0969da" stroke-width="1.5"/>' \
        if len(line) > 1 else ""
    axis = (f'<line x1="{SVG_PAD}" y1="{SVG_H - SVG_PAD}" x2="{SVG_W - SVG_PAD}" y2="{SVG_H - SVG_PAD}" '
            f'stroke="#8c959f"/><line x1="{SVG_PAD}" y1="{SVG_PAD}" x2="{SVG_W - SVG_PAD}" y2="{SVG_PAD}" '
            f'stroke="#8c959f" stroke-dasharray="2 3"/>')
    return (f'<svg class="trend" data-metric="{e(metric)}" width="{SVG_W}" height="{SVG_H}" '
            f'viewBox="0 0 {SVG_W} {SVG_H}" role="img" aria-label="{e(title)}, {n} run(s)">'
            f"<title>{e(title)} across {n} run(s), oldest to newest</title>{axis}{path}{''.join(marks)}</svg>")


HEAT_LEVELS = 5  # shades of a cell, by its share of the row's attempts (heat-1 lightest .. heat-5 darkest)


def heat_class(count: int, of: int, on_diagonal: bool) -> str:
    """A cell's classes: green shades on the diagonal (the expected skill fired), red off it, none for 0. Classes, not
    inline style: the page's CSP allows its own stylesheet only."""
    if not count or not of:
        return "heat heat-0"
    level = max(1, math.ceil(HEAT_LEVELS * count / of))
    return f"heat {'diag' if on_diagonal else 'off'} heat-{level}"


def heatmap(matrix: dict[str, dict[str, int]], rows: dict[str, int], skills: list[str], ident: str, caption: str) -> str:
    """Rows expected, columns fired, the count of attempts in every cell (0 included, so a person reads each)."""
    columns = [name for name in skills if any(name in cells for cells in matrix.values())]
    head = "".join(f'<th scope="col" class="fired"><span>{e(name)}</span></th>' for name in columns)
    body = []
    for row in (name for name in skills if name in matrix):
        of = rows.get(row, 0)
        cells = "".join(
            f'<td class="{heat_class(matrix[row].get(col, 0), of, col == row)}" data-expected="{e(row)}" '
            f'data-fired="{e(col)}" title="{e(row)} → {e(col)}: {matrix[row].get(col, 0)} of {of} attempt(s)">'
            f"{matrix[row].get(col, 0)}</td>" for col in columns)
        body.append(f'<tr><th scope="row">{e(row)}</th><td class="num rowsum">{of}</td>{cells}</tr>')
    return (f'<table id="{ident}" class="heatmap"><caption>{e(caption)}</caption><thead><tr><th scope="col">'
            f'expected ↓ · fired →</th><th scope="col" class="num">attempts</th>{head}</tr></thead><tbody>'
            + "".join(body) + "</tbody></table>")


def _routing(results: Results, history: History | None) -> str:
    """The routing matrix as a heatmap (all fired; the first fired under it), the worst confusions with their cases,
    the per-skill precision, recall and F1, and with history the cells that moved since the last run."""
    found = rollup.shown_routing(results)
    if found is None:
        return ""
    matrix = heatmap(found.matrix, found.rows, found.skills, "routing-matrix",
                     "Every skill an attempt fired (an attempt that fired two skills is in two cells)")
    first = heatmap(found.first_fired, found.rows, found.skills, "routing-first", "The first skill each attempt fired")
    worst = "".join(f"<li>{e(rollup.confusion_text(c))}; first in {c.first} <small>"
                    + ", ".join(f"<code>{e(uid)}</code>" for uid in c.cases) + "</small></li>"
                    for c in found.confusions[: rollup.WORST_CONFUSIONS])
    confusions = (f'<h3>Worst confusions ({min(len(found.confusions), rollup.WORST_CONFUSIONS)} of '
                  f'{len(found.confusions)})</h3><ol id="routing-confusions">{worst}</ol>') if worst else \
        '<p id="routing-confusions">No confusion: no skill fired on another skill\'s prompts.</p>'
    rows = "".join(f"<tr><td>{e(name)}</td><td>{e(rollup.rate_text(one.precision))}</td>"
                   f"<td>{e(rollup.rate_text(one.recall))}</td><td>{e(rollup.rate_text(one.f1, fraction=False))}</td>"
                   f"<td class=num>{one.tp} / {one.fp} / {one.fn}</td></tr>"
                   for name in rollup.routing_order(found) for one in (found.per_skill[name],))
    per_skill = ('<table id="routing-skills"><thead><tr><th>skill</th><th>precision (Wilson 95%)</th>'
                 '<th>recall (Wilson 95%)</th><th>F1 (95%)</th><th class=num>tp / fp / fn</th></tr></thead><tbody>'
                 + rows + "</tbody></table>")
    moved = ""
    if history is not None and history.routing_moves:
        from runner.report.history import move_text
        items = "".join(f"<li>{e(move_text(m))}</li>" for m in history.routing_moves)
        moved = f'<h3>Moved since {e(history.compared_with or "the last run")}</h3><ul id="routing-moved">{items}</ul>'
    return (f'<section id="routing"><h2>Routing ({found.attempts} attempts)</h2><p class="hint">Rows: the skill a '
            f"case's prompt was written for (<code>none</code>: no skill; a no_trigger case counts only its own skill "
            f"firing). Columns: what fired (<code>none</code>: nothing). Green: the expected skill; red: another; "
            f"darker: a larger share of the row. {e(rollup.excluded_text(found))}.</p>{matrix}{moved}{confusions}"
            f"<h3>Per skill</h3>{per_skill}<details><summary>First fired</summary>{first}</details></section>")


def _latest(points: list[TrendPoint], wins: str, total: str) -> str:
    now = points[-1]
    return f"{getattr(now, wins)}/{getattr(now, total)}" if getattr(now, total) else "–"


def _trends(history: History | None) -> str:
    if history is None or not history.trends:
        return ""
    runs = history.stability.runs_in_window
    rows = "".join(
        f'<tr data-skill="{e(t.skill)}"><td>{e(t.skill)}</td>'
        f'<td>{trend_svg(t.points, "trigger_accuracy", "trigger accuracy")} '
        f'<small>now {_latest(t.points, "trigger_wins", "trigger_run")}</small></td>'
        f'<td>{trend_svg(t.points, "pass_rate", "pass rate")} <small>now {_latest(t.points, "passed", "decided")}'
        f"</small></td></tr>" for t in history.trends)
    return (f'<section id="trends"><h2>Trends across {runs} run(s)</h2><p class="hint">Oldest on the left, this run '
            f"on the right (blue). Trigger accuracy as in the per-skill table; pass rate = PASS among cases decided "
            f"PASS or FAIL (quarantined left out). A hollow mark on the axis: nothing to count in that run. Hover a "
            f'point for its run.</p><table id="trend-table"><thead><tr><th>skill</th><th>trigger accuracy</th>'
            f"<th>pass rate</th></tr></thead><tbody>{rows}</tbody></table></section>")


def _review_panel(has_run_dir: bool) -> str:
    if not has_run_dir:
        explain = ("Review needs the attempts: render the page from the run folder "
                   "(<code>skill-evals report RUN_DIR --format html</code>).")
    else:
        explain = ("Turn review on, open a case: under each attempt, every assertion the judge decided has "
                   "<b>agree</b> / <b>disagree</b> and a note. <b>Download labels</b> saves <code>labels.json</code> "
                   "(agree = the judge's verdict is the label, disagree = the other one) for "
                   "<code>skill-evals calibrate-judge labels.json</code>, which re-runs the judge on them and reports "
                   "agreement, false PASS and false FAIL per rubric class. Marks live in this page only: download "
                   "before closing it. Answers and prompts longer than the page's caps are cut, and so are their "
                   "labels.")
    return (f'<section id="review"><h2>Review the judge</h2><p class="hint">{explain}</p>'
            '<div id="review-bar"><label><input type="checkbox" id="review-toggle"> review mode</label>'
            '<span id="review-count"></span><button type="button" id="download-labels" disabled>Download labels'
            '</button><span id="review-status" class="hint" aria-live="polite"></span></div></section>')


CSS = """
:root{--fg:#1b1f24;--muted:#57606a;--line:#d0d7de;--bg:#fff;--soft:#f6f8fa;
--pass:#1a7f37;--fail:#cf222e;--error:#9a6700;--judge:#8250df;--quar:#0969da;--undecided:#bc4c00;--unrun:#6e7781}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg);
margin:0 auto;max-width:1400px;padding:16px 24px}
[hidden]{display:none!important}
h1{font-size:22px;margin:0 0 8px}h2{font-size:17px;margin:22px 0 8px;border-bottom:1px solid var(--line)}
h3{font-size:15px}h4{font-size:14px;margin:14px 0 6px}
code{font:12px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;overflow-wrap:anywhere}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:6px 0}dt{color:var(--muted)}dd{margin:0}
table{border-collapse:collapse;width:100%;margin:4px 0}
th,td{border-bottom:1px solid var(--line);padding:4px 6px;text-align:left;vertical-align:top}
th{background:var(--soft);font-weight:600}.num{text-align:right;white-space:nowrap}
.not-executed{font-weight:600;background:#fff8c5;border:1px solid #d4a72c;padding:6px 10px;border-radius:6px}
.warn{background:#ffebe9;border:1px solid var(--fail);padding:6px 10px;border-radius:6px}
.hint,small,.reason{color:var(--muted)}.reason{font-size:12px}
.badge,.mini{display:inline-block;border-radius:10px;padding:0 7px;font-size:12px;font-weight:600;color:#fff;
background:var(--unrun);white-space:nowrap}.mini{font-weight:400;margin:1px}
.st-PASS.badge,.st-PASS.mini{background:var(--pass)}.st-FAIL.badge,.st-FAIL.mini{background:var(--fail)}
.st-ERROR.badge,.st-ERROR.mini{background:var(--error)}
.st-JUDGE-ERROR.badge,.st-JUDGE-ERROR.mini{background:var(--judge)}
.st-QUARANTINED.badge,.st-QUARANTINED.mini{background:var(--quar)}
.st-UNDECIDED.badge,.st-UNDECIDED.mini{background:var(--undecided)}
.st-UNJUDGEABLE.badge{background:#953800}
.counts{display:flex;gap:8px;list-style:none;padding:0;flex-wrap:wrap}
.counts button{border:1px solid var(--line);border-radius:8px;background:var(--soft);padding:6px 12px;cursor:pointer;
font:inherit}.counts b{font-size:18px;margin-right:4px}
.counts .st-PASS b{color:var(--pass)}.counts .st-FAIL b{color:var(--fail)}.counts .st-ERROR b{color:var(--error)}
.counts .st-JUDGE-ERROR b{color:var(--judge)}.counts .st-QUARANTINED b{color:var(--quar)}
.counts .st-UNDECIDED b{color:var(--undecided)}
#filters{display:flex;gap:14px;align-items:center;flex-wrap:wrap;background:var(--soft);padding:8px 10px;
border:1px solid var(--line);border-radius:8px;position:sticky;top:0;z-index:2}
#filters fieldset{border:0;margin:0;padding:0;display:flex;gap:8px;flex-wrap:wrap}
#filters legend{float:left;margin-right:6px;color:var(--muted)}
tr.case:hover{background:var(--soft)}tr.case.open{background:#ddf4ff}
tr.detail>td{background:#fbfcfd;padding:8px 16px 14px;border-left:3px solid var(--quar)}
button.open{font:inherit;font-size:12px;padding:1px 8px;cursor:pointer}
.evidence{margin:2px 0;padding:2px 8px;border-left:3px solid var(--line);white-space:pre-wrap;
word-break:break-word;font-style:italic}
td.text{white-space:pre-wrap;word-break:break-word;max-width:420px}
.attempt{border:1px solid var(--line);border-radius:6px;padding:6px 10px;margin:8px 0;background:#fff}
.attempt h5{margin:6px 0 4px;font-size:13px}
ol.transcript{padding-left:26px;margin:4px 0;max-height:640px;overflow:auto;border:1px solid var(--line);
border-radius:4px;background:var(--soft)}
ol.transcript li{margin:4px 0}.role{font-weight:600;color:var(--muted);font-size:12px}
pre{white-space:pre-wrap;word-break:break-word;margin:2px 0;font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,
Consolas,monospace}
.cut{color:var(--fail);font-weight:600}
meter{width:120px;vertical-align:middle}
.review-controls{display:none;gap:6px;align-items:center;margin:4px 0 8px;flex-wrap:wrap}
body.reviewing .review-controls{display:flex}
.review-controls button{font:inherit;font-size:12px;padding:1px 8px;cursor:pointer;border:1px solid var(--line);
border-radius:6px;background:#fff}
.review-controls button.review-agree[aria-pressed=true]{background:var(--pass);color:#fff}
.review-controls button.review-disagree[aria-pressed=true]{background:var(--fail);color:#fff}
.review-note{font:inherit;font-size:12px;min-width:260px}
#review-bar{display:flex;gap:14px;align-items:center;flex-wrap:wrap}
table.heatmap{width:auto;margin:8px 0}table.heatmap caption{text-align:left;color:var(--muted);padding:2px 0}
table.heatmap td.heat{text-align:center;min-width:44px;font-variant-numeric:tabular-nums;border:1px solid #fff}
table.heatmap th.fired{vertical-align:bottom;white-space:nowrap}table.heatmap .rowsum{color:var(--muted)}
td.heat-0{color:#afb8c1}
td.diag.heat-1{background:#dafbe1}td.diag.heat-2{background:#aceebb}td.diag.heat-3{background:#6fdd8b}
td.diag.heat-4{background:#4ac26b;color:#fff}td.diag.heat-5{background:#1a7f37;color:#fff}
td.off.heat-1{background:#ffebe9}td.off.heat-2{background:#ffcecb}td.off.heat-3{background:#ff8182}
td.off.heat-4{background:#fa4549;color:#fff}td.off.heat-5{background:#a40e26;color:#fff}
svg.trend{vertical-align:middle}svg.trend text{font:10px system-ui,sans-serif;fill:var(--muted)}
footer{margin-top:24px;color:var(--muted);font-size:12px}
"""

# The state filter knows the states the counts show: the page's own state checkboxes (a run's shown states).
JS = r"""
(function () {
  "use strict";
  var DATA = JSON.parse(document.getElementById("skill-evals-data").textContent);
  var rows = Array.prototype.slice.call(document.querySelectorAll("tr.case"));
  var skillSel = document.getElementById("skill-filter");
  var uidInput = document.getElementById("uid-filter");
  var boxes = Array.prototype.slice.call(document.querySelectorAll('#state-filter input[name="state"]'));
  var STATES = boxes.map(function (b) { return b.value; });
  var shown = document.getElementById("shown");

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) { node.className = cls; }
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    return node;
  }
  function str(value) {
    if (typeof value === "string") { return value; }
    try { return JSON.stringify(value, null, 1); } catch (err) { return String(value); }
  }
  function blockText(block) {
    if (typeof block === "string") { return ["text", block]; }
    if (!block || typeof block !== "object") { return ["", str(block)]; }
    var type = block.type || "";
    if (type === "text" || (!type && typeof block.text === "string")) { return ["text", block.text]; }
    if (type === "thinking" || typeof block.thinking === "string") { return ["thinking", block.thinking || ""]; }
    if (type === "tool_use" || (!type && block.name !== undefined && block.input !== undefined)) {
      return ["tool call: " + str(block.name), str(block.input)];
    }
    if (type === "tool_result" || (!type && block.tool_use_id !== undefined)) {
      return ["tool result" + (block.is_error ? " (error)" : ""), str(block.content)];
    }
    return [type || "block", str(block)];
  }
  function renderMessage(message) {
    var li = el("li");
    var inner = message && typeof message === "object" && message.message && typeof message.message === "object"
      ? message.message : message;
    var role = (message && (message._type || message.type)) || (inner && inner.role) || "message";
    if (inner && inner.role && role !== inner.role) { role += " / " + inner.role; }
    li.appendChild(el("div", "role", role));
    var content = inner && typeof inner === "object" ? inner.content : undefined;
    if (typeof content === "string") {
      li.appendChild(el("pre", "msg", content));
    } else if (Array.isArray(content)) {
      content.forEach(function (block) {
        var pair = blockText(block);
        if (pair[0] && pair[0] !== "text") { li.appendChild(el("div", "role", pair[0])); }
        li.appendChild(el("pre", "msg", pair[1]));
      });
    } else {
      var copy = {};
      if (message && typeof message === "object") {
        Object.keys(message).forEach(function (k) { if (k !== "_type") { copy[k] = message[k]; } });
      } else { copy = message; }
      li.appendChild(el("pre", "msg", str(copy)));
    }
    return li;
  }
  function renderTranscript(box, t) {
    box.appendChild(el("h5", null, "Transcript" + (t.file ? " (" + t.file + ")" : "")));
    if (t.note) { box.appendChild(el("p", t.truncated ? "cut" : "hint", t.note)); }
    if (t.messages) {
      var list = el("ol", "transcript");
      t.messages.forEach(function (m) { list.appendChild(renderMessage(m)); });
      box.appendChild(list);
      var raw = el("details");
      raw.appendChild(el("summary", null, "raw JSON"));
      raw.addEventListener("toggle", function () {
        if (raw.open && raw.childNodes.length === 1) { raw.appendChild(el("pre", null, JSON.stringify(t.messages, null, 1))); }
      });
      box.appendChild(raw);
    }
    if (t.raw) { box.appendChild(el("pre", "transcript-raw", t.raw)); }
  }
  function kv(dl, key, value) {
    if (value === undefined || value === null || value === "" || (Array.isArray(value) && !value.length)) { return; }
    dl.appendChild(el("dt", null, key));
    dl.appendChild(el("dd", null, Array.isArray(value) ? value.join(", ") : value));
  }
  // ---- review mode: a person's agree/disagree with the judge, downloaded as calibrate-judge labels ----
  var REVIEW = {};
  var reviewToggle = document.getElementById("review-toggle");
  var reviewCount = document.getElementById("review-count");
  var downloadButton = document.getElementById("download-labels");
  var reviewable = 0;
  Object.keys(DATA.attempts).forEach(function (k) {
    DATA.attempts[k].forEach(function (a) {
      (a.assertions || []).forEach(function (x) { if (x.judged) { reviewable += 1; } });
    });
  });
  function opposite(verdict) { return verdict === "PASS" ? "FAIL" : "PASS"; }
  function updateReview() {
    var marked = Object.keys(REVIEW).filter(function (id) { return REVIEW[id].mark; }).length;
    reviewCount.textContent = marked + " of " + reviewable + " judged assertion(s) marked";
    downloadButton.disabled = !marked;
  }
  function setReviewing(on) {
    reviewToggle.checked = on;
    document.body.classList.toggle("reviewing", on);
  }
  function labelItem(entry) {
    var a = entry.attempt, x = entry.assertion;
    return {id: a.id + "#" + x.index, prompt: a.prompt || "", answer: a.final_answer || "", assertion: x.text,
            label: entry.mark === "agree" ? x.state : opposite(x.state),
            tool_calls: (a.tool_calls || []).map(function (c) { return {name: c.name, input: c.input}; }),
            assertion_class: x["class"], run_verdict: x.state, "case": entry.uid, attempt: a.id, note: entry.note};
  }
  function downloadLabels() {
    var items = Object.keys(REVIEW).sort().filter(function (id) { return REVIEW[id].mark; })
      .map(function (id) { return labelItem(REVIEW[id]); });
    var blob = new Blob([JSON.stringify(items, null, 1) + "\n"], {type: "application/json"});
    var link = el("a");
    link.href = URL.createObjectURL(blob);
    link.download = "labels.json";
    document.body.appendChild(link);
    link.click();
    link.remove();
    document.getElementById("review-status").textContent = "labels.json: " + items.length + " label(s). " +
      "Next: skill-evals calibrate-judge labels.json --library <library>";
  }
  function reviewControls(uid, a, x) {
    var id = a.id + "#" + x.index;
    var entry = REVIEW[id] || (REVIEW[id] = {uid: uid, attempt: a, assertion: x, mark: null, note: ""});
    var box = el("div", "review-controls");
    box.setAttribute("data-review-id", id);
    box.appendChild(el("span", "hint", "The judge said " + x.state + ":"));
    var buttons = ["agree", "disagree"].map(function (mark) {
      var b = el("button", "review-" + mark, mark === "agree" ? "agree" : "disagree (it is " + opposite(x.state) + ")");
      b.type = "button";
      b.setAttribute("aria-pressed", entry.mark === mark ? "true" : "false");
      b.addEventListener("click", function () {
        entry.mark = entry.mark === mark ? null : mark;
        buttons.forEach(function (other, i) {
          other.setAttribute("aria-pressed", entry.mark === ["agree", "disagree"][i] ? "true" : "false");
        });
        updateReview();
      });
      box.appendChild(b);
      return b;
    });
    var note = el("input", "review-note");
    note.type = "text";
    note.placeholder = "note (optional)";
    note.value = entry.note;
    note.addEventListener("input", function () { entry.note = note.value; });
    box.appendChild(note);
    if (!a.prompt) { box.appendChild(el("span", "hint", " (the prompt is not in the transcript: the label has none)")); }
    return box;
  }
  function renderAttempt(a, uid) {
    var box = el("section", "attempt");
    var head = el("h5", null, a.id + (a.state ? " — " : ""));
    if (a.state) { head.appendChild(el("span", "badge st-" + a.state, a.state)); }
    box.appendChild(head);
    if (a.note) { box.appendChild(el("p", "hint", a.note)); }
    var dl = el("dl");
    kv(dl, "activation", a.activation);
    kv(dl, "fired", a.fired && a.fired.length ? a.fired : (a.fired ? "nothing" : null));
    kv(dl, "fired instead", a.fired_instead);
    if (a.routing && a.routing.length) { kv(dl, "routing", a.routing); }
    if (a.pairs && Object.keys(a.pairs).length) {
      kv(dl, "neighbours silent", Object.keys(a.pairs).map(function (k) { return k + ": " + (a.pairs[k] ? "yes" : "NO"); }));
    }
    kv(dl, "error", a.error);
    kv(dl, "bounds hit", a.bounds_hit);
    if (a.turns !== undefined) { kv(dl, "turns, time, cost", a.turns + " turn(s), " + a.duration_s + " s, $" + a.cost_usd); }
    if (a.judge) {
      kv(dl, "judge", a.judge.model + " (prompt " + a.judge.prompt_version + ")" + (a.judge.error ? " — error: " + a.judge.error : ""));
    }
    box.appendChild(dl);
    if (a.assertions && a.assertions.length) {
      box.appendChild(el("h5", null, "This attempt's assertions"));
      var ul = el("ul", "attempt-assertions");
      a.assertions.forEach(function (x) {
        var li = el("li");
        li.appendChild(el("span", "badge st-" + x.state, x.state));
        li.appendChild(document.createTextNode(" [" + x.index + "]" + (x.text ? " " + x.text : "") +
          (x.reason ? " — " + x.reason : "")));
        if (x.evidence) { li.appendChild(el("blockquote", "evidence", x.evidence)); }
        if (x.judged) { li.appendChild(reviewControls(uid, a, x)); }
        ul.appendChild(li);
      });
      box.appendChild(ul);
    }
    if (a.final_answer) {
      box.appendChild(el("h5", null, "Final answer"));
      box.appendChild(el("pre", "final-answer", a.final_answer));
    }
    if (a.transcript) { renderTranscript(box, a.transcript); }
    return box;
  }
  function fillAttempts(detail) {
    var holder = detail.querySelector(".attempts");
    if (!holder || holder.getAttribute("data-filled")) { return; }
    holder.setAttribute("data-filled", "1");
    var list = DATA.attempts[holder.getAttribute("data-index")] || [];
    if (!list.length) { holder.appendChild(el("p", "hint", "No attempt of this case is in the run folder.")); }
    var uid = document.getElementById("c" + holder.getAttribute("data-index")).getAttribute("data-uid");
    list.forEach(function (a) { holder.appendChild(renderAttempt(a, uid)); });
  }
  function setOpen(row, open) {
    var detail = document.getElementById("d" + row.getAttribute("data-index"));
    row.classList.toggle("open", open);
    if (open) { row.setAttribute("data-open", "1"); } else { row.removeAttribute("data-open"); }
    var button = row.querySelector("button.open");
    button.setAttribute("aria-expanded", open ? "true" : "false");
    button.textContent = open ? "close" : "open";
    if (open) { fillAttempts(detail); }
    detail.hidden = !open || row.hidden;
  }
  function selectedStates() {
    return boxes.filter(function (b) { return b.checked; }).map(function (b) { return b.value; });
  }
  function apply() {
    var skill = skillSel.value, states = selectedStates(), needle = uidInput.value.trim().toLowerCase(), count = 0;
    rows.forEach(function (row) {
      var visible = (!skill || row.getAttribute("data-skill") === skill) &&
        states.indexOf(row.getAttribute("data-state")) >= 0 &&
        (!needle || row.getAttribute("data-uid").toLowerCase().indexOf(needle) >= 0);
      row.hidden = !visible;
      document.getElementById("d" + row.getAttribute("data-index")).hidden = !visible || !row.getAttribute("data-open");
      if (visible) { count += 1; }
    });
    shown.textContent = count + " of " + rows.length + " case(s) shown";
  }
  function writeHash() {
    var parts = [];
    if (skillSel.value) { parts.push("skill=" + encodeURIComponent(skillSel.value)); }
    var states = selectedStates();
    if (states.length !== STATES.length) { parts.push("state=" + states.map(encodeURIComponent).join(",")); }
    if (uidInput.value.trim()) { parts.push("q=" + encodeURIComponent(uidInput.value.trim())); }
    if (reviewToggle.checked) { parts.push("review=1"); }
    try { history.replaceState(null, "", parts.length ? "#" + parts.join("&") : location.pathname + location.search); }
    catch (err) { /* a file: URL that refuses replaceState keeps its old fragment */ }
  }
  function onChange() { apply(); writeHash(); }
  function fromHash() {
    var params = new URLSearchParams(location.hash.replace(/^#/, ""));
    var skill = params.get("skill"), wanted = [];
    params.getAll("state").forEach(function (v) { wanted = wanted.concat(v.split(",")); });
    wanted = wanted.map(function (s) { return s.trim().toUpperCase(); }).filter(function (s) { return STATES.indexOf(s) >= 0; });
    var known = Array.prototype.some.call(skillSel.options, function (o) { return o.value === skill; });
    skillSel.value = skill && known ? skill : "";
    boxes.forEach(function (b) { b.checked = !wanted.length || wanted.indexOf(b.value) >= 0; });
    uidInput.value = params.get("q") || "";
    setReviewing(params.get("review") === "1");
    apply();
    var target = null, uid = params.get("case");
    if (uid) {
      target = rows.filter(function (r) { return r.getAttribute("data-uid") === uid; })[0] || null;
      if (target && target.hidden) { skillSel.value = ""; boxes.forEach(function (b) { b.checked = true; }); apply(); }
    } else if (skill || wanted.length || params.get("q")) {
      target = rows.filter(function (r) { return !r.hidden; })[0] || null;
    }
    if (target) {
      setOpen(target, true);
      var box = target.getBoundingClientRect();
      if (box.top < 0 || box.top > window.innerHeight - 120) { target.scrollIntoView({block: "start"}); }
    }
  }
  rows.forEach(function (row) {
    row.querySelector("button.open").addEventListener("click", function () {
      setOpen(row, !row.getAttribute("data-open"));
    });
  });
  skillSel.addEventListener("change", onChange);
  uidInput.addEventListener("input", onChange);
  boxes.forEach(function (b) { b.addEventListener("change", onChange); });
  document.getElementById("reset-filters").addEventListener("click", function () {
    skillSel.value = ""; uidInput.value = ""; boxes.forEach(function (b) { b.checked = true; }); onChange();
  });
  Array.prototype.forEach.call(document.querySelectorAll("button.count"), function (button) {
    button.addEventListener("click", function () {
      var state = button.getAttribute("data-state");
      boxes.forEach(function (b) { b.checked = b.value === state; });
      onChange();
      document.getElementById("filters").scrollIntoView({block: "start"});
    });
  });
  reviewToggle.addEventListener("change", function () { setReviewing(reviewToggle.checked); writeHash(); });
  downloadButton.addEventListener("click", downloadLabels);
  updateReview();
  window.addEventListener("hashchange", fromHash);
  fromHash();
  document.documentElement.setAttribute("data-ready", "1");
})();
"""


def _hash(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


def render(results: Results, run_dir: Path | None = None, *, transcript_cap: int = TRANSCRIPT_CAP,
           total_cap: int = TOTAL_CAP, history: History | None = None) -> str:
    roll = rollup.build(results)
    data = {"attempts": attempts_data(results, run_dir, transcript_cap, total_cap)}
    csp = (f"default-src 'none'; script-src '{_hash(JS)}'; style-src '{_hash(CSS)}'; img-src data:; "
           f"base-uri 'none'; form-action 'none'")
    body = "".join([
        _header(results, roll), _counts(results, roll), _unrun(results), _skills(roll), _routing(results, history),
        _sequential(results), _hosts(results), _notes(results, roll), _candidates(history),
        _trends(history), _review_panel(run_dir is not None), '<section><h2>Cases</h2>', _filters(results, roll),
        '<table id="cases"><thead><tr><th></th><th>case</th><th>skill</th><th>kind</th><th>state</th>'
        '<th class=num>wins/losses/errors · run of N</th><th class=num>cost</th></tr></thead><tbody>',
        _case_rows(results, run_dir is not None), "</tbody></table></section>",
        f"<footer>Rendered from results.json{' and the run folder' if run_dir is not None else ''}; "
        f"self-contained (no network). Filters: <code>#skill=&lt;skill&gt;&amp;state=FAIL,ERROR</code>, "
        f"<code>#case=&lt;uid&gt;</code>. {e(results.not_executed)}</footer>",
    ])
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>Skill evals: {e(results.plan.tier)} run, {e(results.finished_at)}</title>"
            f"<style>{CSS}</style></head><body>{body}"
            f'<script type="application/json" id="{DATA_ID}">{script_json(data)}</script>'
            f"<script>{JS}</script></body></html>\n")
