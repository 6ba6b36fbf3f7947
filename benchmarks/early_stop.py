"""Sessions per verdict: quorum early stop against fixed N, over a range of true trigger rates.

Part 1, simulation (thousands of cases, no sessions): a scripted host fires the target with
probability p. Case c's i-th attempt outcome is drawn from a seed of its own (p, c, i), so the
early-stop policy and fixed N see the very same i-th outcome. The early-stop side replays
runner.execute.executor.AsTheyFinish.run_case's loop with runner.core.quorum's own functions (starts_allowed,
Tally): it starts what starts_allowed allows, then waits until some in-flight attempts finish
(attempts take a seeded random 1-3 time units, so several may finish together, like
asyncio.wait(FIRST_COMPLETED)), counts them, and asks again. Fixed N runs all N. Each side's
verdict is computed by the code that writes results.json: runner.execute.grading.attempt_outcome on an
Observation, then runner.results.build.case_result over the AttemptRecords (its state and its
activation state). Errors can be mixed in (`--error-rates`): an errored attempt counts for
neither side and is never replaced.

Part 2, end to end (small scale): `skill-evals run --host api` against runner/testing/fake_anthropic.py,
where a `dynamic` first turn calls the Skill tool with probability p (seeded per case and per
request), so the sessions really started (attempts.jsonl) are counted against fixed N (= N per
case) and each case's activation verdict is compared with the fixed-N verdict of the same three
seeded draws. The runner has no setting that turns early stop off, so fixed N is not run
through the runner: its sessions are N per case and its verdict is computed from the draws.

    python -m benchmarks.early_stop [--short] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from runner.core.observation import Activation, Observation
from runner.core.outcomes import AttemptOutcome
from runner.core.quorum import QuorumRule, Tally, starts_allowed
from runner.corpus.library import Case
from runner.execute.grading import attempt_outcome
from runner.execute.rundir import AttemptRecord
from runner.plan.plan import PlannedCase
from runner.results.build import case_result

REPO = Path(__file__).resolve().parent.parent
RATES = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 1.0)
TARGET = "alpha-skill"
NEIGHBOUR = "beta-skill"
KNOWN = {TARGET, NEIGHBOUR}
PLAN_HASH = "benchmark"

Draw = bool | None  # fired / did not fire / errored


# ---- simulation --------------------------------------------------------------------------------

def draws(p: float, error_rate: float, case_index: int, repeats: int) -> list[Draw]:
    """Attempt i's outcome, from a seed of its own: both policies see the same i-th outcome."""
    out: list[Draw] = []
    for i in range(repeats):
        rng = random.Random(f"early-stop/{p}/{error_rate}/{case_index}/{i}")
        errored = rng.random() < error_rate
        fired = rng.random() < p
        out.append(None if errored else fired)
    return out


def observation(attempt: str, draw: Draw) -> Observation:
    if draw is None:
        return Observation(attempt_id=attempt, host="scripted", error_kind="api-error", error_message="scripted error")
    fired = [Activation(name=TARGET, mechanism="skill-tool", turn=0)] if draw else []
    return Observation(attempt_id=attempt, host="scripted", activations=fired, final_answer="ok", turns=1)


def make_case(kind: str) -> Case:
    """A trigger case (the target must fire) or a no_trigger case (it must not); no prose assertions."""
    return Case(uid=f"{TARGET}/sim/{kind}", skill=TARGET, source="trigger", id=kind, file="sim", line=1,
                format="aegis", prompt="scripted", target=TARGET, kind=kind, kind_rule="benchmark",
                triggers=kind == "trigger")


def record(case: Case, repeat: int, draw: Draw) -> AttemptRecord:
    attempt = f"{case.uid}#main#{repeat}"
    outcome = attempt_outcome(case, observation(attempt, draw), KNOWN)
    return AttemptRecord(attempt_id=attempt, uid=case.uid, arm="main", repeat=repeat, plan_hash=PLAN_HASH,
                         status="finished", outcome=outcome)


