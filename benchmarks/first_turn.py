"""Issue 21 side by side, and the cold-start comparison: the claude-code host before and after deciding early, the
first-turn host, the CLI's own floor, and skill-creator's own trigger evaluation, on skill-creator's kind of trigger
set.

    python -m benchmarks.first_turn [--short] [--concurrency 1,4,10] [--rows NAME,...] [--latency 0.3]
        [--out FILE.json] [--md FILE.md]

The set is runner/testing/trigger_set.py: one skill under test (invoice-scanner) and two neighbours, 20 queries (10
should trigger, 10 should not), each run 3 times = 60 sessions, against the fake Messages API
(runner/testing/fake_anthropic.py, in this process, a fresh one per row so no row reads another's cache, 0.3 s per
request) scripted by `trigger_set.script` as a keyword model: a query naming an invoice calls the Skill tool, then
answers; any other query is answered without a tool. The Claude Code CLI is the one bundled in claude-agent-sdk.

Rows, each at every concurrency:
- `claude-code before`: `skill-evals run --library LIB --host claude-code --repeats 3 --quorum 2`, a config file with
  `[run] decide_early = false`, `early_stop = false`: every session runs to its end, all 60 run.
- `claude-code after`: the same with `decide_early = true` (the default): a session ends once its outcome is certain.
- `first-turn`: `--host first-turn`, the same config as `after`; only when runner.core.host_traits.HOST_NAMES
  has it (else the row is skipped and the report says why).
- `bare claude -p`: the CLI-CPU floor. One `claude -p QUERY --output-format stream-json --verbose` per session, each
  in a fresh temporary project holding the same library under .claude/skills, with a fresh HOME and
  CLAUDE_CONFIG_DIR and only PATH, HOME, ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, CLAUDE_CONFIG_DIR and
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 in its environment; its fake answers every request with text (one
  request per session); a thread pool of `concurrency` subprocesses.
- `skill-creator run_eval`: skill-creator's own trigger evaluation, its method re-implemented in
  benchmarks/skill_creator_eval.py (that file's docstring says what it does and which commit of run_eval.py it
  follows), run as that script is: `python benchmarks/skill_creator_eval.py --eval-set EVALS --skill-path SKILL
  --num-workers C --runs-per-query 3` with the working directory a fresh copy of the same library (its project root:
  its temporary command files go into that copy's .claude/commands), `claude` on PATH the bundled CLI, and the
  script's environment this process's less ANTHROPIC_* and CLAUDE*, plus a fresh HOME for the row (one user's home,
  shared by its sessions as a user's is), the fake's URL and key, and CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
  (as the bare row: nothing of a CLI leaves this machine). The same keyword-model fake as the skill-evals rows. Its
  verdicts are the script's: a query passes when it triggered in at least half of its runs (should_trigger) or in
  fewer than half (the others), and "triggered" is the model calling the script's temporary command by name.
And one fault row: `claude-code after` at concurrency 4 with an HTTP 500 scripted for every should-not query; those
cases must come out ERROR, never PASS.

Before the rows, skill-evals' own modules are compiled to bytecode (`python -m compileall runner`), as pip compiles
a package it installs: this machine sets PYTHONDONTWRITEBYTECODE=1, under which every `python -m runner` of the source
tree compiled its ~100 modules again (about 0.25 s of CPU a run), a cost no installed skill-evals pays.

Figures per row:
- wall: the whole command (skill-evals' start-up, validation, surface audit and plan included); sessions/s = sessions
  / wall.
- CPU: resource.getrusage(RUSAGE_CHILDREN) before and after. skill-evals runs as a subprocess, so its own CPU and
  every CLI it started are counted (a child's reaped children count for it); the bare row counts the CLIs only; the
  skill-creator row counts its Python process, its pool's worker processes (reaped by the pool when it shuts down)
  and every CLI they started (each reaped by its worker after the kill). The fake runs in this process and is never
  counted. `1-session CPU` is the same `skill-evals run` (same host and
  config, concurrency 1) of one session (case q1, one repeat), measured once per row: the run's fixed cost
  (interpreter, validation, surface audit, plan, the first-turn host's capture of the CLI's first request, the
  reports) plus one session. `CPU/session` = CPU / sessions (what a user pays, start-up included); `marginal
  CPU/session` = (CPU - 1-session CPU) / (sessions - 1), what one more session costs: the figure the issue's per
  session targets are read against.
- requests/session: the fake's message requests whose body holds no judge rubric (runner.testing.fake_judge
  .JUDGE_MATCH) over the sessions recorded.
- input tokens/session: input + cache_creation + cache_read (attempts.jsonl's usage; the bare rows: the stream-json
  result's usage; the skill-creator row, whose CLIs are killed before their result: what the fake billed); cache
  read = cache_read / all input; `after 1st wave` leaves out the first `concurrency` attempts recorded (attempts.jsonl is in finish order; the bare rows: the first started), the ones that found the cache
  empty.
- verdicts: results.json's PASS/FAIL/ERROR counts, and how many of the cases' majority outcomes (fired in more than
  half of the runs observed, errors not counted) match the query's should_trigger in trigger-evals.json; an ERROR
  case never matches. The skill-creator row: the script's passed/failed queries (it has no error verdict), and
  passed = matching.
`--rows` runs some rows only (e.g. `--rows after,skill-creator,bare`, the cold-start comparison of BENCHMARKS.md
section 8). The short mode (4 queries x 1 repeat, concurrency 2, every row) only shows the benchmark works; tests
run it.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from runner.hosts.claude_code import bundled_cli, cli_version
from runner.testing import trigger_set
from runner.testing.fake_anthropic import FakeAnthropic, error, skill, text, tool
from runner.testing.fake_judge import JUDGE_MATCH

REPO = Path(__file__).resolve().parent.parent
KEY = "sk-bench-not-a-real-key"
LATENCY_S = 0.3
BARE_ENV = ("PATH",)  # what the bare CLI inherits from this process; the rest is set per session


@dataclass(frozen=True)
class Shape:
    queries: int
    repeats: int
    quorum: int
    concurrency: tuple[int, ...]
    fault_concurrency: int


FULL = Shape(queries=20, repeats=3, quorum=2, concurrency=(1, 4, 10), fault_concurrency=4)
SHORT = Shape(queries=4, repeats=1, quorum=1, concurrency=(2,), fault_concurrency=2)


@dataclass(frozen=True)
class Variant:
    """One skill-evals row: its name, host and [run] settings."""
    row: str
    host: str
    decide_early: bool


BEFORE = Variant("claude-code before", "claude-code", decide_early=False)
AFTER = Variant("claude-code after", "claude-code", decide_early=True)
FIRST_TURN = Variant("first-turn", "first-turn", decide_early=True)
FAULT = "claude-code after, 500 on should-not"
HAND_OFF = "first-turn, one query reads a file first"
BARE = "bare claude -p"
SKILL_CREATOR = "skill-creator run_eval"
COLD = "claude-code after, cold result cache"  # --cache DIR, DIR empty: every case runs and is stored
WARM = "claude-code after, warm result cache"  # the same again: every case from the cache, no session
SKILL_CREATOR_SCRIPT = Path(__file__).resolve().parent / "skill_creator_eval.py"


# ---- measuring -------------------------------------------------------------------------------------

def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def own_cpu() -> float:
    """This process (the fake, the bookkeeping) and every child it has reaped."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime + children_cpu()


