"""Peak memory (RSS) of the runner at 1x and 10x the Aegis corpus: does it stay flat per case?

Every figure is ru_maxrss of a FRESH Python process that does one step and exits (`--child`), so
no measurement inherits another's heap. The steps, on the real Aegis library (1,740 cases) and a
synthetic corpus of ten renamed copies of it (benchmarks.synthetic, 17,400 cases):

    baseline  import the runner (the floor under every other figure)
    plan      load the library, validate it (check_library), runs.prepare with the api host's
              surface audit and no key (every case UNRUN no-credentials), write plan.json
    write     plan, then append one synthetic AttemptRecord per attempt (N=3 for every runnable case)
              with RunDir.append_attempt, each with its transcript written by RunDir.write_transcript
    read      plan, then RunDir.read_attempts of that run folder
    finish    plan, then runs.finish: read the attempts, results.build, write results.json
    read-slim   plan, then RunDir.read_attempts(plan_hash, slim=True): verdicts only
    finish-slim plan, then runs.finish's own steps with that slim read instead (what runs.finish
                would cost if it asked for slim records; runs.py is not changed by this benchmark)
    execute   plan, then the real runner.execute.executor.Executor over every runnable case (N=3, early stop
              on) with an in-process scripted Host that answers at once with a ~12 KB transcript:
              the memory of the run itself (sessions, ledger, attempts.jsonl, transcripts), without
              the final results step

The synthetic attempts are shaped like a judged api-host attempt: a ~3 KB final answer, one Skill
tool call, every assertion decided with a ~150-character evidence quote, a judge call, and a
~12 KB transcript on disk. Per-case memory is (RSS - baseline) / cases; flat means about the same
at 1x and 10x, and the marginal figure is (RSS 10x - RSS 1x) / (cases 10x - cases 1x).

    python -m benchmarks.memory [--short] [--repeats 3] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel

REPO = Path(__file__).resolve().parent.parent
STEPS = ("baseline", "plan", "write", "read", "finish", "read-slim", "finish-slim", "execute")


def peak_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux


# ---- the child: one step in a fresh process --------------------------------------------------------

def _prepare(library_path: Path) -> Any:
    from runner.corpus.loader import load_library
    from runner.corpus.settings import Settings
    from runner.floor.validate import check_library
    from runner.pipeline import run as runs

    settings = Settings()
    library, _ = load_library(library_path, settings)
    check_library(library, settings)
    prepared = runs.prepare(library, settings, runs.Options(host="api"), runs.Credentials(None, None), audit=True)
    # As if a key were present: the plan is the same, the cases are not all UNRUN no-credentials.
    plan = prepared.plan.model_copy(update={"unrun_all": None})
    return replace(prepared, plan=plan, plan_hash=plan.digest())


class ScriptedHost:
    """runner.hosts.base.Host answering in-process: the target fires, a ~12 KB transcript, no network."""

    name = "scripted"

    def __init__(self, targets: dict[str, str]):
        self.targets = targets
        self.answer = ("Synthetic final answer. " * 125)[:3000]
        self.body = ("# A skill body, as the Skill tool returns it.\n" + "Step and rule text. " * 400)[:8000]
        self.middleware: list[Any] = []  # no API client: the rate limiter the executor adds here is never read
        self.session_path = None

    def versions(self) -> dict[str, str]:
        return {"host": "scripted"}

    async def surface(self, model: str, library_names: set[str], invocable: set[str]) -> Any:
        raise NotImplementedError("the memory benchmark plans without a surface audit")

    async def aclose(self) -> None:
        return None

    async def run(self, spec: Any) -> Any:
        import asyncio

        from runner.core.observation import Activation, Observation, ToolCall, Usage

        await asyncio.sleep(0)  # yield like a real session would
        target = self.targets[spec.uid]
        return Observation(
            attempt_id=spec.attempt_id, host=self.name, activations=[Activation(name=target, mechanism="skill-tool",
                                                                                turn=0)],
            tool_calls=[ToolCall(name="Skill", input=json.dumps({"skill": target}), turn=0)], final_answer=self.answer,
            turns=2, usage=Usage(input_tokens=4200, output_tokens=800), cost_usd=0.0246, duration_s=0.0,
            transcript=[{"role": "user", "content": spec.prompt},
                        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Skill",
                                                           "input": {"skill": target}}]},
                        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                                      "content": self.body}]},
                        {"role": "assistant", "content": [{"type": "text", "text": self.answer}]}])


def _execute(prepared: Any, rundir: Any) -> int:
    """runs.execute's executor part (no signal handlers, no results step), with the scripted host."""
    import asyncio

    from runner.execute.budget import Ledger
    from runner.execute.executor import Executor, RunState
    from runner.pipeline import run as runs

    plan = prepared.plan.model_copy(update={"cap_usd": 1e9})  # the cap is not what is measured here
    plan_hash = plan.digest()
    rundir.create()
    state = RunState(ledger=Ledger(cap_usd=plan.cap_usd))
    host = ScriptedHost({uid: case.target for uid, case in prepared.cases.items()})
    executor = Executor(plan, plan_hash, prepared.cases, host, rundir, state, prepared.known_names, None, None,
                        plan.judge_unavailable, mine=runs.shard_uids(plan, None))
    asyncio.run(executor.run({}))
    return state.finished


