"""The agent CLIs the host tests run, as installed by `skill-evals hosts install` (.ci/run installs every one)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runner.core.errors import UsageError
from runner.hosts import agent_install


def require_cli(host: str) -> Path:
    """The host's installed CLI. Outside CI a missing CLI skips the test with the command that installs it; under
    CI (CI=true, where .ci/run installs them all) it fails: a host test must never pass by not running."""
    try:
        return agent_install.locate(host)
    except UsageError as exc:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI must run the {host} host's tests: {exc}")
        pytest.skip(str(exc))