def machine_busy() -> float | None:
    """CPU seconds every process of the machine has used since boot (/proc/stat), None without /proc."""
    try:
        fields = Path("/proc/stat").read_text(encoding="ascii").split("\n", 1)[0].split()[1:9]
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields)
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


class Others:
    """The CPU other programs took while a row ran: the machine's busy time less this process's and its children's
    (nothing else should run while CPU is measured; this says whether something did)."""

    def __init__(self) -> None:
        self.busy, self.own = machine_busy(), own_cpu()

    def cpu(self) -> float | None:
        now = machine_busy()
        return None if now is None or self.busy is None else max(0.0, now - self.busy - (own_cpu() - self.own))


def new_fake(latency: float, script: Callable[[FakeAnthropic], None]) -> FakeAnthropic:
    fake = FakeAnthropic()
    script(fake)
    fake.set_latency(latency)
    return fake


def keyword_model(fake: FakeAnthropic) -> None:
    trigger_set.script(fake)


def failing_should_not(fake: FakeAnthropic) -> None:
    # The first registered match wins, so the 500s go in before the keyword model's scripts.
    for query in trigger_set.SHOULD_NOT:
        fake.script(query, error(500, "api_error", "Internal server error (scripted by the benchmark)"))
    trigger_set.script(fake)


def reads_first(fake: FakeAnthropic) -> None:
    # One should query whose model reads a file before it calls the skill: the first reply settles nothing, so the
    # first-turn host hands each of its attempts to a real Claude Code session (which reads, then calls the skill).
    fake.script(trigger_set.SHOULD[0], tool("Read", {"file_path": "README.md"}), skill(trigger_set.SKILL),
                text("Invoice read."))
    trigger_set.script(fake)


def text_only(fake: FakeAnthropic) -> None:
    fake.default(text("Here you go."))


def agent_requests(fake: FakeAnthropic) -> int:
    """Message requests of the sessions (the judge's, recognised by their rubric, are not a session's)."""
    return sum(1 for r in fake.message_requests if JUDGE_MATCH not in json.dumps(r.body))


def token_figures(usages: list[dict[str, Any]], first_wave: int) -> dict[str, Any]:
    def totals(part: list[dict[str, Any]]) -> tuple[int, int]:
        read = sum(int(u.get("cache_read_input_tokens") or 0) for u in part)
        every = read + sum(int(u.get("input_tokens") or 0) + int(u.get("cache_creation_input_tokens") or 0)
                           for u in part)
        return read, every
    read, every = totals(usages)
    later_read, later_every = totals(usages[first_wave:])
    return {"input_tokens_per_session": every / len(usages) if usages else None,
            "cache_read_share": read / every if every else None,
            "cache_read_share_after_first_wave": later_read / later_every if later_every else None}


