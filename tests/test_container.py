"""runner.container.launch against a real Docker daemon (no mocks): the image from the repository's Dockerfile on the
local debootstrap base (skill-evals-base:local, built by .ci/run), and `skill-evals run` inside it against the
fake Messages API on the host's 127.0.0.1 — which the container cannot reach: it has no network, and the API is
reached only through runner.container.apiproxy on the host, which holds the real key (the container gets a placeholder).

Without a reachable daemon these tests are skipped, except under CI, where that is a failure.
"""

from __future__ import annotations

import ipaddress
import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from importlib.metadata import version
from pathlib import Path

import docker
import docker.errors
import pytest

from runner.container import launch as ctr
from runner.corpus.loader import load_library
from runner.corpus.settings import Settings
from runner.plan.plan import Plan
from runner.testing.fake_anthropic import FakeAnthropic, Recorded, hang, skill, text, tool
from tests.conftest import EXAMPLE, REPO, cli
from tests.dockerenv import BASE_IMAGE, daemon, runner_image
from tests.helpers import results_of

KEY = "sk-ant-container-marker-7c41e0"
TRIAGE = "test-report-triage"
NIGHTLY = f"{TRIAGE}/evals/positive-nightly-summary-with-skip"
LIBRARY_IN_CONTAINER = f"{ctr.REPO_MOUNT}/{EXAMPLE.relative_to(REPO).as_posix()}"


@pytest.fixture(scope="module")
def client():
    yield from daemon("container")


@pytest.fixture(scope="module")
def image(client) -> str:
    return runner_image(client, "container")


def prompt_key(uid: str) -> str:
    library, _ = load_library(EXAMPLE, Settings())
    return next(case.prompt for case in library.cases if case.uid == uid)[:60]


def no_key_anywhere(out: Path, outcome: ctr.ContainerOutcome) -> None:
    for path in out.rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(errors="replace"), f"the key leaked into {path}"
    assert KEY not in outcome.stdout and KEY not in outcome.stderr
    assert outcome.leaked_files == []


def key_of(recorded: Recorded) -> str:
    """The key a request reached the API with (the CLI's x-api-key, or the SDK's bearer token)."""
    return recorded.headers.get("x-api-key") or recorded.headers.get("authorization", "").removeprefix("Bearer ")


def only_the_real_key(fake: FakeAnthropic) -> None:
    """Every request reached the fake with the REAL key: the proxy put it there (the container never had it)."""
    assert fake.requests and all(key_of(r) == KEY for r in fake.requests), [key_of(r) for r in fake.requests]


def removed(client, outcome: ctr.ContainerOutcome) -> bool:
    try:
        client.containers.get(outcome.container_id)
    except docker.errors.NotFound:
        return True
    return False


def run_one(client, image: str, fake: FakeAnthropic, out: Path, host: str, **kw) -> ctr.ContainerOutcome:
    env = ctr.container_env({"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": fake.url, "CI": "true"})
    args = ["run", "--library", LIBRARY_IN_CONTAINER, "--out", f"{ctr.OUT_MOUNT}/run", "--case", NIGHTLY,
            "--repeats", "1", "--host", host, "--timeout", "60"]
    return ctr.run_in_container(client, image, REPO, out, args, env, deadline=kw.pop("deadline", 300), **kw)


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
    outcome = ctr.run_in_container(client, image, REPO, tmp_path / "out", ["--version"], {}, deadline=120)
    assert outcome.exit_code == 0, outcome.logs
    assert f"version {version('skill-evals')}" in outcome.stdout
    assert outcome.user.split(":")[0] not in ("0", "root")
    # The image's own default user, whatever the caller: uid 10001, not root.
    uid = client.containers.run(image, entrypoint=["python3", "-c", "import os; print(os.getuid(), os.getgid())"],
                                remove=True, network_mode="none")
    assert uid.decode().split() == ["10001", "10001"]


