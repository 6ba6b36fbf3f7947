"""The workflows (the project's own and the copyable examples in docs/workflows) and action.yml, as supply chain.

zizmor (pinned in the `test` extra) audits every one of them offline and must find nothing: a finding is
fixed, or ignored on its line with `# zizmor: ignore[audit]` and a comment saying why. Without zizmor the
audit is skipped, except under CI, where that is a failure. Beside it, what zizmor's default persona does not
insist on and this project does: no permission at workflow level (each job asks for what it uses), every
`uses:` of a third-party action pinned to a full commit SHA with its release in a comment, and pull-request
workflows in a concurrency group that cancels the run a new push supersedes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
ACTION = REPO / "action.yml"
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml")) + sorted((REPO / "docs" / "workflows").glob("*.yml"))
PINNED = re.compile(r"^\s*(?:-\s+)?uses:\s+[\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+\s*$")
PLACEHOLDER = "OWNER/skill-evals@v1"  # the examples' name for this action: the reader pins it (see their header)


def zizmor() -> str:
    found = shutil.which("zizmor", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    if not found:
        if os.environ.get("CI"):
            pytest.fail("CI must have zizmor (pip install -e '.[test]' installs the pinned version)")
        pytest.skip("zizmor is not installed here (pip install -e '.[test]'): the workflows are not audited")
    return found


def audit(*files: Path) -> list[dict]:
    done = subprocess.run([zizmor(), "--offline", "--no-progress", "--format", "json", *map(str, files)],
                          capture_output=True, text=True, timeout=300, check=False, cwd=REPO)
    assert done.returncode in (0, 11, 12, 13, 14), f"zizmor could not run ({done.returncode}):\n{done.stderr}"
    return json.loads(done.stdout or "[]")


def test_zizmor_finds_nothing_in_any_workflow_or_the_action() -> None:
    findings = audit(*WORKFLOWS, ACTION)
    shown = []
    for finding in findings:
        where = finding["locations"][0] if finding.get("locations") else {}
        path = next(iter((where.get("symbolic", {}).get("key", {}).get("Local") or {}).values()), "?")
        row = where.get("concrete", {}).get("location", {}).get("start_point", {}).get("row", -1) + 1
        shown.append(f"{finding['ident']}: {finding.get('desc')} at {path}:{row}")
    assert findings == [], "zizmor found:\n" + "\n".join(shown)


def test_zizmor_is_live(tmp_path: Path) -> None:
    """The audit above can fail: an unpinned action and a pasted expression are found."""
    bad = tmp_path / "bad.yml"
    bad.write_text("name: bad\non: pull_request\npermissions: {}\njobs:\n  x:\n    runs-on: ubuntu-latest\n"
                   "    steps:\n      - uses: actions/checkout@v4\n"
                   "      - run: echo \"${{ github.event.pull_request.title }}\"\n", encoding="utf-8")
    assert {"unpinned-uses", "template-injection"} <= {f["ident"] for f in audit(bad)}


def test_permissions_are_granted_per_job_and_never_at_workflow_level() -> None:
    for path in WORKFLOWS:
        workflow = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert workflow.get("permissions") == {}, f"{path.name}: `permissions: {{}}` at workflow level"
        for name, job in workflow["jobs"].items():
            assert isinstance(job.get("permissions"), dict) and job["permissions"], f"{path.name}:{name}"
            assert "write-all" not in json.dumps(job["permissions"]), f"{path.name}:{name}"
    pr = yaml.safe_load((REPO / "docs" / "workflows" / "pr-advisory.yml").read_text(encoding="utf-8"))
    assert pr["jobs"]["evals"]["permissions"] == {"contents": "read", "checks": "write", "pull-requests": "write"}


def test_every_action_is_pinned_to_a_commit_with_its_release_named() -> None:
    for path in [*WORKFLOWS, ACTION]:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not re.match(r"^\s*(?:-\s+)?uses:", line):
                continue
            target = line.split("uses:", 1)[1].split("#", 1)[0].strip()
            if target.startswith("./") or target.startswith(PLACEHOLDER):
                continue
            assert PINNED.match(line), f"{path.name}:{number}: {line.strip()}"


def test_pull_request_runs_cancel_the_run_they_supersede() -> None:
    for path in WORKFLOWS:
        workflow = yaml.safe_load(path.read_text(encoding="utf-8"))
        events = workflow.get(True) or workflow.get("on")  # YAML 1.1 reads a bare `on` key as True
        if "pull_request" not in (events if isinstance(events, (dict, list)) else [events]):
            continue
        concurrency = workflow.get("concurrency") or {}
        assert concurrency.get("cancel-in-progress") is True, path.name
        assert "github.event.pull_request.number" in concurrency.get("group", ""), path.name
        assert "github.workflow" in concurrency.get("group", ""), f"{path.name}: one group per workflow"


def test_the_runner_image_is_built_once_and_released_to_the_registry() -> None:
    ci = yaml.safe_load((REPO / ".github" / "workflows" / "ci.yml").read_text(encoding="utf-8"))
    build = next(s for s in ci["jobs"]["image"]["steps"] if "docker/build-push-action" in s.get("uses", ""))
    assert "type=gha" in build["with"]["cache-from"] and "type=gha" in build["with"]["cache-to"]
    example = ci["jobs"]["action-on-example"]
    assert example["needs"] == "image"
    assert any("docker load" in s.get("run", "") for s in example["steps"])
    release = yaml.safe_load((REPO / ".github" / "workflows" / "release.yml").read_text(encoding="utf-8"))
    assert list((release.get(True) or release.get("on"))) == ["push"]
    push = next(s for s in release["jobs"]["image"]["steps"] if "docker/build-push-action" in s.get("uses", ""))
    assert push["with"]["push"] is True and push["with"].get("no-cache") is True, "a release trusts no cache"
    assert release["jobs"]["image"]["permissions"] == {"contents": "read", "packages": "write"}
