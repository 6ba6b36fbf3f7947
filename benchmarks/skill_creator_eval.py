"""skill-creator's trigger evaluation, re-implemented here to be measured beside skill-evals (benchmarks/first_turn.py).

    python benchmarks/skill_creator_eval.py --eval-set EVALS.json --skill-path SKILL_DIR [--num-workers 10]
        [--runs-per-query 3] [--timeout 30] [--trigger-threshold 0.5] [--model M]

Read from anthropics/skills, skills/skill-creator/scripts/run_eval.py (Apache-2.0) at commit
9d2f1ae187231d8199c64b5b762e1bdf2244733d (the file last changed in 3d59511518591fa82e6cfcf0438d68dd5dad3e76). This
is our own code doing what that script does, step for step, so that its CPU and wall can be measured on our trigger
set, fake and CLI; none of its text is copied. What it does:

- The process: `python` running the script, importing only the standard library (and a frontmatter reader of its
  own). It reads the skill's name and description from SKILL.md's frontmatter and finds the project root: the
  nearest folder, from the working directory up, that has a `.claude/` folder.
- Concurrency: a `concurrent.futures.ProcessPoolExecutor(max_workers=num_workers)` (on Linux, forked workers); every
  (query, run) pair is one task, submitted at once; results are collected with `as_completed`. A task that raises
  counts as not triggered.
- One query (one task): it writes `<root>/.claude/commands/<name>-skill-<8 hex>.md`, a slash command whose
  frontmatter `description` is the skill's description (a YAML block scalar) and whose body is a heading and "This
  skill handles: <description>", so the CLI lists it beside the project's skills; then it starts
  `claude -p QUERY --output-format stream-json --verbose --include-partial-messages [--model M]` (found on PATH) with
  the working directory the project root, stdout piped, stderr to /dev/null and the script's whole environment but
  CLAUDECODE. Every task of a run shares the one project root, so at concurrency c up to c such command files (the
  other workers') are listed at once.
- Deciding: stdout is read with `select` (1 s ticks) and split into JSON lines. From the streamed events: the first
  `content_block_start` of a `tool_use` decides at once when the tool is neither Skill nor Read (not triggered);
  for Skill or Read the tool input's JSON deltas are gathered, and triggered is decided as soon as they contain the
  command's name, else at that block's `content_block_stop` (whether they contained it); a `message_stop` with no
  such block pending is not triggered. Without stream events, the first `assistant` message holding a tool_use
  decides (Skill whose `skill`, or Read whose `file_path`, contains the command's name), and a `result` event ends
  it with what was seen. The CLI exiting, EOF, or the timeout (default 30 s) end it as not triggered.
- Killing: as soon as it has decided (or on timeout or any error) the CLI is killed (SIGKILL) and waited for, in the
  middle of its first turn's stream when it decided there; the command file is removed.
- The verdict of a query: trigger rate = triggered runs / runs; it passes when the rate is >= the threshold (0.5)
  for a should_trigger query, < the threshold for the others. The JSON printed has every query's rate and pass, and
  the summary (total, passed, failed).

Where this differs from the script, and why: the script is run as `python -m scripts.run_eval` from skill-creator's
folder; this file is run by path and has the frontmatter reader inside (the same standard-library imports). Nothing
else differs; the benchmark chooses the environment, PATH and working directory the script is given
(benchmarks/first_turn.py says which).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import subprocess
import sys
import time
import uuid
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

STREAM_TICK_S = 1.0  # how long one select() waits for the CLI's output before the timeout is looked at again
READ_BYTES = 8192
DECIDING_TOOLS = ("Skill", "Read")  # the tools whose input can name the command


def frontmatter(skill_dir: Path) -> tuple[str, str]:
    """(name, description) from SKILL.md's frontmatter: plain `key: value` lines, a description given as a YAML
    block (`>`, `|`, `>-`, `|-`) joined from its indented lines."""
    lines = (skill_dir / "SKILL.md").read_text().split("\n")
    if lines[0].strip() != "---":
        raise ValueError(f"{skill_dir}/SKILL.md has no frontmatter")
    end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() == "---"), None)
    if end is None:
        raise ValueError(f"{skill_dir}/SKILL.md has no end to its frontmatter")
    name = description = ""
    body, i = lines[1:end], 0
    while i < len(body):
        key, _, value = body[i].partition(":")
        i += 1
        if key == "name":
            name = value.strip().strip("\"'")
        elif key == "description" and value.strip() in (">", "|", ">-", "|-"):
            block = []
            while i < len(body) and body[i][:1] in (" ", "\t"):
                block.append(body[i].strip())
                i += 1
            description = " ".join(block)
        elif key == "description":
            description = value.strip().strip("\"'")
    return name, description


def project_root(start: Path) -> Path:
    """The nearest folder from `start` up that has `.claude/` (where the CLI looks for project commands)."""
    return next((folder for folder in (start, *start.parents) if (folder / ".claude").is_dir()), start)


def command_text(name: str, description: str) -> str:
    indented = "\n  ".join(description.split("\n"))
    return f"---\ndescription: |\n  {indented}\n---\n\n# {name}\n\nThis skill handles: {description}\n"


class Watch:
    """Reads the CLI's stream-json lines and decides, as early as the stream allows, whether `command` was called."""

    def __init__(self, command: str):
        self.command = command
        self.tool: str | None = None  # the Skill or Read block being streamed
        self.tool_json = ""
        self.triggered = False

    def line(self, event: dict[str, Any]) -> bool | None:
        """True or False once decided, None to read on."""
        kind = event.get("type")
        if kind == "stream_event":
            return self.stream_event(event.get("event", {}))
        if kind == "assistant":
            return self.assistant(event.get("message", {}))
        if kind == "result":
            return self.triggered
        return None

    def stream_event(self, event: dict[str, Any]) -> bool | None:
        kind = event.get("type", "")
        if kind == "content_block_start":
            block = event.get("content_block", {})
            if block.get("type") != "tool_use":
                return None
            if block.get("name", "") not in DECIDING_TOOLS:
                return False
            self.tool, self.tool_json = block.get("name", ""), ""
        elif kind == "content_block_delta" and self.tool:
            delta = event.get("delta", {})
            if delta.get("type") == "input_json_delta":
                self.tool_json += delta.get("partial_json", "")
                if self.command in self.tool_json:
                    return True
        elif kind in ("content_block_stop", "message_stop"):
            if self.tool:
                return self.command in self.tool_json
            if kind == "message_stop":
                return False
        return None

    def assistant(self, message: dict[str, Any]) -> bool | None:
        """The whole message, when no stream event decided: its first tool call decides."""
        for block in message.get("content", []):
            if block.get("type") != "tool_use":
                continue
            given = block.get("input", {})
            if block.get("name") == "Skill":
                self.triggered = self.command in given.get("skill", "")
            elif block.get("name") == "Read":
                self.triggered = self.command in given.get("file_path", "")
            return self.triggered
        return None


