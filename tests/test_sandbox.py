"""runner.container.sandbox against a real Docker daemon (no mocks): the library's validator is run in its throwaway container
and observes its own prison from inside (network, file system, environment, privileges, processes); its output and
exit status mean what they mean on the host; a timeout or a command that cannot start leaves no container behind.
And the CLI around it: a sandbox asked for without a daemon is a one-line usage error, and `run --untrusted-settings`
refuses settings that would pick a program to run beside the API key.

The image is the runner image built from this checkout on the local debootstrap base (skill-evals-base:local, built
by .ci/run, or SKILL_EVALS_BASE_IMAGE). Without a reachable daemon the daemon tests are skipped, except under CI,
where that is a failure.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from runner.container import sandbox as sandbox_mod
from runner.corpus.settings import Settings
from runner.floor import validate as validate_mod
from tests.conftest import EXAMPLE
from tests.dockerenv import daemon, runner_image

SECRETS = {"ANTHROPIC_API_KEY": "sk-ant-sandbox-marker-41d2", "GITHUB_TOKEN": "ghs-sandbox-marker-93aa",
           "ACTIONS_RUNTIME_TOKEN": "actions-sandbox-marker-77c0", "AWS_SECRET_ACCESS_KEY": "aws-sandbox-marker-1f5e",
           "RUNNER_TEMP": "/runner-temp-sandbox-marker", "GITHUB_ENV": "/github-env-sandbox-marker"}


@pytest.fixture(scope="module")
def client():
    yield from daemon("sandbox")


@pytest.fixture(scope="module")
def image(client) -> str:
    return runner_image(client, "sandbox")


@pytest.fixture
def sandbox(client, image) -> sandbox_mod.ContainerSandbox:
    return sandbox_mod.ContainerSandbox(client=client, image=image)


def library_with_validator(tmp_path: Path, script: str) -> Path:
    """A repository root whose default validator (scripts/validate-skills.py) is `script`."""
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    (root / "scripts" / "validate-skills.py").write_text(script, encoding="utf-8")
    (root / "README.md").write_text("a file the validator may read\n", encoding="utf-8")
    return root


def run_default(root: Path, execute: validate_mod.Executor, timeout_s: float = 120) -> list:
    validator = validate_mod.find_library_validator(root, Settings(), None)
    assert validator is not None
    return validate_mod.run_library_validator(root, validator, timeout_s, execute)


class Listener:
    """A TCP server on the host's 127.0.0.1 that counts connections (what a validator with a network could reach)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self.sock.close()


PROBE = r"""
import json, os, socket
from pathlib import Path

def attempt(action):
    try:
        action()
        return "ok"
    except OSError as exc:
        return exc.__class__.__name__

def connect(host, port):
    with socket.create_connection((host, port), timeout=3):
        pass

def write(path):
    Path(path).write_text("x")

status = Path("/proc/self/status").read_text()
field = lambda name: next((l.split(":", 1)[1].strip() for l in status.splitlines() if l.startswith(name + ":")), None)
limits = {}
for name in ("/sys/fs/cgroup/pids.max", "/sys/fs/cgroup/pids/pids.max",
             "/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
    if Path(name).exists():
        limits[name] = Path(name).read_text().strip()
report = {
    "uid": os.getuid(),
    "cap_eff": field("CapEff"),
    "no_new_privs": field("NoNewPrivs"),
    "env": dict(os.environ),
    "interfaces": sorted(os.listdir("/sys/class/net")),
    "host_port": attempt(lambda: connect("127.0.0.1", __PORT__)),
    "outside": attempt(lambda: connect("1.1.1.1", 53)),
    "write_repo": attempt(lambda: write("/repo/pwned")),
    "write_root": attempt(lambda: write("/pwned")),
    "write_venv": attempt(lambda: write("/opt/venv/bin/pwned")),
    "write_tmp": attempt(lambda: write("/tmp/scratch")),
    "read_repo": Path("/repo/README.md").read_text().strip(),
    "cwd": os.getcwd(),
    "docker_socket": Path("/var/run/docker.sock").exists() or Path("/run/docker.sock").exists(),
    "processes": len([p for p in os.listdir("/proc") if p.isdigit()]),
    "limits": limits,
}
print(json.dumps(report), flush=True)
"""


