"""Making a host by name: `make_host` imports the host's module (its traits say which) and calls its `make`.

Callers make a host by name and then reach it only through runner.hosts.base.Host, never by testing which host it
is; what they know of a host without making it is its traits (runner.core.host_traits). Nothing here imports a host
module at import time: the CLI's `validate` must not pay for claude-agent-sdk.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from runner.core.host_traits import traits

if TYPE_CHECKING:  # types only: this module is imported where no host is made
    from collections.abc import Callable

    from runner.corpus.library import Library
    from runner.corpus.settings import Settings
    from runner.hosts.base import Host
    from runner.hosts.prices import PriceTable


# A version key a host records (Host.versions) -> the name a person knows that program by (runner.report.versions).
VERSION_LABELS: dict[str, str] = {"claude-code-cli": "claude-code", "copilot-cli": "copilot", "opencode-ai": "opencode",
                                  "codex-cli": "codex", "gemini-cli": "gemini"}


@dataclass(frozen=True)
class HostInputs:
    """What a factory may build a host from; the key is the host's own, never read from the environment."""

    library: Library
    settings: Settings
    prices: PriceTable
    api_key: str
    base_url: str | None
    # The run this host serves, whose lock this process holds (runner.execute.rundir.RunDir.claim), or None.
    run_folder: Path | None = None


def make_host(name: str, inputs: HostInputs) -> Host:
    """The host registered as `name`; ValueError for a name no host is registered as."""
    module = importlib.import_module(traits(name).module)
    make = cast("Callable[[HostInputs], Host]", module.make)
    return make(inputs)