# ---- skill-evals rows ------------------------------------------------------------------------------

def write_config(path: Path, decide_early: bool) -> Path:
    # [cost] basis "": the default (auto) would plan from the earlier rows' run folders beside this one; each row
    # plans as a first run does.
    path.write_text(f"[run]\ndecide_early = {str(decide_early).lower()}\nearly_stop = false\n\n[cost]\nbasis = \"\"\n",
                    encoding="utf-8")
    return path


def skill_evals_args(library: Path, variant: Variant, repeats: int, quorum: int, concurrency: int, config: Path,
                     out: Path, cache: Path | None = None) -> list[str]:
    # --max-usd: the default $10 cap admits only 5 concurrent worst-case reservations, which would bound
    # concurrency 10 by the cap instead of by the machine.
    return [sys.executable, "-m", "runner", "run", "--library", str(library), "--host", variant.host,
            "--repeats", str(repeats), "--quorum", str(quorum), "--concurrency", str(concurrency),
            "--config", str(config), "--max-usd", "1000", "--timeout", "120", "--no-library-validator",
            "--out", str(out), *(["--cache", str(cache)] if cache is not None else [])]


def fake_env(fake: FakeAnthropic) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env.update({"ANTHROPIC_BASE_URL": fake.url, "ANTHROPIC_API_KEY": KEY, "CI": "true", "PYTHONPATH": str(REPO)})
    return env


def timed(args: list[str], env: dict[str, str], cwd: Path) -> tuple[subprocess.CompletedProcess[str], float, float]:
    wall0, cpu0 = time.perf_counter(), children_cpu()
    done = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=3600, check=False)
    return done, time.perf_counter() - wall0, children_cpu() - cpu0


def one_session_cpu(library: Path, variant: Variant, work: Path, latency: float) -> float:
    """The CPU of the same run with one session (case q1, one repeat): its fixed cost plus one session."""
    out = work / f"one-{variant.row.replace(' ', '-')}"
    config = write_config(work / f"{out.name}.toml", variant.decide_early)
    args = [*skill_evals_args(library, variant, 1, 1, 1, config, out), "--case", f"{trigger_set.SKILL}/trigger/q1"]
    with new_fake(latency, keyword_model) as fake:
        done, _, cpu = timed(args, fake_env(fake), work)
    if done.returncode != 0 or attempt_figures(out, 1)["sessions"] != 1:
        raise RuntimeError(f"the one-session run failed ({variant.row}): {done.stderr[-2000:]}")
    return cpu


def expected_triggers(library: Path) -> dict[str, bool]:
    """Case uid -> should_trigger, from the set's own file (skill-creator's layout: case qN is its N-th entry)."""
    entries = json.loads((library / ".claude" / "skills" / trigger_set.SKILL / "evals" / "trigger-evals.json")
                         .read_text(encoding="utf-8"))
    return {f"{trigger_set.SKILL}/trigger/q{n}": bool(e["should_trigger"]) for n, e in enumerate(entries, 1)}


def matches(case: dict[str, Any], should: bool) -> bool:
    activation = case.get("activation") or {}
    observed, fired = activation.get("observed_runs") or 0, activation.get("fired_runs") or 0
    if case["state"] not in ("PASS", "FAIL") or observed == 0:
        return False
    return (2 * fired > observed) == should


def verdict_figures(out: Path, expected: dict[str, bool]) -> dict[str, Any]:
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    cases = {c["uid"]: c for c in results["cases"]}
    states = {uid: case["state"] for uid, case in cases.items()}
    should_not_states = sorted({states.get(uid, "missing") for uid, should in expected.items() if not should})
    return {"verdicts": {k: results["counts"].get(k, 0) for k in ("PASS", "FAIL", "ERROR")},
            "cases": len(cases), "matching": sum(1 for uid, should in expected.items()
                                                 if uid in cases and matches(cases[uid], should)),
            "states": states, "should_not_states": should_not_states}


def attempt_figures(out: Path, first_wave: int) -> dict[str, Any]:
    attempts = [json.loads(line) for line in (out / "attempts.jsonl").read_text(encoding="utf-8").splitlines()
                if line.strip()]
    outcomes: dict[str, int] = {}
    for attempt in attempts:
        first = attempt.get("first_turn") or {}
        if first.get("outcome"):
            outcomes[first["outcome"]] = outcomes.get(first["outcome"], 0) + 1
    return {"sessions": len(attempts), "errored": sum(1 for a in attempts if a.get("error_kind")),
            "decided_early": sum(1 for a in attempts if a.get("decided")), "first_turn_outcomes": outcomes,
            **token_figures([a.get("usage") or {} for a in attempts], first_wave)}


