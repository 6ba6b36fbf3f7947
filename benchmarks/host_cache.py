"""Prompt caching across whole runs, both hosts: cache-read share, $ per session, and the plan's prediction.

    python -m benchmarks.host_cache [--short] [--before-src DIR] [--models M,...] --out FILE.json

Each measurement is a real `skill-evals run` (a subprocess, as a user runs it) against runner/testing/fake_anthropic.py in
this process (300 ms per request), N = 3, k = 2, early stop, concurrency 2, no judge: every session is a Skill
call then a final text. On the example library (every case, 66 sessions) and on Project Aegis (its first eight
skills: 50 runnable cases, about 100 sessions), for the claude-code and api hosts. The fake accounts prompt caching by
the documented prefix rules (its module docstring: tools, system, messages up to each breakpoint, a ~20-block
lookback, the model's minimum) and one assumption, that Claude Code's `x-anthropic-billing-header:` system block
is no part of the cached prefix. Each run gets a fresh fake, so nothing is read across runs.

Variants per (host, library, model):
- `before`: the runner of another source tree (`--before-src`, e.g. `git archive <commit> runner | tar -x -C
  DIR`), run with PYTHONPATH=DIR against the same fake;
- `after`: this tree, the plan on its defaults (`[cost] basis = ""`: the default, `auto`, would find the other
  variants' runs beside it);
- `after+basis`: this tree again, its plan's `[cost] basis` = the `after` run (what a later run of a library
  plans from);
- `fallback`, `fallback+basis` (claude-code, `--variants`): the same with `[run] session_namespace = "off"`, a
  random path per session;
- `case` (claude-code): the same with `[run] session_namespace = "case"` (per-case-path, what a machine without
  namespaces gets);
- `container` (claude-code): `skill-evals run --container` with the default settings, as the action runs it; the
  image is `$SKILL_EVALS_IMAGE`, else built from the Dockerfile on `--base-image`.

Reported per run, from the run folder: sessions, errored sessions, input / cache-write / cache-read / output
tokens, the share of input tokens read from cache, spend per session (the run's price table), the plan's expected
cost per session and planned / spent, the distinct prefix hashes and the session-path modes. Token figures are
deterministic given the order sessions reach the fake; with concurrency 2 that order can vary a little between
repetitions (which two sessions form the first wave), so the figures are from one run each.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "library"
AEGIS = REPO / "tests" / "corpora" / "project-aegis" / "dot-claude" / "skills"
AEGIS_SKILLS = ("ab-test-designer", "accessibility-test-harness", "admin-console-architect", "adr-sequencer",
                "adr-writer", "agent-authorization-matrix", "agent-containment-reviewer", "agent-failure-recovery")
KEY = "sk-bench-not-a-real-key"
LATENCY_S = 0.3
CONCURRENCY = 2
# The claude-code-only variants: their `[run] session_namespace` (None: the default, in the container).
NAMESPACES: dict[str, str | None] = {"fallback": "off", "case": "case", "container": None}


def fired_skill(library: Path) -> str:
    return "dependency-upgrade-reviewer" if library == EXAMPLE else "adr-writer"


def run_once(src: Path, library: Path, host: str, model: str, skills: tuple[str, ...], out: Path,
             basis: Path | str | None = None, short: bool = False, namespace: str | None = None,
             container: bool = False, base_image: str | None = None) -> dict[str, Any]:
    """One `skill-evals run` of the runner in `src` against a fresh fake; the figures of its run folder.
    `namespace`: `[run] session_namespace`; `container`: `run --container` (the settings stay the defaults)."""
    sys.path.insert(0, str(REPO))
    from runner.testing.fake_anthropic import FakeAnthropic, skill, text

    args = [sys.executable, "-m", "runner", "run", "--library", str(library), "--out", str(out), "--host", host,
            "--model", model, "--no-judge", "--repeats", "3", "--quorum", "2", "--concurrency", str(CONCURRENCY),
            "--timeout", "120", "--max-usd", "1000", "--no-library-validator"]
    for name in skills:
        args += ["--skill", name]
    if short:
        args += ["--case", "*/evals/positive-*"]
    if container:
        args += ["--container"] + (["--base-image", base_image] if base_image else [])
    settings = (f'[cost]\nbasis = "{basis}"\n' if basis is not None else "") + \
        (f'[run]\nsession_namespace = "{namespace}"\n' if namespace else "")
    if container:
        # With --container a settings file must be inside the repository: none is given, so the plan's cost basis
        # is `auto` (an earlier run beside this one, if any). Tokens and spend do not depend on it.
        settings = ""
    if settings:
        config = out.parent / f"{out.name}.toml"
        config.write_text(settings, encoding="utf-8")
        args += ["--config", str(config)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    with FakeAnthropic() as fake:
        fake.default(skill(fired_skill(library)), text("Done."))
        fake.set_latency(LATENCY_S)
        env.update({"ANTHROPIC_BASE_URL": fake.url, "ANTHROPIC_API_KEY": KEY, "CI": "true", "PYTHONPATH": str(src)})
        done = subprocess.run(args, cwd=src, env=env, capture_output=True, text=True, timeout=3600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"skill-evals run failed ({src}): {done.stderr[-2000:]}")
    (out.parent / f"{out.name}.stdout").write_text(done.stdout, encoding="utf-8")  # the plan as it was printed
    return figures(out)


def figures(out: Path) -> dict[str, Any]:
    attempts = [json.loads(line) for line in (out / "attempts.jsonl").read_text().splitlines() if line.strip()]
    plan = json.loads((out / "plan.json").read_text())
    usage = {k: sum(a["usage"][k] for a in attempts) for k in
             ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")}
    all_input = usage["input_tokens"] + usage["cache_creation_input_tokens"] + usage["cache_read_input_tokens"]
    spent = sum(a["cost_usd"] for a in attempts) / len(attempts)
    planned = plan["estimate"]["expected_session_usd"]
    hashes = {a.get("prefix_hash") for a in attempts if a.get("prefix_hash")}
    modes: dict[str, int] = {}
    for attempt in attempts:
        if attempt.get("session_path"):
            modes[attempt["session_path"]] = modes.get(attempt["session_path"], 0) + 1
    return {"sessions": len(attempts), "errors": sum(1 for a in attempts if a.get("error_kind")), **usage,
            "cache_read_share": usage["cache_read_input_tokens"] / all_input if all_input else 0.0,
            "usd_per_session": spent, "planned_usd_per_session": planned,
            "planned_over_spent": planned / spent if spent else None,
            "prefixes": len(hashes) if hashes else None, "session_path": modes,
            "uncached_planned_usd_per_session": plan["estimate"].get("expected_uncached_session_usd"),
            "cost_basis": plan["estimate"].get("cost_basis", "none (before)"),
            "input_tokens_per_session": all_input / len(attempts),
            "sessions_max": plan["estimate"]["sessions_max"]}


def table(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'host':<12}{'library':<9}{'model':<19}{'variant':<13}{'sessions':>9}{'err':>4}{'read share':>11}"
             f"{'$/session':>11}{'plan $/s':>10}{'plan/spent':>11}{'prefixes':>9}  session path"]
    for r in rows:
        ratio = f"{r['planned_over_spent']:.2f}" if r["planned_over_spent"] else "-"
        lines.append(f"{r['host']:<12}{r['library']:<9}{r['model']:<19}{r['variant']:<13}{r['sessions']:>9}"
                     f"{r['errors']:>4}{100 * r['cache_read_share']:>10.1f}%{r['usd_per_session']:>11.5f}"
                     f"{r['planned_usd_per_session']:>10.5f}{ratio:>11}{str(r['prefixes'] or '-'):>9}  "
                     f"{r['session_path'] or '-'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.host_cache", description=__doc__.split("\n")[0])
    parser.add_argument("--short", action="store_true", help="one small run per host: shows the benchmark works")
    parser.add_argument("--before-src", type=Path, default=None, help="a source tree of the runner to compare with")
    parser.add_argument("--hosts", default="claude-code,api")
    parser.add_argument("--libraries", default="example,aegis")
    parser.add_argument("--models", default="claude-sonnet-4-6")
    parser.add_argument("--variants", default="before,after,after+basis",
                        help="before (needs --before-src), after, after+basis, fallback, fallback+basis, case, "
                             "container")
    parser.add_argument("--base-image", default=None, help="container: the Dockerfile's BASE_IMAGE when "
                                                           "$SKILL_EVALS_IMAGE names no built image")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    libraries = {"example": (EXAMPLE, ()), "aegis": (AEGIS, AEGIS_SKILLS)}
    chosen = ["example"] if args.short else [n for n in args.libraries.split(",") if n != "aegis" or AEGIS.is_dir()]
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-host-cache-") as tmp:
        for host in args.hosts.split(","):
            for name in chosen:
                library, skills = libraries[name]
                skills = ("dependency-upgrade-reviewer",) if args.short else skills
                for model in args.models.split(","):
                    tag = f"{host}-{name}-{model}"
                    for variant in args.variants.split(","):
                        if (variant == "before" and args.before_src is None) or \
                                (variant.split("+")[0] in NAMESPACES and host != "claude-code"):
                            continue
                        src = args.before_src if variant == "before" else REPO
                        basis: Path | str | None = (Path(tmp) / f"{tag}-{variant.split('+')[0]}"
                                                    if variant.endswith("+basis") else None if src != REPO else "")
                        out = Path(tmp) / f"{tag}-{variant}"
                        found = run_once(src, library, host, model, skills, out, basis, args.short,
                                         namespace=NAMESPACES.get(variant.split("+")[0]),
                                         container=variant == "container", base_image=args.base_image)
                        rows.append({"host": host, "library": name, "model": model, "variant": variant, **found})
                        print(table(rows[-1:]).splitlines()[1], flush=True)
    report = {"benchmark": "host_cache", "command": "python -m benchmarks.host_cache " + " ".join(argv or sys.argv[1:]),
              "short": args.short, "latency_s": LATENCY_S, "concurrency": CONCURRENCY, "repeats": 3, "quorum": 2,
              "load_1min": os.getloadavg()[0], "rows": rows}
    print(table(rows))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
