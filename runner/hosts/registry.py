"""The hosts a session can run on, by name: the one list every `--host` option offers and `[run] host` names.

A host is chosen by name on the command line and in the settings; keeping the names here, beside the hosts,
means a new host is offered by every command that takes `--host` at once, never by some of them.

Each name has its factory here too (FACTORIES, make_host): callers make a host by name and then reach it only
through runner.hosts.base.Host, never by testing which host it is. Settings and the command line read
HostName and HOST_NAMES without making a host, so nothing here imports a host module at import time: a factory imports its
module when it is called (the CLI's `validate` must not pay for claude-agent-sdk). Adding a host is its module (a
class that satisfies Host), its name in HostName and its factory in FACTORIES below, and its docs
(docs/hosts.md); `python scripts/regen_schemas.py` then offers it in settings.schema.json.
"""

from __future__ import annotations

import shutil
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, get_args

from runner.core.hostnames import HostName

if TYPE_CHECKING:  # types only: this module is imported where no host is made (settings, the CLI's choices)
    from runner.corpus.library import Library
    from runner.corpus.settings import Settings
    from runner.hosts.base import Host
    from runner.hosts.claude_code import ClaudeCodeHost
    from runner.hosts.prices import PriceTable

# The CLI offers HOST_NAMES; settings ([run] host) type their field with HostName (runner.core.hostnames).
HOST_NAMES: tuple[str, ...] = get_args(HostName)


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


def _claude_code(inputs: HostInputs) -> Host:
    return _claude_code_host(inputs)


def _claude_code_host(inputs: HostInputs) -> ClaudeCodeHost:
    """A claude-code host keeps its session folders under the run folder's own session-folder parent, emptied
    first of what a killed process of the same run folder left (workspace.claim_run_parent) and removed when the
    host goes."""
    from runner.hosts.claude_code import ClaudeCodeHost
    from runner.hosts.workspace import LibraryFiles, claim_run_parent

    settings = inputs.settings
    files = LibraryFiles.of(inputs.library, settings.limits.max_file_bytes)
    parent = claim_run_parent(inputs.run_folder) if inputs.run_folder is not None else None
    host = ClaudeCodeHost(files, inputs.prices, inputs.api_key, inputs.base_url, settings.listing.budget_chars,
                          settings.run.allowed_tools, settings.run.cli_path, work_parent=parent,
                          max_retries=settings.run.host_max_retries, aliases=inputs.library.aliases(),
                          session_namespace=settings.run.session_namespace,
                          session_confinement=settings.run.session_confinement)
    if parent is not None:  # at exit too: a clean end leaves nothing behind, not even the empty folder
        weakref.finalize(host, shutil.rmtree, str(parent), True)
    return host


def _api(inputs: HostInputs) -> Host:
    from runner.hosts.api import ApiHost
    from runner.hosts.workspace import LibraryFiles

    settings = inputs.settings
    files = LibraryFiles.of(inputs.library, settings.limits.max_file_bytes)
    return ApiHost(inputs.library, files, inputs.prices, inputs.api_key, inputs.base_url,
                   settings.listing.budget_chars, settings.listing.max_description_chars,
                   max_retries=settings.run.host_max_retries)


def _first_turn(inputs: HostInputs) -> Host:
    """Claude Code's first request sent directly, around a real claude-code host (its hand-offs and the capture).
    Not the `replay` host (re-judging a run folder). A run folder whose capture was made with another CLI version
    than the installed one is refused (first_turn.FirstTurnCaptureError, a usage error)."""
    from runner.hosts.claude_code import cli_version
    from runner.hosts.first_turn import FirstTurnHost, load_capture

    real = _claude_code_host(inputs)
    saved = load_capture(inputs.run_folder, cli_version(real.cli)) if inputs.run_folder is not None else None
    run = inputs.settings.run
    return FirstTurnHost(real, inputs.library, inputs.api_key, inputs.base_url, max_retries=run.host_max_retries,
                         max_output_tokens=run.max_output_tokens, run_folder=inputs.run_folder, saved=saved)


# Every name of HOST_NAMES, and no other (tests/test_host_registry.py holds them to it).
FACTORIES: dict[str, Callable[[HostInputs], Host]] = {
    "claude-code": _claude_code,
    "api": _api,
    "first-turn": _first_turn,
}


def make_host(name: str, inputs: HostInputs) -> Host:
    """The host registered as `name`; ValueError for a name no host is registered as."""
    factory = FACTORIES.get(name)
    if factory is None:
        raise ValueError(f"no host is named {name!r}; the hosts are {', '.join(HOST_NAMES)}")
    return factory(inputs)
