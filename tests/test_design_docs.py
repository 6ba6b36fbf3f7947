"""Design history lives in docs/design/, not in the module docstrings, and the two stay linked.

A module docstring says what the module is for and the contract it keeps; what was measured, what was rejected
and which issue asked for it is in docs/design/, reached by the "Design notes: docs/design/<file>.md." pointer a
docstring ends with. So: no "issue N" in runner/ (an issue number says nothing to a reader of the code), no module
docstring over DOCSTRING_WORDS words outside runner/testing/ (the fakes' docstrings are their manual), every page
of docs/design/ indexed by its README, every pointer reaching a page, and every link and runner/ path on those
pages true. Static reads only: no import of the runner, no subprocess.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.test_docs import PENDING, RUNNER_PATH, anchors, links

RUNNER = REPO / "runner"
DESIGN = REPO / "docs" / "design"
DESIGN_PAGES = sorted(DESIGN.glob("*.md"))
DOCSTRING_WORDS = 200
ISSUE_REFERENCE = re.compile(r"\b[Ii]ssue #?\d+")
POINTER = re.compile(r"docs/design/[\w.-]+\.md")
def modules() -> list[Path]:
    return sorted(RUNNER.rglob("*.py"))


def name(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def docstring_words(path: Path) -> int:
    text = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    return len(text.split()) if text else 0


def issue_references(path: Path) -> list[str]:
    return [f"{name(path)}:{number}: {match.group(0)}"
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            for match in ISSUE_REFERENCE.finditer(line)]


def test_no_issue_reference_in_the_runner() -> None:
    found = [hit for path in modules() for hit in issue_references(path)]
    assert not found, "say what the thing is, not which issue asked for it (docs/design/ may name it):\n" + "\n".join(
        found)


def test_no_long_module_docstring_outside_the_fakes() -> None:
    long = [f"{name(path)}: {words} words" for path in modules()
            if path.relative_to(RUNNER).parts[0] != "testing"
            and (words := docstring_words(path)) > DOCSTRING_WORDS]
    assert not long, f"module docstrings over {DOCSTRING_WORDS} words (move the history to docs/design/):\n" + "\n".join(
        long)


def test_every_design_pointer_reaches_a_page() -> None:
    missing = [f"{name(path)}: {pointer}" for path in modules()
               for pointer in POINTER.findall(path.read_text(encoding="utf-8")) if not (REPO / pointer).is_file()]
    assert not missing, "pointers to design pages that do not exist:\n" + "\n".join(missing)


def test_the_design_readme_indexes_every_page() -> None:
    readme = DESIGN / "README.md"
    linked = {(DESIGN / target.partition("#")[0]).resolve() for target in links(readme)}
    unindexed = [page.name for page in DESIGN_PAGES if page != readme and page.resolve() not in linked]
    assert not unindexed, f"pages of docs/design/ its README does not index: {unindexed}"


@pytest.mark.parametrize("page", DESIGN_PAGES, ids=lambda page: page.name)
def test_a_design_page_names_only_true_paths_and_links(page: Path) -> None:
    wrong = []
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if PENDING in line:
            continue
        wrong += [f"{page.name}:{number}: {match.group(0)}" for match in RUNNER_PATH.finditer(line)
                  if "<" not in match.group(0) and not (REPO / match.group(0)).exists()]
    for target in links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists() or (anchor and file.suffix == ".md" and anchor not in anchors(file)):
            wrong.append(f"{page.name}: link {target}")
    assert not wrong, "\n".join(wrong)
