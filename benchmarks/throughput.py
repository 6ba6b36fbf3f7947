"""Session throughput of the `api` and `claude-code` hosts against the fake Messages API.

    python -m benchmarks.throughput [--short] [--hosts api,claude-code] [--latency 0.3] [--reps 5] --out FILE.json

The fake (runner/testing/fake_anthropic.py) runs in a SEPARATE process with a fixed per-request latency,
so the CPU time of this process is the runner's own (host objects, the anthropic SDK or the
claude-agent-sdk, asyncio) and the CLI subprocesses' CPU is read apart (RUSAGE_CHILDREN). Every
session plays the same script: a Skill call, then a final text (two requests). The host objects
are the real ones (runner.pipeline.run.make_host on the example library), driven by an asyncio semaphore
as runner.execute.executor.Executor drives them (without its ledger and run folder).

Figures per (host, concurrency), as the median over --reps repetitions with min-max:
- sessions/s and the ratio to the ideal rate concurrency / (requests per session x latency);
- the runner's CPU per session (time.process_time of this process) and the host process's CPU per
  session (the CLI subprocesses, RUSAGE_CHILDREN), and the fake's CPU per session (/proc);
- for claude-code, where one session's wall time goes: workspace build, CLI start until its first
  request reaches the fake, the model wait (latency x requests), the CLI's own time between
  requests, and teardown (process exit and workspace removal).
The load averages before and after every configuration are recorded: the machine has 2 cores and
is shared, so a busy machine lowers the figures and the table says so.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from pydantic import BaseModel

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "library"
SKILL = "incident-postmortem-writer"
MODEL = "claude-haiku-4-5"
PROMPT = "Write the postmortem for yesterday's checkout outage"
KEY = "sk-bench-not-a-real-key"
CLK_TCK = os.sysconf("SC_CLK_TCK")


# ---- the fake, in its own process ----------------------------------------------------------------

def serve_fake(latency: float, skill_name: str = SKILL) -> None:
    """Subprocess entry: serve until stdin closes; `dump` prints and forgets the recorded requests."""
    from runner.testing.fake_anthropic import FakeAnthropic, first_user_text, skill, text

    # The fake sends with TCP_NODELAY and listens with a backlog of 128 (runner.testing.scripted): with
    # Nagle's algorithm a body waits ~40 ms for the client's delayed ACK, and socketserver's backlog of 5 loses
    # SYNs in a burst of 16 connections (1 s retransmissions), neither of which the real API does (measured).
    with FakeAnthropic() as fake:
        fake.default(skill(skill_name), text("The postmortem is written."))
        fake.set_latency(latency)
        print(fake.url, flush=True)
        for line in sys.stdin:
            if line.strip() != "dump":
                continue
            with fake._lock:  # the fake's own lock: requests is appended under it
                taken, fake.requests[:] = list(fake.requests), []
            rows = [{"t": r.time, "prompt": first_user_text(r.body)[-200:], "turn": r.turn} for r in taken
                    if r.method == "POST" and r.path.rstrip("/") == "/v1/messages"]
            print(json.dumps(rows), flush=True)


class FakeProcess:
    """The fake Messages API in a child process (its CPU never counts as the runner's)."""

    def __init__(self, latency: float, skill_name: str = SKILL):
        self.proc = subprocess.Popen([sys.executable, "-m", "benchmarks.throughput", "--serve-fake",
                                      "--latency", str(latency), "--skill", skill_name], cwd=REPO, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http://"):
            raise RuntimeError(f"the fake did not start: {self.url!r}")

    def dump(self) -> list[dict[str, Any]]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("dump\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# ---- the hosts -------------------------------------------------------------------------------------

def make_host(name: str, url: str, library_path: Path = EXAMPLE) -> Any:
    from runner.corpus.loader import load_library
    from runner.corpus.settings import Settings
    from runner.hosts import prices as prices_mod
    from runner.pipeline.run import Credentials
    from runner.pipeline.run import make_host as runs_make_host

    settings = Settings()
    library, _ = load_library(library_path, settings)
    prices = prices_mod.load(settings)
    return runs_make_host(name, library, settings, Credentials(api_key=KEY, base_url=url), prices, KEY)


def make_spec(attempt_id: str) -> Any:
    from runner.core.observation import SessionSpec

    # The attempt id in the prompt lets the fake's records be matched to their session.
    return SessionSpec(attempt_id=attempt_id, uid=attempt_id, prompt=f"{PROMPT} [{attempt_id}]", model=MODEL,
                       max_turns=4, timeout_s=120, max_output_tokens=512)


async def drive(host: Any, specs: list[Any], concurrency: int, close: bool = True) -> list[Any]:
    """The executor's shape: one task per session, at most `concurrency` sessions at once."""
    gate = asyncio.Semaphore(concurrency)

    async def one(spec: Any) -> Any:
        async with gate:
            return await host.run(spec)

    observations = await asyncio.gather(*(one(s) for s in specs))
    closer = getattr(host, "aclose", None)
    if close and closer is not None:
        await closer()  # the api host's client belongs to this event loop
    return observations


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class Rep(BaseModel):
    sessions: int
    errors: int
    wall_s: float
    rate: float
    requests_per_session: float
    ideal_rate: float
    ratio: float
    runner_cpu_ms: float
    host_cpu_ms: float
    fake_cpu_ms: float
    phases_ms: dict[str, float] = {}
    snapshot_ms: float = 0.0


def one_rep(host_name: str, fake: FakeProcess, concurrency: int, sessions: int, latency: float, tag: str,
            library_path: Path = EXAMPLE) -> Rep:
    host = make_host(host_name, fake.url, library_path)
    marks: dict[str, dict[str, float]] = defaultdict(dict)
    host.trace = lambda attempt_id, phase: marks[attempt_id].__setitem__(phase, time.time())
    # Warm-up: imports, the first client and connections, the claude-code host's snapshot of the library
    # (kept: a run makes it once, timed apart as `snapshot_ms`) are not what a run pays per session.
    snapshot_ms = 0.0
    if hasattr(host, "staging"):
        started = time.perf_counter()
        host.staging()
        snapshot_ms = 1000 * (time.perf_counter() - started)
    asyncio.run(drive(host, [make_spec(f"warm-{tag}-{i}") for i in range(min(concurrency, 4))], concurrency,
                      close=host_name == "api"))
    fake.dump()
    marks.clear()
    specs = [make_spec(f"{tag}-{i}") for i in range(sessions)]
    cpu0, child0, fake0, wall0 = time.process_time(), children_cpu_s(), fake.cpu_s(), time.monotonic()
    observations = asyncio.run(drive(host, specs, concurrency))
    wall = time.monotonic() - wall0
    cpu, child, fake_cpu = time.process_time() - cpu0, children_cpu_s() - child0, fake.cpu_s() - fake0
    rows = fake.dump()
    errors = [o for o in observations if o.error_kind is not None]
    ok = len(observations) - len(errors)
    per_session = len(rows) / max(1, len(observations))
    ideal = concurrency / (per_session * latency) if per_session else float("nan")
    rate = ok / wall
    close = getattr(host, "close", None)
    if close is not None:
        close()
    return Rep(sessions=len(observations), errors=len(errors), wall_s=wall, rate=rate,
               requests_per_session=per_session, ideal_rate=ideal, ratio=rate / ideal,
               runner_cpu_ms=1000 * cpu / len(observations), host_cpu_ms=1000 * child / len(observations),
               fake_cpu_ms=1000 * fake_cpu / len(observations),
               phases_ms=phases(marks, rows, latency) if host_name == "claude-code" else {},
               snapshot_ms=snapshot_ms)


def phases(marks: dict[str, dict[str, float]], rows: list[dict[str, Any]], latency: float) -> dict[str, float]:
    """Median per-session milliseconds of each phase of a claude-code session."""
    arrivals: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        start = row["prompt"].rfind("[")
        arrivals[row["prompt"][start + 1:-1]].append(row["t"])
    parts: dict[str, list[float]] = defaultdict(list)
    for attempt_id, m in marks.items():
        seen = sorted(arrivals.get(attempt_id, []))
        if not seen or not {"start", "workspace", "stream-end", "removed"} <= set(m):
            continue
        parts["workspace"].append(m["workspace"] - m["start"])
        parts["cli-start-to-first-request"].append(seen[0] - m["workspace"])
        parts["model-wait"].append(len(seen) * latency)
        parts["cli-between-requests"].append(m["stream-end"] - seen[0] - len(seen) * latency)
        parts["teardown"].append(m["removed"] - m["stream-end"])
        parts["total"].append(m["removed"] - m["start"])
    return {k: round(1000 * statistics.median(v), 1) for k, v in parts.items()}


def spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def run_config(host_name: str, fake: FakeProcess, concurrency: int, latency: float, reps: int,
               sessions: int, library_path: Path = EXAMPLE) -> dict[str, Any]:
    load_before = os.getloadavg()
    results = [one_rep(host_name, fake, concurrency, sessions, latency, f"{host_name}-c{concurrency}-r{r}",
                       library_path) for r in range(reps)]
    load_after = os.getloadavg()
    summary: dict[str, Any] = {"host": host_name, "concurrency": concurrency, "sessions_per_rep": sessions,
                               "reps": [r.model_dump() for r in results], "load_before": load_before,
                               "load_after": load_after}
    for key in ("rate", "ratio", "runner_cpu_ms", "host_cpu_ms", "fake_cpu_ms", "requests_per_session",
                "snapshot_ms"):
        summary[key] = spread([getattr(r, key) for r in results])
    summary["errors"] = sum(r.errors for r in results)
    summary["ideal_rate"] = results[0].ideal_rate
    if host_name == "claude-code":
        keys = results[0].phases_ms.keys()
        summary["phases_ms"] = {k: spread([r.phases_ms[k] for r in results if k in r.phases_ms]) for k in keys}
    return summary


def sessions_for(host_name: str, concurrency: int, short: bool) -> int:
    if short:
        return concurrency * 2
    # About 5 s of wall time per repetition at the ideal rate, never fewer than 4 sessions per slot.
    return concurrency * (8 if host_name == "api" else 4)


def first_skill(library_path: Path) -> str:
    from runner.corpus.loader import load_library
    from runner.corpus.settings import Settings

    library, _ = load_library(library_path, Settings())
    invocable = sorted(name for name, s in library.skills.items() if not s.manual_only)
    return SKILL if SKILL in invocable else invocable[0]


def machine() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
            "processor": platform.processor() or platform.machine()}


def table(results: list[dict[str, Any]]) -> str:
    lines = [f"{'host':<12}{'conc':>5}{'sess/s':>18}{'ideal':>7}{'ratio':>20}{'runner ms':>18}{'host ms':>18}"
             f"{'err':>5}  load (1 min) before/after"]
    for r in results:
        def fmt(key: str, scale: float = 1.0, digits: int = 2) -> str:
            s = r[key]
            return f"{s['median'] * scale:.{digits}f} ({s['min'] * scale:.{digits}f}-{s['max'] * scale:.{digits}f})"
        lines.append(f"{r['host']:<12}{r['concurrency']:>5}{fmt('rate'):>18}{r['ideal_rate']:>7.2f}"
                     f"{fmt('ratio', 100, 0) + ' %':>20}{fmt('runner_cpu_ms', 1, 1):>18}{fmt('host_cpu_ms', 1, 0):>18}"
                     f"{r['errors']:>5}  {r['load_before'][0]:.2f}/{r['load_after'][0]:.2f}")
        if r.get("phases_ms"):
            shown = ", ".join(f"{k} {v['median']:.0f}" for k, v in r["phases_ms"].items())
            lines.append(f"{'':<17}per session (ms, median): {shown}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.throughput", description=__doc__.split("\n")[0])
    parser.add_argument("--short", action="store_true", help="a quick run that only shows the benchmark works")
    parser.add_argument("--hosts", default="api,claude-code")
    parser.add_argument("--latency", type=float, default=0.3, help="seconds per request at the fake")
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--api-concurrency", default="1,4,8,16")
    parser.add_argument("--cc-concurrency", default="1,4,8")
    parser.add_argument("--library", type=Path, default=EXAMPLE, help="the library the sessions see")
    parser.add_argument("--skill", default=None, help="the skill the fake's script calls (default: the "
                                                      "example's incident-postmortem-writer, else the first)")
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    parser.add_argument("--serve-fake", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_fake:
        serve_fake(args.latency, args.skill or SKILL)
        return 0
    skill_name = args.skill or first_skill(args.library)
    reps = args.reps or (1 if args.short else 5)
    latency = 0.05 if args.short and args.latency == 0.3 else args.latency
    plan = {"api": [int(c) for c in args.api_concurrency.split(",")],
            "claude-code": [int(c) for c in args.cc_concurrency.split(",")]}
    if args.short:
        plan = {"api": [1, 4], "claude-code": [2]}
    fake = FakeProcess(latency, skill_name)
    results = []
    try:
        for host_name in args.hosts.split(","):
            for concurrency in plan[host_name]:
                results.append(run_config(host_name, fake, concurrency, latency, reps,
                                          sessions_for(host_name, concurrency, args.short), args.library))
                print(table(results[-1:]).splitlines()[-1 if not results[-1].get("phases_ms") else -2],
                      file=sys.stderr, flush=True)
    finally:
        fake.close()
    report = {"benchmark": "throughput", "command": "python -m benchmarks.throughput " + " ".join(argv or sys.argv[1:]),
              "short": args.short, "latency_s": latency, "library": str(args.library), "skill": skill_name,
              "machine": machine(), "results": results}
    print(table(results))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
