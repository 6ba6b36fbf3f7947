"""The README is the front door and docs/ the reference: both must stay true to the repository.

A reference that names a file which moved, or a link whose anchor a renamed heading broke, misleads the one reader
it was written for; so every `runner/...` path the pages name must exist, and every relative link must reach a file
and a heading of it. The README stays short (under 12,000 characters) and its quick start's test command is the
one CI runs (.ci/run).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import REPO

README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]
README_LIMIT = 12_000
# A line that names a file another step of a change is still creating says so with this marker; whoever lands
# that step checks the path and removes the marker, and from then on the path is checked here.
PENDING = "<!-- VERIFY"

FENCE = re.compile(r"^```.*?^```[ \t]*$", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
RUNNER_PATH = re.compile(r"(?<![\w./-])runner/[\w./<>-]*[\w>/]")


def prose(text: str) -> str:
    """The text outside fenced code blocks (a `# comment` in a bash block is no heading)."""
    return FENCE.sub("", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped (`§`, `–`, `.`, backticks), spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in prose(page.read_text(encoding="utf-8")).splitlines():
        match = re.match(r"#{1,6} +(.+?) *#*$", line)
        if match:
            base = slug(match.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(page: Path) -> list[str]:
    text = CODE_SPAN.sub(lambda span: "`" + span.group(0).replace("](", "] (") + "`", prose(
        page.read_text(encoding="utf-8")))
    return [target for target in LINK.findall(text) if not re.match(r"[a-z]+:", target)]


def test_readme_is_a_front_door() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text) < README_LIMIT, f"README.md is {len(text):,} characters; the reference belongs in docs/"
    assert "docs/cli.md" in text and "docs/architecture.md" in text


def test_ci_runs_the_readme_test_command() -> None:
    """The quick start is two commands; the second is the test command, and .ci/run runs exactly it."""
    quick = README.read_text(encoding="utf-8").split("## Quick start", 1)[1]
    block = re.search(r"^```bash\n(.*?)^```", quick, re.MULTILINE | re.DOTALL)
    assert block, "the quick start has no bash block"
    commands = [line for line in block.group(1).splitlines() if line.strip()]
    assert len(commands) == 2, commands
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert commands[1] in ci, f".ci/run does not run the README's test command {commands[1]!r}"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(REPO).as_posix())
def test_every_runner_path_a_page_names_exists(page: Path) -> None:
    missing = []
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if PENDING in line:
            continue
        for match in RUNNER_PATH.finditer(line):
            path = match.group(0)
            # `runner/report/<new>.py` is a placeholder; "`runner/publish/gitlab.py` (new)" a file a change creates.
            if "<" in path or line[match.end():].startswith("` (new)"):
                continue
            if not (REPO / path).exists():
                missing.append(f"{page.name}:{number}: {path}")
    assert not missing, "paths that do not exist:\n" + "\n".join(missing)


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(REPO).as_posix())
def test_every_relative_link_reaches_a_file_and_a_heading(page: Path) -> None:
    broken = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading #{anchor} in {file.relative_to(REPO)}")
    assert not broken, f"{page.relative_to(REPO)}:\n" + "\n".join(broken)


def test_the_readme_links_every_page_of_docs() -> None:
    linked = {(REPO / target.partition("#")[0]).resolve() for target in links(README)}
    unlinked = [page.name for page in PAGES[1:] if page.resolve() not in linked]
    assert not unlinked, f"pages of docs/ the README does not link: {unlinked}"


def test_slug_matches_github() -> None:
    assert slug("`skill-evals run --container`") == "skill-evals-run---container"
    assert slug("Verdicts (semantics §2–§4)") == "verdicts-semantics-24"
    assert slug("Settings: `.skill-evals.toml`") == "settings-skill-evalstoml"
    assert slug("`skill-evals calibrate PROBE... | --all | --status`") == "skill-evals-calibrate-probe----all----status"