def test_the_repository_cannot_replace_the_runner(client, image: str, tmp_path: Path) -> None:
    """The repository is the working directory: a `runner` package in it must not be what the entry point runs."""
    repo = tmp_path / "repo"
    (repo / "runner").mkdir(parents=True)
    (repo / "runner" / "__init__.py").write_text("")
    (repo / "runner" / "cli").mkdir()
    (repo / "runner" / "cli" / "__init__.py").write_text("print('HIJACKED')\n")
    (repo / "runner" / "cli" / "entrypoint.py").write_text("print('HIJACKED')\n")
    assert client.images.get(image).attrs["Config"]["Entrypoint"] == ["/opt/venv/bin/python3", "-P", "-m",
                                                                      "runner.cli.entrypoint"]
    outcome = ctr.run_in_container(client, image, repo, tmp_path / "out", ["--version"], {}, deadline=120)
    assert outcome.exit_code == 0 and "HIJACKED" not in outcome.logs, outcome.logs
    assert f"version {version('skill-evals')}" in outcome.stdout


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
    outcome = ctr.run_in_container(client, image, REPO, out, args, env, deadline=300)
    assert outcome.exit_code == 0, outcome.logs
    results = results_of(out / "run")
    result = next(c for c in results["cases"] if c["uid"] == NIGHTLY)
    assert result["state"] == "PASS", result
    assert results["plan"]["host"] == "api"
    # The requests came from inside the container through the proxy, which put the real key on them; the run
    # folder is the host user's.
    assert fake.requests_for(prompt_key(NIGHTLY))
    only_the_real_key(fake)
    assert all(p.stat().st_uid == os.getuid() for p in [out, *out.rglob("*")])
    no_key_anywhere(out, outcome)
    record = json.loads((out / ctr.RECORD).read_text())
    assert record["hardening"]["network"] == "none" and record["exit_code"] == 0
    assert record["api_proxy"]["forwarded"] == len(fake.requests) and record["api_proxy"]["refused"] == []
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
    only_the_real_key(fake)
    no_key_anywhere(out, outcome)
    # The CLI needs nothing the proxy refuses (no telemetry, no /v1/models, ...).
    assert outcome.api_proxy is not None and outcome.api_proxy["refused_total"] == 0
    assert outcome.api_proxy["forwarded"] == len(fake.requests)


def test_run_an_agent_cli_host_in_the_container(client, image: str, fake: FakeAnthropic, tmp_path: Path) -> None:
    """Copilot CLI baked into the image (the Dockerfile's AGENT_CLIS, as `run --container --host copilot` builds
    it), reaching the fake only through its key proxy, the container's relay and the runner's API proxy."""
    agents = ctr.ensure_image(client, REPO, BASE_IMAGE, "skill-evals:test", agent_clis=("copilot",))
    fake.script(prompt_key(NIGHTLY), tool("skill", {"skill": TRIAGE}),
                text("TEST REPORT TRIAGE — nightly\n[NOT PROVEN] api skipped"))
    out = tmp_path / "out"
    outcome = run_one(client, agents, fake, out, "copilot")
    assert outcome.exit_code == 0, outcome.logs
    results = results_of(out / "run")
    assert results["plan"]["host"] == "copilot" and results["plan"]["versions"]["copilot-cli"] == "1.0.102"
    result = next(c for c in results["cases"] if c["uid"] == NIGHTLY)
    assert result["activation"]["state"] == "PASS" and result["activation_grade"] == "tool-event", result
    assert any(r.headers.get("user-agent", "").startswith("Anthropic/JS") for r in fake.message_requests)
    only_the_real_key(fake)
    no_key_anywhere(out, outcome)


def test_a_host_of_another_api_is_refused_in_the_container(tmp_path: Path) -> None:
    """The container's one way out carries the Messages API: a host that needs another API is a usage error before
    any image is built."""
    done = cli("run", "--library", str(EXAMPLE), "--container", "--host", "gemini", "--out", str(tmp_path / "o"))
    assert done.exit_code == 2 and "reaches its model through the gemini-api API" in done.output
    assert not (tmp_path / "o").exists()


