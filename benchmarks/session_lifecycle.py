"""Where one Claude Code session's CPU goes, and what ending it earlier saves (issue 33, BENCHMARKS.md section 8).

    python -m benchmarks.session_lifecycle [--sessions 20] [--latency 0.3] [--out FILE.json] [--md FILE.md]

The bundled CLI against the fake Messages API (runner/testing/fake_anthropic.py, scripted as the keyword model of
runner/testing/trigger_set.py), each session in a fresh folder holding the trigger set's three skills under
.claude/skills, with a fresh HOME and CLAUDE_CONFIG_DIR and the claude-code host's environment switches. Its CPU is
this process's children's (getrusage) over the session. Variants, interleaved session by session so that a drift of
the machine falls on every variant alike:

- **To the first request** (the fake holds its answer; the CLI is killed as soon as the fake has the request): the
  CLI's start-up, for `claude -p` (`bare`), through claude-agent-sdk's query() (`sdk`), and through query() with the
  host's PostToolUse hook registered (`sdk+hook`).
- **Whole sessions** of the should-trigger queries (the model calls the Skill tool, then would answer):
  `hook ends it` is the claude-code host's way (claude_code._Decider: the PostToolUse hook answers continue: false
  once the call ran, the CLI sends its result and exits); `hook, then killed` also SIGKILLs the CLI in the hook
  (the earliest point at which the CLI has accepted the call); `killed at the tool call` is skill-creator's
  run_eval way (`claude -p ... --include-partial-messages`, SIGKILL at the tool_use block's content_block_stop,
  before the CLI has looked at the call).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from claude_agent_sdk import ClaudeAgentOptions, HookMatcher, query

from benchmarks.first_turn import children_cpu
from runner.hosts.claude_code import DECIDING_TOOLS, bundled_cli, cli_version
from runner.testing import trigger_set
from runner.testing.fake_anthropic import FakeAnthropic

KEY = "sk-ant-benchmark-lifecycle"
TOOLS = ["Skill", "Read"]
START_VARIANTS = ("bare", "sdk", "sdk+hook")
END_VARIANTS = ("hook ends it", "hook, then killed", "killed at the tool call")


def own_children() -> list[int]:
    """This process's child processes (the CLI: query() starts it directly here, no wrapper)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(stat[1]) == os.getpid():
            found.append(int(entry))
    return found


def kill_children() -> None:
    for pid in own_children():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


class Session:
    """One fresh session folder and the environment the claude-code host gives its CLI."""

    def __init__(self, fake: FakeAnthropic):
        self.fake = fake
        self._tmp = tempfile.TemporaryDirectory(prefix="bench-lifecycle-")
        root = Path(self._tmp.name)
        self.project = trigger_set.write_library(root / "home" / "project", 20)
        (root / "config").mkdir()
        self.env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(root / "home"), "TMPDIR": str(root),
                    "LANG": "C.UTF-8", "CLAUDE_CONFIG_DIR": str(root / "config"), "ANTHROPIC_API_KEY": KEY,
                    "ANTHROPIC_BASE_URL": fake.url, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                    "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1"}

    def close(self) -> None:
        self._tmp.cleanup()

    def options(self, hook: Any | None) -> ClaudeAgentOptions:
        return ClaudeAgentOptions(
            hooks={"PostToolUse": [HookMatcher(matcher=DECIDING_TOOLS, hooks=[hook])]} if hook else None,
            system_prompt={"type": "preset", "preset": "claude_code"}, cwd=str(self.project),
            setting_sources=["project"], allowed_tools=TOOLS, tools=TOOLS, permission_mode="dontAsk", max_turns=5,
            env=self.env, mcp_servers={}, strict_mcp_config=True, cli_path=str(bundled_cli()),
            extra_args={"replay-user-messages": None})

    def bare_args(self, prompt: str, partial: bool) -> list[str]:
        args = [str(bundled_cli()), "-p", prompt, "--output-format", "stream-json", "--verbose",
                "--tools", ",".join(TOOLS), "--allowedTools", ",".join(TOOLS)]
        return args + (["--include-partial-messages"] if partial else [])


async def run_query(prompt: str, options: ClaudeAgentOptions) -> None:
    try:
        async for _ in query(prompt=prompt, options=options):
            pass
    except Exception:  # noqa: BLE001 - a killed CLI ends query() with an error: expected here
        pass


