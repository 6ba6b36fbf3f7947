"""The hosts by name, and what is known of each without making it: its traits.

Settings (`[run] host`) type their field with HostName and every `--host` option offers HOST_NAMES, so a new host is
offered everywhere at once. What a caller must know about a host without making one (is it Claude Code, may it be
batched, how its listing and first request are modelled, which tool calls are activations, which module makes it)
it reads from its HostTraits, never from its name: tests/test_host_traits.py fails on a host name written outside
runner/hosts/ and this module. This is pure data below every stage; making a host is runner.hosts.registry's.
Adding a host: its module in runner/hosts/ (a class that satisfies runner.hosts.base.Host and a `make`), its name
in HostName and its row in HOST_TRAITS here, and docs/hosts.md; `python scripts/regen_schemas.py` then offers it in
settings.schema.json.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

HostName = Literal["claude-code", "api", "first-turn", "opencode"]
HOST_NAMES: tuple[str, ...] = get_args(HostName)
# The host `[run] host` names when the settings name none: the real one.
DEFAULT_HOST: HostName = "claude-code"
# The host `route` (the library-wide routing sweep) runs on unless --host names another: one request per attempt for
# an activation-only case, Claude Code from the start for the others (runner.hosts.first_turn).
ROUTE_HOST: HostName = "first-turn"

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
# How a host lets the harness see that a skill was activated (issue 36), recorded with every attempt and shown
# beside every trigger, no_trigger, discrimination, refusal and routing verdict:
# - tool-event: the host's stream shows the model calling its skill tool (Claude Code's Skill, OpenCode's and
#   Copilot's `skill`, Gemini CLI's `activate_skill`), with the host's answer to it;
# - file-read: the host has no skill event; the only trace is the model reading a SKILL.md (Codex, Cursor). A
#   verdict from it is labelled as such: a read is not proof the skill's instructions were followed;
# - none: nothing the host shows tells an activation; activation cases are UNRUN host-cannot-observe-activation.
ActivationGrade = Literal["tool-event", "file-read", "none"]


@dataclass(frozen=True)
class ActivationNames:
    """What the activation recogniser (runner.hosts.activation) reads a session's tool calls by."""

    skill_tool: str  # the tool whose `skill_input` input names the skill it loads
    read_tool: str  # the tool whose `file_path` input, a SKILL.md in skills_folder, loads that skill
    subagent_tools: tuple[str, ...]  # the tools whose `subagent_type` input starts that subagent
    skills_folder: str  # where the session finds the library's skills, relative to its project (posix)
    skill_input: str = "skill"  # the skill tool's input that names the skill (OpenCode's and Gemini CLI's: `name`)

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
    # How its sessions show an activation (ActivationGrade above).
    activation_grade: ActivationGrade
    # The module that makes it (runner.hosts.<name>), whose `make(inputs: HostInputs) -> Host` builds the host
    # (runner.hosts.registry.make_host imports it only then, so reading traits imports no host).
    module: str
    # Its sessions may run through the Message Batches executor (runner.execute.batch): each model turn is a request
    # the runner sends itself. Only the api host's loop is batched (BatchApiHost), so only it may say True.
    batchable: bool = False
    # Before its session an attempt may send one request more (the first-turn host sends Claude Code's first
    # request itself, then hands the attempt to a whole session): the worst case counts one turn more.
    extra_first_request: bool = False


# Every name of HostName, and no other (tests/test_host_registry.py and tests/test_host_traits.py hold them to it).
HOST_TRAITS: dict[str, HostTraits] = {
    "claude-code": HostTraits(
        runs_claude_code=True, approximation=None, listing_model="claude-code-cli", request_model="claude-code-cli",
        activation=CLAUDE_CODE_ACTIVATION, activation_grade="tool-event", module="runner.hosts.claude_code"),
    "api": HostTraits(
        runs_claude_code=False, approximation=API_HOST_NOTE, listing_model="name-order-fit", request_model="api-prompt",
        activation=CLAUDE_CODE_ACTIVATION, activation_grade="tool-event", module="runner.hosts.api", batchable=True),
    "first-turn": HostTraits(
        runs_claude_code=True, approximation=None, listing_model="claude-code-cli", request_model="claude-code-cli",
        activation=CLAUDE_CODE_ACTIVATION, activation_grade="tool-event", module="runner.hosts.first_turn",
        extra_first_request=True),
    # OpenCode (npm opencode-ai): its `skill` tool names the skill in `name`; its read tool is `read`. The library
    # goes to `.agents/skills`, which it reads without a `.opencode/` folder (whose plugin install it would run).
    "opencode": HostTraits(
        runs_claude_code=False, approximation=None, listing_model="name-order-fit", request_model=None,
        activation=ActivationNames(skill_tool="skill", skill_input="name", read_tool="read", subagent_tools=(),
                                   skills_folder=".agents/skills"),
        activation_grade="tool-event", module="runner.hosts.opencode"),
}


def traits(name: str) -> HostTraits:
    """The traits of the host registered as `name`; ValueError for a name no host is registered as."""
    found = HOST_TRAITS.get(name)
    if found is None:
        raise ValueError(f"no host is named {name!r}; the hosts are {', '.join(HOST_TRAITS)}")
    return found
