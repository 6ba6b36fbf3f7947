"""The host registry: one list of names, a factory for each, and no host module imported until a host is made."""

import importlib
import subprocess
import sys
import typing

import pytest

from runner.core.host_traits import HOST_NAMES, HOST_TRAITS, traits
from runner.corpus.settings import RunSettings
from runner.hosts import registry
from tests.conftest import EXAMPLE, cli_imports


def test_every_name_has_a_factory_and_the_settings_accept_it():
    assert tuple(HOST_TRAITS) == HOST_NAMES
    assert all(callable(getattr(importlib.import_module(traits(name).module), "make", None))
               for name in HOST_NAMES)
    assert typing.get_args(RunSettings.model_fields["host"].annotation) == HOST_NAMES


def test_an_unregistered_name_is_refused_before_anything_is_built():
    with pytest.raises(ValueError, match=f"no host is named 'replay'; the hosts are {', '.join(HOST_NAMES)}$"):
        registry.make_host("replay", None)  # type: ignore[arg-type]


def test_reading_the_names_imports_no_host():
    code = ("import sys; from runner.hosts import registry; registry.make_host; "
            "print(sorted(m for m in sys.modules if m.startswith(('claude_agent_sdk', 'anthropic', "
            "'runner.hosts.api', 'runner.hosts.claude_code'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize(("host", "loads_sdk"), [("claude-code", False), ("api", True)])
def test_a_claude_code_run_never_imports_the_anthropic_sdk(host: str, loads_sdk: bool, tmp_path, monkeypatch) -> None:
    # Importing the anthropic SDK is about a second of CPU at every start (BENCHMARKS.md section 8). The CLI makes a
    # claude-code session's requests, and the judge makes its client at its first call: a whole `run` (here with
    # the kill switch, so no session starts, a key so that the judge is made) needs none of it. The api host is the
    # control: the probe sees the SDK when a host needs it.
    monkeypatch.setenv("SKILL_EVALS_DISABLED", "1")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-real-key")
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    done = cli_imports(("anthropic", "claude_agent_sdk"), "run", "--library", str(EXAMPLE), "--host", host,
                       "--no-library-validator", "--out", str(tmp_path / "run"))
    assert done.stdout.splitlines()[-2] == "exit 0", done.stdout[-2000:] + done.stderr[-2000:]
    loaded = done.stdout.splitlines()[-1].split()[1:]
    assert ("anthropic" in loaded) is loads_sdk and ("claude_agent_sdk" in loaded) is not loads_sdk, loaded
