"""The host interface: one fresh session for one attempt. What a session is given and what the harness observed
in it (SessionSpec, Observation) are runner.core.observation's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from pydantic_core import PydanticSerializationError

from runner.core.observation import Observation, SessionSpec
from runner.corpus.findings import printable_tree

if TYPE_CHECKING:  # for the Host protocol's types only: base.py is imported where no host is (the plan, the records)
    import anthropic

    from runner.hosts.sessionpath import SessionPath
    from runner.hosts.surface import Surface
    from runner.hosts.wall import SessionWall


class Host(Protocol):
    """What a run asks of a host; every caller reaches a host through these members only, whatever its kind.

    A host is made by name (runner.hosts.registry); the plan records its `name`, `versions()` and
    `session_path`, the surface audit calls `surface()`, the executor hands its rate limiter to `middleware` and
    calls `run()` per attempt, and the run calls `aclose()` in the event loop the sessions ran in.
    """

    name: str

    @property
    def middleware(self) -> list[anthropic.MiddlewareInput]:
        """The anthropic SDK client middleware of the API client the host itself makes requests with.

        The executor puts the run's rate limiter here before the first session (runner.hosts.ratelimit), so each
        request is paced and its retried 429s are observed. A host whose requests the runner does not make (the
        claude-code CLI makes its own) keeps a list that nothing reads."""

    @property
    def session_path(self) -> SessionPath | None:
        """How each session sees its own folder (runner.hosts.sessionpath), recorded in the plan: where
        a fixed path lets sessions share one prompt cache. None for a host whose sessions have no folder."""

    @property
    def session_wall(self) -> SessionWall | None:
        """How each session's processes are confined (runner.hosts.wall), recorded in the plan. None for a
        host that starts no process for a session (its tools run in the runner)."""

    def versions(self) -> dict[str, str]:
        """Versions that decide behaviour (SDK, CLI, model), recorded in the plan."""

    async def surface(self, model: str, library_names: set[str], invocable: set[str]) -> Surface:
        """What a session's model would be shown of the library (the listing, the tools), measured without a
        model or a key. `library_names`: every skill of the library; `invocable`: those the model may invoke
        itself. A host that builds the listing itself knows both already and ignores them."""

    async def run(self, spec: SessionSpec) -> Observation:
        """Run one fresh session. Never raises for what happened inside the session: errors are
        observations. Raises only for a bug in the runner itself."""

    async def aclose(self) -> None:
        """Release what the host keeps open for the run (an API client, a library snapshot), in the event loop
        the sessions ran in. The host stays usable: a later session opens what it needs again."""


def utf8_safe(obs: Observation) -> Observation:
    """The observation, with any text UTF-8 cannot write kept as its visible escape. JSON allows half a surrogate
    pair ("\\ud83d") and a model may send one in an answer or a tool input; unescaped it would make the attempt's
    record, its transcript and the judge's request unwritable, and the attempt would be lost."""
    try:
        obs.model_dump_json()
    except PydanticSerializationError:
        return Observation.model_validate(printable_tree(obs.model_dump()))
    return obs
