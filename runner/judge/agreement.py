"""Judge calibration (seed 000: "calibrate the discriminator on known transcripts before spending
live reps"): run the judge on labelled answers and compare.

In: a labels file (JSON Lines or a JSON list). Out: agreement, false PASS, false FAIL and JUDGE-ERROR rates (also
per rubric class), appended to `.skill-evals/judge-calibration.json`; `[judge] require_calibration` reads them.

Design notes: docs/design/judge.md.
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runner.core.errors import UsageError
from runner.core.observation import ToolCall
from runner.corpus import bounded
from runner.corpus.findings import first_problem
from runner.corpus.library import Assertion
from runner.corpus.settings import CalibrationThresholds, Settings
from runner.judge.prose import Judge

RECORD_FILE = Path(".skill-evals") / "judge-calibration.json"


class LabelsError(UsageError):
    """The labels file cannot be used (a usage error with file and line)."""


class LabelledTool(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    input: str = ""


class LabelledItem(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    prompt: str
    answer: str
    assertion: str = Field(min_length=1)
    label: Literal["PASS", "FAIL"]
    tool_calls: list[LabelledTool] = []
    # Written by the HTML report's review mode; the judge never sees them (it is measured, not told).
    assertion_class: str = Field(default="semantic", min_length=1)
    run_verdict: Literal["PASS", "FAIL"] | None = None
    case: str | None = None
    attempt: str | None = None
    note: str = ""


class ItemResult(BaseModel):
    id: str
    label: str
    judged: str
    cause: str | None = None
    assertion_class: str = "semantic"


class Rates(BaseModel):
    """The rates of one group of items (see docs/design/judge.md)."""
    items: int
    agreement: float | None
    false_pass_rate: float | None
    false_fail_rate: float | None
    judge_error_rate: float


class CalibrationRecord(BaseModel):
    created_at: str
    model: str
    prompt_version: str
    labels_file: str
    items: int
    agreement: float | None
    false_pass_rate: float | None
    false_fail_rate: float | None
    judge_error_rate: float
    by_class: dict[str, Rates] = Field(default={}, description="The same rates per rubric (assertion) class.")
    thresholds: CalibrationThresholds
    passed: bool
    failures: list[str] = []
    cost_usd: float = 0.0
    results: list[ItemResult] = []


def load_labels(path: Path) -> list[LabelledItem]:
    try:
        text = bounded.read_text(path, bounded.OPTION_FILE_MAX_BYTES)
    except (OSError, UnicodeDecodeError) as exc:
        raise LabelsError(f"{path}: cannot read the labels file: {exc}") from exc
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            raw_items = [(1, item) for item in json.loads(text)]
        except json.JSONDecodeError as exc:
            raise LabelsError(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from exc
        except (ValueError, RecursionError) as exc:  # a number past Python's digit limit; nesting past its stack
            raise LabelsError(f"{path}: the labels cannot be read: {str(exc) or type(exc).__name__}") from exc
    else:
        raw_items = []
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    raw_items.append((number, json.loads(line)))
                except json.JSONDecodeError as exc:
                    raise LabelsError(f"{path}:{number}:{exc.colno}: invalid JSON: {exc.msg}") from exc
                except (ValueError, RecursionError) as exc:
                    raise LabelsError(f"{path}:{number}: the labels cannot be read: "
                                      f"{str(exc) or type(exc).__name__}") from exc
    items = []
    for number, raw in raw_items:
        try:
            items.append(LabelledItem.model_validate(raw))
        except ValidationError as exc:
            raise LabelsError(f"{path}:{number}: {first_problem(exc)}") from exc
    if not items:
        raise LabelsError(f"{path}: no labelled items")
    ids = [item.id for item in items]
    if len(set(ids)) != len(ids):
        raise LabelsError(f"{path}: item ids must be unique")
    return items


def _rate(numerator: int, denominator: int) -> float | None:
    return round(numerator / denominator, 4) if denominator else None


async def _judge_all(judge: Judge, items: list[LabelledItem], concurrency: int) -> tuple[list[ItemResult], float]:
    gate = asyncio.Semaphore(concurrency)
    cost = 0.0

    async def one(item: LabelledItem) -> ItemResult:
        nonlocal cost
        assertion = Assertion(index=1, text=item.assertion, line=1, assertion_class="semantic", class_rule="label")
        calls = [ToolCall(name=t.name, input=t.input, turn=0) for t in item.tool_calls]
        async with gate:
            outcomes, call = await judge.judge(item.prompt, item.answer, calls, [assertion])
        cost += call.cost_usd
        return ItemResult(id=item.id, label=item.label, judged=outcomes[0].state, cause=call.error,
                          assertion_class=item.assertion_class)

    try:
        results = await asyncio.gather(*(one(item) for item in items))
    finally:
        await judge.aclose()
    return list(results), cost


def rates(results: list[ItemResult]) -> Rates:
    errors = sum(1 for r in results if r.judged == "JUDGE-ERROR")
    decided = [r for r in results if r.judged != "JUDGE-ERROR"]
    label_fail = [r for r in results if r.label == "FAIL"]
    label_pass = [r for r in results if r.label == "PASS"]
    return Rates(items=len(results), agreement=_rate(sum(1 for r in decided if r.judged == r.label), len(decided)),
                 false_pass_rate=_rate(sum(1 for r in label_fail if r.judged == "PASS"), len(label_fail)),
                 false_fail_rate=_rate(sum(1 for r in label_pass if r.judged == "FAIL"), len(label_pass)),
                 judge_error_rate=round(errors / len(results), 4) if results else 0.0)


def calibrate(judge: Judge, items: list[LabelledItem], labels_file: str, thresholds: CalibrationThresholds,
              concurrency: int = 4) -> CalibrationRecord:
    results, cost = asyncio.run(_judge_all(judge, items, concurrency))
    classes = sorted({r.assertion_class for r in results})
    record = CalibrationRecord(
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"), model=judge.settings.model,
        prompt_version=judge.version, labels_file=labels_file, **rates(results).model_dump(),
        by_class={c: rates([r for r in results if r.assertion_class == c]) for c in classes},
        thresholds=thresholds, passed=False, cost_usd=round(cost, 6), results=results)
    failures = []
    if record.agreement is None or record.agreement < thresholds.min_agreement:
        failures.append(f"agreement {record.agreement} < {thresholds.min_agreement}")
    if record.false_pass_rate is not None and record.false_pass_rate > thresholds.max_false_pass:
        failures.append(f"false PASS rate {record.false_pass_rate} > {thresholds.max_false_pass}")
    if record.false_fail_rate is not None and record.false_fail_rate > thresholds.max_false_fail:
        failures.append(f"false FAIL rate {record.false_fail_rate} > {thresholds.max_false_fail}")
    if record.judge_error_rate > thresholds.max_judge_error:
        failures.append(f"JUDGE-ERROR rate {record.judge_error_rate} > {thresholds.max_judge_error}")
    return record.model_copy(update={"passed": not failures, "failures": failures})


def calibrating_settings(settings: Settings) -> Settings:
    """The settings a calibration judges with: a passing record is what it makes, so none is required of it."""
    return settings.model_copy(update={"judge": settings.judge.model_copy(update={"require_calibration": False})})


def read_records(root: Path) -> list[CalibrationRecord]:
    path = root / RECORD_FILE
    if not path.exists():
        return []
    try:
        records = json.loads(bounded.read_text(path, bounded.OPTION_FILE_MAX_BYTES))
        return [CalibrationRecord.model_validate(r) for r in records]
    except (OSError, ValueError, ValidationError, RecursionError, TypeError):
        return []  # an unreadable record file proves nothing: treated as no calibration


def append_record(root: Path, record: CalibrationRecord) -> Path:
    path = root / RECORD_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    records = read_records(root) + [record]
    path.write_text(json.dumps([r.model_dump(mode="json") for r in records], indent=2) + "\n", encoding="utf-8")
    return path


def passing_record(root: Path, model: str, version: str) -> CalibrationRecord | None:
    """The latest record for this judge model and prompt version, if it passed."""
    matching = [r for r in read_records(root) if r.model == model and r.prompt_version == version]
    return matching[-1] if matching and matching[-1].passed else None
