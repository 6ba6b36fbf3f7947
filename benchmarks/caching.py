"""Prompt caching on the `api` host, in tokens from the fake Messages API's usage figures.

    python -m benchmarks.caching [--short] [--cases 100] [--library PATH ...] [--model M ...] --out FILE.json

Each run sends `--cases` sessions (the library's own case prompts, in corpus order, repeated when the
library has fewer) through the real ApiHost (runner.pipeline.run.make_host) against runner/testing/fake_anthropic.py,
at concurrency 8 with 50 ms latency, every session playing a Skill call then a final text (two
requests). Once with prompt caching (the host marks the tools + system prefix when it can be cached)
and once without. The fake accounts the cache as the API does (its module docstring): a prefix below
the model's minimum is never cached, and a prefix is only read by requests that arrive after the
response that wrote it began, so the first wave of concurrent sessions all write.

Reported per (library, model): input / cache-write / cache-read tokens summed over the sessions, the
share of input tokens served from cache, and the cost of both runs from runner.hosts.prices (cache writes
at 1.25x input, reads at 0.1x unless the price table says otherwise). Token figures are deterministic
(the fake's 4-characters-a-token count), so one repetition is the measurement.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "library"
AEGIS = REPO / "tests" / "corpora" / "project-aegis" / "dot-claude" / "skills"
KEY = "sk-bench-not-a-real-key"
CONCURRENCY = 8
LATENCY_S = 0.05


class Figures(BaseModel):
    library: str
    model: str
    caching: bool
    prefix_marked: bool
    prefix_tokens_estimate: int
    sessions: int
    errors: int
    requests: int
    input_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    cached_share: float
    cost_usd: float


def prompts(library: Any, count: int) -> list[str]:
    texts = [case.prompt for case in library.cases if case.prompt]
    return [f"{texts[i % len(texts)]}\n[session {i}]" for i in range(count)]


async def run_all(host: Any, model: str, texts: list[str]) -> list[Any]:
    from runner.core.observation import SessionSpec

    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(i: int, prompt: str) -> Any:
        async with gate:
            return await host.run(SessionSpec(attempt_id=f"cache-{i}", uid=f"cache-{i}", prompt=prompt, model=model,
                                              max_turns=4, timeout_s=60, max_output_tokens=512))

    try:
        return await asyncio.gather(*(one(i, p) for i, p in enumerate(texts)))
    finally:
        await host.aclose()


def measure(library_path: Path, model: str, caching: bool, cases: int) -> Figures:
    from runner.core.observation import Usage
    from runner.corpus.loader import load_library
    from runner.corpus.settings import Settings
    from runner.hosts import prices as prices_mod
    from runner.hosts.api import CHARS_PER_TOKEN, TOOLS_CHARS
    from runner.pipeline.run import Credentials, make_host
    from runner.testing.fake_anthropic import FakeAnthropic, skill, text

    settings = Settings()
    library, _ = load_library(library_path, settings)
    prices = prices_mod.load(settings)
    invocable = sorted(name for name, s in library.skills.items() if not s.manual_only)
    with FakeAnthropic() as fake:
        fake.default(skill(invocable[0]), text("Done."))
        fake.set_latency(LATENCY_S)
        host = make_host("api", library, settings, Credentials(api_key=KEY, base_url=fake.url), prices, KEY)
        host.prompt_caching = caching
        system, _, _ = host.system_param([])
        text_chars = len(system) if isinstance(system, str) else sum(len(b["text"]) for b in system)
        observations = asyncio.run(run_all(host, model, prompts(library, cases)))
        requests = len(fake.message_requests)
    total = Usage()
    for obs in observations:
        total = total.add(obs.usage)
    all_input = total.input_tokens + total.cache_creation_input_tokens + total.cache_read_input_tokens
    return Figures(library=str(library_path), model=model, caching=caching, prefix_marked=not isinstance(system, str),
                   prefix_tokens_estimate=(text_chars + TOOLS_CHARS) // CHARS_PER_TOKEN, sessions=len(observations),
                   errors=sum(1 for o in observations if o.error_kind), requests=requests,
                   input_tokens=total.input_tokens, cache_creation_input_tokens=total.cache_creation_input_tokens,
                   cache_read_input_tokens=total.cache_read_input_tokens,
                   cached_share=total.cache_read_input_tokens / all_input if all_input else 0.0,
                   cost_usd=sum(o.cost_usd for o in observations))


def table(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'library':<10}{'model':<20}{'prefix tok':>11}{'marked':>8}{'input':>10}{'cache write':>12}"
             f"{'cache read':>12}{'cached':>8}{'cost $':>10}{'no-cache $':>11}{'saving':>8}"]
    for r in rows:
        on = r["with_caching"]
        label = "example" if Path(r["library"]) == EXAMPLE else "aegis" if "aegis" in r["library"] else \
            Path(r["library"]).name
        lines.append(f"{label:<10}"
                     f"{r['model']:<20}{on['prefix_tokens_estimate']:>11}{str(on['prefix_marked']):>8}"
                     f"{on['input_tokens']:>10}{on['cache_creation_input_tokens']:>12}"
                     f"{on['cache_read_input_tokens']:>12}{100 * on['cached_share']:>7.1f}%"
                     f"{on['cost_usd']:>10.4f}{r['without_caching']['cost_usd']:>11.4f}{100 * r['saving']:>7.1f}%")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.caching", description=__doc__.split("\n")[0])
    parser.add_argument("--short", action="store_true", help="a quick run that only shows the benchmark works")
    parser.add_argument("--cases", type=int, default=100)
    parser.add_argument("--library", type=Path, action="append", default=None,
                        help="repeatable; default: the example library and Project Aegis (when present)")
    parser.add_argument("--model", action="append", default=None,
                        help="repeatable; default: claude-sonnet-4-6 (the run default) and claude-haiku-4-5")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    libraries = args.library or [EXAMPLE] + ([AEGIS] if AEGIS.is_dir() else [])
    models = args.model or ["claude-sonnet-4-6", "claude-haiku-4-5"]
    cases = 12 if args.short else args.cases
    rows = []
    for library_path in libraries:
        for model in models:
            on = measure(library_path, model, True, cases)
            off = measure(library_path, model, False, cases)
            rows.append({"library": str(library_path), "model": model, "with_caching": on.model_dump(),
                         "without_caching": off.model_dump(),
                         "saving": 1 - on.cost_usd / off.cost_usd if off.cost_usd else 0.0})
    report = {"benchmark": "caching", "command": "python -m benchmarks.caching " + " ".join(argv or sys.argv[1:]),
              "short": args.short, "cases": cases, "concurrency": CONCURRENCY, "latency_s": LATENCY_S, "rows": rows}
    print(table(rows))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
