"""The run folder: plan.json first, one line per finished attempt, transcripts, results.json.

    <run>/plan.json            written before the first session starts
    <run>/surface.json         the surface audit (what the model is shown)
    <run>/attempts.jsonl       one AttemptRecord per line, flushed and fsynced as each finishes
    <run>/reservations.jsonl   the spend ledger's journal (runner.execute.budget.Journal): one fsynced line per
                               reservation before its session or judge call starts, one line per settlement
    <run>/transcripts/<slug>-<hash>.json the host's messages for one attempt (secrets removed); the record's
                               `transcript` field names its file (`transcript_name`)
    <run>/run.lock             held (fcntl lock) by the one process running on this folder; it holds its pid
    <run>/repairs.jsonl        one TailRepair per torn last line cut from an append-only file
    <run>/torn/                the bytes each such cut removed, kept for a human to read
    <run>/results.json         written at the end, and on SIGINT/SIGTERM

A crash can lose at most the attempt being written. A kill mid-write leaves a torn last line (no newline):
before a process first appends to attempts.jsonl or reservations.jsonl it cuts that line off (`repair_tail`),
or the next record would be glued onto the fragment and lost with it; the cut is logged in repairs.jsonl,
shown in results.json (`repairs`) and said on stderr, and the bytes go to torn/. Only one process runs on a
folder at a time (`claim`): a second one is refused (RunFolderBusy), it would append to the same files.

Nothing here holds a run in memory: each attempt is appended (and fsynced) as it finishes, its
transcript goes to its own file, and reading streams attempts.jsonl one line at a time. A reader
that only needs verdicts (results, resume) asks for `slim` records, which leave out the final answer
and the tool calls (they stay on disk), so memory grows with the attempts' outcomes only.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import BinaryIO, Literal

from pydantic import BaseModel, Field, ValidationError
from pydantic_core import PydanticSerializationError

from runner.corpus import bounded
from runner.corpus.errors import UsageError
from runner.corpus.findings import is_unicode, printable_tree
from runner.execute.hosts.base import Bound, Decided, FirstTurn, ToolCall, Usage
from runner.judge.prose import JudgeCall
from runner.probes.arms import ProbeGrade
from runner.results.verdicts import AttemptOutcome

PLAN = "plan.json"
SURFACE = "surface.json"
ATTEMPTS = "attempts.jsonl"
RESULTS = "results.json"
TRANSCRIPTS = "transcripts"
RESERVATIONS = "reservations.jsonl"
LOCK = "run.lock"
REPAIRS = "repairs.jsonl"
TORN = "torn"


class AttemptRecord(BaseModel):
    attempt_id: str
    uid: str
    arm: str
    repeat: int
    plan_hash: str
    status: Literal["finished", "cancelled"]
    outcome: AttemptOutcome | None = None
    error_kind: str | None = None
    error_message: str | None = None
    bounds_hit: list[Bound] = []
    turns: int = 0
    usage: Usage = Usage()
    cost_usd: float = 0.0
    host_cost_usd: float | None = None
    reserved_usd: float = 0.0
    # The journal line of the session's reservation (reservations.jsonl) this record settles; None when the
    # ledger kept no journal (older run folders, batch mode, re-judging): then this record alone shows its spend.
    reservation_id: str | None = None
    duration_s: float = 0.0
    # What the model received before the case prompt, hashed (runner.execute.hosts.base.Observation.prefix_hash), the
    # session-path mode (claude-code) and the first model call's input: results.json's `cost` is made of them.
    prefix_hash: str | None = None
    session_path: str | None = None
    first_turn_input_tokens: int | None = None
    model_calls: int | None = None
    decided: Decided | None = None  # the host ended the session once its outcome was certain (issue 21)
    first_turn: FirstTurn | None = None  # first-turn host: decided by the first reply, or handed off
    transcript: str | None = None
    final_answer: str | None = None
    tool_calls: list[ToolCall] = []
    judge: JudgeCall | None = None
    probe: ProbeGrade | None = None  # tier-2 probe attempts: the graded act, arm, band score, skill fired

    @property
    def total_cost_usd(self) -> float:
        return self.cost_usd + (self.judge.cost_usd if self.judge else 0.0)


def safe_name(attempt_id: str) -> str:
    """A file-name-safe form of an id. Not one-to-one (`a b` and `a_b` map alike): batch files use it for ids
    the runner makes itself; transcripts, named after case ids an author wrote, use `transcript_name`."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", attempt_id)