def _attempts(prepared: Any, rundir: Any, repeats: int) -> int:
    from runner.core.observation import ToolCall, Usage
    from runner.core.outcomes import AssertionOutcome, AttemptOutcome
    from runner.execute.rundir import AttemptRecord
    from runner.judge.prose import JudgeCall

    rng = random.Random(11)
    answer = ("Synthetic final answer. " * 125)[:3000]
    evidence = ("quoted evidence from the answer " * 5)[:150]
    skill_body = ("# A skill body, as the Skill tool returns it.\n" + "Step and rule text. " * 400)[:8000]
    written = 0
    for planned in prepared.plan.cases:
        if planned.unrun_reason is not None:
            continue
        case = prepared.cases[planned.uid]
        for repeat in range(1, repeats + 1):
            attempt_id = f"{planned.uid}#main#{repeat}"
            won = rng.random() < 0.8
            outcome = AttemptOutcome(
                state="PASS" if won else "FAIL", activation="PASS" if won else "FAIL",
                fired=[planned.target] if won else [], target_fired=won, fired_instead=[],
                assertions=[AssertionOutcome(index=a.index, state="PASS", reason="judged", evidence=evidence)
                            for a in case.assertions])
            transcript = [{"role": "user", "content": case.prompt},
                          {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Skill",
                                                             "input": {"skill": planned.target}}]},
                          {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                                        "content": skill_body}]},
                          {"role": "assistant", "content": [{"type": "text", "text": answer}]}]
            relative = rundir.write_transcript(attempt_id, transcript)
            rundir.append_attempt(AttemptRecord(
                attempt_id=attempt_id, uid=planned.uid, arm="main", repeat=repeat, plan_hash=prepared.plan_hash,
                status="finished", outcome=outcome, turns=2,
                usage=Usage(input_tokens=4200, output_tokens=800), cost_usd=0.0246, reserved_usd=1.68,
                duration_s=4.2, transcript=relative, final_answer=answer,
                tool_calls=[ToolCall(name="Skill", input=json.dumps({"skill": planned.target}), turn=0)],
                judge=JudgeCall(model="claude-sonnet-4-6", prompt_version="v1", usage=Usage(input_tokens=2500,
                                output_tokens=300), cost_usd=0.012, duration_s=2.0)))
            written += 1
    return written


class ChildResult(BaseModel):
    step: str
    cases: int = 0
    runnable: int = 0
    attempts: int = 0
    peak_kib: int
    seconds: float
    checkpoints: dict[str, int] = {}  # peak KiB after each phase (a peak only grows)
    results_bytes: int = 0
    attempts_bytes: int = 0


