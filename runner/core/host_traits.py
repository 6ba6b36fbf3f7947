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

HostName = Literal["claude-code", "api", "first-turn", "copilot", "gemini", "codex", "opencode"]
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
# The folder the agent CLIs share for a project's skills (agentskills.io): OpenCode, Codex, Gemini CLI and Copilot CLI
# read it.
AGENTS_SKILLS_FOLDER = ".agents/skills"
# How a host lets the harness see that a skill was activated, recorded with every attempt and shown
# beside every trigger, no_trigger, discrimination, refusal and routing verdict:
# - tool-event: the host's stream shows the model calling its skill tool (Claude Code's Skill, OpenCode's and
#   Copilot's `skill`, Gemini CLI's `activate_skill`), with the host's answer to it;
# - file-read: the host has no skill event; the only trace is the model reading a SKILL.md (Codex, Cursor). A
#   verdict from it is labelled as such: a read is not proof the skill's instructions were followed;
# - none: nothing the host shows tells an activation; activation cases are UNRUN host-cannot-observe-activation.
ActivationGrade = Literal["tool-event", "file-read", "none"]
# The API a host's model is reached through, and the variables its key and endpoint are read from (the judge always
# uses the Anthropic key): Claude Code, the api host, OpenCode and Copilot CLI speak the Messages API; Gemini CLI the
# Gemini API; Codex the OpenAI Responses API. A key is only ever given to a host of its own API.
ApiFamily = Literal["anthropic-messages", "gemini-api", "openai-responses"]
API_VARIABLES: dict[str, tuple[str, str]] = {
    "anthropic-messages": ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
    "gemini-api": ("GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL"),
    "openai-responses": ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
}


@dataclass(frozen=True)
class ActivationNames:
    """What the activation recogniser (runner.hosts.activation) reads a session's tool calls by."""

    skill_tool: str  # the tool whose `skill_input` input names the skill it loads
    read_tool: str  # the tool whose `file_path` input, a SKILL.md in skills_folder, loads that skill
    subagent_tools: tuple[str, ...]  # the tools whose `subagent_type` input starts that subagent
    skills_folder: str  # where the session finds the library's skills, relative to its project (posix)
    skill_input: str = "skill"  # the skill tool's input that names the skill (OpenCode's and Gemini CLI's: `name`)
    read_input: str = "file_path"  # the read tool's input that names the file (Copilot CLI's `view`: `path`)

    @property
    def skills_folder_parts(self) -> tuple[str, ...]:
        return tuple(part for part in self.skills_folder.split("/") if part)


CLAUDE_CODE_ACTIVATION = ActivationNames(skill_tool="Skill", read_tool="Read", subagent_tools=("Task", "Agent"),
                                         skills_folder=CLAUDE_SKILLS_FOLDER)
# Codex CLI has no skill tool: its listing tells the model to open a skill's SKILL.md, which it does with its shell
# tool (`exec_command {"cmd": ...}`); a project's skills are read from `.agents/skills` (not `.claude/skills`).
# runner.hosts.codex reads the command for the file (mechanism skill-md-read).
CODEX_ACTIVATION = ActivationNames(skill_tool="", read_tool="exec_command", subagent_tools=(),
                                   skills_folder=AGENTS_SKILLS_FOLDER)

# Gemini CLI (runner.hosts.gemini): `activate_skill {"name"}`, `read_file {"file_path"}`, project skills read from
# `.agents/skills` by default (measured on 0.61.0; `.gemini/skills` too, `.agents` wins a tie).
GEMINI_ACTIVATION = ActivationNames(skill_tool="activate_skill", read_tool="read_file", subagent_tools=(),
                                    skills_folder=AGENTS_SKILLS_FOLDER, skill_input="name")

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
    # The output bound of each of its model calls when the host fixes it whatever the run asks (Copilot CLI asks
    # 32,000 and refuses a lower provider maximum): the plan's worst case per session counts this, not
    # [run] max_output_tokens. None: the host bounds each call at the run's max_output_tokens.
    fixed_max_output_tokens: int | None = None
    # The API its model is reached through (ApiFamily above): whose key and endpoint the run gives it.
    api: ApiFamily = "anthropic-messages"
    # It keeps a skill marked `disable-model-invocation: true` from the model (Claude Code, Copilot CLI): a case that
    # needs the model to pick one on its own is UNRUN manual-only-target there. False: the host lists and loads such
    # a skill like any other (measured: Gemini CLI, Codex and OpenCode ignore the field), so those cases run.
    hides_manual_only: bool = True


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
    "copilot": HostTraits(
        runs_claude_code=False, approximation=None, listing_model="name-order-fit", request_model=None,
        activation=ActivationNames(skill_tool="skill", read_tool="view", read_input="path", subagent_tools=(),
                                   skills_folder=AGENTS_SKILLS_FOLDER),
        activation_grade="tool-event", module="runner.hosts.copilot", fixed_max_output_tokens=32_000),
    "gemini": HostTraits(
        runs_claude_code=False, approximation=None, listing_model="name-order-fit", request_model=None,
        activation=GEMINI_ACTIVATION, activation_grade="tool-event", module="runner.hosts.gemini", api="gemini-api", hides_manual_only=False,
        # Gemini CLI 0.61.0 sends no maxOutputTokens: each call may reach the model's own maximum (65,536 for the
        # Gemini 2.5 and 3 models).
        fixed_max_output_tokens=65_536),
    "codex": HostTraits(
        runs_claude_code=False, approximation=None, listing_model="name-order-fit", request_model=None,
        activation=CODEX_ACTIVATION, activation_grade="file-read", module="runner.hosts.codex", api="openai-responses", hides_manual_only=False,
        # `codex exec` takes no output bound: each call may reach the model's own maximum (128,000 for GPT-5).
        fixed_max_output_tokens=128_000),
    # OpenCode (runner.hosts.opencode): `skill {"name"}`, `read {"filePath"}`; the library goes to `.agents/skills`,
    # which it reads without a `.opencode/` folder (whose plugin install it would run). It asks 32,000 output tokens
    # of every call (measured on 1.18.33).
    "opencode": HostTraits(
        runs_claude_code=False, approximation=None, listing_model="name-order-fit", request_model=None,
        activation=ActivationNames(skill_tool="skill", skill_input="name", read_tool="read", read_input="filePath",
                                   subagent_tools=(), skills_folder=AGENTS_SKILLS_FOLDER),
        activation_grade="tool-event", module="runner.hosts.opencode", fixed_max_output_tokens=32_000,
        hides_manual_only=False),
}


def traits(name: str) -> HostTraits:
    """The traits of the host registered as `name`; ValueError for a name no host is registered as."""
    found = HOST_TRAITS.get(name)
    if found is None:
        raise ValueError(f"no host is named {name!r}; the hosts are {', '.join(HOST_TRAITS)}")
    return found


def grade_of(name: str) -> ActivationGrade | None:
    """How the host registered as `name` shows an activation; None for a name no host is registered as (a plan
    from an older version of the runner)."""
    found = HOST_TRAITS.get(name)
    return found.activation_grade if found is not None else None
