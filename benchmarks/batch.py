"""Cost levers measured in tokens: the same `api`-host run direct, through the Message Batches API,
and through batches with prompt caching marked.

    python -m benchmarks.batch [--short] [--reps N] [--out FILE.json]

The run: the real runner (runner.pipeline.run.prepare, then runner.pipeline.run.execute or runner.pipeline.batched.execute_batched)
on Project Aegis — the cases of its first 11 skills by name, 101 cases, N=3, k=2, judge on — or, with
--short, on the bundled example library (one skill). The API is runner/testing/fake_anthropic.py in this
process, scripted the same way for every mode: a case's first turn calls the Skill tool with the
case's target skill for 80% of the prompts (chosen by a hash of the prompt, so every mode sees the same
answers), then a text answer; the judge passes every rubric item quoting the answer. All token figures
are the fake's usage figures as the runner recorded them in attempts.jsonl (sessions and judge calls);
costs are the runner's own (runner/data/prices.json, batch = 50% of every figure).

Modes:
- direct: every model turn and judge call a /v1/messages request; no cache breakpoints (the api
  host's `prompt_caching=False`, the judge's `prompt_caching=False`);
- batch: the same, through Message Batches (`--batch`), no cache breakpoints;
- batch+cache: batches, with the api host's system prompt (listing + tools prefix) and the judge's
  system prompt and rubric marked `cache_control: ephemeral`.

The fake answers a batch at once and the runner polls every 0.05 s, so wall times here say nothing
about real batch latency (the API promises 24 hours, most batches end within one): they are
reported only to show the batch path's own overhead. Every figure is the median over --reps
repetitions with min-max; sessions, judge calls and case states are checked to be identical in every
repetition. The load averages before and after are recorded (2-core machine, shared).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

AEGIS = REPO / "tests" / "corpora" / "project-aegis" / "dot-claude" / "skills"
EXAMPLE = REPO / "examples" / "library"
KEY = "sk-bench-batch-not-a-real-key"
MODES = ("direct", "batch", "batch+cache")
FIRE_SHARE = 0.8


def workload(short: bool) -> tuple[Path, tuple[str, ...]]:
    """(library, skills): the example library's triage skill, or Aegis's first 11 skills (101 cases)."""
    from runner.corpus.loader import load_library
    from runner.corpus.settings import Settings

    if short or not AEGIS.is_dir():
        return EXAMPLE, ("test-report-triage",)
    library, _ = load_library(AEGIS, Settings())
    names = sorted({case.skill for case in library.cases})
    return AEGIS, tuple(names[:11])


def script(fake: Any, library: Any) -> None:
    """Deterministic per prompt: the same answers in every mode."""
    from runner.testing.fake_anthropic import dynamic, first_user_text, text, tool
    from runner.testing.fake_judge import JUDGE_MATCH, verdicts

    targets = [(case.prompt[:60], case.target or case.skill) for case in library.cases if case.prompt]

    def first_turn(body: dict[str, Any]) -> Any:
        user = first_user_text(body)
        target = next((t for key, t in targets if key and key in user), None)
        draw = int(hashlib.sha256(user.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
        if target and draw < FIRE_SHARE:
            # A fixed tool_use id: the fake numbers ids in request order, and a longer id would change
            # its input token count (JSON length / 4) from one mode to the other.
            return tool("Skill", {"skill": target}, id="toolu_bench_skill")
        return text("I can answer this directly without any skill.\nHere is the answer.")

    fake.script(JUDGE_MATCH, verdicts("PASS"))
    fake.default(dynamic(first_turn), text("ANSWER\nThe work is done as the skill describes."))


def run_mode(mode: str, library_path: Path, skills: tuple[str, ...], out: Path) -> dict[str, Any]:
    from runner.corpus.loader import load_library
    from runner.corpus.settings import Settings
    from runner.execute.rundir import RunDir
    from runner.pipeline import run as runs_mod
    from runner.pipeline.batched import execute_batched
    from runner.testing.fake_anthropic import FakeAnthropic

    settings = Settings()
    library, _ = load_library(library_path, settings)
    options = runs_mod.Options(tier="full", skills=skills, host="api", repeats=3, quorum=2, max_usd=10_000.0,
                               concurrency=16, timeout_s=120)
    with FakeAnthropic() as fake:
        script(fake, library)
        credentials = runs_mod.Credentials(api_key=KEY, base_url=fake.url)
        prepared = runs_mod.prepare(library, settings, options, credentials, audit=True)
        caching = mode == "batch+cache"
        prepared.host.prompt_caching = caching
        if prepared.judge is not None:
            prepared.judge.prompt_caching = caching
        rundir = RunDir(out)
        runs_mod.write_plan(rundir, prepared)
        started, cpu = time.monotonic(), time.process_time()
        if mode == "direct":
            results = runs_mod.execute(prepared, rundir)
        else:
            results = execute_batched(prepared, rundir, credentials, None, poll_s=0.05)
        wall, cpu = time.monotonic() - started, time.process_time() - cpu
        bodies = [r.body for r in fake.message_requests] + [item.params for item in fake.batch_items]
        http = {"messages": len(fake.message_requests), "batch_creates": len(fake.batch_creates),
                "batch_requests": len(fake.batch_items),
                # Requests that carried a cache breakpoint (the api host marks its system prompt only when
                # tools + system reach 1,024 tokens by its estimate; the judge always marks both blocks).
                "cache_marked": sum('"cache_control"' in json.dumps(b) for b in bodies)}
    return {"mode": mode, "wall_s": wall, "cpu_s": cpu, "http": http, **tally(out, prepared, results)}


def tally(out: Path, prepared: Any, results: Any) -> dict[str, Any]:
    from runner.core.observation import Usage
    from runner.corpus.settings import Settings
    from runner.hosts import prices as prices_mod

    records = [json.loads(line) for line in (out / "attempts.jsonl").read_text().splitlines() if line.strip()]
    finished = [r for r in records if r["status"] == "finished"]
    sessions, judge = Usage(), Usage()
    session_usd = judge_usd = 0.0
    calls = 0
    for record in finished:
        sessions = sessions.add(Usage(**record["usage"]))
        session_usd += record["cost_usd"]
        if record.get("judge") and record["judge"].get("usage"):
            judge = judge.add(Usage(**record["judge"]["usage"]))
            judge_usd += record["judge"]["cost_usd"]
            calls += 1
    table = prices_mod.load(Settings())
    plan = prepared.plan
    at_list = (table.cost(plan.model, sessions) or 0.0) + (table.cost(plan.judge_model or plan.model, judge) or 0.0)
    total = sessions.add(judge)
    input_all = total.input_tokens + total.cache_creation_input_tokens + total.cache_read_input_tokens
    states = {c.uid: c.state for c in results.cases}
    return {"sessions": len(finished), "judge_calls": calls, "cases": len(results.cases),
            "session_usage": sessions.model_dump(), "judge_usage": judge.model_dump(),
            "input_tokens": input_all, "output_tokens": total.output_tokens,
            "cache_read_share": round(total.cache_read_input_tokens / input_all, 4) if input_all else 0.0,
            "session_usd": round(session_usd, 6), "judge_usd": round(judge_usd, 6),
            "cost_usd": round(session_usd + judge_usd, 6), "cost_at_list_prices_usd": round(at_list, 6),
            "states": states}


def median_row(reps: list[dict[str, Any]]) -> dict[str, Any]:
    """Median of every figure, with min-max beside it. Sessions, judge calls and case states must agree
    in every repetition (token counts too, with the fixed tool_use id of `script`; min-max shows it)."""
    first = reps[0]
    for key in ("sessions", "judge_calls", "states"):
        if any(rep[key] != first[key] for rep in reps):
            raise SystemExit(f"{first['mode']}: {key} differs between repetitions")
    row = {k: v for k, v in first.items() if k not in ("states",)}
    for key in ("wall_s", "cpu_s", "input_tokens", "output_tokens", "cache_read_share", "session_usd", "judge_usd",
                "cost_usd", "cost_at_list_prices_usd"):
        values = [rep[key] for rep in reps]
        row[key] = statistics.median(values)
        row[f"{key}_range"] = [min(values), max(values)]
    for key in ("session_usage", "judge_usage"):
        row[key] = {field: statistics.median(rep[key][field] for rep in reps) for field in first[key]}
    row["_states"] = first["states"]
    return row


def machine() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--short", action="store_true", help="The example library, one repetition (CI).")
    parser.add_argument("--reps", type=int, default=None, help="Repetitions per mode (default 3; --short 1).")
    parser.add_argument("--out", type=Path, default=None, help="Write the figures as JSON here.")
    args = parser.parse_args(argv)
    reps = args.reps or (1 if args.short else 3)
    library_path, skills = workload(args.short)
    load_before = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-batch-") as tmp:
        for mode in MODES:
            runs = [run_mode(mode, library_path, skills, Path(tmp) / f"{mode}-{rep}".replace("+", "_"))
                    for rep in range(reps)]
            rows.append(median_row(runs))
    load_after = os.getloadavg()
    direct = rows[0]
    for row in rows:
        row["states_match_direct"] = row["_states"] == direct["_states"]
        row["cost_vs_direct"] = round(row["cost_usd"] / direct["cost_usd"], 4) if direct["cost_usd"] else None
        row["input_tokens_vs_direct"] = (round(row["input_tokens"] / direct["input_tokens"], 4)
                                         if direct["input_tokens"] else None)
    states = {}
    for row in rows:
        states = row.pop("_states")
    report = {"benchmark": "batch", "short": args.short, "library": str(library_path), "skills": list(skills),
              "cases": rows[0]["cases"], "repeats": 3, "quorum": 2, "reps": reps, "machine": machine(),
              "load_average": {"before": load_before, "after": load_after},
              "case_states": dict(sorted(__import__("collections").Counter(states.values()).items())),
              "rows": rows}
    print_table(report)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1))
    return 0


def print_table(report: dict[str, Any]) -> None:
    print(f"batch benchmark: {report['library']} ({report['cases']} cases, N=3 k=2), {report['reps']} rep(s); "
          f"load {report['load_average']['before']} -> {report['load_average']['after']}")
    head = (f"{'mode':<12} {'sessions':>8} {'judge':>6} {'input tok':>10} {'cache rd':>9} {'cache wr':>9} "
            f"{'output tok':>10} {'cost $':>9} {'vs direct':>9} {'same states':>11} {'batches':>7} {'wall s (min-max)':>20}")
    print(head)
    for row in report["rows"]:
        usage = {k: row["session_usage"][k] + row["judge_usage"][k] for k in row["session_usage"]}
        low, high = row["wall_s_range"]
        print(f"{row['mode']:<12} {row['sessions']:>8} {row['judge_calls']:>6} {row['input_tokens']:>10.0f} "
              f"{usage['cache_read_input_tokens']:>9.0f} {usage['cache_creation_input_tokens']:>9.0f} "
              f"{row['output_tokens']:>10.0f} {row['cost_usd']:>9.4f} {row['cost_vs_direct']!s:>9} "
              f"{row['states_match_direct']!s:>11} {row['http']['batch_creates']:>7} "
              f"{row['wall_s']:>8.2f} ({low:.2f}-{high:.2f})")


if __name__ == "__main__":
    sys.exit(main())