def skill_evals_row(library: Path, variant: Variant, shape: Shape, concurrency: int, work: Path, latency: float,
                    script: Callable[[FakeAnthropic], None], row: str, cache: Path | None = None) -> dict[str, Any]:
    out = work / f"{row.replace(' ', '-').replace(',', '')}-c{concurrency}"
    config = write_config(work / f"{out.name}.toml", variant.decide_early)
    args = skill_evals_args(library, variant, shape.repeats, shape.quorum, concurrency, config, out, cache)
    load, others = os.getloadavg()[0], Others()
    with new_fake(latency, script) as fake:
        done, wall, cpu = timed(args, fake_env(fake), work)
        requests = agent_requests(fake)
    other_cpu = others.cpu()
    if not (out / "results.json").exists():
        raise RuntimeError(f"skill-evals run wrote no results ({row}, c={concurrency}): {done.stderr[-2000:]}")
    found = attempt_figures(out, concurrency)
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    found["reused"] = results.get("attempts_reused", 0)
    if cache is not None:  # the sessions this run started: its attempts less those taken from the cache
        found["sessions"] = results["attempts_finished"]
    return {"row": row, "variant": variant.row, "host": variant.host, "concurrency": concurrency, "repeats": shape.repeats,
            "exit_code": done.returncode,
            "wall_s": wall, "cpu_s": cpu, "requests": requests,
            "requests_per_session": requests / found["sessions"] if found["sessions"] else None,
            **found, **verdict_figures(out, expected_triggers(library)),
            "load_1min_before": load, "load_1min_after": os.getloadavg()[0], "other_cpu_s": other_cpu}


# ---- the bare CLI ----------------------------------------------------------------------------------

def bare_session(cli: Path, query: str, fake_url: str, queries: int) -> dict[str, Any]:
    """One `claude -p` in a fresh project and home; the usage of its stream-json result (None when it has none)."""
    with tempfile.TemporaryDirectory(prefix="bench-bare-") as tmp:
        project = trigger_set.write_library(Path(tmp) / "project", queries)
        home = Path(tmp) / "home"
        home.mkdir()
        env = {name: os.environ[name] for name in BARE_ENV if name in os.environ}
        env.update({"HOME": str(home), "ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": fake_url,
                    "CLAUDE_CONFIG_DIR": str(home / ".claude"), "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"})
        done = subprocess.run([str(cli), "-p", query, "--output-format", "stream-json", "--verbose"], cwd=project,
                              env=env, capture_output=True, text=True, timeout=300, check=False)
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    results = [e for e in events if e.get("type") == "result"]
    usage = results[-1].get("usage") if results else None
    return {"ok": done.returncode == 0 and bool(results) and not results[-1].get("is_error"), "usage": usage}


