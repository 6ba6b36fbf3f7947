"""`validate --format github` as GitHub reads it: paths from the repository root, at most 10 per level.

GitHub resolves a workflow command's `file=` from the repository root, not from the library: a library in
`examples/library` must be annotated as `examples/library/.claude/skills/...`. And Actions shows at most 10
error, 10 warning and 10 notice annotations per step, dropping the rest in silence: the first 10 of each level
are printed as workflow commands, one notice says how many were not annotated, and every finding is still in
the step's log as plain text. Each test runs the real CLI as a separate process on a real git repository.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from tests.conftest import EXAMPLE, run_cli
from tests.helpers import GIT_ENV

COMMAND = re.compile(r"^::(error|warning|notice)(?: ([^:]*))?::(.*)$")


def git_repo(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True, env=os.environ | GIT_ENV, timeout=60)
    return root


def validate(library: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "ANTHROPIC_"))} | GIT_ENV | env
    return run_cli("validate", "--library", library, "--format", "github", "--no-library-validator", cwd=cwd,
                   env=clean)


def commands(output: str) -> list[tuple[str, dict[str, str], str]]:
    """(level, properties, message) of every workflow command line."""
    found = []
    for line in output.splitlines():
        if match := COMMAND.match(line):
            props = dict(p.split("=", 1) for p in (match.group(2) or "").split(",") if p)
            found.append((match.group(1), props, match.group(3)))
    return found


def test_annotations_of_a_library_in_a_subfolder_are_relative_to_the_repository_root(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    shutil.copytree(EXAMPLE, repo / "examples" / "library", symlinks=True)
    skill_md = repo / "examples" / "library" / ".claude" / "skills" / "migration-planner" / "SKILL.md"
    skill_md.write_text(skill_md.read_text().replace("name: migration-planner", "name: Migration_Planner", 1))

    for cwd in (repo, repo / "examples"):  # wherever it is run from, as long as git knows the repository
        done = validate(str(repo / "examples" / "library"), cwd)
        assert done.returncode == 1, done.stderr
        annotated = [(props["file"], int(props["line"])) for _, props, _ in commands(done.stdout) if "file" in props]
        assert ("examples/library/.claude/skills/migration-planner/SKILL.md", 2) in annotated, done.stdout
        for path, _ in annotated:
            assert (repo / path).exists(), f"{path} does not resolve from the repository root"

    # No git repository (or no git): GITHUB_WORKSPACE is the repository root when it holds the library.
    bare = tmp_path / "workspace"
    shutil.copytree(repo / "examples", bare / "examples", symlinks=True)
    done = validate("examples/library", bare, GITHUB_WORKSPACE=str(bare), GIT_CEILING_DIRECTORIES=str(tmp_path))
    files = {props["file"] for _, props, _ in commands(done.stdout) if "file" in props}
    assert "examples/library/.claude/skills/migration-planner/SKILL.md" in files, done.stdout


def synthetic_library(repo: Path, skills: int) -> Path:
    """`skills` skills whose name breaks two rules (2 errors each) and that have no eval file (1 warning each)."""
    library = repo / "lib"
    for i in range(1, skills + 1):
        folder = library / ".claude" / "skills" / f"skill-{i:02d}"
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(f"---\nname: Wrong_{i:02d}\ndescription: Does thing {i} when asked.\n---\n"
                                         "Body.\n", encoding="utf-8")
    return library


def test_at_most_10_annotations_per_level_then_one_notice_with_the_rest(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    synthetic_library(repo, 13)  # 26 errors, 13 warnings
    done = validate("lib", repo)
    assert done.returncode == 1, done.stderr
    found = commands(done.stdout)
    levels = [level for level, props, _ in found if "file" in props]
    assert levels.count("error") == 10 and levels.count("warning") == 10, done.stdout
    summaries = [message for level, props, message in found if "file" not in props]
    assert len(summaries) == 1 and [level for level, props, _ in found if "file" not in props] == ["notice"]
    assert "16 more error(s)" in summaries[0] and "3 more warning(s)" in summaries[0], summaries[0]
    assert sum(1 for level, _, _ in found if level == "notice") <= 10
    # Every finding is still in the log as plain text, with the same repository-relative paths.
    plain = [line for line in done.stdout.splitlines() if not line.startswith("::")]
    for i in range(1, 14):
        skill_md = f"lib/.claude/skills/skill-{i:02d}/SKILL.md:2: error[name-mismatch]"
        evals = f"lib/.claude/skills/skill-{i:02d}/SKILL.md:1: warning[evals-missing]"
        assert any(line.startswith(skill_md) for line in plain), skill_md
        assert any(line.startswith(evals) for line in plain), evals
    assert plain[-1] == "26 error(s), 13 warning(s), 0 note(s)"
    pause = next(line for line in done.stdout.splitlines() if line.startswith("::stop-commands::"))
    token = pause.split("::")[2]
    assert len(token) >= 32 and done.stdout.splitlines()[-1] == f"::{token}::", "the listing is never read as commands"


def test_under_the_cap_everything_is_annotated_and_no_notice_is_added(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    synthetic_library(repo, 5)  # 10 errors, 5 warnings: exactly at and under the cap
    found = commands(validate("lib", repo).stdout)
    assert [level for level, _, _ in found].count("error") == 10
    assert [level for level, _, _ in found].count("warning") == 5
    assert all("file" in props for _, props, _ in found), "no summary notice when nothing was left out"


def test_the_summary_notice_counts_against_the_10_notices() -> None:
    """Notes are `::notice` commands too: with 12 of them, 9 are annotated and the summary is the 10th."""
    from runner.corpus.findings import info, render_github

    found = commands(render_github([info("note-rule", f"lib/n{i:02d}.md", 1, f"note {i}") for i in range(12)], "x/"))
    assert [level for level, _, _ in found] == ["notice"] * 10
    assert [props["file"] for _, props, _ in found[:9]] == [f"x/lib/n{i:02d}.md" for i in range(9)]
    assert "3 more note(s)" in found[9][2] and "file" not in found[9][1]
