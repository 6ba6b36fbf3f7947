"""The Docker daemon and the runner image, for the tests that use them (container, sandbox).

Locally, without a daemon or the base image, those tests are SKIPPED with the reason; under CI they FAIL,
because .ci/run installs docker.io, starts dockerd and builds the base image (registry images cannot be
pulled here).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import docker
import docker.errors
import pytest
import requests.exceptions

from runner.container.launch import ensure_image
from tests.conftest import REPO

BASE_IMAGE = os.environ.get("SKILL_EVALS_BASE_IMAGE") or "skill-evals-base:local"
TAG = "skill-evals:test"


def unavailable(what: str, reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the {what} tests: {reason} (.ci/run starts dockerd and builds {BASE_IMAGE})")
    pytest.skip(f"{reason}; .ci/run installs docker.io, starts dockerd and builds {BASE_IMAGE}")


def daemon(what: str) -> Iterator[docker.DockerClient]:
    """A client of the local daemon (a module fixture's body: ``yield from daemon("container")``)."""
    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as exc:
        unavailable(what, f"no Docker daemon is reachable ({exc.__class__.__name__}: {exc})")
    yield client
    client.close()


def runner_image(client: docker.DockerClient, what: str) -> str:
    """The runner image built from this checkout's Dockerfile on the local base image (cached by the daemon)."""
    try:
        client.images.get(BASE_IMAGE)
    except docker.errors.ImageNotFound:
        unavailable(what, f"the local base image {BASE_IMAGE} is missing")
    return ensure_image(client, REPO, BASE_IMAGE, TAG)
