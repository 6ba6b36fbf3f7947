"""Tier-2 probe calibration at a terminal (and as JSON): every start counted, every verdict shown
whether positive, null or adverse."""

from __future__ import annotations

import json

from rich.console import Console

from runner.core.states import BROKEN
from runner.execute.budget import Ledger
from runner.probes.arms import Arm
from runner.probes.calibration import CalibrationRecord, Declaration, ProbeStatus, tally


def print_statuses(statuses: list[ProbeStatus], console: Console, fmt: str) -> None:
    if fmt == "json":
        console.print_json(json.dumps([s.model_dump(mode="json") for s in statuses]))
        return
    for s in statuses:
        console.print(f"{s.uid} (version {s.content_hash[:12]}): {s.state} — {s.message}")


def _arm(record: CalibrationRecord, arm: Arm) -> str:
    t = tally(record.starts, arm)
    if not t.started:
        return "not run"
    errors = f", {t.errors} error" + ("s" if t.errors > 1 else "") if t.errors else ""
    return f"{t.caught}/{record.declaration.reps} caught{errors}"


def _fired(record: CalibrationRecord) -> str:
    treatment = [s for s in record.starts if s.arm == "treatment"]
    if not treatment:
        return "-"
    return " ".join("yes" if s.skill_fired else ("error" if s.state in BROKEN and not s.fired
                                                  else "no") for s in treatment)


def print_records(records: list[CalibrationRecord], declaration: Declaration, ledger: Ledger, console: Console,
                  fmt: str) -> None:
    if fmt == "json":
        console.print_json(json.dumps({"declaration": declaration.model_dump(mode="json"),
                                       "spent_usd": round(ledger.spent_usd, 6),
                                       "records": [r.model_dump(mode="json") for r in records]}))
        return
    invocation = "explicit (/skill as the prompt's first line)" if declaration.explicit_invocation else (
        "routed (the agent must choose the skill)")
    console.print(f"Protocol {declaration.protocol}, declared before the first start: {declaration.stop_rule}")
    console.print(f"Host {declaration.host}, model {declaration.model}; treatment invocation: {invocation}; judge "
                  f"{declaration.judge_model} (prompt {declaration.judge_prompt_version}).")
    for r in records:
        verdict = r.verdict or f"no verdict: stopped ({r.stop_reason}); `skill-evals calibrate` continues it"
        console.print(f"\n{r.probe} (version {r.content_hash[:12]}) verdict: {verdict}")
        console.print(f"  control: {_arm(r, 'control')}; treatment: {_arm(r, 'treatment')}; skill fired in the "
                      f"treatment starts: {_fired(r)}; {len(r.starts)} start(s), ${r.cost_usd:.4f}")
        if r.verdict_reason:
            console.print(f"  {r.verdict_reason}")
        for s in r.starts:
            if s.error:
                console.print(f"  start {s.number} ({s.arm} rep {s.rep}) {s.state}: {s.error}")
    console.print(f"Spent ${ledger.spent_usd:.4f}" + (f" of the ${ledger.cap_usd:.2f} cap" if ledger.cap_usd is not None
                                                       else "") + "; records are in calibration.json beside each probe.")