def test_the_container_reads_a_cases_first_turn_as_the_host_does(image: str, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 32: no namespace can be made in the container (no capability, Docker's seccomp), so a case's sessions
    take turns at one path of the case's own there (per-case-path), and the cache-read share the fake accounts is
    within 5 points of the same run on the host (mount namespace here). Before, the container fell back to a path
    per session: 69 % against 84 % on the issue's library. The same runs as `python -m benchmarks.host_cache
    --variants after,container` (BENCHMARKS.md §6)."""
    from benchmarks.host_cache import run_once

    monkeypatch.setenv("SKILL_EVALS_IMAGE", image)
    skills = ("dependency-upgrade-reviewer",)
    on_host = run_once(REPO, EXAMPLE, "claude-code", "claude-sonnet-4-6", skills, tmp_path / "host", basis="")
    # (No settings file: with --container it must be inside the repository. The plan's cost basis is the host run
    # beside it then, which changes the plan's estimate, not a token the fake counts.)
    inside = run_once(REPO, EXAMPLE, "claude-code", "claude-sonnet-4-6", skills, tmp_path / "container",
                      container=True)
    plan = json.loads((tmp_path / "container" / "plan.json").read_text())
    assert plan["session_path"]["mode"] == "per-case-path", plan["session_path"]
    assert "mount-namespace: exit" in plan["session_path"]["detail"]  # why no namespace, said in the plan
    assert plan["estimate"]["repeats_read_first_turn"] is True
    assert "Session path: per-case-path" in (tmp_path / "container.stdout").read_text()  # the plan printed in there
    assert inside["errors"] == 0 and inside["session_path"] == {"per-case-path": inside["sessions"]}
    assert on_host["errors"] == 0 and inside["sessions"] >= 8
    if "per-session-path" in on_host["session_path"]:
        pytest.fail(f"the host ran without a namespace: {on_host['session_path']}")  # CI runs as root
    assert abs(on_host["cache_read_share"] - inside["cache_read_share"]) <= 0.05, (on_host, inside)


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
    outcome = ctr.run_in_container(client, image, REPO, tmp_path / "out", args, {"CI": "true"}, deadline=120)
    assert outcome.exit_code != 0
    assert "Read-only file system" in outcome.logs, outcome.logs
    assert not (REPO / probe).exists()


def test_the_key_is_scrubbed_from_the_logs(client, image: str, tmp_path: Path) -> None:
    # The CLI echoes the library path it cannot find: here that path holds the key.
    env = ctr.container_env({"ANTHROPIC_API_KEY": KEY})
    outcome = ctr.run_in_container(client, image, REPO, tmp_path / "out", ["validate", "--library", f"/repo/{KEY}"],
                                   env, deadline=120)
    assert outcome.exit_code == 2
    assert outcome.key_scrubbed and ctr.REDACTED in outcome.logs and KEY not in outcome.logs


def test_the_deadline_kills_the_container(client, image: str, fake: FakeAnthropic, tmp_path: Path) -> None:
    fake.script(prompt_key(NIGHTLY), hang(120))
    out = tmp_path / "out"
    outcome = run_one(client, image, fake, out, "api", deadline=8)
    assert outcome.timed_out and outcome.exit_code == ctr.TIMEOUT_EXIT
    assert outcome.deadline == ctr.Deadline(8, "fixed by the caller")
    assert removed(client, outcome), "the container was not removed"
    assert all(p.stat().st_uid == os.getuid() for p in [out, *out.rglob("*")])
    assert KEY not in outcome.logs
    assert json.loads((out / ctr.RECORD).read_text())["timed_out"] is True


# ---- the hardening ------------------------------------------------------------------------------------------

# Run inside the running container (docker exec: the same namespaces, user, limits and environment as the run).
# The key comes in two halves, so that this program's own command line does not hold it.
PROBE = r"""
import errno, json, os, resource, socket, sys
import anthropic, httpx2
key = sys.argv[1] + sys.argv[2]
out = {}
def attempt(fn):
    try:
        fn()
        return "ok"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
def touch(path):
    open(path, "w").close()
def connect(host, port):
    socket.create_connection((host, port), timeout=5).close()
out["write /"] = attempt(lambda: touch("/probe"))
out["write /opt/venv"] = attempt(lambda: touch("/opt/venv/probe"))
out["write /run/skill-evals"] = attempt(lambda: touch("/run/skill-evals/probe"))
out["write /tmp"] = attempt(lambda: touch("/tmp/probe"))
out["write HOME"] = attempt(lambda: touch(os.environ["HOME"] + "/probe"))
out["host 127.0.0.1 service"] = attempt(lambda: connect("127.0.0.1", int(sys.argv[3])))
out["fake API directly"] = attempt(lambda: connect("127.0.0.1", int(sys.argv[4])))
out["docker gateway"] = attempt(lambda: connect(sys.argv[5], int(sys.argv[3])))
out["interfaces"] = sorted(os.listdir("/sys/class/net"))
out["nofile"] = list(resource.getrlimit(resource.RLIMIT_NOFILE))
out["nproc"] = list(resource.getrlimit(resource.RLIMIT_NPROC))
out["uid"] = os.getuid()
http = httpx2.Client(transport=httpx2.HTTPTransport(uds=os.environ["SKILL_EVALS_API_SOCKET"]))
api = anthropic.Anthropic(api_key=os.environ["ANTHROPIC_API_KEY"], base_url="http://proxy", http_client=http,
                          max_retries=0)
reply = api.messages.create(model="claude-haiku-4-5", max_tokens=8,
                            messages=[{"role": "user", "content": "probe through the proxy"}])
out["through the proxy"] = reply.content[0].text
try:
    api.models.list()
    out["GET /v1/models"] = 200
except anthropic.APIStatusError as exc:
    out["GET /v1/models"] = exc.status_code
hits, runner_limits, cli_env = [], {}, []
for pid in [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]:
    for name in ("environ", "cmdline"):
        try:
            with open(f"/proc/{pid}/{name}", "rb") as handle:
                if key.encode() in handle.read():
                    hits.append(f"{pid}/{name}")
        except OSError:
            pass
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            cmdline = handle.read()
        if b"runner.cli.entrypoint" in cmdline:  # the run itself: its limits as the kernel holds them
            with open(f"/proc/{pid}/limits") as handle:
                for line in handle:
                    if line.startswith(("Max open files", "Max processes")):
                        runner_limits[line[:25].strip()] = line[25:].split()[:2]
        if cmdline.split(b"\0")[0].endswith(b"/_bundled/claude"):  # a Claude Code session
            with open(f"/proc/{pid}/environ", "rb") as handle:
                env = dict(item.split(b"=", 1) for item in handle.read().split(b"\0") if b"=" in item)
            cli_env.append({k.decode(): v.decode() for k, v in env.items()
                            if k in (b"ANTHROPIC_API_KEY", b"ANTHROPIC_BASE_URL")})
    except OSError:
        pass
out["key in /proc"] = hits
out["runner limits"] = runner_limits
out["CLI environments"] = cli_env
out["ANTHROPIC_API_KEY"] = os.environ.get("ANTHROPIC_API_KEY", "")
print(json.dumps(out))
"""


def wait_for(condition, what: str, bound_s: float = 120.0):
    """Poll ``condition`` until it returns something truthy (a bound against a hang, never a measurement)."""
    for _ in range(int(bound_s / 0.1)):
        found = condition()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"never happened: {what}")


# Docker's default bridge gateway when the daemon's configuration does not change it (its documented default).
DEFAULT_BRIDGE_GATEWAY = "172.17.0.1"


def bridge_gateway(network: dict) -> str:
    """The IPv4 address of the Docker host on the bridge network (`docker network inspect` attributes): its IPAM
    Gateway; else the first address of its IPv4 subnet (Docker 20.10 leaves Gateway out until set); else, for a
    bridge whose IPAM config has neither (or none at all), Docker's default gateway. The test needs one address of
    the host that a bridged container would reach; any will do to show that this container reaches none."""
    for config in (network.get("IPAM") or {}).get("Config") or []:
        if config.get("Gateway") and ipaddress.ip_address(config["Gateway"]).version == 4:
            return str(config["Gateway"])
        if config.get("Subnet") and ipaddress.ip_network(config["Subnet"], strict=False).version == 4:
            return str(ipaddress.ip_network(config["Subnet"], strict=False)[1])
    return DEFAULT_BRIDGE_GATEWAY


@pytest.mark.parametrize(("config", "expected"), [
    ([{"Subnet": "172.18.0.0/16", "Gateway": "172.18.0.1"}], "172.18.0.1"),
    ([{"Subnet": "10.9.0.0/24"}], "10.9.0.1"),
    ([{"Subnet": "fd00::/64", "Gateway": "fd00::1"}, {"Subnet": "10.9.0.0/24"}], "10.9.0.1"),
    ([], DEFAULT_BRIDGE_GATEWAY),
    (None, DEFAULT_BRIDGE_GATEWAY),
])
def test_the_bridge_gateway_is_found_without_a_gateway_key(config: list | None, expected: str) -> None:
    """A bridge without `Gateway` (or without any IPAM config) still gives the hardening test an address to try."""
    assert bridge_gateway({"IPAM": {"Config": config}}) == expected


def test_the_container_is_hardened(client, image: str, fake: FakeAnthropic, tmp_path: Path) -> None:
    """Each property, from `docker inspect` of the running container and from inside it."""
    fake.script(prompt_key(NIGHTLY), hang(300))  # the run's CLI session waits; the container stays up meanwhile
    fake.script("probe through the proxy", text("probe answered"))
    service = socket.create_server(("127.0.0.1", 0))  # a host-only service
    gateway = bridge_gateway(client.networks.get("bridge").attrs)
    label = {"skill-evals.test": secrets.token_hex(8)}
    out = tmp_path / "out"
    outcomes: list[ctr.ContainerOutcome] = []
    runner = threading.Thread(target=lambda: outcomes.append(run_one(client, image, fake, out, "claude-code",
                                                                     labels=label)))
    runner.start()
    running = None
    try:
        running = wait_for(lambda: client.containers.list(filters={"label": f"skill-evals.test={label['skill-evals.test']}"}),
                           "the container started")[0]
        wait_for(lambda: fake.requests_for(prompt_key(NIGHTLY)), "the run's session reached the API")
        attrs = running.attrs
        host_config, config = attrs["HostConfig"], attrs["Config"]
        assert host_config["NetworkMode"] == "none"
        assert host_config["ReadonlyRootfs"] is True
        assert set(host_config["Tmpfs"]) == {"/tmp", ctr.HOME}
        assert "exec" in host_config["Tmpfs"]["/tmp"].split(",") and "noexec" in host_config["Tmpfs"][ctr.HOME]
        assert {u["Name"]: (u["Soft"], u["Hard"]) for u in host_config["Ulimits"]} == \
            {"nofile": (ctr.NOFILE, ctr.NOFILE), "nproc": (ctr.NPROC, ctr.NPROC)}
        assert host_config["PidsLimit"] == ctr.PIDS_LIMIT and host_config["Memory"] == 4 * 1024 ** 3
        assert host_config["CapDrop"] == ["ALL"] and "no-new-privileges" in host_config["SecurityOpt"]
        assert host_config["Privileged"] is False
        mounts = {m["Destination"]: m["RW"] for m in attrs["Mounts"]}
        assert mounts == {ctr.REPO_MOUNT: False, ctr.OUT_MOUNT: True, ctr.API_MOUNT: False}
        env = dict(item.split("=", 1) for item in config["Env"])
        assert env["ANTHROPIC_API_KEY"].startswith("skill-evals-proxy-") and "ANTHROPIC_BASE_URL" not in env
        assert KEY not in json.dumps(attrs), "the key is in docker inspect"
        assert config["User"] not in ("", "0", "root") and not config["User"].startswith("0:")

        probe = running.exec_run(["/opt/venv/bin/python3", "-P", "-c", PROBE, KEY[:12], KEY[12:],
                                  str(service.getsockname()[1]), fake.url.rsplit(":", 1)[1], gateway])
        assert probe.exit_code == 0, probe.output.decode(errors="replace")
        inside = json.loads(probe.output.decode().splitlines()[-1])
        assert inside["write /"] == inside["write /opt/venv"] == inside["write /run/skill-evals"] == "EROFS"
        assert inside["write /tmp"] == inside["write HOME"] == "ok"
        assert inside["host 127.0.0.1 service"] == inside["fake API directly"] == "ECONNREFUSED"
        assert inside["docker gateway"] == "ENETUNREACH"
        assert inside["interfaces"] == ["lo"]
        assert inside["nofile"] == [ctr.NOFILE, ctr.NOFILE] and inside["nproc"] == [ctr.NPROC, ctr.NPROC]
        assert inside["uid"] != 0
        # Only the proxy reaches the API: the probe's request arrived there with the REAL key, not the placeholder.
        assert inside["through the proxy"] == "probe answered"
        (probed,) = fake.requests_for("probe through the proxy")
        assert key_of(probed) == KEY and inside["ANTHROPIC_API_KEY"] not in json.dumps(probed.headers)
        assert inside["GET /v1/models"] == 403
        assert inside["key in /proc"] == [], "the key is in a process's environment or command line"
        assert inside["runner limits"] == {"Max open files": [str(ctr.NOFILE)] * 2,
                                           "Max processes": [str(ctr.NPROC)] * 2}
        # The session waiting on the API right now: a Claude Code CLI with the placeholder and the relay's URL.
        (cli_env,) = inside["CLI environments"]
        assert cli_env["ANTHROPIC_API_KEY"] == env["ANTHROPIC_API_KEY"]
        assert cli_env["ANTHROPIC_BASE_URL"].startswith("http://127.0.0.1:")
    finally:
        if running is not None:
            running.kill()  # the run's session would wait for its timeout otherwise
        runner.join(timeout=120)
        service.close()
    (outcome,) = outcomes
    assert not outcome.timed_out and removed(client, outcome)
    assert outcome.api_proxy is not None and outcome.api_proxy["refused"] == ["403 GET /v1/models"]
    only_the_real_key(fake)
    no_key_anywhere(out, outcome)


# ---- the deadline -------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def example_plan() -> Plan:
    result = cli("plan", "--library", str(EXAMPLE), "--host", "api", "--no-surface", "--format", "json",
                 "--repeats", "3", "--concurrency", "2", "--timeout", "100")
    assert result.exit_code == 0, result.output
    return Plan.model_validate_json(result.output)


def test_the_plan_bounds_the_run(example_plan: Plan) -> None:
    plan = example_plan.model_copy(update={"unrun_all": None})  # planned without a key here
    sessions = plan.estimate.sessions_max
    assert sessions > 2 and plan.concurrency == 2 and plan.timeout_s == 100
    waves = -(-sessions // 2)
    unjudged = plan.model_copy(update={"estimate": plan.estimate.model_copy(update={"judge_calls": 0})})
    bound, why = ctr.plan_bound(unjudged, judge_timeout_s=60, judge_retries=2)
    assert bound == waves * (100 + plan.rate_limit_pause_s)
    assert why == (f"{sessions} session(s) at concurrency 2 = {waves} wave(s) x (100 s session + 0 s judge + "
                   f"{plan.rate_limit_pause_s:g} s rate-limit pause)")
    judged = plan.model_copy(update={"estimate": plan.estimate.model_copy(update={"judge_calls": 4})})
    assert ctr.plan_bound(judged, judge_timeout_s=60, judge_retries=2)[0] == waves * (100 + 180 + plan.rate_limit_pause_s)
    assert ctr.plan_bound(example_plan, 60, 2) == (0.0, "nothing to execute")  # unrun_all: no-credentials
    batch, why = ctr.plan_bound(judged.model_copy(update={"batch": True}), 60, 2)
    assert batch == 3 * (plan.max_turns + 1) * 86_400 and "24 h" in why


def test_plan_deadline_waits_for_this_runs_plan(example_plan: Plan, tmp_path: Path) -> None:
    plan_file = tmp_path / "plan.json"
    plan_file.write_text("an older run's plan")  # there before the run: not this run's
    deadline = ctr.PlanDeadline.for_run(Settings(), plan_file, resumed=False)
    assert deadline.planning.seconds == 300 + ctr.SURFACE_AUDIT_S + ctr.PLANNING_MARGIN_S
    assert deadline.from_plan(5.0) is None
    plan_file.unlink()
    assert deadline.from_plan(5.0) is None
    plan = example_plan.model_copy(update={"unrun_all": None})
    plan_file.write_text(plan.model_dump_json())
    found = deadline.from_plan(42.0)
    bound, _ = ctr.plan_bound(plan, Settings().judge.timeout_s, Settings().judge.max_retries)
    assert bound > 0
    assert found is not None and found.seconds == 42.0 + bound + max(ctr.RUN_MARGIN_S, bound / 10)
    assert found.basis.startswith("plan.json appeared after 42 s")
    resumed = ctr.PlanDeadline.for_run(Settings(), plan_file, resumed=True).from_plan(1.0)
    assert resumed is not None and resumed.seconds == 1.0 + deadline.planning.seconds + bound + \
        max(ctr.RUN_MARGIN_S, bound / 10)


def test_the_planning_deadline_applies_until_a_plan_appears(client, image: str, fake: FakeAnthropic,
                                                            tmp_path: Path) -> None:
    fake.script(prompt_key(NIGHTLY), hang(120))
    out = tmp_path / "out"
    # This plan.json is never written (the run writes out/run/plan.json): the planning deadline stays.
    never = ctr.PlanDeadline(ctr.Deadline(6, "planning (test)"), out / "elsewhere" / "plan.json", 60, 2)
    outcome = run_one(client, image, fake, out, "api", deadline=never)
    assert outcome.timed_out and outcome.deadline == ctr.Deadline(6, "planning (test)")
    assert removed(client, outcome)


def test_the_plan_sets_the_deadline(client, image: str, fake: FakeAnthropic, tmp_path: Path) -> None:
    fake.script(prompt_key(NIGHTLY), skill(TRIAGE), text("TEST REPORT TRIAGE — nightly"))
    out = tmp_path / "out"
    told: list[ctr.Deadline] = []
    policy = ctr.PlanDeadline.for_run(Settings(), out / "run" / "plan.json", resumed=False)
    outcome = run_one(client, image, fake, out, "api", deadline=policy, on_deadline=told.append)
    assert outcome.exit_code == 0 and not outcome.timed_out, outcome.logs
    assert outcome.deadline is not None and outcome.deadline != policy.planning
    assert "plan.json appeared after" in outcome.deadline.basis
    assert "1 session(s) at concurrency" in outcome.deadline.basis
    assert told in ([], [outcome.deadline])  # told as soon as it was seen, unless the run ended first
    record = json.loads((out / ctr.RECORD).read_text())
    assert record["deadline_basis"] == outcome.deadline.basis and record["timed_out"] is False


def test_run_container_from_the_cli(image: str, fake: FakeAnthropic, tmp_path: Path) -> None:
    """`skill-evals run --container` as a user runs it: the plan's deadline is set, said and recorded."""
    fake.script(prompt_key(NIGHTLY), skill(TRIAGE), text("TEST REPORT TRIAGE — nightly\n[NOT PROVEN] api skipped"))
    out = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "GITHUB_"))}
    env.update(ANTHROPIC_API_KEY=KEY, ANTHROPIC_BASE_URL=fake.url, SKILL_EVALS_BASE_IMAGE=BASE_IMAGE, CI="true")
    done = subprocess.run([sys.executable, "-m", "runner", "run", "--container", "--library", str(EXAMPLE),
                           "--case", NIGHTLY, "--repeats", "1", "--host", "api", "--timeout", "60", "--out", str(out)],
                          env=env, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Traceback" not in done.stderr and KEY not in done.stdout + done.stderr
    # The run inside printed /out/results.json; the user is told the folder on this machine (issue 16).
    assert f"Results: {out}/results.json" in done.stdout and "/out/" not in done.stdout, done.stdout[-2000:]
    record = json.loads((out / ctr.RECORD).read_text())
    assert record["deadline_basis"].startswith("plan.json appeared after")
    assert "1 session(s) at concurrency" in record["deadline_basis"]
    assert f"skill-evals: container deadline {record['deadline_s']:.0f} s ({record['deadline_basis']})" in done.stderr
    assert record["hardening"]["network"] == "none" and record["api_proxy"]["forwarded"] == len(fake.requests) > 0
    assert next(c for c in results_of(out)["cases"] if c["uid"] == NIGHTLY)["state"] == "PASS"
    only_the_real_key(fake)
    assert not any(KEY in p.read_text(errors="replace") for p in out.rglob("*") if p.is_file())


def test_a_given_image_is_used_and_nothing_is_built(image: str, tmp_path: Path) -> None:
    """SKILL_EVALS_IMAGE (a CI job that built or pulled the runner image once): `run --container` uses it as it is.
    The source it would build from has no Dockerfile, so a build could not even start; an unknown name is refused
    in one line."""
    no_source = tmp_path / "no-source"
    no_source.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "GITHUB_", "SKILL_EVALS_"))}
    env.update(SKILL_EVALS_SOURCE=str(no_source), SKILL_EVALS_DISABLED="1", CI="true")
    args = [sys.executable, "-m", "runner", "run", "--container", "--library", str(EXAMPLE), "--case", NIGHTLY,
            "--repeats", "1", "--host", "api"]
    done = subprocess.run([*args, "--out", str(tmp_path / "run")], env=env | {"SKILL_EVALS_IMAGE": image},
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (tmp_path / "run" / "results.json").is_file()
    missing = subprocess.run([*args, "--out", str(tmp_path / "run2")],
                             env=env | {"SKILL_EVALS_IMAGE": "skill-evals-no-such-image:none"},
                             capture_output=True, text=True, timeout=300, check=False)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert "SKILL_EVALS_IMAGE=skill-evals-no-such-image:none: no such image" in missing.stderr


def test_a_hostile_library_runs_nothing_and_reaches_nothing_in_the_container(client, image: str, fake: FakeAnthropic,
                                                                              tmp_path: Path) -> None:
    """Issue 28 in the action's default mode: the library of tests/test_session_wall.py (hooks of every event that
    would forge a PASS into /out/run/attempts.jsonl, inline shell, a subagent's hooks and MCP server, the repository's
    own settings and .mcp.json), plus a trusted Bash that runs the issue's attack: nothing ran, nothing was forged,
    and the attack was refused by the Landlock wall inside the container too."""
    from tests.hostile_session import attack_outcome, confined_attack, hostile_library, tool_results

    out, marks = tmp_path / "out", Path(ctr.OUT_MOUNT) / "marks"
    (out / "marks").mkdir(parents=True)
    library = hostile_library(tmp_path / "library", marks, "http://127.0.0.1:9", Path(ctr.OUT_MOUNT) / "run")
    (library / ".skill-evals.toml").write_text(
        '[run]\nallowed_tools = ["Skill", "Read", "Glob", "Grep", "Agent", "Bash"]\ndecide_early = false\n',
        encoding="utf-8")
    attack = confined_attack(Path(ctr.OUT_MOUNT) / "run", Path(ctr.REPO_MOUNT), marks)
    fake.script("Please use alpha", skill("alpha"), skill("beta"), tool("Bash", {"command": attack}),
                tool("Agent", {"description": "help", "prompt": "Helper task for alpha.", "subagent_type": "helper",
                               "run_in_background": False}), text("Alpha done."))
    fake.script("Helper task for alpha", text("Helper done."))
    env = ctr.container_env({"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": fake.url, "CI": "true"})
    args = ["run", "--library", ctr.REPO_MOUNT, "--out", f"{ctr.OUT_MOUNT}/run", "--repeats", "1", "--host",
            "claude-code", "--timeout", "60", "--no-library-validator"]
    if os.geteuid() == 0:
        os.chown(out / "marks", 10001, 10001)  # the image's user may write there: only a session may not
    outcome = ctr.run_in_container(client, image, library, out, args, env, deadline=300)
    assert outcome.exit_code in (0, 1), outcome.logs
    assert sorted(p.name for p in (out / "marks").iterdir()) == [], "a command of the library ran in the container"
    said = attack_outcome(tool_results(fake, "Please use alpha"))
    assert {"FORGE-DENIED", "ANSWER-KEY-DENIED", "OUTSIDE-DENIED", "INSIDE-OK"} <= said, said
    assert fake.requests_for("Helper task for alpha"), "the subagent (and its hooks) was never tried"
    lines = (out / "run" / "attempts.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["attempt_id"] for line in lines] == ["alpha/evals/fires#main#1"], lines
    results = results_of(out / "run")
    states = {c["uid"]: c["state"] for c in results["cases"]}
    assert states == {"alpha/evals/fires": "PASS", "alpha/evals/ships-settings": "UNRUN"}, states
    plan = json.loads((out / "run" / "plan.json").read_text(encoding="utf-8"))
    assert plan["session_wall"]["mode"] == "landlock", plan["session_wall"]
    only_the_real_key(fake)
    no_key_anywhere(out, outcome)