def early_stop_repeats(rule: QuorumRule, outcomes: list[AttemptOutcome], timing: random.Random) -> list[int]:
    """The repeats (1-based) AsTheyFinish.run_case would start, replayed with runner.core.quorum's functions."""
    wins = losses = errors = 0
    started: list[int] = []
    finishes: dict[int, int] = {}  # repeat -> the time it finishes
    clock = 0
    while True:
        tally = Tally(wins=wins, losses=losses, errors=errors, in_flight=len(finishes))
        for _ in range(starts_allowed(rule, tally)):
            repeat = len(started) + 1
            if repeat > rule.repeats:
                break
            started.append(repeat)
            finishes[repeat] = clock + timing.choice((1, 2, 3))
        if not finishes:
            return started
        clock = min(finishes.values())
        for repeat in [r for r, t in finishes.items() if t == clock]:  # every attempt done by now
            del finishes[repeat]
            state = outcomes[repeat - 1].state
            wins += state == "PASS"
            losses += state == "FAIL"
            errors += state in ("ERROR", "JUDGE-ERROR")


def planned_of(case: Case, rule: QuorumRule) -> PlannedCase:
    return PlannedCase(uid=case.uid, skill=case.skill, kind=case.kind, target=case.target, repeats=rule.repeats,
                       quorum=rule.quorum, why="benchmark")


class CaseVerdicts(BaseModel):
    state: str
    activation: str


def verdict(case: Case, planned: PlannedCase, records: list[AttemptRecord]) -> CaseVerdicts:
    result = case_result(planned, case, records, None, None, set())
    return CaseVerdicts(state=result.state, activation=result.activation.state if result.activation else "UNRUN")


class RateRow(BaseModel):
    p: float
    error_rate: float
    cases: int
    sessions_fixed: int
    sessions_early_stop: int
    sessions_per_case: float
    saving_pct: float
    expected_saving_pct: float | None  # the closed form for N=3, k=2 without errors
    batch_saving_pct: tuple[float, float, float]  # min, median, max over 10 equal batches of the seeds
    mismatches: dict[str, int]        # per case kind: seeds whose early-stop verdict differs from fixed N
    verdicts: dict[str, dict[str, int]]  # per case kind: fixed-N case states


def expected_saving(p: float, rule: QuorumRule, error_rate: float) -> float | None:
    """N=3, k=2: two attempts always, a third exactly when the first two split: 2 + 2p(1-p) of 3."""
    if (rule.repeats, rule.quorum) != (3, 2) or error_rate:
        return None
    return 100 * (1 - (2 + 2 * p * (1 - p)) / 3)