async def to_first_request(fake: FakeAnthropic, variant: str, prompt: str) -> float:
    """CPU of the CLI from its start until the fake holds its first request (then it is killed)."""
    session = Session(fake)
    seen = len(fake.message_requests)

    async def kill_at_request() -> None:
        while len(fake.message_requests) == seen:
            await asyncio.sleep(0.002)
        kill_children()

    async def hook(data: Any, tool_use_id: str | None, context: Any) -> Any:
        return {}

    start = children_cpu()
    killer = asyncio.ensure_future(kill_at_request())
    try:
        if variant == "bare":
            process = await asyncio.create_subprocess_exec(*session.bare_args(prompt, False), cwd=session.project,
                                                           env=session.env, stdout=asyncio.subprocess.DEVNULL,
                                                           stderr=asyncio.subprocess.DEVNULL)
            await process.wait()
        else:
            await run_query(prompt, session.options(hook if variant == "sdk+hook" else None))
        await killer
        return children_cpu() - start
    finally:
        session.close()


async def whole_session(fake: FakeAnthropic, variant: str, prompt: str) -> float:
    session = Session(fake)

    async def hook(data: Any, tool_use_id: str | None, context: Any) -> Any:
        if variant == "hook, then killed":
            kill_children()
        return {"continue_": False, "stopReason": "benchmark: decided"}

    start = children_cpu()
    try:
        if variant == "killed at the tool call":
            process = await asyncio.create_subprocess_exec(*session.bare_args(prompt, True), cwd=session.project,
                                                           env=session.env, stdout=asyncio.subprocess.PIPE,
                                                           stderr=asyncio.subprocess.DEVNULL)
            assert process.stdout is not None
            async for line in process.stdout:
                if b'"content_block_stop"' in line or b'"message_stop"' in line:
                    process.kill()
                    break
            await process.wait()
        else:
            await run_query(prompt, session.options(hook))
        return children_cpu() - start
    finally:
        session.close()


def summary(values: list[float]) -> dict[str, float]:
    return {"mean": round(statistics.mean(values), 4), "median": round(statistics.median(values), 4),
            "stdev": round(statistics.stdev(values), 4) if len(values) > 1 else 0.0, "n": len(values)}


async def measure(sessions: int, latency: float) -> dict[str, Any]:
    prompts = trigger_set.SHOULD
    with FakeAnthropic() as fake:
        trigger_set.script(fake)
        fake.set_latency(60.0)  # held: the CLI is killed at the request
        start = {name: [] for name in START_VARIANTS}
        for index in range(sessions):
            for name in START_VARIANTS:
                start[name].append(await to_first_request(fake, name, prompts[index % len(prompts)]))
    with FakeAnthropic() as fake:
        trigger_set.script(fake)
        fake.set_latency(latency)
        end = {name: [] for name in END_VARIANTS}
        for index in range(sessions):
            for name in END_VARIANTS:
                end[name].append(await whole_session(fake, name, prompts[index % len(prompts)]))
    return {"to_first_request": {k: summary(v) for k, v in start.items()},
            "whole_session": {k: summary(v) for k, v in end.items()}}


def markdown(report: dict[str, Any]) -> str:
    lines = ["# One Claude Code session's CPU (benchmarks/session_lifecycle.py)", "",
             f"Measured {report['when']} with `{report['command']}`; {report['machine']}; Claude Code CLI "
             f"{report['cli']}; the fake answers after {report['latency']} s; {report['sessions']} sessions per "
             "variant, interleaved. CPU seconds per session (getrusage of the CLI processes).", "",
             "| part | variant | mean | median | stdev |", "| --- | --- | ---: | ---: | ---: |"]
    for part, label in (("to_first_request", "to the first request"), ("whole_session", "whole session")):
        for name, row in report[part].items():
            lines.append(f"| {label} | {name} | {row['mean']:.3f} | {row['median']:.3f} | {row['stdev']:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.session_lifecycle", description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=20, help="sessions per variant (default 20)")
    parser.add_argument("--latency", type=float, default=0.3, help="seconds the fake waits per request")
    parser.add_argument("--out", type=Path, help="the report as JSON")
    parser.add_argument("--md", type=Path, help="the report as Markdown")
    args = parser.parse_args(argv)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    report = asyncio.run(measure(args.sessions, args.latency))
    report.update(when=started, command="python -m benchmarks.session_lifecycle " + " ".join(argv or sys.argv[1:]),
                  machine=f"{os.cpu_count()} cores, {sys.platform}", cli=cli_version(bundled_cli()),
                  latency=args.latency, sessions=args.sessions)
    text = markdown(report)
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if args.md:
        args.md.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
