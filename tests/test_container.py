"""runner.container against a real Docker daemon (no mocks): the image from the repository's Dockerfile on the
local debootstrap base (skill-evals-base:local, built by .ci/run), and `skill-evals run` inside it against the
fake Messages API on 127.0.0.1 (host network, so the container reaches it).

Without a reachable daemon these tests are skipped, except under CI, where that is a failure.
"""

from __future__ import annotations

import json
import os
from importlib.metadata import version
from pathlib import Path

import docker
import docker.errors
import pytest
import requests.exceptions
from jsonschema import Draft202012Validator

from runner import container as ctr
from runner.corpus import load_library
from runner.settings import Settings
from tests.conftest import EXAMPLE, REPO
from tests.fake_anthropic import FakeAnthropic, hang, skill, text


BASE_IMAGE = "skill-evals-base:local"
TAG = "skill-evals:test"
KEY = "sk-ant-container-marker-7c41e0"
TRIAGE = "test-report-triage"
NIGHTLY = f"{TRIAGE}/evals/positive-nightly-summary-with-skip"
LIBRARY_IN_CONTAINER = f"{ctr.REPO_MOUNT}/{EXAMPLE.relative_to(REPO).as_posix()}"


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the container tests: {reason} (.ci/run starts dockerd and builds {BASE_IMAGE})")
    pytest.skip(f"{reason}; .ci/run installs docker.io, starts dockerd and builds {BASE_IMAGE}")


@pytest.fixture(scope="module")
def client():
    try:
        c = docker.from_env(timeout=120)
        c.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as exc:
        _unavailable(f"no Docker daemon is reachable ({exc.__class__.__name__}: {exc})")
    yield c
    c.close()


@pytest.fixture(scope="module")
def image(client) -> str:
    try:
        client.images.get(BASE_IMAGE)
    except docker.errors.ImageNotFound:
        _unavailable(f"the local base image {BASE_IMAGE} is missing")
    return ctr.ensure_image(client, REPO, BASE_IMAGE, TAG)


def prompt_key(uid: str) -> str:
    library, _ = load_library(EXAMPLE, Settings())
    return next(case.prompt for case in library.cases if case.uid == uid)[:60]


def results_of(run_dir: Path) -> dict:
    data = json.loads((run_dir / "results.json").read_text())
    schema = json.loads((REPO / "runner" / "schemas" / "results.schema.json").read_text())
    errors = list(Draft202012Validator(schema).iter_errors(data))
    assert not errors, errors[0].message
    return data


def no_key_anywhere(out: Path, outcome: ctr.ContainerOutcome) -> None:
    for path in out.rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(errors="replace"), f"the key leaked into {path}"
    assert KEY not in outcome.stdout and KEY not in outcome.stderr
    assert outcome.leaked_files == []


def run_one(client, image: str, fake: FakeAnthropic, out: Path, host: str, **kw) -> ctr.ContainerOutcome:
    env = ctr.container_env({"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": fake.url, "CI": "true"})
    args = ["run", "--library", LIBRARY_IN_CONTAINER, "--out", f"{ctr.OUT_MOUNT}/run", "--case", NIGHTLY,
            "--repeats", "1", "--host", host, "--timeout", "60"]
    return ctr.run_in_container(client, image, REPO, out, args, env, timeout_s=kw.pop("timeout_s", 300), **kw)


# --------------------------------------------------------------------------------------------------------------

def test_container_env_keeps_only_the_allowlist() -> None:
    host = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": "http://127.0.0.1:9", "SKILL_EVALS_DISABLED": "1",
            "CI": "true", "GITHUB_TOKEN": "ghp_marker", "AWS_SECRET_ACCESS_KEY": "aws-secret-marker",
            "AWS_ACCESS_KEY_ID": "AKIAMARKER", "HOME": "/root", "PATH": "/usr/bin", "ANTHROPIC_AUTH_TOKEN": "tok",
            "DOCKER_HOST": "unix:///var/run/docker.sock", "SSH_AUTH_SOCK": "/tmp/agent"}
    assert ctr.container_env(host) == {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
                                       "SKILL_EVALS_DISABLED": "1", "CI": "true"}
    # Empty values are not passed; settings the caller passes on purpose are.
    assert ctr.container_env({"CI": "", "GITHUB_TOKEN": "x"}, {"SKILL_EVALS_MODEL": "claude-haiku-4-5"}) == \
        {"SKILL_EVALS_MODEL": "claude-haiku-4-5"}
    with pytest.raises(ValueError):
        ctr.container_env({}, {"NOT A NAME": "x"})


def test_image_runs_version_as_non_root(client, image: str, tmp_path: Path) -> None:
    assert client.images.get(image).attrs["Config"]["User"] == ctr.IMAGE_USER
    outcome = ctr.run_in_container(client, image, REPO, tmp_path / "out", ["--version"], {}, timeout_s=120)
    assert outcome.exit_code == 0, outcome.logs
    assert f"version {version('skill-evals')}" in outcome.stdout
    assert outcome.user.split(":")[0] not in ("0", "root")
    # The image's own default user, whatever the caller: uid 10001, not root.
    uid = client.containers.run(image, entrypoint=["python3", "-c", "import os; print(os.getuid(), os.getgid())"],
                                remove=True, network_mode="none")
    assert uid.decode().split() == ["10001", "10001"]