def child(step: str, library: Path | None, run: Path | None, repeats: int) -> ChildResult:
    started = time.monotonic()
    from runner.execute.rundir import ATTEMPTS, RESULTS, RunDir
    from runner.pipeline import run as runs
    from runner.results import build as _results  # noqa: F401 - the baseline imports what every step imports

    checkpoints = {"imports": peak_kib()}
    if step == "baseline":
        return ChildResult(step=step, peak_kib=peak_kib(), seconds=time.monotonic() - started, checkpoints=checkpoints)
    assert library is not None and run is not None
    prepared = _prepare(library)
    checkpoints["plan"] = peak_kib()
    cases = len(prepared.plan.cases)
    runnable = sum(1 for c in prepared.plan.cases if c.unrun_reason is None)
    rundir = RunDir(run)
    attempts = 0
    if step == "plan":
        runs.write_plan(rundir, prepared)
    elif step == "write":
        runs.write_plan(rundir, prepared)
        attempts = _attempts(prepared, rundir, repeats)
    elif step == "read":
        attempts = len(rundir.read_attempts())
    elif step == "finish":
        results = runs.finish(prepared, rundir, None)
        attempts = results.attempts_finished
    elif step == "read-slim":
        attempts = len(rundir.read_attempts(plan_hash=prepared.plan_hash, slim=True))
    elif step == "finish-slim":
        # runs.finish, step for step, with the slim read.
        records = rundir.read_attempts(plan_hash=prepared.plan_hash, slim=True)
        results = _results.build(prepared.plan, prepared.plan_hash, prepared.cases, records, None, 0,
                                 runs.shard_uids(prepared.plan, prepared.shard), prepared.shard)
        rundir.write_json(RESULTS, results.model_dump_json(indent=2))
        attempts = results.attempts_finished
    elif step == "execute":
        rundir = RunDir(run.with_name(run.name + "-execute"))
        attempts = _execute(prepared, rundir)
        run = rundir.path
    checkpoints[step] = peak_kib()
    size = (run / RESULTS).stat().st_size if (run / RESULTS).exists() else 0
    attempts_size = (run / ATTEMPTS).stat().st_size if (run / ATTEMPTS).exists() else 0
    return ChildResult(step=step, cases=cases, runnable=runnable, attempts=attempts, peak_kib=peak_kib(),
                       seconds=round(time.monotonic() - started, 2), checkpoints=checkpoints, results_bytes=size,
                       attempts_bytes=attempts_size)


# ---- the parent: fresh processes, repetitions, the table -----------------------------------------

