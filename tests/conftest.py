"""Shared fixtures: the bundled example library, the real Aegis corpus, and the CLI run in-process or as a process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from runner.cli import main
from runner.testing.fake_anthropic import FakeAnthropic

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "library"
# Vendored (Apache-2.0; tests/corpora/project-aegis/SOURCE.md says from where): the suite needs nothing outside
# the checkout.
AEGIS_SKILLS = REPO / "tests" / "corpora" / "project-aegis" / "dot-claude" / "skills"


@pytest.fixture
def example_copy(tmp_path: Path) -> Path:
    """A writable copy of the example library (a repository root with .claude/skills)."""
    target = tmp_path / "library"
    shutil.copytree(EXAMPLE, target, symlinks=True)
    return target


@pytest.fixture
def aegis_skills() -> Path:
    assert AEGIS_SKILLS.is_dir(), f"the vendored Project Aegis corpus is missing: {AEGIS_SKILLS}"
    return AEGIS_SKILLS


@pytest.fixture
def fake():
    """The fake Messages API on 127.0.0.1: a judge that passes every rubric item, plain answers otherwise."""
    from runner.testing.fake_anthropic import text
    from runner.testing.fake_judge import JUDGE_MATCH, verdicts

    with FakeAnthropic() as server:
        server.script(JUDGE_MATCH, verdicts("PASS"))
        server.default(text("A plain answer without any skill."))
        yield server


def cli(*args: str) -> Result:
    """Run the real CLI in-process; exceptions are not swallowed into a pass."""
    result = CliRunner().invoke(main, list(args), catch_exceptions=True)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def fake_env(fake: FakeAnthropic | None, key: str | None,
             extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment as CI has it (CI=true), without the developer's own ANTHROPIC_* settings (a real
    key or base URL must never reach a test), pointed at `fake` when given, with `key` as ANTHROPIC_API_KEY (none
    when None: the no-key paths), then `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env["CI"] = "true"
    if fake is not None:
        env["ANTHROPIC_BASE_URL"] = fake.url
    if key:
        env["ANTHROPIC_API_KEY"] = key
    env.update(extra or {})
    return env


def run_cli(*args: str, fake: FakeAnthropic | None = None, key: str | None = None,
            env: Mapping[str, str] | None = None, cwd: Path | None = None,
            timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`python -m runner ARGS` in a new process, as a user or CI runs it. Its environment: `env` when given, else
    fake_env(fake, key) when a fake is given, else this process's. The timeout only stops a hung process (it is
    never what a test asserts)."""
    if fake is not None:
        if env is not None:
            raise TypeError("give run_cli a fake (and key) or a whole env, not both: fake_env(fake, key, extra) "
                            "adds variables to the fake's environment")
        env = fake_env(fake, key)
    return subprocess.run([sys.executable, "-m", "runner", *args], env=None if env is None else dict(env), cwd=cwd,
                          capture_output=True, text=True, timeout=timeout, check=False)


# Runs the CLI in a fresh interpreter and then names which of the given modules it imported: tests assert that a
# command did not pay for a slow import (the cause of a slow command), never its time (benchmarks/ measure that).
_IMPORT_PROBE = """
import sys
from runner.cli import main
try:
    main(sys.argv[1:], prog_name="skill-evals")
except SystemExit as exc:
    print("exit", exc.code)
print("loaded", *sorted(m for m in {heavy!r} if m in sys.modules))
"""


def cli_imports(heavy: tuple[str, ...], *args: str) -> subprocess.CompletedProcess[str]:
    """`skill-evals ARGS` in a new process; its stdout ends with "exit N" and "loaded <those of heavy imported>"."""
    return subprocess.run([sys.executable, "-c", _IMPORT_PROBE.format(heavy=heavy), *args], capture_output=True,
                          text=True, timeout=120, check=False)


def findings_of(library: Path, *extra: str) -> tuple[int, list[dict]]:
    result = cli("validate", "--library", str(library), "--format", "json", *extra)
    return result.exit_code, json.loads(result.output)["findings"]


def line_of(path: Path, needle: str, occurrence: int = 1) -> int:
    """1-based line of the n-th line containing needle (tests compute expected lines, never guess)."""
    seen = 0
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if needle in line:
            seen += 1
            if seen == occurrence:
                return number
    raise AssertionError(f"{needle!r} not in {path}")
