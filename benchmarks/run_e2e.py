"""Throughput of a whole `skill-evals run` (Executor, ledger, rate limiter, run folder), not just a host.

    python -m benchmarks.run_e2e [--short] [--concurrency 1,4,8,16] [--latency 0.3] [--reps 3] --out FILE.json

benchmarks/throughput.py drives the host objects directly; this one runs the CLI as a user does:
`skill-evals run --host api --no-judge --no-early-stop` on the example library against the fake
Messages API in its own process (benchmarks.throughput.FakeProcess, 300 ms per request). Every
session is a Skill call then a final text (2 requests). Sessions/s is measured at the fake, from
the first request to the last response: sessions / (last arrival - first arrival + latency), so
the CLI's start-up (imports, validation, surface audit, plan) is not counted as session time; the
CLI process's whole CPU (start-up included) is reported per session beside it. The ideal rate is
concurrency / (2 x latency).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.throughput import EXAMPLE, KEY, REPO, FakeProcess, machine, spread

REQUESTS_PER_SESSION = 2


def one_run(fake: FakeProcess, concurrency: int, repeats: int, latency: float) -> dict[str, Any]:
    fake.dump()  # forget earlier requests
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryDirectory(prefix="bench-run-") as out:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
        env.update({"ANTHROPIC_BASE_URL": fake.url, "ANTHROPIC_API_KEY": KEY, "CI": "true"})
        done = subprocess.run([sys.executable, "-m", "runner", "run", "--library", str(EXAMPLE), "--out", out,
                               "--host", "api", "--no-judge", "--no-early-stop", "--repeats", str(repeats),
                               "--concurrency", str(concurrency), "--max-usd", "100000", "--timeout", "60",
                               "--no-library-validator"],
                              cwd=REPO, env=env, capture_output=True, text=True, timeout=1800, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"skill-evals run failed: {done.stderr[-2000:]}")
        attempts = [json.loads(line) for line in Path(out, "attempts.jsonl").read_text().splitlines() if line]
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    rows = fake.dump()
    times = sorted(r["t"] for r in rows)
    sessions = len(attempts)
    errors = sum(1 for a in attempts if a.get("error_kind"))
    window = times[-1] - times[0] + latency
    rate = sessions / window
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {"sessions": sessions, "requests": len(rows), "errors": errors, "rate": rate,
            "ideal": concurrency / (REQUESTS_PER_SESSION * latency),
            "ratio": rate / (concurrency / (REQUESTS_PER_SESSION * latency)),
            "process_cpu_ms_per_session": 1000 * cpu / max(1, sessions), "load": os.getloadavg()[0]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run_e2e", description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true", help="one quick configuration, to show it still runs")
    parser.add_argument("--concurrency", default="1,4,8,16")
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    levels = [2] if args.short else [int(c) for c in args.concurrency.split(",")]
    reps = 1 if args.short else args.reps
    fake = FakeProcess(0.05 if args.short else args.latency)
    latency = 0.05 if args.short else args.latency
    results = []
    try:
        for concurrency in levels:
            # Enough sessions for a steady state: at least 8 per slot (the example library has 33 runnable cases).
            repeats = 1 if args.short else max(1, -(-8 * concurrency // 33))
            repeats += 1 - repeats % 2  # N must be odd
            runs = [one_run(fake, concurrency, repeats, latency) for _ in range(reps)]
            row = {"concurrency": concurrency, "sessions": runs[0]["sessions"], "ideal": runs[0]["ideal"],
                   "rate": spread([r["rate"] for r in runs]), "ratio": spread([r["ratio"] for r in runs]),
                   "process_cpu_ms_per_session": spread([r["process_cpu_ms_per_session"] for r in runs]),
                   "errors": sum(r["errors"] for r in runs), "load": [round(r["load"], 2) for r in runs]}
            results.append(row)
            print(f"c={concurrency:>2} sessions={row['sessions']:>3} rate={row['rate']['median']:.2f}/s "
                  f"({row['rate']['min']:.2f}-{row['rate']['max']:.2f}) ideal={row['ideal']:.2f} "
                  f"ratio={100 * row['ratio']['median']:.0f}% ({100 * row['ratio']['min']:.0f}-"
                  f"{100 * row['ratio']['max']:.0f}) cli-process CPU/session="
                  f"{row['process_cpu_ms_per_session']['median']:.1f} ms errors={row['errors']} load={row['load']}",
                  flush=True)
    finally:
        fake.close()
    payload = {"machine": machine(), "latency": latency, "results": results}
    if args.out:
        args.out.write_text(json.dumps(payload, indent=2))
    return 0 if all(r["errors"] == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
