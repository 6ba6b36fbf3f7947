"""The jobs that published to one commit's check run: one check run per head SHA, and no job's result hidden.

Each job's result is a `Lane` recorded in a hidden line at the start of the check run's output.text; a publish
merges its own lane in:

- a lane is a job of a workflow (`GITHUB_WORKFLOW` / `GITHUB_JOB`) on a library; its entries from an earlier
  workflow run or run attempt are superseded (a re-run replaces the job's result, as GitHub's own checks do);
- entries of the same job in the same run attempt are siblings (the legs of a matrix): each is kept (without a
  run id, outside Actions, the job's entries are replaced);
- every other job's entries are kept.

The check run's conclusion is the worst of the lanes', so a job that passed never turns another job's FAIL into
a success. Not atomic: GitHub has no compare-and-set for a check run. Design notes: docs/design/publishing.md.
"""

from __future__ import annotations

import json
import re

from pydantic import BaseModel, ValidationError

from runner.publish.rules import Conclusion
from runner.report import markdown

TRAILER = "<!-- skill-evals-lanes v1 "
_TRAILER = re.compile(r"<!-- skill-evals-lanes v1 (\[.*?\]) -->")
RANK: dict[Conclusion, int] = {"success": 0, "neutral": 1, "failure": 2}
TITLE_CUT = 1_000  # characters of a combined title; each lane's own title is in the summary's table


class Lane(BaseModel):
    """One job's result on the check run. Holds no token: names, ids, a title and a conclusion."""

    job: str                   # "workflow / job": the lane
    run: str | None = None     # "run_id/attempt": which run of the job this is
    run_url: str | None = None
    library: str = ""          # the library's folder in the repository ("" at the root)
    conclusion: Conclusion
    title: str


def job_name(workflow: str | None, job: str | None) -> str:
    return f"{workflow or 'workflow ?'} / {job or 'job ?'}"


def read(text: str | None) -> list[Lane]:
    """The lanes a check run's output.text records; [] for a check run written before lanes (or not by us)."""
    found = _TRAILER.search(text or "")
    if found is None:
        return []
    try:
        items = json.loads(found.group(1))
        return [Lane.model_validate(item) for item in items] if isinstance(items, list) else []
    except (ValueError, ValidationError):
        return []


def trailer(lanes: list[Lane]) -> str:
    """The hidden line that records `lanes`; `<` and `>` are JSON escapes, so no name can close the comment."""
    data = json.dumps([lane.model_dump() for lane in lanes], separators=(",", ":"))
    data = data.replace("<", "\\u003c").replace(">", "\\u003e")
    return f"{TRAILER}{data} -->"


def merged(existing: list[Lane], mine: Lane) -> list[Lane]:
    """`existing` with `mine` added: the same job's entries for the same library from another run (or attempt) give
    way to it, and so do all of them when no run is known (outside Actions: nothing tells a sibling from a re-run).
    The library is part of a lane: re-running one leg of a matrix over libraries replaces that leg's entry only."""
    kept = [lane for lane in existing if (lane.job, lane.library) != (mine.job, mine.library)
            or (mine.run is not None and lane.run == mine.run)]
    return [*kept, mine]


def worst(lanes: list[Lane]) -> Conclusion:
    return max((lane.conclusion for lane in lanes), key=lambda c: RANK[c])


def title(lanes: list[Lane]) -> str:
    """The check run's title: the one lane's own, or every lane's, worst first."""
    if len(lanes) == 1:
        return lanes[0].title
    ordered = sorted(lanes, key=lambda lane: -RANK[lane.conclusion])
    text = f"{len(lanes)} jobs: " + "; ".join(f"{lane.job}: {lane.title}" for lane in ordered)
    return text if len(text) <= TITLE_CUT else text[: TITLE_CUT - 1] + "…"


def table(lanes: list[Lane], mine: Lane) -> str:
    """What goes above this job's report when other jobs published to the same check run ('' when none did)."""
    if len(lanes) < 2:
        return ""
    rows = ["| Job | Library | Conclusion | Result |", "| --- | --- | --- | --- |"]
    for lane in lanes:
        name = markdown.escape(lane.job) + (" (this job)" if lane is mine else "")
        if lane.run_url:
            name = f"[{name}]({lane.run_url})"
        rows.append(f"| {name} | {markdown.escape(lane.library) or '(root)'} | {lane.conclusion} | "
                    f"{markdown.escape(lane.title)} |")
    return "\n".join([f"**{len(lanes)} jobs published to this check run**; its conclusion is the worst of theirs "
                      f"({worst(lanes)}). The report below is this job's; each job's run has its own.", "",
                      *rows, "", ""])
