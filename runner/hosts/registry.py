"""The hosts a session can run on, by name: the one list every `--host` option offers and `[run] host` names.

Each name has its factory and its HostTraits here; callers read traits, never a host's name
(tests/test_host_traits.py). No host module is imported until its factory is called. A new host: its module, its
name in HostName, its entry in HOSTS, docs/hosts.md.

Design notes: docs/design/host-registry.md.
"""

from __future__ import annotations

import shutil
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, get_args

from runner.core.hostnames import HostName

if TYPE_CHECKING:  # types only: this module is imported where no host is made (settings, the CLI's choices)
    from runner.corpus.library import Library
    from runner.corpus.settings import Settings
    from runner.hosts.base import Host
    from runner.hosts.claude_code import ClaudeCodeHost
    from runner.hosts.prices import PriceTable

# The CLI offers HOST_NAMES; settings ([run] host) type their field with HostName (runner.core.hostnames).
HOST_NAMES: tuple[str, ...] = get_args(HostName)
# A version key a host records (Host.versions) -> the name a person knows that program by (runner.report.versions).
VERSION_LABELS: dict[str, str] = {"claude-code-cli": "claude-code"}

# How the census models the skill listing a host shows the model (runner.hosts.listing.estimate):
# - claude-code-cli: the CLI's own rule, the library's skills and then the CLI's own entries as measured
#   (runner/data/host_listing.json, whose `host` is this name);
# - name-order-fit: the library's invocable skills in name order, each line kept whole while it fits the budget.
ListingModel = Literal["claude-code-cli", "name-order-fit"]
# How the plan models a host's first request without a surface audit (runner.plan.cost.first_request):
# - claude-code-cli: the CLI's first request as the audit measured it once (runner.hosts.surface.KNOWN_REQUESTS,
#   keyed by this name) plus the listing;
# - api-prompt: the api host's own prompt and tools (runner.hosts.api) plus its listing.
# None: the listing alone; the host's own prompt and tools are not known.
RequestModel = Literal["claude-code-cli", "api-prompt"]
# Where Claude Code finds a project's skills: each session's workspace puts them there, and a Read of
# `<folder>/<name>/SKILL.md` loads one.
CLAUDE_SKILLS_FOLDER = ".claude/skills"


@dataclass(frozen=True)
class ActivationNames:
    """What the activation recogniser (runner.hosts.activation) reads a session's tool calls by."""

    skill_tool: str  # the tool whose `skill` input names the skill it loads
    read_tool: str  # the tool whose `file_path` input, a SKILL.md in skills_folder, loads that skill
    subagent_tools: tuple[str, ...]  # the tools whose `subagent_type` input starts that subagent
    skills_folder: str  # where the session finds the library's skills, relative to its project (posix)

    @property
    def skills_folder_parts(self) -> tuple[str, ...]:
        return tuple(part for part in self.skills_folder.split("/") if part)


CLAUDE_CODE_ACTIVATION = ActivationNames(skill_tool="Skill", read_tool="Read", subagent_tools=("Task", "Agent"),
                                         skills_folder=CLAUDE_SKILLS_FOLDER)

API_HOST_NOTE = ("api host: a direct Messages API approximation of Claude Code (same listing format and Skill "
                 "tool schema, not Claude Code's system prompt or tools); results are not a measurement of the "
                 "real host")


@dataclass(frozen=True)
class HostTraits:
    """What a caller may know of a host without making it; docs/hosts.md ("Traits") names where each is read."""

    # Its sessions are Claude Code's (the real CLI, or its first request sent directly): a session path and wall
    # apply, it can start subagents when allowed the tool, and the plan compares it with the other Claude Code hosts.
    runs_claude_code: bool
    # Set for a host that approximates another: recorded in the plan and the improve record, shown in reports.
    approximation: str | None
    listing_model: ListingModel
    request_model: RequestModel | None
    activation: ActivationNames
    # Its sessions may run through the Message Batches executor (runner.execute.batch): each model turn is a request
    # the runner sends itself. Only the api host's loop is batched (BatchApiHost), so only it may say True.
    batchable: bool = False
    # Before its session an attempt may send one request more (the first-turn host sends Claude Code's first
    # request itself, then hands the attempt to a whole session): the worst case counts one turn more.
    extra_first_request: bool = False


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


@dataclass(frozen=True)
class HostEntry:
    """A registered host: how it is made and what is known of it without making it."""

    factory: Callable[[HostInputs], Host]
    traits: HostTraits


# Every name of HOST_NAMES, and no other (tests/test_host_registry.py and tests/test_host_traits.py hold them to it).
HOSTS: dict[str, HostEntry] = {
    "claude-code": HostEntry(_claude_code, HostTraits(
        runs_claude_code=True, approximation=None, listing_model="claude-code-cli", request_model="claude-code-cli",
        activation=CLAUDE_CODE_ACTIVATION)),
    "api": HostEntry(_api, HostTraits(
        runs_claude_code=False, approximation=API_HOST_NOTE, listing_model="name-order-fit", request_model="api-prompt",
        activation=CLAUDE_CODE_ACTIVATION, batchable=True)),
    "first-turn": HostEntry(_first_turn, HostTraits(
        runs_claude_code=True, approximation=None, listing_model="claude-code-cli", request_model="claude-code-cli",
        activation=CLAUDE_CODE_ACTIVATION, extra_first_request=True)),
}
# The factories alone, read from HOSTS (make_host and traits read HOSTS itself).
FACTORIES: dict[str, Callable[[HostInputs], Host]] = {name: entry.factory for name, entry in HOSTS.items()}


def _entry(name: str) -> HostEntry:
    entry = HOSTS.get(name)
    if entry is None:
        raise ValueError(f"no host is named {name!r}; the hosts are {', '.join(HOSTS)}")
    return entry


def make_host(name: str, inputs: HostInputs) -> Host:
    """The host registered as `name`; ValueError for a name no host is registered as."""
    return _entry(name).factory(inputs)


def traits(name: str) -> HostTraits:
    """The traits of the host registered as `name`; ValueError for a name no host is registered as."""
    return _entry(name).traits
