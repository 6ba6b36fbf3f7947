"""Wall time of the commands a user waits on before any session runs: validate, census, plan.

Each figure is one fresh `python -m runner ...` process (interpreter start included, as a user or
CI sees it), repeated; the table shows min / median / max seconds. `plan` runs without a key, so
no request leaves the machine. The test suite only runs `--short` to check this still works: the
"validate in well under two seconds" promise is measured here, never asserted as a timed test.

    python -m benchmarks.commands [--short] [--repeats 5] [--library PATH ...] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "library"
AEGIS = REPO / "tests" / "corpora" / "project-aegis" / "dot-claude" / "skills"


def commands(library: Path, out: Path) -> dict[str, list[str]]:
    return {"validate": ["validate", "--library", str(library)],
            "census": ["census", "--library", str(library), "--format", "json"],
            "plan": ["plan", "--library", str(library), "--out", str(out / "plan.json")]}


def time_once(args: list[str]) -> float:
    environment = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "runner", *args], cwd=REPO, env=environment,
                          capture_output=True, text=True, timeout=600, check=False)
    elapsed = time.monotonic() - started
    if done.returncode not in (0, 1):  # 1: the library has error findings, still a measured command
        raise SystemExit(f"{' '.join(args)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return elapsed


def measure(library: Path, repeats: int) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for name, args in commands(library, Path(scratch)).items():
            seconds = [time_once(args) for _ in range(repeats)]
            rows.append({"library": str(library), "command": name, "repeats": repeats,
                         "seconds": {"min": min(seconds), "median": statistics.median(seconds),
                                     "max": max(seconds)}})
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'library':<12}{'command':<10}{'min s':>8}{'median s':>10}{'max s':>8}"]
    for r in rows:
        s = r["seconds"]
        path = Path(r["library"])
        label = "example" if path == EXAMPLE else "aegis" if path == AEGIS else path.name
        lines.append(f"{label:<12}{r['command']:<10}{s['min']:>8.2f}{s['median']:>10.2f}{s['max']:>8.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.commands", description=__doc__.split("\n")[0])
    parser.add_argument("--short", action="store_true", help="one repeat on the example library only")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--library", type=Path, action="append", default=None,
                        help="repeatable; default: the example library and Project Aegis (when present)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.short:
        libraries, repeats = args.library or [EXAMPLE], 1
    else:
        libraries, repeats = args.library or [EXAMPLE] + ([AEGIS] if AEGIS.is_dir() else []), args.repeats
    rows = [row for library in libraries for row in measure(library, repeats)]
    report = {"benchmark": "commands", "command": "python -m benchmarks.commands " + " ".join(argv or sys.argv[1:]),
              "short": args.short, "python": sys.version.split()[0], "cpus": os.cpu_count(), "rows": rows}
    print(table(rows))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