def test_the_validator_runs_without_network_secrets_or_write_access(tmp_path: Path, sandbox, client,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LANG", "C.UTF-8")
    listener = Listener()
    try:
        root = library_with_validator(tmp_path, PROBE.replace("__PORT__", str(listener.port)))
        findings = run_default(root, sandbox)
    finally:
        listener.close()
    assert [f.rule for f in findings] == ["library-validator-passed"], findings
    report = json.loads(findings[0].message.split("passed: ", 1)[1])
    # No network: only a loopback of its own; the host's 127.0.0.1 and the outside unreachable.
    assert report["interfaces"] == ["lo"] and listener.accepted == 0
    assert report["host_port"] != "ok" and report["outside"] != "ok"
    # Nothing of the host's environment but the locale: no secret, no runner or GitHub variable.
    env = report["env"]
    assert not [value for value in env.values() for secret in SECRETS.values() if secret in value]
    assert not [name for name in env if name.startswith(("ANTHROPIC_", "GITHUB_", "RUNNER_", "ACTIONS_", "AWS_"))]
    assert env["HOME"] == "/tmp" and env["LANG"] == "C.UTF-8"
    # Read-only everywhere but its tmpfs; the repository readable at /repo, its working directory.
    assert report["write_repo"] != "ok" and report["write_root"] != "ok" and report["write_venv"] != "ok"
    assert report["write_tmp"] == "ok"
    assert report["read_repo"] == "a file the validator may read" and report["cwd"] == "/repo"
    assert not (root / "pwned").exists()
    # Unprivileged: not root, no capability, no way to gain privileges; no Docker socket; no host process.
    assert report["uid"] != 0 and int(report["cap_eff"], 16) == 0 and report["no_new_privs"] == "1"
    assert report["docker_socket"] is False
    assert report["processes"] < 10
    pids = [v for k, v in report["limits"].items() if "pids" in k]
    assert pids == [str(sandbox_mod.PIDS_LIMIT)], report["limits"]
    assert not client.containers.list(all=True, filters={"id": sandbox.started})


OUTPUT = r"""
import sys
print("first line on stdout", flush=True)
print("ERROR skills/a/SKILL.md: a problem on stderr", file=sys.stderr, flush=True)
print("last line", flush=True)
sys.exit(__CODE__)
"""


@pytest.mark.parametrize("code", [0, 3])
def test_output_and_exit_status_mean_what_they_mean_on_the_host(tmp_path: Path, sandbox, code: int) -> None:
    root = library_with_validator(tmp_path, OUTPUT.replace("__CODE__", str(code)))
    contained = run_default(root, sandbox)
    on_host = run_default(root, validate_mod.run_on_host)
    assert [f.model_dump() for f in contained] == [f.model_dump() for f in on_host]
    if code:
        assert contained[0].rule == "library-validator" and "exit 3" in contained[0].message
        assert contained[0].detail.splitlines() == ["first line on stdout", "ERROR skills/a/SKILL.md: a problem on "
                                                    "stderr", "last line"]
    else:
        assert contained[0].message.endswith("passed: last line")


def test_a_validator_past_its_time_is_stopped_and_removed(tmp_path: Path, sandbox, client) -> None:
    root = library_with_validator(tmp_path, "import time\ntime.sleep(600)\n")
    findings = run_default(root, sandbox, timeout_s=2)
    assert [(f.rule, f.message) for f in findings] == [
        ("library-validator", "the library's validator `scripts/validate-skills.py` did not finish in 2 s")]
    assert len(sandbox.started) == 1
    assert not client.containers.list(all=True, filters={"id": sandbox.started})


def test_a_command_that_cannot_start_is_a_finding_and_leaves_nothing(tmp_path: Path, sandbox, client) -> None:
    root = library_with_validator(tmp_path, "")
    validator = validate_mod.find_library_validator(root, Settings(), "no-such-validator --check")
    assert validator is not None
    findings = validate_mod.run_library_validator(root, validator, 60, sandbox)
    assert [f.rule for f in findings] == ["library-validator"]
    assert "`no-such-validator --check` could not start" in findings[0].message
    assert "no-such-validator" in findings[0].message.split("could not start:", 1)[1]
    assert not client.containers.list(all=True, filters={"id": sandbox.started})


def test_validate_runs_the_validator_in_the_sandbox(image: str, tmp_path: Path) -> None:
    """The CLI with --validator-sandbox container (SKILL_EVALS_IMAGE: the image built above), as a process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKILL_EVALS_")} | {"SKILL_EVALS_IMAGE": image}
    done = subprocess.run([sys.executable, "-m", "runner", "validate", "--library", str(EXAMPLE), "--format", "json",
                           "--validator-sandbox", "container"], capture_output=True, text=True, env=env, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr
    passed = [f for f in json.loads(done.stdout)["findings"] if f["rule"] == "library-validator-passed"]
    assert [f["message"] for f in passed] == ["the library's own validator passed: OK: 5 skill(s) valid, 0 warning(s)"]


# ---- without a daemon, and the settings' executables ------------------------------------------------------

def test_a_sandbox_without_a_daemon_is_a_one_line_usage_error(tmp_path: Path) -> None:
    env = os.environ | {"DOCKER_HOST": f"unix://{tmp_path}/no-daemon.sock"}
    done = subprocess.run([sys.executable, "-m", "runner", "validate", "--library", str(EXAMPLE),
                           "--validator-sandbox", "container"], capture_output=True, text=True, env=env, timeout=120,
                          check=False)
    assert done.returncode == 2
    assert done.stdout == "" and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("skill-evals: --validator-sandbox container: no Docker daemon")
    assert "--validator-sandbox none" in lines[0] and "trust" in lines[0]


def test_untrusted_settings_refuse_a_cli_path(tmp_path: Path) -> None:
    """`run --untrusted-settings` (what the action passes): a repository's [run] cli_path would be executed with
    the API key; it is refused before anything starts."""
    import shutil

    library = tmp_path / "library"
    shutil.copytree(EXAMPLE, library, symlinks=True)
    marker = tmp_path / "executed"
    evil = library / "evil.sh"
    evil.write_text(f"#!/bin/sh\nenv > {marker}\n", encoding="utf-8")
    evil.chmod(0o755)
    (library / ".skill-evals.toml").write_text('[run]\ncli_path = "evil.sh"\n', encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SKILL_EVALS_", "ANTHROPIC_"))}
    env |= {"ANTHROPIC_API_KEY": SECRETS["ANTHROPIC_API_KEY"], "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}
    done = subprocess.run([sys.executable, "-m", "runner", "run", "--library", str(library), "--out",
                           str(tmp_path / "run"), "--no-library-validator", "--untrusted-settings"],
                          capture_output=True, text=True, env=env, cwd=library, timeout=300, check=False)
    assert done.returncode == 2, done.stdout + done.stderr
    assert '[run] cli_path = "evil.sh"' in done.stderr and "Traceback" not in done.stderr
    assert not marker.exists() and not (tmp_path / "run" / "results.json").exists()
    assert SECRETS["ANTHROPIC_API_KEY"] not in done.stdout + done.stderr