def watch(process: subprocess.Popen[bytes], decide: Watch, timeout: float) -> bool:
    """Read the CLI's stdout until `decide` decides, the CLI ends, or `timeout` passes (not triggered)."""
    assert process.stdout is not None
    started, pending = time.time(), ""
    while time.time() - started < timeout:
        if process.poll() is not None:
            # The CLI has ended: what it printed last is read but, as in the script, not looked at.
            process.stdout.read()
            return decide.triggered
        ready, _, _ = select.select([process.stdout], [], [], STREAM_TICK_S)
        if not ready:
            continue
        chunk = os.read(process.stdout.fileno(), READ_BYTES)
        if not chunk:
            return decide.triggered
        pending += chunk.decode("utf-8", errors="replace")
        while "\n" in pending:
            line, pending = pending.split("\n", 1)
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            found = decide.line(event) if isinstance(event, dict) else None
            if found is not None:
                return found
    return decide.triggered


def run_query(query: str, name: str, description: str, timeout: float, root: str, model: str | None) -> bool:
    """One session: the command file, the CLI, the decision; the CLI killed once decided, the file removed."""
    command = f"{name}-skill-{uuid.uuid4().hex[:8]}"
    folder = Path(root) / ".claude" / "commands"
    command_file = folder / f"{command}.md"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        command_file.write_text(command_text(name, description))
        argv = ["claude", "-p", query, "--output-format", "stream-json", "--verbose", "--include-partial-messages",
                *(["--model", model] if model else [])]
        env = {key: value for key, value in os.environ.items() if key != "CLAUDECODE"}
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=root, env=env)
        try:
            return watch(process, Watch(command), timeout)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    finally:
        command_file.unlink(missing_ok=True)


def verdicts(eval_set: list[dict[str, Any]], runs: dict[str, list[bool]], threshold: float) -> list[dict[str, Any]]:
    by_query = {item["query"]: item for item in eval_set}
    found = []
    for query, triggers in runs.items():
        rate = sum(triggers) / len(triggers)
        should = bool(by_query[query]["should_trigger"])
        found.append({"query": query, "should_trigger": should, "trigger_rate": rate, "triggers": sum(triggers),
                      "runs": len(triggers), "pass": rate >= threshold if should else rate < threshold})
    return found


def run_eval(eval_set: list[dict[str, Any]], name: str, description: str, workers: int, timeout: float, root: Path,
             runs_per_query: int, threshold: float, model: str | None) -> dict[str, Any]:
    runs: dict[str, list[bool]] = {}
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(run_query, item["query"], name, description, timeout, str(root), model): item["query"]
                   for item in eval_set for _ in range(runs_per_query)}
        for future in as_completed(futures):
            query = futures[future]
            try:
                triggered = future.result()
            except Exception as exc:  # a failed task counts as not triggered, as the script has it
                print(f"a query failed: {exc}", file=sys.stderr)
                triggered = False
            runs.setdefault(query, []).append(triggered)
    results = verdicts(eval_set, runs, threshold)
    passed = sum(1 for r in results if r["pass"])
    return {"skill_name": name, "description": description, "results": results,
            "summary": {"total": len(results), "passed": passed, "failed": len(results) - passed}}


def main() -> None:
    parser = argparse.ArgumentParser(description="skill-creator's trigger evaluation (re-implemented)")
    parser.add_argument("--eval-set", required=True, type=Path)
    parser.add_argument("--skill-path", required=True, type=Path)
    parser.add_argument("--num-workers", type=int, default=10)
    parser.add_argument("--timeout", type=int, default=30)
    parser.add_argument("--runs-per-query", type=int, default=3)
    parser.add_argument("--trigger-threshold", type=float, default=0.5)
    parser.add_argument("--model", default=None)
    args = parser.parse_args()
    name, description = frontmatter(args.skill_path)
    output = run_eval(json.loads(args.eval_set.read_text()), name, description, args.num_workers, args.timeout,
                      project_root(Path.cwd()), args.runs_per_query, args.trigger_threshold, args.model)
    print(json.dumps(output, indent=2))


if __name__ == "__main__":
    main()
