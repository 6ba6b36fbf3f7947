"""Regenerate the review-mode, trend and routing-matrix screenshots under docs/images in headless Chromium (issues
19 and 34).

    python scripts/screenshots.py [WORK_DIR]

The pages are the tests' own: a real run against the fake Messages API (tests/test_review_mode.py), a history of
run folders (tests/test_trends.py) and the routing library's run (tests/routing_library.py, as
tests/test_routing_matrix.py runs it). Needs Chromium (`chromium`, `chromium-browser` or `google-chrome` on PATH).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from runner.testing.fake_anthropic import FakeAnthropic  # noqa: E402
from runner.testing.fake_judge import JUDGE_MATCH, verdicts  # noqa: E402
from tests import routing_library  # noqa: E402
from tests.browser import Browser  # noqa: E402
from tests.conftest import run_cli  # noqa: E402
from tests.helpers import skill_evals_run  # noqa: E402
from tests.test_review_mode import NIGHTLY, judged_run, page  # noqa: E402
from tests.test_trends import write_runs  # noqa: E402

IMAGES = ROOT / "docs" / "images"
SETTLE_S = 0.3  # let the layout settle after scrolling, before the capture


def review_mode(work: Path) -> None:
    """Two assertions agreed with, one disagreed with and a note being typed."""
    report = page(judged_run(work), work)
    browser = Browser(work / "profile-review", report.as_uri() + f"#review=1&case={NIGHTLY}", size=(1280, 1500))
    try:
        browser.wait_for("document.documentElement.getAttribute('data-ready') === '1'")
        browser.wait_for("document.querySelectorAll('.review-controls').length")
        for index, mark in ((0, "agree"), (1, "agree"), (2, "disagree")):
            browser.js(f"document.querySelectorAll('.review-controls')[{index}]"
                       f".querySelector('button.review-{mark}').click()")
        browser.js("document.querySelectorAll('.review-controls')[2].querySelector('.review-note').focus()")
        browser.call("Input.insertText", text="the skip is listed, but not why it does not cover the release")
        browser.js("document.querySelectorAll('ol.transcript').forEach(function(o){o.style.maxHeight='90px'});"
                   "document.getElementById('review').scrollIntoView({block:'start'})")
        time.sleep(SETTLE_S)
        browser.screenshot(IMAGES / "review-mode.png")
    finally:
        browser.close()


def section_screenshot(profile: Path, page: Path, section: str, image: Path, size: tuple[int, int]) -> None:
    """The report page once it is ready, scrolled to the element `section`, saved as `image`."""
    browser = Browser(profile, page.as_uri(), size=size)
    try:
        browser.wait_for("document.documentElement.getAttribute('data-ready') === '1'")
        browser.js(f"document.getElementById('{section}').scrollIntoView({{block:'start'}})")
        time.sleep(SETTLE_S)
        browser.screenshot(image)
    finally:
        browser.close()


def trends(work: Path) -> None:
    """The trend charts of a run with two earlier runs in its history folder."""
    history, current = write_runs(work / "trends")
    out = work / "trends.html"
    done = run_cli("report", str(current), "--history", str(history), "--format", "html", "--out", str(out))
    if done.returncode != 0:
        raise SystemExit(done.stdout + done.stderr)
    section_screenshot(work / "profile-trends", out, "trends", IMAGES / "trends.png", (1280, 900))


def routing_matrix(work: Path) -> None:
    """The routing section of the routing library's run: the heatmap, the worst confusions, the per-skill table."""
    library = routing_library.make(work / "routing-library")
    out = work / "routing-run"
    with FakeAnthropic() as fake:
        fake.script(JUDGE_MATCH, verdicts("PASS"))
        routing_library.script(fake)
        done = skill_evals_run(fake, out, "--host", "api", "--no-early-stop", library=library)
    if done.returncode != 0:
        raise SystemExit(done.stdout + done.stderr)
    page = work / "routing.html"
    done = run_cli("report", str(out), "--format", "html", "--out", str(page))
    if done.returncode != 0:
        raise SystemExit(done.stdout + done.stderr)
    section_screenshot(work / "profile-routing", page, "routing", IMAGES / "routing-matrix.png", (1280, 1000))


if __name__ == "__main__":
    work = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="skill-evals-shots-"))
    work.mkdir(parents=True, exist_ok=True)
    only = sys.argv[2:]  # e.g. `routing`: regenerate that screenshot only
    for name, make in (("review", review_mode), ("trends", trends), ("routing", routing_matrix)):
        if not only or name in only:
            make(work)
            print(f"wrote the {name} screenshot under {IMAGES}")