def test_run_api_host_in_the_container(client, image: str, fake: FakeAnthropic, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # Secrets in the host environment do not get in: the env is built from it through the allowlist.
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_container_marker")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-container-marker")
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
    env = ctr.container_env(os.environ)
    assert "GITHUB_TOKEN" not in env and "AWS_SECRET_ACCESS_KEY" not in env
    fake.script(prompt_key(NIGHTLY), skill(TRIAGE), text("TEST REPORT TRIAGE — nightly\n[NOT PROVEN] api skipped"))
    out = tmp_path / "out"
    args = ["run", "--library", LIBRARY_IN_CONTAINER, "--out", f"{ctr.OUT_MOUNT}/run", "--case", NIGHTLY,
            "--repeats", "1", "--host", "api", "--timeout", "60"]
    outcome = ctr.run_in_container(client, image, REPO, out, args, env, timeout_s=300)
    assert outcome.exit_code == 0, outcome.logs
    results = results_of(out / "run")
    result = next(c for c in results["cases"] if c["uid"] == NIGHTLY)
    assert result["state"] == "PASS", result
    assert results["plan"]["host"] == "api"
    # The requests came from inside the container, with the key; the run folder is the host user's.
    assert any(KEY in (r.headers.get("x-api-key", ""), r.headers.get("authorization", "")[7:])
               for r in fake.message_requests)
    assert all(p.stat().st_uid == os.getuid() for p in [out, *out.rglob("*")])
    no_key_anywhere(out, outcome)
    for marker in ("ghp_container_marker", "aws-container-marker"):
        assert marker not in outcome.logs
        assert not any(marker in p.read_text(errors="replace") for p in out.rglob("*") if p.is_file())


def test_run_claude_code_host_in_the_container(client, image: str, fake: FakeAnthropic, tmp_path: Path) -> None:
    """One real Claude Code session: the CLI bundled in the image's claude-agent-sdk runs there."""
    fake.script(prompt_key(NIGHTLY), skill(TRIAGE), text("TEST REPORT TRIAGE — nightly\n[NOT PROVEN] api skipped"))
    out = tmp_path / "out"
    outcome = run_one(client, image, fake, out, "claude-code")
    assert outcome.exit_code == 0, outcome.logs
    results = results_of(out / "run")
    assert results["plan"]["host"] == "claude-code" and results["plan"]["versions"]["claude-code-cli"]
    result = next(c for c in results["cases"] if c["uid"] == NIGHTLY)
    assert result["state"] == "PASS" and result["activation"]["state"] == "PASS", result
    assert any(r.headers.get("user-agent", "").startswith("claude-cli/") for r in fake.message_requests)
    no_key_anywhere(out, outcome)


def test_as_an_arbitrary_uid(client, image: str, fake: FakeAnthropic, tmp_path: Path) -> None:
    """What a non-root host user gets: the container runs as that uid (no passwd entry in the image)."""
    fake.script(prompt_key(NIGHTLY), skill(TRIAGE), text("TEST REPORT TRIAGE — nightly"))
    out = tmp_path / "out"
    out.mkdir()
    if os.geteuid() == 0:
        os.chown(out, 23456, 23456)
    user = f"{out.stat().st_uid}:{out.stat().st_gid}" if os.geteuid() == 0 else None
    outcome = run_one(client, image, fake, out, "api", user=user)
    assert outcome.exit_code == 0, outcome.logs
    assert outcome.user == (user or f"{os.getuid()}:{os.getgid()}")
    assert {p.stat().st_uid for p in out.rglob("*")} == {out.stat().st_uid}
    results_of(out / "run")
    no_key_anywhere(out, outcome)


def test_the_repository_is_read_only(client, image: str, tmp_path: Path) -> None:
    probe = "container-write-probe"
    assert not (REPO / probe).exists()
    args = ["run", "--library", LIBRARY_IN_CONTAINER, "--out", f"{ctr.REPO_MOUNT}/{probe}", "--host", "api",
            "--skill", TRIAGE]
    outcome = ctr.run_in_container(client, image, REPO, tmp_path / "out", args, {"CI": "true"}, timeout_s=120)
    assert outcome.exit_code != 0
    assert "Read-only file system" in outcome.logs, outcome.logs
    assert not (REPO / probe).exists()


def test_the_key_is_scrubbed_from_the_logs(client, image: str, tmp_path: Path) -> None:
    # The CLI echoes the library path it cannot find: here that path holds the key.
    env = ctr.container_env({"ANTHROPIC_API_KEY": KEY})
    outcome = ctr.run_in_container(client, image, REPO, tmp_path / "out", ["validate", "--library", f"/repo/{KEY}"],
                                   env, timeout_s=120)
    assert outcome.exit_code == 2
    assert outcome.key_scrubbed and ctr.REDACTED in outcome.logs and KEY not in outcome.logs


def test_the_deadline_kills_the_container(client, image: str, fake: FakeAnthropic, tmp_path: Path) -> None:
    fake.script(prompt_key(NIGHTLY), hang(120))
    out = tmp_path / "out"
    outcome = run_one(client, image, fake, out, "api", timeout_s=8)
    assert outcome.timed_out and outcome.exit_code == ctr.TIMEOUT_EXIT
    assert not client.containers.list(all=True, filters={"ancestor": image}), "the container was not removed"
    assert all(p.stat().st_uid == os.getuid() for p in [out, *out.rglob("*")])
    assert KEY not in outcome.logs
