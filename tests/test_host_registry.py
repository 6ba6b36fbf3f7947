"""The host registry: one list of names, a factory for each, and no host module imported until a host is made."""

import importlib
import subprocess
import sys
import typing

import pytest

from runner.core.host_traits import HOST_NAMES, HOST_TRAITS, traits
from runner.corpus.settings import RunSettings
from runner.hosts import registry


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