def set_queries(queries: int) -> tuple[str, ...]:
    """The queries of trigger-evals.json as trigger_set.write_library writes it (case qN is the N-th)."""
    return (*trigger_set.SHOULD[:(queries + 1) // 2], *trigger_set.SHOULD_NOT[:queries // 2])


def bare_row(shape: Shape, concurrency: int, latency: float) -> dict[str, Any]:
    cli = bundled_cli()
    queries = [q for q in set_queries(shape.queries) for _ in range(shape.repeats)]
    load, others = os.getloadavg()[0], Others()
    with new_fake(latency, text_only) as fake:
        wall0, cpu0 = time.perf_counter(), children_cpu()
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            # map keeps submission order: the first `concurrency` sessions are the ones that started first.
            sessions = list(pool.map(lambda q: bare_session(cli, q, fake.url, shape.queries), queries))
        wall, cpu = time.perf_counter() - wall0, children_cpu() - cpu0
        requests = agent_requests(fake)
    usages = [s["usage"] for s in sessions if s["usage"] is not None]
    return {"row": BARE, "variant": BARE, "host": "bare CLI", "concurrency": concurrency, "exit_code": 0, "wall_s": wall, "cpu_s": cpu,
            "requests": requests, "requests_per_session": requests / len(sessions), "sessions": len(sessions),
            "errored": sum(1 for s in sessions if not s["ok"]), "decided_early": 0, "first_turn_outcomes": {},
            **token_figures(usages, concurrency), "verdicts": None, "cases": None, "matching": None,
            "states": {}, "should_not_states": [],
            "load_1min_before": load, "load_1min_after": os.getloadavg()[0], "other_cpu_s": others.cpu()}


# ---- skill-creator's run_eval ----------------------------------------------------------------------

def skill_creator_args(skill: Path, queries: int, runs: int, workers: int) -> list[str]:
    # Its own defaults but for the workers (skill-creator's default is 10) and the runs (3): the timeout 30 s, the
    # threshold 0.5, no --model (the CLI's own default).
    return [sys.executable, str(SKILL_CREATOR_SCRIPT), "--eval-set", str(skill / "evals" / "trigger-evals.json"),
            "--skill-path", str(skill), "--num-workers", str(workers), "--runs-per-query", str(runs)]


def skill_creator_env(home: Path, bin_dir: Path, fake: FakeAnthropic) -> dict[str, str]:
    """The script passes its whole environment to every CLI: this process's, without a key, base URL or Claude
    setting of its own, and with the row's HOME, `claude` first on PATH, and the fake."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE"))}
    env.update({"HOME": str(home), "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
                "ANTHROPIC_BASE_URL": fake.url, "ANTHROPIC_API_KEY": KEY, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"})
    return env


def skill_creator_run(queries: int, runs: int, workers: int, work: Path, latency: float
                      ) -> tuple[dict[str, Any], float, float, FakeAnthropic, int]:
    """One run of the script on a fresh copy of the library (its project root), with a fresh HOME: (its JSON, wall,
    CPU, the fake it ran against, the queries' tasks that failed)."""
    work.mkdir(parents=True)
    project = trigger_set.write_library(work / "project", queries)
    bin_dir, home = work / "bin", work / "home"
    bin_dir.mkdir()
    home.mkdir()
    (bin_dir / "claude").symlink_to(bundled_cli())
    skill = project / ".claude" / "skills" / trigger_set.SKILL
    with new_fake(latency, keyword_model) as fake:
        done, wall, cpu = timed(skill_creator_args(skill, queries, runs, workers), skill_creator_env(home, bin_dir, fake),
                                project)
    if done.returncode != 0 or not done.stdout.strip():
        raise RuntimeError(f"the skill-creator run failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout), wall, cpu, fake, done.stderr.count("a query failed")


def skill_creator_one_session_cpu(work: Path, latency: float) -> float:
    """The script's run of one query once: its fixed cost (the interpreter, the pool) plus one session."""
    found, _, cpu, _, _ = skill_creator_run(1, 1, 1, work / "one-skill-creator", latency)
    if found["summary"]["total"] != 1:
        raise RuntimeError(f"the one-session skill-creator run decided {found['summary']}")
    return cpu


def skill_creator_row(shape: Shape, concurrency: int, work: Path, latency: float) -> dict[str, Any]:
    load, others = os.getloadavg()[0], Others()
    found, wall, cpu, fake, failed = skill_creator_run(shape.queries, shape.repeats, concurrency,
                                                       work / f"skill-creator-c{concurrency}", latency)
    requests = agent_requests(fake)
    sessions = sum(r["runs"] for r in found["results"])
    summary = found["summary"]
    passed = {r["query"]: r["pass"] for r in found["results"]}
    states = {f"{trigger_set.SKILL}/trigger/q{n}": "PASS" if passed[query] else "FAIL"
              for n, query in enumerate(set_queries(shape.queries), 1)}
    return {"row": SKILL_CREATOR, "variant": SKILL_CREATOR, "host": "skill-creator run_eval.py (re-implemented)",
            "concurrency": concurrency, "repeats": shape.repeats, "exit_code": 0, "wall_s": wall, "cpu_s": cpu,
            "requests": requests, "requests_per_session": requests / sessions if sessions else None,
            "sessions": sessions, "errored": failed, "decided_early": 0, "first_turn_outcomes": {},
            **token_figures([dataclasses.asdict(b.usage) for b in fake.billed], concurrency),
            "verdicts": {"PASS": summary["passed"], "FAIL": summary["failed"], "ERROR": 0}, "cases": summary["total"],
            "matching": summary["passed"], "states": states, "should_not_states": [],
            "triggered": {r["query"]: r["triggers"] for r in found["results"]},
            "load_1min_before": load, "load_1min_after": os.getloadavg()[0], "other_cpu_s": others.cpu()}


# ---- the report ------------------------------------------------------------------------------------

def per_session(rows: list[dict[str, Any]], one_session: dict[str, float]) -> None:
    for r in rows:
        one = one_session.get(r["variant"]) if r["row"] != WARM else None
        r["one_session_cpu_s"] = one
        if not r["sessions"] or r["row"] == COLD:  # a warm run starts none; a cold one pays its cache's writes too
            r["cpu_per_session_s"] = r["cpu_s"] / r["sessions"] if r["sessions"] else None
            r["marginal_cpu_per_session_s"] = r["sessions_per_s"] = None
            continue
        r["cpu_per_session_s"] = r["cpu_s"] / r["sessions"]
        # The bare rows have no start-up of their own: every session is the same process.
        r["marginal_cpu_per_session_s"] = ((r["cpu_s"] - one) / (r["sessions"] - 1) if one is not None
                                           else r["cpu_per_session_s"])
        r["sessions_per_s"] = r["sessions"] / r["wall_s"]


def fmt(value: float | None, spec: str, suffix: str = "") -> str:
    return "—" if value is None else f"{value:{spec}}{suffix}"


def table(rows: list[dict[str, Any]]) -> str:
    head = ("| row | c | sessions | wall s | CPU s | 1-session CPU s | CPU/session s | marginal CPU/session s | sessions/s "
            "| requests/session | input tokens/session | cache read | after 1st wave | PASS/FAIL/ERROR | match |")
    lines = [head, "|" + " --- |" * 2 + " ---: |" * 13]
    for r in rows:
        v = r["verdicts"]
        verdicts = f"{v['PASS']}/{v['FAIL']}/{v['ERROR']}" if v else "—"
        match = f"{r['matching']}/{r['cases']}" if r["cases"] is not None else "—"
        share = r["cache_read_share"]
        later = r["cache_read_share_after_first_wave"]
        lines.append(
            f"| {r['row']} | {r['concurrency']} | {r['sessions']} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | "
            f"{fmt(r['one_session_cpu_s'], '.2f')} | {fmt(r['cpu_per_session_s'], '.3f')} | "
            f"{fmt(r['marginal_cpu_per_session_s'], '.3f')} | "
            f"{fmt(r['sessions_per_s'], '.2f')} | {fmt(r['requests_per_session'], '.2f')} | "
            f"{fmt(r['input_tokens_per_session'], ',.0f')} | {fmt(None if share is None else 100 * share, '.1f', ' %')} "
            f"| {fmt(None if later is None else 100 * later, '.1f', ' %')} | {verdicts} | {match} |")
    return "\n".join(lines)


def check(label: str, ok: bool, measured: str) -> dict[str, Any]:
    return {"target": label, "met": ok, "measured": measured}


def targets(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The issue's 'Done when' figures, per concurrency, against what this run measured."""
    by = {(r["row"], r["concurrency"]): r for r in rows}
    found: list[dict[str, Any]] = []
    for c in sorted({r["concurrency"] for r in rows}):
        before, after, first, bare = (by.get((name, c)) for name in (BEFORE.row, AFTER.row, FIRST_TURN.row, BARE))
        if after and bare:
            ratio = after["marginal_cpu_per_session_s"] / bare["cpu_per_session_s"]
            gross = after["cpu_per_session_s"] / bare["cpu_per_session_s"]
            found.append(check(f"c={c} claude-code after: <= 1.2 requests/session", after["requests_per_session"] <= 1.2,
                               f"{after['requests_per_session']:.3f}"))
            found.append(check(f"c={c} claude-code after: CPU/session <= 1.1x bare", ratio <= 1.1,
                               f"{ratio:.2f}x marginal ({gross:.2f}x all-in)"))
        if after and before:
            found.append(check(f"c={c} claude-code after: same verdicts as before", after["states"] == before["states"],
                               f"{after['matching']}/{after['cases']} match (before {before['matching']}/{before['cases']})"))
        if first and bare and after:
            ratio = first["marginal_cpu_per_session_s"] / bare["cpu_per_session_s"]
            later = first["cache_read_share_after_first_wave"]
            found.append(check(f"c={c} first-turn: same verdicts as claude-code after",
                               first["states"] == after["states"], f"{first['matching']}/{first['cases']} match"))
            found.append(check(f"c={c} first-turn: <= 1.05 requests/session", first["requests_per_session"] <= 1.05,
                               f"{first['requests_per_session']:.3f}"))
            found.append(check(f"c={c} first-turn: CPU/attempt <= 15% of bare", ratio <= 0.15,
                               f"{100 * ratio:.1f} % marginal "
                               f"({100 * first['cpu_per_session_s'] / bare['cpu_per_session_s']:.1f} % all-in)"))
            found.append(check(f"c={c} first-turn: >= 90% cache read after the first wave",
                               later is not None and later >= 0.9, fmt(None if later is None else 100 * later, ".1f", " %")))
        creator = by.get((SKILL_CREATOR, c))
        if after and creator:
            found += against_skill_creator(c, after, creator)
        cold, warm = by.get((COLD, c)), by.get((WARM, c))
        if cold and warm and creator:
            found += cache_against_skill_creator(c, cold, warm, creator)
    for r in rows:
        if r["row"] == HAND_OFF:
            handed = r["first_turn_outcomes"].get("handed-off", 0)
            found.append(check(f"c={r['concurrency']} first-turn: the read-first query is handed off, counted and "
                               "decided on Claude Code", handed == r["repeats"] and r["matching"] == r["cases"],
                               f"{handed} handed off of {r['repeats']} attempts; {r['matching']}/{r['cases']} match"))
        if r["row"] == FAULT:
            bad = [s for s in r["should_not_states"] if s != "ERROR"]
            found.append(check(f"c={r['concurrency']} faults: every should-not case ERROR, none PASS", not bad,
                               f"should-not states {r['should_not_states']}"))
    return found


def against_skill_creator(c: int, after: dict[str, Any], creator: dict[str, Any]) -> list[dict[str, Any]]:
    """The cold-start comparison (BENCHMARKS.md section 8): the claude-code host's whole run, start-up included,
    against skill-creator's run_eval on the same set, and whose verdicts are right."""
    cpu, wall = after["cpu_s"] / creator["cpu_s"], after["wall_s"] / creator["wall_s"]
    return [check(f"c={c} claude-code after: CPU <= 1.0x skill-creator run_eval", cpu <= 1.0,
                  f"{cpu:.3f}x ({after['cpu_s']:.1f} s against {creator['cpu_s']:.1f} s)"),
            check(f"c={c} claude-code after: wall <= 1.0x skill-creator run_eval", wall <= 1.0,
                  f"{wall:.3f}x ({after['wall_s']:.1f} s against {creator['wall_s']:.1f} s)"),
            check(f"c={c} claude-code after: every verdict right", after["matching"] == after["cases"],
                  f"{after['matching']}/{after['cases']} (skill-creator run_eval {creator['matching']}/"
                  f"{creator['cases']})")]


def cache_against_skill_creator(c: int, cold: dict[str, Any], warm: dict[str, Any], creator: dict[str, Any]
                                ) -> list[dict[str, Any]]:
    """Issue 33: a warm result cache with nothing changed costs under 10% of skill-creator's CPU, starts no session
    and gives the cold run's verdicts; the cold run (an empty cache, every case run and stored) is at most 1.0x
    skill-creator's CPU and wall."""
    warm_share, cold_cpu, cold_wall = (warm["cpu_s"] / creator["cpu_s"], cold["cpu_s"] / creator["cpu_s"],
                                       cold["wall_s"] / creator["wall_s"])
    return [check(f"c={c} warm result cache: CPU < 10% of skill-creator run_eval", warm_share < 0.10,
                  f"{100 * warm_share:.1f} % ({warm['cpu_s']:.2f} s against {creator['cpu_s']:.1f} s)"),
            check(f"c={c} warm result cache: no session, no request, the cold run's verdicts",
                  warm["sessions"] == 0 and warm["requests"] == 0 and warm["states"] == cold["states"],
                  f"{warm['sessions']} sessions, {warm['requests']} requests, {warm['reused']} attempts reused; "
                  f"verdicts {'equal' if warm['states'] == cold['states'] else 'DIFFER'}"),
            check(f"c={c} cold result cache: CPU <= 1.0x skill-creator run_eval", cold_cpu <= 1.0,
                  f"{cold_cpu:.3f}x ({cold['cpu_s']:.1f} s against {creator['cpu_s']:.1f} s)"),
            check(f"c={c} cold result cache: wall <= 1.0x skill-creator run_eval", cold_wall <= 1.0,
                  f"{cold_wall:.3f}x ({cold['wall_s']:.1f} s against {creator['wall_s']:.1f} s)")]


def tree() -> dict[str, Any]:
    """The commit measured, and the files that differed from it (others edit this tree as it runs)."""
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False)
        return done.stdout.rstrip()  # not strip(): a porcelain line starts with a status column that may be blank
    return {"commit": git("rev-parse", "--short", "HEAD"),
            "changed": [line[3:] for line in git("status", "--porcelain").splitlines() if not line.startswith("??")]}


def machine() -> dict[str, Any]:
    return {"nproc": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
            "cli_version": cli_version(bundled_cli()),
            "claude_agent_sdk": importlib.metadata.version("claude-agent-sdk"),
            "anthropic": importlib.metadata.version("anthropic")}


def markdown(report: dict[str, Any]) -> str:
    m = report["machine"]
    lines = [
        "# claude-code before/after, first-turn host, bare `claude -p`, skill-creator's run_eval "
        "(benchmarks/first_turn.py)", "",
        f"Measured {report['measured_at']} with `{report['command']}`; {m['nproc']} cores, {m['platform']}, Python "
        f"{m['python']}, Claude Code CLI {m['cli_version']} (claude-agent-sdk {m['claude_agent_sdk']}), anthropic "
        f"{m['anthropic']}. {report['queries']} queries x {report['repeats']} repeats, quorum {report['quorum']}; "
        f"the fake answers after {report['latency_s']} s. Tree: {report['tree']['commit']}"
        + (f" with uncommitted changes to {', '.join(report['tree']['changed'])}" if report["tree"]["changed"] else "")
        + ". The method is the module docstring of benchmarks/first_turn.py.", "",
        table(report["rows"]), "",
    ]
    lines += [f"- {r['row']} c={r['concurrency']}: {r['decided_early']} of {r['sessions']} sessions decided early"
              + (f"; first turn: {r['first_turn_outcomes']}" if r["first_turn_outcomes"] else "")
              + (f"; {r['errored']} errored" if r["errored"] else "") for r in report["rows"]
              if r["row"] not in (BARE, SKILL_CREATOR)]
    lines += [f"- {r['row']} c={r['concurrency']}: {r['matching']} of {r['cases']} queries passed; runs that triggered "
              f"the script's command, by query: {sorted(r['triggered'].values())}" for r in report["rows"]
              if r["row"] == SKILL_CREATOR]
    lines.append("")
    if report["skipped"]:
        lines += [f"Skipped: {report['skipped']}", ""]
    lines += ["Targets of the issue, as measured:", ""]
    lines += [f"- {'met' if t['met'] else '**missed**'}: {t['target']} — {t['measured']}" for t in report["targets"]]
    lines += ["", "Load average (1 min) before each row: " + ", ".join(
        f"{r['row']} c={r['concurrency']} {r['load_1min_before']:.2f}" for r in report["rows"]), ""]
    lines += ["CPU other programs took while each row ran (should be ~0): " + ", ".join(
        f"{r['row']} c={r['concurrency']} {fmt(r.get('other_cpu_s'), '.1f', ' s')}" for r in report["rows"]), ""]
    return "\n".join(lines)


# ---- main ------------------------------------------------------------------------------------------

def first_turn_available() -> tuple[bool, str]:
    from runner.core.host_traits import HOST_NAMES
    if FIRST_TURN.host in HOST_NAMES:
        return True, ""
    return False, (f"the first-turn row: no host named {FIRST_TURN.host!r} in runner.hosts.registry"
                   f".HOST_NAMES {HOST_NAMES} (not built yet in this tree)")


# --rows names: every row of the report by a short name (the default runs them all).
ROW_NAMES = {"before": BEFORE.row, "after": AFTER.row, "first-turn": FIRST_TURN.row, "bare": BARE,
             "skill-creator": SKILL_CREATOR, "cache": f"{COLD}, {WARM}", "fault": FAULT, "hand-off": HAND_OFF}


def compile_runner() -> None:
    """skill-evals' modules as an installed package has them: compiled (see the module docstring)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "runner")], capture_output=True, check=True)


def run(shape: Shape, concurrencies: tuple[int, ...], latency: float, work: Path,
        wanted: frozenset[str] = frozenset(ROW_NAMES)) -> dict[str, Any]:
    compile_runner()
    library = trigger_set.write_library(work / "library", shape.queries)
    has_first_turn, skipped = first_turn_available()
    if skipped:
        print(f"skipped {skipped}", flush=True)
    variants = [v for v, name in ((BEFORE, "before"), (AFTER, "after"), (FIRST_TURN, "first-turn"))
                if name in wanted and (v is not FIRST_TURN or has_first_turn)]
    one_session = {v.row: one_session_cpu(library, v, work, latency) for v in variants}
    if "skill-creator" in wanted:
        one_session[SKILL_CREATOR] = skill_creator_one_session_cpu(work, latency)
    rows: list[dict[str, Any]] = []
    for c in concurrencies:
        for variant in variants:
            rows.append(skill_evals_row(library, variant, shape, c, work, latency, keyword_model, variant.row))
            print(f"{variant.row} c={c}: done", flush=True)
        if "cache" in wanted:  # the `after` run with --cache: an empty folder (cold), then the same again (warm)
            folder = work / f"result-cache-c{c}"
            rows.append(skill_evals_row(library, AFTER, shape, c, work, latency, keyword_model, COLD, folder))
            rows.append(skill_evals_row(library, AFTER, shape, c, work, latency, keyword_model, WARM, folder))
            print(f"{COLD} / {WARM} c={c}: done", flush=True)
        if "bare" in wanted:
            rows.append(bare_row(shape, c, latency))
            print(f"{BARE} c={c}: done", flush=True)
        if "skill-creator" in wanted:
            rows.append(skill_creator_row(shape, c, work, latency))
            print(f"{SKILL_CREATOR} c={c}: done", flush=True)
    if "fault" in wanted:
        rows.append(skill_evals_row(library, AFTER, shape, shape.fault_concurrency, work, latency, failing_should_not,
                                    FAULT))
    if "hand-off" in wanted and has_first_turn:
        rows.append(skill_evals_row(library, FIRST_TURN, shape, shape.fault_concurrency, work, latency, reads_first,
                                    HAND_OFF))
    per_session(rows, one_session)
    return {"rows": rows, "skipped": skipped, "one_session_cpu_s": one_session}


def row_names(text: str | None) -> frozenset[str]:
    if not text:
        return frozenset(ROW_NAMES)
    names = frozenset(name.strip() for name in text.split(",") if name.strip())
    unknown = sorted(names - set(ROW_NAMES))
    if unknown:
        raise SystemExit(f"--rows: no row named {', '.join(unknown)} (the rows: {', '.join(ROW_NAMES)})")
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.first_turn", description=__doc__.split("\n")[0])
    parser.add_argument("--short", action="store_true", help="4 queries x 1 repeat at concurrency 2: shows it works")
    parser.add_argument("--concurrency", default=None, help="comma-separated (default 1,4,10; --short: 2)")
    parser.add_argument("--rows", default=None, help=f"comma-separated, some of {','.join(ROW_NAMES)} (default: all)")
    parser.add_argument("--latency", type=float, default=LATENCY_S, help="seconds the fake waits per request")
    parser.add_argument("--out", type=Path, default=None, help="the report as JSON")
    parser.add_argument("--md", type=Path, default=None, help="the report as Markdown")
    args = parser.parse_args(argv)
    shape = SHORT if args.short else FULL
    concurrencies = tuple(int(c) for c in args.concurrency.split(",")) if args.concurrency else shape.concurrency
    with tempfile.TemporaryDirectory(prefix="bench-first-turn-") as tmp:
        measured = run(shape, concurrencies, args.latency, Path(tmp), row_names(args.rows))
    report = {"benchmark": "first_turn", "command": "python -m benchmarks.first_turn " + " ".join(argv or sys.argv[1:]),
              "short": args.short, "measured_at": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "machine": machine(), "tree": tree(), "queries": shape.queries, "repeats": shape.repeats, "quorum": shape.quorum,
              "latency_s": args.latency, **measured}
    report["targets"] = targets(report["rows"])
    print(markdown(report))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if args.md:
        args.md.parent.mkdir(parents=True, exist_ok=True)
        args.md.write_text(markdown(report), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
