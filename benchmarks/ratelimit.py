"""Rate limits: the api host at a fixed concurrency against a fake Messages API that enforces a
requests-per-window limit, with and without the adaptive limiter (runner.hosts.ratelimit).

Time is scaled: the fake's window is `--window` seconds (the API's is 60) with the limit in
proportion, and the limiter is told the same window. Each session is one request (the fake answers
every prompt with plain text), so sessions per second = requests per second. The library is
generated (4 small skills, 150 trigger cases each) so that the limit, not the host's own per-session
work, bounds the rate; `--library` runs another one.

Per arm it reports: requests refused over the limit in all and after the first burst (a refusal
after the fake already accepted a request past the first refusal), the achieved request rate as a
share of the limit (overall: accepted requests over the run's wall time, which includes the pause
after the first 429 and the sliding window's edges; and at the steady state: the slope of the
cumulative count of accepted requests from the first one accepted after the first refusal), the limiter's decreases and smallest window, and the attempt
states (an attempt with an error is ERROR, never PASS or FAIL).

    python -m benchmarks.ratelimit [--short] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel

from runner.corpus import settings as settings_mod
from runner.corpus.loader import load_library
from runner.execute.budget import Ledger
from runner.execute.executor import Executor, RunState
from runner.execute.rundir import RunDir
from runner.hosts.ratelimit import AdaptiveLimiter, LimiterStats
from runner.pipeline.run import Credentials, Options, finish, prepare, write_plan
from runner.testing.fake_anthropic import FakeAnthropic, Recorded, text

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "library"
REFUSED = "error 429 rate-limit"
GENERATED = Path("<generated>")  # --library default: small_library() in a temporary folder


class ArmResult(BaseModel):
    arm: str
    sessions: int
    wall_s: float
    requests: int
    over_limit: int
    over_limit_after_first_burst: int
    rate_per_s: float
    steady_rate_per_s: float | None
    limit_per_s: float
    share_of_limit: float
    steady_share_of_limit: float | None
    states: dict[str, int]
    error_kinds: dict[str, int]
    errors_as_pass_or_fail: int
    limiter: LimiterStats | None
    load_before: str
    load_after: str


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def small_library(dest: Path, skills: int = 4, cases_per_skill: int = 150) -> Path:
    """A repository root with a few small skills and many trigger cases: the session's own cost stays
    small (the api host copies the skills folder per session), so the rate limit is what binds."""
    for i in range(skills):
        name = f"bench-skill-{i}"
        folder = dest / ".claude" / "skills" / name
        (folder / "evals").mkdir(parents=True, exist_ok=True)
        (folder / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: Benchmark skill {i}. Use when the prompt names bench topic {i}.\n"
            f"---\n\n# Bench skill {i}\n\nAnswer briefly.\n", encoding="utf-8")
        cases = [{"id": f"case-{j}", "type": "should_trigger", "prompt": f"Bench topic {i}, question {j}.",
                  "expect": {"triggers": True, "assertions": []}} for j in range(cases_per_skill)]
        (folder / "evals" / "evals.json").write_text(json.dumps({"skill": name, "cases": cases}), encoding="utf-8")
    return dest


def widen_backlog(fake: FakeAnthropic, backlog: int = 128) -> None:
    """Raise the fake's listen backlog (socketserver's default is 5). Otherwise a burst of 16 new
    connections overflows it, the kernel drops SYNs and the client retransmits them a second later:
    requests sent before the first 429 would reach the fake after the pause, as if sent after it.
    (Asked of runner/testing/fake_anthropic.py as `request_queue_size = 128`; then this is a no-op.)"""
    if fake._server is not None:
        fake._server.socket.listen(max(backlog, fake._server.request_queue_size))


def first_burst_split(requests: list[Recorded]) -> tuple[int, float | None]:
    """(refusals after the first burst, time of the first accepted request after the first refusal)."""
    ordered = sorted(requests, key=lambda r: r.time)
    first_refusal = next((i for i, r in enumerate(ordered) if r.outcome == REFUSED), None)
    if first_refusal is None:
        return 0, None
    resumed = next((i for i in range(first_refusal, len(ordered)) if ordered[i].outcome != REFUSED), None)
    if resumed is None:
        return 0, None
    after = sum(1 for r in ordered[resumed:] if r.outcome == REFUSED)
    return after, ordered[resumed].time


def steady_rate(accepted: list[float], resumed_at: float | None) -> float | None:
    """Accepted requests per second after the first accepted request past the first refusal: the
    least-squares slope of the cumulative count over the arrival times. A plain count over a span
    would count a sliding window's edges (a full allowance at once, a partial window at the end)
    as throughput; the slope of a staircase of L every P seconds is L / P."""
    later = [t for t in accepted if resumed_at is not None and t >= resumed_at]
    if len(later) < 3 or later[-1] - later[0] <= 0:
        return None
    return statistics.linear_regression(later, list(range(len(later)))).slope


def run_arm(library_root: Path, fake: FakeAnthropic, out: Path, *, concurrency: int, limiter: AdaptiveLimiter | None,
            cases: int, timeout_s: float = 120.0) -> tuple[dict, list[dict], float]:
    """Plan `cases` cases (N=1, api host, no judge) and execute them; (results, attempts, wall seconds).
    limiter None: a fixed-concurrency limiter without middleware (the runner before the adaptive one)."""
    settings, _ = settings_mod.load(library_root / settings_mod.SETTINGS_FILE, library_root)
    library, _ = load_library(library_root, settings)
    uids = tuple(c.uid for c in library.cases if c.kind in ("trigger", "no_trigger", "refusal"))[:cases]
    options = Options(host="api", repeats=1, quorum=1, concurrency=concurrency, no_judge=True, cases=uids,
                      max_usd=1e6, timeout_s=timeout_s)
    prepared = prepare(library, settings, options, Credentials(api_key="sk-bench-ratelimit", base_url=fake.url),
                       audit=False)
    rundir = RunDir(out)
    write_plan(rundir, prepared)
    state = RunState(ledger=Ledger(cap_usd=prepared.plan.cap_usd))
    if limiter is None:
        # The baseline: the runner before runner.hosts.ratelimit (a fixed window, no middleware on the client).
        limiter = AdaptiveLimiter(concurrency, default_pause_s=prepared.plan.rate_limit_pause_s, adaptive=False)
    executor = Executor(prepared.plan, prepared.plan_hash, prepared.cases, prepared.host, rundir, state,
                        prepared.known_names, limiter=limiter)
    started = time.monotonic()
    async def run_and_close() -> None:
        try:
            await executor.run({})
        finally:
            await prepared.host.aclose()  # the host's client belongs to this event loop

    asyncio.run(run_and_close())
    wall = time.monotonic() - started
    results = finish(prepared, rundir, state.stop_reason, state.ledger.refused)
    attempts = [json.loads(line) for line in (out / "attempts.jsonl").read_text().splitlines() if line.strip()]
    return results.model_dump(mode="json"), attempts, wall


def measure(arm: str, library_root: Path, *, concurrency: int, limit: int, window_s: float, latency_s: float,
            cases: int, margin: float) -> ArmResult:
    with FakeAnthropic() as fake, tempfile.TemporaryDirectory(prefix="bench-ratelimit-") as tmp:
        library_root = library_root if library_root.is_dir() else small_library(Path(tmp) / "library")
        widen_backlog(fake)
        fake.default(text("A plain answer without any skill."))
        fake.set_latency(latency_s)
        fake.set_rate_limit(limit, window_s)
        limiter = AdaptiveLimiter(concurrency, period_s=window_s, margin=margin) if arm == "adaptive" else None
        before = load_average()
        results, attempts, wall = run_arm(library_root, fake, Path(tmp) / "run", concurrency=concurrency,
                                          limiter=limiter, cases=cases)
        after = load_average()
        requests = fake.message_requests
    after_burst, resumed_at = first_burst_split(requests)
    times = sorted(r.time for r in requests if r.outcome != REFUSED)
    accepted = len(times)
    limit_per_s = limit / window_s
    rate = accepted / wall
    steady = steady_rate(times, resumed_at)
    states: dict[str, int] = {}
    kinds: dict[str, int] = {}
    wrong = 0
    for record in attempts:
        state = (record.get("outcome") or {}).get("state", "none")
        states[state] = states.get(state, 0) + 1
        if record.get("error_kind"):
            kinds[record["error_kind"]] = kinds.get(record["error_kind"], 0) + 1
            wrong += state in ("PASS", "FAIL")
    return ArmResult(
        arm=arm, sessions=len(attempts), wall_s=round(wall, 3), requests=len(requests),
        over_limit=sum(1 for r in requests if r.outcome == REFUSED), over_limit_after_first_burst=after_burst,
        rate_per_s=round(rate, 3), steady_rate_per_s=round(steady, 3) if steady else None,
        limit_per_s=limit_per_s, share_of_limit=round(rate / limit_per_s, 4),
        steady_share_of_limit=round(steady / limit_per_s, 4) if steady else None, states=states, error_kinds=kinds,
        errors_as_pass_or_fail=wrong, limiter=limiter.stats if limiter else None, load_before=before,
        load_after=after)


def spread(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 4), "min": round(min(values), 4), "max": round(max(values), 4)}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--short", action="store_true", help="a quick run that only checks the benchmark works")
    parser.add_argument("--out", type=Path, default=None, help="write the JSON figures here")
    parser.add_argument("--library", type=Path, default=None,
                        help="default: a generated library of 4 small skills (the rate limit binds, not the host)")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--latency", type=float, default=0.3, help="the fake's seconds per request")
    parser.add_argument("--limit", type=int, default=30, help="requests per window")
    parser.add_argument("--window", type=float, default=6.0, help="the window in seconds (the API's: 60)")
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--margin", type=float, default=0.05)
    args = parser.parse_args(argv)
    library = args.library or GENERATED
    if args.short:
        args.cases, args.reps, args.limit, args.window, args.latency = 40, 1, 10, 1.0, 0.05
    runs: list[ArmResult] = []
    for rep in range(args.reps):
        for arm in ("fixed", "adaptive"):
            result = measure(arm, library, concurrency=args.concurrency, limit=args.limit, window_s=args.window,
                             latency_s=args.latency, cases=args.cases, margin=args.margin)
            runs.append(result)
            print(f"rep {rep + 1} {arm:8} sessions {result.sessions:4} over-limit {result.over_limit:4} "
                  f"(after first burst {result.over_limit_after_first_burst:3}) share {result.share_of_limit:.3f} "
                  f"steady {result.steady_share_of_limit} load {result.load_before} -> {result.load_after}",
                  flush=True)
    summary = {}
    for arm in ("fixed", "adaptive"):
        mine = [r for r in runs if r.arm == arm]
        steady = [r.steady_share_of_limit for r in mine if r.steady_share_of_limit is not None]
        summary[arm] = {
            "over_limit": spread([r.over_limit for r in mine]),
            "over_limit_after_first_burst": spread([r.over_limit_after_first_burst for r in mine]),
            "share_of_limit": spread([r.share_of_limit for r in mine]),
            "steady_share_of_limit": spread(steady) if steady else None,
            "errors_as_pass_or_fail": sum(r.errors_as_pass_or_fail for r in mine),
        }
    config = {"library": str(library) if library != GENERATED else "generated: 4 skills x 150 trigger cases", "concurrency": args.concurrency, "latency_s": args.latency,
              "limit": args.limit, "window_s": args.window, "cases": args.cases, "reps": args.reps,
              "margin": args.margin, "short": args.short, "cpus": os.cpu_count()}
    print()
    print(f"{'arm':9} {'over limit':>20} {'after 1st burst':>20} {'share of limit':>24} {'steady share':>24}")
    for arm, s in summary.items():
        def fmt(d: dict | None) -> str:
            return "n/a" if d is None else f"{d['median']:g} ({d['min']:g}-{d['max']:g})"
        print(f"{arm:9} {fmt(s['over_limit']):>20} {fmt(s['over_limit_after_first_burst']):>20} "
              f"{fmt(s['share_of_limit']):>24} {fmt(s['steady_share_of_limit']):>24}")
    report = {"config": config, "summary": summary, "runs": [r.model_dump(mode="json") for r in runs]}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


if __name__ == "__main__":
    main()
