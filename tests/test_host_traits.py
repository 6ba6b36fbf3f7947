"""Host traits (issue 31): what a caller knows of a host comes from its traits in the registry, never from its name.

- No host name is written as a string outside the hosts package (one exception, explained below), so nothing can
  branch on a name; the scanner is tested on sources that must and must not pass.
- Every registered host has traits, an unknown name is refused, and a batchable host is the host the batch adapter
  runs (the api host's loop).
- A fourth host registered with its traits only is planned, listed and recognised by those traits.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.core import host_traits
from runner.core.host_traits import DEFAULT_HOST
from runner.corpus.claims import is_output_case
from runner.corpus.library import Library
from runner.corpus.loader import load_library
from runner.corpus.settings import Settings
from runner.hosts import listing, registry
from runner.hosts.activation import recognise, skill_md_name
from runner.hosts.api import ApiHost
from runner.hosts.prices import load as load_prices
from runner.hosts.sessionpath import SessionPath
from runner.improve.loop import listing_problem
from runner.plan import planner
from runner.plan.plan import Plan
from tests.conftest import EXAMPLE, REPO

RUNNER = REPO / "runner"
HOSTS_PACKAGE = Path(registry.__file__).parent


# ---- no host name outside the hosts package ----------------------------------------------------------------------

def _is_host_name_literal(node: ast.stmt) -> bool:
    """`HostName = Literal[...]` (or annotated): the one place the names are spelled for the type checker."""
    target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
        node.target if isinstance(node, ast.AnnAssign) else None
    value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
    return (isinstance(target, ast.Name) and target.id == "HostName" and isinstance(value, ast.Subscript)
            and isinstance(value.value, (ast.Name, ast.Attribute))
            and (value.value.id if isinstance(value.value, ast.Name) else value.value.attr) == "Literal")


def _traits_table_keys(node: ast.stmt) -> list[ast.AST]:
    """The keys of `HOST_TRAITS = {...}` (or annotated): the table of each name's traits, keyed by the names."""
    target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
        node.target if isinstance(node, ast.AnnAssign) else None
    value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
    if isinstance(target, ast.Name) and target.id == "HOST_TRAITS" and isinstance(value, ast.Dict):
        return [key for key in value.keys if key is not None]
    return []


def _is_default_host(node: ast.stmt) -> bool:
    """`DEFAULT_HOST: HostName = "..."`: the default `[run] host`, typed with HostName, so mypy checks the name; and
    ROUTE_HOST, `route`'s default, the same way."""
    return (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
            and node.target.id in ("DEFAULT_HOST", "ROUTE_HOST")
            and isinstance(node.annotation, ast.Name) and node.annotation.id == "HostName")