def simulate_rate(p: float, error_rate: float, seeds: int, rule: QuorumRule) -> RateRow:
    kinds = ("trigger", "no_trigger")
    cases = {kind: make_case(kind) for kind in kinds}
    planned = {kind: planned_of(cases[kind], rule) for kind in kinds}
    mismatches: Counter[str] = Counter()
    fixed_states: dict[str, Counter[str]] = {kind: Counter() for kind in kinds}
    per_seed: list[int] = []
    for seed in range(seeds):
        sequence = draws(p, error_rate, seed, rule.repeats)
        for kind in kinds:
            records = [record(cases[kind], i + 1, d) for i, d in enumerate(sequence)]
            timing = random.Random(f"early-stop/timing/{p}/{error_rate}/{seed}")
            started = early_stop_repeats(rule, [r.outcome for r in records if r.outcome], timing)
            early = verdict(cases[kind], planned[kind], [records[r - 1] for r in started])
            fixed = verdict(cases[kind], planned[kind], records)
            fixed_states[kind][fixed.state] += 1
            if early != fixed:
                mismatches[kind] += 1
            if kind == "trigger":
                per_seed.append(len(started))
    sessions_early = sum(per_seed)
    fixed_total = seeds * rule.repeats
    size = max(1, seeds // 10)
    batches = sorted(100 * (1 - sum(per_seed[i:i + size]) / (size * rule.repeats)) for i in range(0, seeds, size))
    return RateRow(batch_saving_pct=(round(batches[0], 2), round(statistics.median(batches), 2), round(batches[-1], 2)),
                   p=p, error_rate=error_rate, cases=seeds, sessions_fixed=fixed_total,
                   sessions_early_stop=sessions_early, sessions_per_case=round(sessions_early / seeds, 4),
                   saving_pct=round(100 * (1 - sessions_early / fixed_total), 2),
                   expected_saving_pct=None if (e := expected_saving(p, rule, error_rate)) is None else round(e, 2),
                   mismatches={kind: mismatches[kind] for kind in kinds},
                   verdicts={kind: dict(sorted(fixed_states[kind].items())) for kind in kinds})


# ---- end to end against the fake Messages API ----------------------------------------------------

def write_library(root: Path, groups: dict[str, int]) -> dict[str, float]:
    """A two-skill library whose trigger-evals cases carry their group's rate in the prompt."""
    skills = root / ".claude" / "skills"
    for name, other in ((TARGET, NEIGHBOUR), (NEIGHBOUR, TARGET)):
        (skills / name / "evals").mkdir(parents=True, exist_ok=True)
        (skills / name / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: Benchmark skill {name}; never {other}.\n---\n\n# {name}\n\nAnswer.\n",
            encoding="utf-8")
    cases, rates = [], {}
    for group, count in groups.items():
        for index in range(count):
            prompt = f"early-stop case {group} #{index:03d}: please help"
            rates[prompt] = float(group)
            cases.append({"id": f"p{group.replace('.', '_')}-{index:03d}", "prompt": prompt,
                          "expected_skill": TARGET, "should_not_trigger": [NEIGHBOUR]})
    (skills / TARGET / "evals" / "trigger-evals.json").write_text(
        json.dumps({"skill": TARGET, "cases": cases}, indent=1), encoding="utf-8")
    return rates


class E2EGroup(BaseModel):
    p: float
    cases: int
    sessions_fixed: int
    sessions_started: int
    saving_pct: float
    verdict_mismatches: int
    states: dict[str, int]


class E2EResult(BaseModel):
    command: list[str]
    exit_code: int
    seconds: float
    groups: list[E2EGroup]
    requests_turn0: int


def run_e2e(per_group: int, seed: int, concurrency: int) -> E2EResult:
    sys.path.insert(0, str(REPO))
    from runner.testing.fake_anthropic import FakeAnthropic, dynamic, skill, text

    lock = threading.Lock()
    served: Counter[str] = Counter()
    with tempfile.TemporaryDirectory(prefix="early-stop-e2e-") as tmp:
        library = Path(tmp) / "library"
        rates = write_library(library, {"0.05": per_group, "0.5": per_group, "0.95": per_group})

        def first_turn(body: dict[str, Any]) -> Any:
            text_of = json.dumps(body.get("messages", [])[:1])
            prompt = next(p for p in rates if p in text_of)
            with lock:  # the i-th session of a case to ask gets draw i
                index = served[prompt]
                served[prompt] += 1
            fired = random.Random(f"e2e/{seed}/{prompt}/{index}").random() < rates[prompt]
            return skill(TARGET) if fired else text("A plain answer without any skill.")

        with FakeAnthropic() as fake:
            fake.script("early-stop case", dynamic(first_turn), text("done"))
            out = Path(tmp) / "run"
            command = [sys.executable, "-m", "runner", "run", "--library", str(library), "--out", str(out),
                       "--host", "api", "--repeats", "3", "--quorum", "2", "--concurrency", str(concurrency),
                       "--no-library-validator", "--timeout", "60",
                       "--max-usd", "100000"]  # the default $10 cap admits only 5 concurrent reservations
            env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
            env.update({"ANTHROPIC_BASE_URL": fake.url, "ANTHROPIC_API_KEY": "benchmark-key", "CI": "true"})
            started = time.monotonic()
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800, check=False,
                                  cwd=REPO)
            seconds = time.monotonic() - started
            if done.returncode != 0:
                raise RuntimeError(f"skill-evals run failed ({done.returncode}): {done.stderr[-2000:]}")
            results = json.loads((out / "results.json").read_text(encoding="utf-8"))
            attempts = [json.loads(line) for line in (out / "attempts.jsonl").read_text().splitlines() if line]
        rule = QuorumRule(3, 2)
        by_prompt_state = {}
        prompt_of_id = {c["id"]: c["prompt"] for c in json.loads(
            (library / ".claude/skills" / TARGET / "evals/trigger-evals.json").read_text())["cases"]}
        prompt_of_uid = {case["uid"]: prompt_of_id[case["uid"].rsplit("/", 1)[1]] for case in results["cases"]}
        for case in results["cases"]:
            by_prompt_state[prompt_of_uid[case["uid"]]] = case
    groups = []
    for group in sorted(set(rates.values())):
        prompts = [p for p, r in rates.items() if r == group]
        mismatches, states = 0, Counter()
        for prompt in prompts:
            three = [random.Random(f"e2e/{seed}/{prompt}/{i}").random() < group for i in range(3)]
            fixed = _fixed_state(rule, sum(three), 3 - sum(three))
            got = by_prompt_state[prompt]
            states[got["activation"]["state"] if got["activation"] else got["state"]] += 1
            mismatches += (got["activation"] or {}).get("state") != fixed
        uids = {u for u, p in prompt_of_uid.items() if p in prompts}
        started_here = sum(1 for a in attempts if a["uid"] in uids and a["status"] == "finished")
        groups.append(E2EGroup(p=group, cases=len(prompts), sessions_fixed=3 * len(prompts),
                               sessions_started=started_here,
                               saving_pct=round(100 * (1 - started_here / (3 * len(prompts))), 2),
                               verdict_mismatches=mismatches, states=dict(sorted(states.items()))))
    return E2EResult(command=[c if c != sys.executable else "python" for c in command], exit_code=done.returncode,
                     seconds=round(seconds, 2), groups=groups, requests_turn0=sum(served.values()))


