"""Helpers shared by test modules: git as a test author, and `skill-evals run` against the fake with its records.

Test modules import from here (or from conftest), never from another test module: importing a test module runs its
module-level set-up a second time and ties two files' tests together.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from runner.corpus.loader import load_library
from runner.corpus.settings import Settings
from runner.testing.fake_anthropic import FakeAnthropic, dynamic, text
from runner.testing.fake_judge import final_answer, rubric_ids
from tests.conftest import EXAMPLE, REPO, fake_env, run_cli

# ---- git ----------------------------------------------------------------------------------------------------------

# A fixed author and no user or system configuration (no signing, no hooks, no default branch of the developer's).
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def git(repo: Path, *args: str) -> str:
    """`git ARGS` in `repo` with GIT_ENV; its stdout, stripped. A failing git command fails the test."""
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True, timeout=60,
                          env=os.environ | GIT_ENV)
    return done.stdout.strip()


def commit(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


def example_repository(tmp_path: Path) -> Path:
    """The example library as a git repository: a `base` commit (tagged) on branch main."""
    target = tmp_path / "library"
    shutil.copytree(EXAMPLE, target, symlinks=True)
    git(target, "init", "-q")
    git(target, "checkout", "-q", "-b", "main")
    commit(target, "base")
    git(target, "tag", "base")
    return target


# ---- `skill-evals run` against the fake, and what it recorded --------------------------------------------------

KEY = "sk-ant-test-marker-5f3a9c"
TRIAGE = "test-report-triage"


def prompts() -> dict[str, str]:
    library, _ = load_library(EXAMPLE, Settings())
    return {case.uid: case.prompt for case in library.cases}


PROMPTS = prompts()


def key_of(uid: str) -> str:
    """A substring that identifies the case's prompt (the listing never contains prompts)."""
    return PROMPTS[uid][:60]


def skill_evals_run(fake: FakeAnthropic, out: Path, *args: str, library: Path = EXAMPLE, key: str | None = KEY,
                    extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`skill-evals run --library LIBRARY --out OUT --timeout 20 ARGS` against the fake (a later --timeout wins)."""
    return run_cli("run", "--library", str(library), "--out", str(out), "--timeout", "20", *args,
                   env=fake_env(fake, key, extra_env))


def results_of(out: Path) -> dict:
    data = json.loads((out / "results.json").read_text())
    schema = json.loads((REPO / "runner" / "schemas" / "results.schema.json").read_text())
    errors = list(Draft202012Validator(schema).iter_errors(data))
    assert not errors, errors[0].message
    return data


def case(results: dict, uid: str) -> dict:
    return next(c for c in results["cases"] if c["uid"] == uid)


def attempts(out: Path, uid: str | None = None) -> list[dict]:
    lines = [json.loads(line) for line in (out / "attempts.jsonl").read_text().splitlines() if line.strip()]
    return [a for a in lines if uid is None or a["uid"] == uid]


# ---- small libraries ----------------------------------------------------------------------------------------------

def demo_skill(root: Path, cases: list[dict]) -> Path:
    """A library of one skill, `demo` (summarise a demo report in one line), with these evals.json cases."""
    skill_dir = root / ".claude" / "skills" / "demo"
    (skill_dir / "evals").mkdir(parents=True)
    (skill_dir / "SKILL.md").write_text("---\nname: demo\ndescription: Summarise a demo report into one line. Use "
                                        "when asked to summarise a demo report.\n---\n\n# Demo\n\nOne line.\n",
                                        encoding="utf-8")
    (skill_dir / "evals" / "evals.json").write_text(json.dumps({"skill": "demo", "cases": cases}, ensure_ascii=False),
                                                    encoding="utf-8")
    return root


def big_library(root: Path, skills: int = 40) -> Path:
    """A library whose listing is long enough to be cached (about 40 x 300 characters)."""
    for i in range(skills):
        folder = root / ".claude" / "skills" / f"skill-{i:02d}"
        folder.mkdir(parents=True)
        description = f"Use for task family {i}, " + "careful domain-specific guidance " * 8
        (folder / "SKILL.md").write_text(f"---\nname: skill-{i:02d}\ndescription: {description.strip()}\n---\n"
                                         f"# Skill {i}\n\nDo the work of family {i}.\n", encoding="utf-8")
    return root


# ---- the judge -----------------------------------------------------------------------------------------------------

def judge_queue(*verdicts: str) -> Any:
    """Judge replies in order of arrival: the n-th judge call gets verdicts[n] for every rubric item."""
    lock, calls = threading.Lock(), []

    def reply(body: dict[str, Any]) -> Any:
        with lock:
            verdict = verdicts[min(len(calls), len(verdicts) - 1)]
            calls.append(verdict)
        quote = final_answer(body).strip().splitlines()[0][:80]
        return text(json.dumps({"verdicts": [{"id": i, "verdict": verdict, "evidence": quote if verdict == "PASS"
                                              else "", "reason": "scripted"} for i in rubric_ids(body)]}))
    return dynamic(reply)


def files_holding(root: Path, *needles: str) -> list[str]:
    """Every file under root (symlinks not followed) whose bytes hold one of the needles."""
    found = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            try:
                data = path.read_bytes()
            except OSError:
                continue
            found += [f"{path} holds {needle!r}" for needle in needles if needle.encode() in data]
    return found