def measure(step: str, library: Path | None, run: Path | None, repeats: int) -> ChildResult:
    command = [sys.executable, "-m", "benchmarks.memory", "--child", step, "--attempt-repeats", str(repeats)]
    if library is not None:
        command += ["--library", str(library), "--run", str(run)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=3600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {done.stderr[-3000:]}")
    return ChildResult.model_validate_json(done.stdout.strip().splitlines()[-1])


class StepFigure(BaseModel):
    scale: str
    step: str
    cases: int
    attempts: int
    peak_mib_median: float
    peak_mib_min: float
    peak_mib_max: float
    seconds_median: float
    above_baseline_mib: float
    bytes_per_case: float       # (peak - baseline) / cases
    results_bytes: int
    attempts_bytes: int
    loads: list[tuple[float, float, float]]


def figure(scale: str, step: str, runs: list[ChildResult], baseline_kib: float,
           loads: list[tuple[float, float, float]]) -> StepFigure:
    peaks = [r.peak_kib for r in runs]
    median = statistics.median(peaks)
    last = runs[-1]
    return StepFigure(scale=scale, step=step, cases=last.cases, attempts=last.attempts,
                      peak_mib_median=round(median / 1024, 1), peak_mib_min=round(min(peaks) / 1024, 1),
                      peak_mib_max=round(max(peaks) / 1024, 1),
                      seconds_median=round(statistics.median(r.seconds for r in runs), 2),
                      above_baseline_mib=round((median - baseline_kib) / 1024, 1),
                      bytes_per_case=round((median - baseline_kib) * 1024 / last.cases, 0) if last.cases else 0.0,
                      results_bytes=last.results_bytes, attempts_bytes=last.attempts_bytes, loads=loads)


class Marginal(BaseModel):
    step: str
    bytes_per_added_case: float  # (peak 10x - peak 1x) / (cases 10x - cases 1x)
    per_case_ratio: float        # bytes per case at 10x / at 1x: 1.0 is flat


class Report(BaseModel):
    command: str
    machine: dict[str, Any]
    repetitions: int
    attempt_repeats: int
    baseline_mib: float
    figures: list[StepFigure]
    marginal: list[Marginal]


def run_all(scales: dict[str, Path], repetitions: int, attempt_repeats: int, work: Path,
            steps: list[str]) -> tuple[float, list[StepFigure]]:
    baseline_runs = [measure("baseline", None, None, attempt_repeats) for _ in range(repetitions)]
    baseline_kib = statistics.median(r.peak_kib for r in baseline_runs)
    figures = []
    for scale, library in scales.items():
        run = work / f"run-{scale}"
        for step in steps:
            results, loads = [], []
            for _ in range(repetitions):
                if step in ("plan", "write"):
                    shutil.rmtree(run, ignore_errors=True)  # each write starts from an empty run folder
                if step == "execute":
                    shutil.rmtree(run.with_name(run.name + "-execute"), ignore_errors=True)
                results.append(measure(step, library, run, attempt_repeats))
                loads.append(os.getloadavg())
            figures.append(figure(scale, step, results, baseline_kib, loads))
            print(f"  {scale:>4} {step:<7} {figures[-1].peak_mib_median:>8.1f} MiB "
                  f"({figures[-1].peak_mib_min}-{figures[-1].peak_mib_max})  "
                  f"{figures[-1].bytes_per_case:>8.0f} B/case  {figures[-1].seconds_median:>6.2f} s  "
                  f"load {loads[-1][0]:.2f}", flush=True)
    return baseline_kib, figures


def marginals(figures: list[StepFigure], small: str, large: str, steps: list[str]) -> list[Marginal]:
    out = []
    for step in steps:
        a = next(f for f in figures if f.scale == small and f.step == step)
        b = next(f for f in figures if f.scale == large and f.step == step)
        added = b.cases - a.cases
        out.append(Marginal(step=step,
                            bytes_per_added_case=round((b.peak_mib_median - a.peak_mib_median) * 1024 * 1024 / added, 0)
                            if added else 0.0,
                            per_case_ratio=round(b.bytes_per_case / a.bytes_per_case, 2) if a.bytes_per_case else 0.0))
    return out


def main(argv: list[str] | None = None) -> Report | None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true",
                        help="The bundled example library at 1x and 3x, one repetition (CI check).")
    parser.add_argument("--repeats", type=int, default=3, help="Fresh-process repetitions per figure.")
    parser.add_argument("--copies", type=int, default=10, help="Size of the large corpus, in copies of the small.")
    parser.add_argument("--attempt-repeats", type=int, default=3, help="Attempts per runnable case (N).")
    parser.add_argument("--steps", default=",".join(STEPS[1:]),
                        help="Comma-separated steps (plan and write first: the others read what write wrote).")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--child", choices=STEPS, help=argparse.SUPPRESS)
    parser.add_argument("--library", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--run", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(child(args.child, args.library, args.run, args.attempt_repeats).model_dump_json())
        return None

    from benchmarks.synthetic import AEGIS_SKILLS, generate

    source = REPO / "examples" / "library" / ".claude" / "skills" if args.short else AEGIS_SKILLS
    copies = 3 if args.short else args.copies
    repetitions = 1 if args.short else args.repeats
    with tempfile.TemporaryDirectory(prefix="memory-bench-") as tmp:
        work = Path(tmp)
        large = generate(work / f"x{copies}", copies, source)
        scales = {"1x": source, f"{copies}x": large.root}
        print(f"Peak RSS per step, fresh process each, median of {repetitions} (min-max); "
              f"load before {os.getloadavg()}")
        steps = [s for s in args.steps.split(",") if s]
        baseline_kib, figures = run_all(scales, repetitions, args.attempt_repeats, work, steps)
    report = Report(command="python -m benchmarks.memory " + " ".join(argv if argv is not None else sys.argv[1:]),
                    machine={"cpus": os.cpu_count(), "python": sys.version.split()[0]}, repetitions=repetitions,
                    attempt_repeats=args.attempt_repeats, baseline_mib=round(baseline_kib / 1024, 1),
                    figures=figures, marginal=marginals(figures, "1x", f"{copies}x", steps))
    print(f"baseline (imports) {report.baseline_mib} MiB")
    for m in report.marginal:
        print(f"  {m.step:<7} {m.bytes_per_added_case:>8.0f} B per added case; per-case ratio {copies}x/1x "
              f"{m.per_case_ratio}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report.model_dump_json(indent=2), encoding="utf-8")
    return report


if __name__ == "__main__":
    main()