def _fixed_state(rule: QuorumRule, wins: int, losses: int) -> str:
    from runner.results.verdicts import _rule_state
    return _rule_state(rule, wins, losses, 0, True)


# ---- report --------------------------------------------------------------------------------------

class Report(BaseModel):
    command: str
    machine: dict[str, Any]
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]
    repeats: int
    quorum: int
    seeds: int
    simulation_seconds: float
    rows: list[RateRow]
    e2e: E2EResult | None


def table(rows: list[RateRow]) -> str:
    lines = ["  p     err  cases  fixed  early  per-case  saving%  (10 batches min-max)  closed-form%  "
             "mismatches(trigger/no_trigger)"]
    for r in rows:
        closed = f"{r.expected_saving_pct:.2f}" if r.expected_saving_pct is not None else "-"
        lines.append(f"  {r.p:<5} {r.error_rate:<4} {r.cases:>5}  {r.sessions_fixed:>5}  {r.sessions_early_stop:>5}  "
                     f"{r.sessions_per_case:>8.3f}  {r.saving_pct:>7.2f}  "
                     f"{r.batch_saving_pct[0]:>9.2f}-{r.batch_saving_pct[2]:<9.2f}  {closed:>12}  "
                     f"{r.mismatches['trigger']}/{r.mismatches['no_trigger']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> Report:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true", help="100 seeds, 3 end-to-end cases per rate (CI check).")
    parser.add_argument("--seeds", type=int, default=None, help="Seeded cases per rate (default 1000; short 100).")
    parser.add_argument("--error-rates", default="0,0.1", help="Comma-separated attempt error rates to simulate.")
    parser.add_argument("--e2e-cases", type=int, default=None, help="End-to-end cases per rate (default 40; short 3).")
    parser.add_argument("--no-e2e", action="store_true")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    seeds = args.seeds or (100 if args.short else 1000)
    rule = QuorumRule(3, 2)
    load_before = os.getloadavg()
    started = time.monotonic()
    rows = [simulate_rate(p, float(e), seeds, rule) for e in args.error_rates.split(",") for p in RATES]
    simulation_seconds = time.monotonic() - started
    print(f"Early stop, N={rule.repeats} k={rule.quorum}, {seeds} seeded cases per rate")
    print(table(rows))
    e2e = None
    if not args.no_e2e:
        e2e = run_e2e(args.e2e_cases or (3 if args.short else 40), seed=7, concurrency=args.concurrency)
        print(f"\nEnd to end ({' '.join(e2e.command[:2])} ... --host api, {e2e.seconds} s):")
        for g in e2e.groups:
            print(f"  p={g.p:<5} cases {g.cases}  sessions {g.sessions_started} of {g.sessions_fixed} "
                  f"(saving {g.saving_pct}%)  verdict mismatches {g.verdict_mismatches}  {g.states}")
    report = Report(command="python -m benchmarks.early_stop " + " ".join(argv if argv is not None else sys.argv[1:]),
                    machine={"cpus": os.cpu_count(), "python": sys.version.split()[0]},
                    load_before=load_before, load_after=os.getloadavg(), repeats=rule.repeats, quorum=rule.quorum,
                    seeds=seeds, simulation_seconds=round(simulation_seconds, 2), rows=rows, e2e=e2e)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report.model_dump_json(indent=2), encoding="utf-8")
    return report


if __name__ == "__main__":
    main()