SLUG_CHARS = 80  # keeps a transcript's name far below the 255 bytes a file name may have


def transcript_name(attempt_id: str) -> str:
    """A readable slug of the id plus a hash of the whole id: two ids never share a file, whatever their
    characters (`case one` / `case_one`, `тест-1` / `проверка-1`) or length."""
    digest = hashlib.sha256(attempt_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    slug = safe_name(attempt_id).strip("._")[:SLUG_CHARS]
    return f"{slug}-{digest}" if slug else digest


def _record_json(record: AttemptRecord) -> str:
    """The record as one JSON line. A host's or judge's text may hold half a surrogate pair (JSON allows the
    escape "\\ud83d", UTF-8 cannot write it): such text is kept as the visible escape, never a lost record."""
    try:
        return record.model_dump_json()
    except PydanticSerializationError:
        return AttemptRecord.model_validate(printable_tree(record.model_dump())).model_dump_json()


class RunFolderBusy(UsageError, ValueError):
    """The run folder cannot be claimed: another live process runs on it, or it cannot be locked at all (a
    usage error: the CLI reports it and exits 2)."""


class TailRepair(BaseModel):
    """A torn last line cut off an append-only file of the run folder before the next append."""

    file: str = Field(description="The file, relative to the run folder (attempts.jsonl, reservations.jsonl).")
    offset: int = Field(description="Byte offset where the torn line began; the file now ends there.")
    bytes_cut: int = Field(description="How many bytes were cut (the torn line, without a newline).")
    saved_to: str = Field(description="Where the cut bytes are kept, relative to the run folder.")
    at: str = Field(description="When the cut was made (UTC).")

    def describe(self) -> str:
        return (f"{self.file} ended in a torn line ({self.bytes_cut} bytes from byte {self.offset}, no newline: an "
                f"earlier process was killed while writing it); cut it before appending, the bytes are kept in "
                f"{self.saved_to}")


def torn_tail(path: Path) -> tuple[int, bytes] | None:
    """(offset, bytes) of a last line without its newline; None when the file is whole, empty or missing."""
    try:
        handle = open(path, "rb")
    except FileNotFoundError:
        return None
    with handle:
        size = handle.seek(0, os.SEEK_END)
        if size == 0:
            return None
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return None
        offset = _after_last_newline(handle, size)
        handle.seek(offset)
        return offset, handle.read()


def _after_last_newline(handle: BinaryIO, size: int, chunk: int = 1 << 16) -> int:
    """The offset just after the last newline (0 when there is none), read backwards a chunk at a time."""
    end = size
    while end > 0:
        start = max(0, end - chunk)
        handle.seek(start)
        found = handle.read(end - start).rfind(b"\n")
        if found >= 0:
            return start + found + 1
        end = start
    return 0


def _write_durably(path: Path, data: bytes) -> None:
    with open(path, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def _truncate_durably(path: Path, offset: int) -> None:
    with open(path, "r+b") as handle:
        handle.truncate(offset)
        handle.flush()
        os.fsync(handle.fileno())


class RunDir:
    def __init__(self, path: Path):
        self.path = path
        self._lock_fd: int | None = None
        self._checked: set[str] = set()  # append-only files whose tail this object already made whole

    def create(self) -> None:
        (self.path / TRANSCRIPTS).mkdir(parents=True, exist_ok=True)

    def claim(self) -> list[TailRepair]:
        """Make this process the one running on the folder, then cut torn tails left by a killed one.

        The lock is an fcntl record lock on run.lock: the kernel drops it when the process ends, however it
        ends (a SIGKILL leaves no stale lock), and it is per process, so the same process may claim again.
        Raises RunFolderBusy when another live process holds it, or when the folder's filesystem has no locks
        (then nothing could keep two processes apart)."""
        import fcntl  # here, not at the top: the readers of a run folder (reports) need no POSIX-only module

        self.path.mkdir(parents=True, exist_ok=True)
        if self._lock_fd is None:
            fd = os.open(self.path / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                holder = os.pread(fd, 64, 0).decode("utf-8", errors="replace").strip() or "unknown"
                os.close(fd)
                if exc.errno not in (errno.EACCES, errno.EAGAIN):
                    raise RunFolderBusy(f"{self.path}: cannot lock {LOCK} ({exc.strerror}); put the run folder on "
                                        f"a filesystem with file locks") from None
                raise RunFolderBusy(
                    f"{self.path}: another skill-evals process (pid {holder}) is running on this run folder; two "
                    f"processes would append to the same attempts. Wait for it to end (or stop it), then resume "
                    f"with `skill-evals run --resume {self.path}`") from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            self._lock_fd = fd
        return [cut for cut in (self.repair_tail(ATTEMPTS), self.repair_tail(RESERVATIONS)) if cut is not None]

    def release(self) -> None:
        """Give the folder up before the process ends (the end of the process does it too)."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def repair_tail(self, name: str) -> TailRepair | None:
        """Once per file and RunDir: cut a torn last line, keep its bytes in torn/, log it in repairs.jsonl."""
        if name in self._checked:
            return None
        self._checked.add(name)
        torn = torn_tail(self.path / name)
        if torn is None:
            return None
        offset, fragment = torn
        # The bytes are kept before the file is cut: a crash in between loses nothing.
        saved = f"{TORN}/{len(self.repairs()) + 1:03d}-{name}-at-{offset}"
        (self.path / TORN).mkdir(exist_ok=True)
        _write_durably(self.path / saved, fragment)
        _truncate_durably(self.path / name, offset)
        repair = TailRepair(file=name, offset=offset, bytes_cut=len(fragment), saved_to=saved,
                            at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
        self.append_line(REPAIRS, repair.model_dump_json())
        return repair

    def repairs(self) -> list[TailRepair]:
        """Every cut made in this folder, oldest first (results.json shows them all, not only this process's)."""
        path = self.path / REPAIRS
        if not path.exists():
            return []
        out = []
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                out.append(TailRepair.model_validate_json(line))
            except ValidationError:
                continue  # a torn line of the log itself: the cut it describes is still in torn/
        return out

    def append_line(self, name: str, line: str, durable: bool = True) -> None:
        """Append one line with a single write(2): a kill leaves it whole or torn, never interleaved. `durable`:
        fsynced too (a kill never loses a written line, only a machine crash can lose an unsynced one)."""
        self.repair_tail(name)
        data = (line + "\n").encode("utf-8")
        fd = os.open(self.path / name, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            while data:
                data = data[os.write(fd, data):]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)

    def write_json(self, name: str, payload: str) -> None:
        """Write atomically: a reader never sees half a plan or half a results file."""
        target = self.path / name
        temporary = target.with_suffix(target.suffix + ".tmp")
        temporary.write_text(payload, encoding="utf-8")
        os.replace(temporary, target)

    def append_attempt(self, record: AttemptRecord) -> None:
        """Flushed and fsynced; the first append of this object first cuts a torn tail (module docstring)."""
        self.append_line(ATTEMPTS, _record_json(record))

    def iter_attempts(self, plan_hash: str | None = None, slim: bool = False) -> Iterator[AttemptRecord]:
        """The recorded attempts in file order, read one line at a time (never the whole file at once).

        plan_hash: only the attempts of that plan. slim: without final_answer and tool_calls, for
        readers that need verdicts only (they are the bulk of a line; the report and re-judging read
        them in full)."""
        path = self.path / ATTEMPTS
        if not path.exists():
            return
        # errors="replace": a crash can cut a multi-byte character in the last line; that line is
        # invalid JSON anyway and is skipped below, and it must not make the whole file unreadable.
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if not line.strip():
                    continue
                try:
                    record = AttemptRecord.model_validate_json(line)
                except ValidationError:
                    continue  # a line torn by a crash mid-write: that attempt did not finish
                if plan_hash is not None and record.plan_hash != plan_hash:
                    continue
                if slim:
                    record.final_answer, record.tool_calls = None, []
                yield record

    def read_attempts(self, plan_hash: str | None = None, slim: bool = False) -> list[AttemptRecord]:
        return list(self.iter_attempts(plan_hash, slim))

    def write_transcript(self, attempt_id: str, messages: list[dict]) -> str:
        relative = f"{TRANSCRIPTS}/{transcript_name(attempt_id)}.json"
        text = json.dumps(messages, indent=1, ensure_ascii=False, default=str)
        if not is_unicode(text):
            # Half a surrogate pair (a JSON escape a model may send): ASCII JSON escapes it and reads it back the same.
            text = json.dumps(messages, indent=1, ensure_ascii=True, default=str)
        (self.path / relative).write_text(text, encoding="utf-8")
        return relative

    def read_text(self, name: str) -> str:
        # The folder is named by an option (--resume, judge RUN_DIR): a FIFO or a link to a device is refused unopened.
        return bounded.read_text(self.path / name, bounded.RUN_FILE_MAX_BYTES)
