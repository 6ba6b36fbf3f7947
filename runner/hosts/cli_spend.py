"""What a Claude Code session cost, its lost replies included: the claude-code host's side of runner.hosts.billing.

The CLI's result counts only the replies it received. Each lost request (from its session log, else its
stream-json output) is charged billing.input_bound_usd of its best input estimate, down to the session's whole
budget when nothing better is known.

Design notes: docs/design/rate-limits-and-spend.md.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from runner.core.observation import SessionSpec, Usage
from runner.hosts import billing
from runner.hosts.cli_log import TURN_SLACK, SessionLog
from runner.hosts.prices import PriceTable


def _input(usage: Usage) -> int:
    return usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens


@dataclass
class StreamSeen:
    """What the stream-json output showed of the session's requests (the recorder keeps it)."""

    replies: dict[str, Usage] = field(default_factory=dict)  # reply id -> message_start's usage
    lost: int = 0  # api_retry without an HTTP status, replies whose usage could not be read, a final lost reply
    added: int = 0  # characters of the tool results since the last reply (what the next request adds)
    calls: set[str] = field(default_factory=set)  # the last reply's tool calls without a result yet
    last: Usage | None = None

    def on_reply(self, ident: str, usage: Usage, calls: set[str]) -> None:
        if ident not in self.replies:
            self.replies[ident] = usage
            self.last, self.added, self.calls = usage, 0, set()
        self.calls |= calls

    def on_results(self, chars: int, answered: set[str]) -> None:
        self.added += chars
        self.calls -= answered

    def next_input(self, request_input_tokens: int | None) -> int | None:
        """The next request's input: the last reply's input, its output at most max_tokens, the tool results since
        (4 characters a token) and a turn's worst growth per call still without a result; before any reply, the
        plan's first-request estimate."""
        if self.last is None:
            return request_input_tokens
        return (_input(self.last) + self.added // billing.CHARS_PER_TOKEN + TURN_SLACK
                + len(self.calls) * billing.TOOL_RESULT_TOKENS)


@dataclass(frozen=True)
class Spent:
    reported_usd: float
    bound_usd: float
    lost: int


class CliCosts:
    """The prices and bounds of one session's requests."""

    def __init__(self, prices: PriceTable, spec: SessionSpec):
        self.prices = prices
        self.spec = spec

    def cost(self, usage: Usage) -> float:
        return self.prices.cost(self.spec.model, usage) or 0.0

    def bound(self, input_tokens: int | None) -> float:
        """One lost request's bound; its whole budget when its input is unknown (or no price says)."""
        if input_tokens is None:
            input_tokens = self.spec.request_input_tokens
        found = (billing.input_bound_usd(self.prices, self.spec.model, input_tokens, self.spec.max_output_tokens)
                 if input_tokens is not None else billing.UNKNOWN)
        if found == billing.UNKNOWN and self.spec.max_usd is not None:
            return self.spec.max_usd
        return 0.0 if found == billing.UNKNOWN else found

    def next_request(self, seen: StreamSeen) -> float:
        """The bound of the session's next request (a reply's output is at most max_tokens: counted in it)."""
        tokens = seen.next_input(None)
        if tokens is not None:
            tokens += self.spec.max_output_tokens
        return self.bound(tokens)

    def live(self, seen: StreamSeen) -> tuple[Spent, float]:
        """While the session runs: the replies' input as reported, their output and the retries' lost requests at
        their bound; and the bound of the request that may be in flight."""
        replies = list(seen.replies.values())
        reported = sum(self.cost(u.model_copy(update={"output_tokens": 0})) for u in replies)
        output = sum(self.cost(Usage(output_tokens=self.spec.max_output_tokens)) for _ in replies)
        per_lost = self.next_request(seen)
        return Spent(reported, output + seen.lost * per_lost, seen.lost), per_lost

    def final(self, log: SessionLog | None, result: Usage | None, seen: StreamSeen, ended: bool) -> Spent:
        """The session's cost once it is over. `result`: the CLI's result usage (None: no result came); `ended`:
        the session ended by itself (a result), not by its wall clock or a cancel with a request in flight."""
        stream_replies = list(seen.replies.values())
        bound = 0.0
        if result is not None:
            reported = self.cost(result)
        elif log is not None:
            reported = sum(self.cost(u) for u in log.replies)
        else:  # only message_start's figures: every output at its bound
            reported = sum(self.cost(u.model_copy(update={"output_tokens": 0})) for u in stream_replies)
            bound += sum(self.cost(Usage(output_tokens=self.spec.max_output_tokens)) for _ in stream_replies)
        stream_lost = seen.lost + (0 if ended else 1)
        lost = 0
        if log is not None:
            for request in log.requests:
                if request.reply is None:
                    bound += self.bound(request.input_estimate)
                    lost += 1
        # What the stream showed lost beyond the log (a log written behind the session, or none): at the log's
        # estimate of a request after its end, else the stream's.
        extra = max(0, stream_lost - lost)
        if log is not None and log.next_input is not None:
            bound += extra * self.bound(log.next_input)
        else:
            bound += extra * self.next_request(seen)
        return Spent(reported, bound, lost + extra)


# Beside each session folder while its session runs: which attempt and reservation it is (runner.execute.reconcile
# reads it after a SIGKILL). Outside the folder the session sees, removed with it.
MARK_SUFFIX = ".attempt.json"


def mark_path(root: Path) -> Path:
    return root.parent / (root.name + MARK_SUFFIX)


def write_mark(root: Path, attempt_id: str, reservation_id: str | None) -> Path:
    path = mark_path(root)
    path.write_text(json.dumps({"attempt_id": attempt_id, "reservation_id": reservation_id}), encoding="utf-8")
    return path


def remove_mark(root: Path) -> None:
    try:
        os.unlink(mark_path(root))
    except OSError:
        pass