def host_name_strings(source: str, names: tuple[str, ...]) -> Iterator[int]:
    """The lines of `source` where a string constant is a host name. Exempt, and only in the module that defines
    HostName: that definition, and DEFAULT_HOST typed with it. A name must be spelled somewhere for the settings and
    the CLI to offer it without importing a host; a default needs one too. Anywhere else a name is a branch on
    which host runs, which the traits are for (runner.core.host_traits.HostTraits)."""
    tree = ast.parse(source)
    exempt: set[int] = set()
    if any(_is_host_name_literal(node) for node in tree.body):
        for node in tree.body:
            if _is_host_name_literal(node) or _is_default_host(node):
                exempt |= {id(n) for n in ast.walk(node)}
            exempt |= {id(key) for key in _traits_table_keys(node)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names \
                and id(node) not in exempt:
            yield node.lineno


def outside_hosts() -> list[Path]:
    return sorted(p for p in RUNNER.rglob("*.py") if HOSTS_PACKAGE not in p.parents)


def test_no_host_name_is_written_outside_the_hosts_package() -> None:
    assert outside_hosts() and HOSTS_PACKAGE.is_dir()
    found = [f"{path.relative_to(REPO)}:{line}" for path in outside_hosts()
             for line in host_name_strings(path.read_text(encoding="utf-8"), host_traits.HOST_NAMES)]
    assert found == [], ("a host name outside the hosts package (read the host's traits instead, "
                         f"runner.core.host_traits.traits): {found}")


@pytest.mark.parametrize(("source", "lines"), [
    # The one definition and the default typed with it pass, wherever the module is.
    ('from typing import Literal\nHostName = Literal["claude-code", "api"]\nDEFAULT_HOST: HostName = "api"\n', []),
    # A comparison, a default of a parameter, a table key: each a branch on a name.
    ('if host == "api":\n    pass\n', [1]),
    ('def f(host: str = "claude-code") -> None: ...\n', [1]),
    ('KNOWN = {"claude-code": 1}\n', [1]),
    # The exemption holds only beside the definition, only for it and the defaults typed with it (DEFAULT_HOST,
    # ROUTE_HOST), only for their own values.
    ('DEFAULT_HOST: HostName = "api"\n', [1]),
    ('HostName = Literal["api"]\nOTHER: HostName = "api"\n', [2]),
    ('HostName = Literal["api"]\nROUTE_HOST: HostName = "api"\n', []),
    ('HostName = Literal["api"]\nDEFAULT_HOST = "api"\n', [2]),
    ('HostName = Literal["api"]\ndef f() -> None:\n    DEFAULT_HOST: HostName = "api"\n', [3]),
    # The traits table's keys beside the definition; its values, and the table elsewhere, are not exempt.
    ('HostName = Literal["api"]\nHOST_TRAITS = {"api": T(module="api")}\n', [2]),
    ('HostName = Literal["api"]\nHOST_TRAITS = {"api": T(approximation="x")}\n', []),
    ('HOST_TRAITS = {"api": 1}\n', [1]),
    # A name inside longer text is no branch: docstrings and messages may mention hosts.
    ('"""Runs on claude-code or api."""\nx = f"<span id=\'first-turn\'>{y}"\n', []),
])
def test_the_scanner_finds_host_names_and_exempts_only_the_definition(source: str, lines: list[int]) -> None:
    assert list(host_name_strings(source, ("claude-code", "api", "first-turn"))) == lines


# ---- every host has traits ---------------------------------------------------------------------------------------

def test_every_registered_name_has_traits_and_an_unknown_name_is_refused() -> None:
    assert tuple(host_traits.HOST_TRAITS) == host_traits.HOST_NAMES
    assert all(isinstance(host_traits.traits(name), host_traits.HostTraits) for name in host_traits.HOST_NAMES)
    assert DEFAULT_HOST in host_traits.HOST_NAMES
    assert "claude-code" in host_traits.HOST_NAMES  # the real host, at least
    with pytest.raises(ValueError, match=f"no host is named 'nosuch'; the hosts are {', '.join(host_traits.HOST_NAMES)}$"):
        host_traits.traits("nosuch")


def test_the_measured_listing_is_the_listing_model_that_reads_it() -> None:
    """runner/data/host_listing.json holds the CLI's own entries: it names the listing model it is for."""
    assert listing.host_listing().host == host_traits.traits(DEFAULT_HOST).listing_model


def test_a_batchable_host_is_the_host_whose_loop_the_batch_adapter_runs(library: Library) -> None:
    """runner.execute.batch runs a batchable host's sessions through BatchApiHost, the api host's own loop; the
    registry may call no other host batchable. Made, not run: no request is sent."""
    settings = Settings()
    inputs = registry.HostInputs(library, settings, load_prices(settings), "sk-test-traits", "http://127.0.0.1:9")
    batchable = [name for name in host_traits.HOST_NAMES if host_traits.traits(name).batchable]
    assert batchable
    assert all(isinstance(registry.make_host(name, inputs), ApiHost) for name in batchable)


# ---- a fourth host, by its traits alone --------------------------------------------------------------------------

CODEX_NAMES = host_traits.ActivationNames(skill_tool="load_skill", read_tool="read_file", subagent_tools=("spawn",),
                                       skills_folder=".codex/skills")


def codex(**traits: object) -> host_traits.HostTraits:
    """A fourth host's traits; its module does not exist: planning and listing never make a host."""
    base: dict[str, object] = dict(runs_claude_code=False, approximation="codex: not Claude Code",
                                   listing_model="name-order-fit", request_model=None, activation=CODEX_NAMES,
                                   activation_grade="tool-event", module="runner.hosts.codex_not_written")
    return host_traits.HostTraits(**(base | traits))


@pytest.fixture(scope="module")
def library() -> Library:
    return load_library(EXAMPLE, Settings())[0]


def plan_on(host: str, library: Library, settings: Settings) -> Plan:
    selected = [(case, "selected") for case in library.cases]
    return planner.build(library, selected, settings, "full", settings.tiers.full, host, {}, load_prices(settings),
                          None, None, session_path=SessionPath(mode="mount-namespace", path="/work/project"))


def test_a_host_that_is_not_claude_code_gets_nothing_of_claude_code(monkeypatch: pytest.MonkeyPatch,
                                                                    library: Library) -> None:
    monkeypatch.setitem(host_traits.HOST_TRAITS, "codex", codex())
    settings = Settings().model_copy(update={"run": Settings().run.model_copy(
        update={"allowed_tools": ["Skill", "Read", "Agent", "spawn"]})})
    plan = plan_on("codex", library, settings)
    assert plan.approximation == "codex: not Claude Code"
    assert plan.estimate.by_host == [] and plan.session_path is None
    # No Claude Code request shape: the listing alone, and it says the host's own prompt is not counted.
    assert plan.estimate.token_basis.endswith("the codex host's own system prompt and tools are not known, "
                                              "so not counted")
    assert plan.estimate.cache_layout == "none"
    assert not planner.subagents_callable("codex", settings.run.allowed_tools)
    # The listing by its listing model, and improve's listing check with it.
    assert listing.estimate(library, settings.listing, "codex").model == listing.API_MODEL
    assert listing_problem(library, settings, "codex", "migration-planner", "Plans migrations.") is None
    # The same plan on claude-code has all three (the contrast that makes the above mean something).
    real = plan_on("claude-code", library, settings)
    assert real.estimate.by_host and real.session_path is not None and real.approximation is None
    assert "Claude Code 2.1.332's first request" in real.estimate.token_basis


def test_on_a_host_that_shows_no_activation_activation_cases_are_unrun_and_output_cases_run(
        monkeypatch: pytest.MonkeyPatch, library: Library) -> None:
    monkeypatch.setitem(host_traits.HOST_TRAITS, "codex", codex(activation_grade="none"))
    plan = plan_on("codex", library, Settings())
    reasons = {case.kind: case.unrun_reason for case in plan.cases}
    reads_activation = {"trigger", "no_trigger", "discrimination", "refusal", "routing"} & set(reasons)
    assert reads_activation, "the example library has activation cases"
    by_uid = {case.uid: case for case in library.cases}
    outputs = [case for case in plan.cases if is_output_case(by_uid[case.uid])]
    assert outputs, "the example library has output cases"
    for case in plan.cases:
        if case.kind in reads_activation and case not in outputs:
            assert case.unrun_reason == planner.NO_ACTIVATION, case.uid
    # An output case runs there, on its answer alone (tests/test_judge.py grades one).
    assert all(case.unrun_reason != planner.NO_ACTIVATION for case in outputs)
    # The same library on a host that shows activations runs them (the contrast).
    monkeypatch.setitem(host_traits.HOST_TRAITS, "codex", codex(activation_grade="file-read"))
    assert not [c for c in plan_on("codex", library, Settings()).cases if c.unrun_reason == planner.NO_ACTIVATION]


def test_a_host_that_sends_claude_codes_first_request_is_planned_as_first_turn(monkeypatch: pytest.MonkeyPatch,
                                                                               library: Library) -> None:
    monkeypatch.setitem(host_traits.HOST_TRAITS, "codex", codex(
        runs_claude_code=True, approximation=None, listing_model="claude-code-cli", request_model="claude-code-cli",
        extra_first_request=True, activation=host_traits.CLAUDE_CODE_ACTIVATION))
    settings = Settings()
    plan, first_turn = plan_on("codex", library, settings), plan_on("first-turn", library, settings)
    assert plan.estimate.token_basis == first_turn.estimate.token_basis
    assert plan.estimate.worst_session_usd == first_turn.estimate.worst_session_usd
    # by_host lists every Claude Code host, codex last with first-turn's figures.
    assert [row.host for row in plan.estimate.by_host] == ["claude-code", "first-turn", "codex"]
    assert plan.estimate.by_host[2].model_dump(exclude={"host"}) == plan.estimate.by_host[1].model_dump(exclude={"host"})
    assert plan.session_path is not None


def test_the_recogniser_reads_the_hosts_own_tools_and_folder() -> None:
    read = {"file_path": "/p/.codex/skills/pdf/SKILL.md"}
    activation = recognise("read_file", read, "t", 1, names=CODEX_NAMES)
    assert activation is not None and (activation.name, activation.mechanism) == ("pdf", "skill-md-read")
    assert recognise("Read", read, "t", 1, names=CODEX_NAMES) is None
    assert skill_md_name("/p/.claude/skills/pdf/SKILL.md", CODEX_NAMES) is None
    spawned = recognise("spawn", {"subagent_type": "reviewer"}, "t", 1, names=CODEX_NAMES)
    assert spawned is not None and spawned.name == "reviewer (subagent)"
    assert recognise("Agent", {"subagent_type": "reviewer"}, "t", 1, names=CODEX_NAMES) is None
    skill = recognise("load_skill", {"skill": "pdf"}, "t", 1, names=CODEX_NAMES)
    assert skill is not None and skill.mechanism == "skill-tool"


def test_a_host_of_another_api_is_never_planned_with_an_anthropic_model() -> None:
    """Gemini CLI cannot be asked for claude-sonnet: without its own model ([run] host_models) the plan is refused
    before anything starts, naming the setting."""
    from tests.conftest import cli

    done = cli("plan", "--library", str(EXAMPLE), "--host", "gemini")
    assert done.exit_code == 2 and "name its own in [run] host_models" in done.output


def test_a_host_that_ignores_disable_model_invocation_runs_the_cases_of_a_manual_only_skill(library: Library) -> None:
    """Gemini CLI, Codex and OpenCode list and load a skill marked disable-model-invocation (docs/hosts.md): a case
    that needs the model to pick one runs there, and a pair against one is measured; on Claude Code and Copilot CLI,
    which keep it from the model, it stays UNRUN manual-only-target."""
    manual = {name for name, skill in library.skills.items() if skill.manual_only}
    assert manual, "the example library has a manual-only skill"
    for host in host_traits.HOST_NAMES:
        plan = plan_on(host, library, Settings())
        held = {c.uid for c in plan.cases if c.unrun_reason == "manual-only-target"}
        if host_traits.traits(host).hides_manual_only:
            assert held and set(plan.manual_only) == manual, host
        else:
            assert not held and plan.manual_only == [], host
    assert {name for name in host_traits.HOST_NAMES if not host_traits.traits(name).hides_manual_only} == {
        "gemini", "codex", "opencode"}
