"""Quarantine: cases a person has set aside, listed in `.skill-evals/quarantine.json`.

    [{"uid": "<skill>/<source>/<id>", "reason": "...", "date": "2026-11-30", "expires": "2027-01-31"}]

A quarantined case still runs when selected; its state is shown as QUARANTINED with the state it
really had beside it; it is left out of health metrics and appears in every report. Nothing is
ever quarantined automatically: the history report only names candidates.
"""

from __future__ import annotations

import datetime
import json
from datetime import date
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runner.core.errors import UsageError
from runner.corpus import bounded
from runner.corpus.findings import first_problem

QUARANTINE_FILE = Path(".skill-evals") / "quarantine.json"


class QuarantineError(UsageError):
    """The quarantine file cannot be read (a usage error: file and problem)."""


class QuarantineEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    uid: str = Field(min_length=1)
    reason: str = Field(min_length=1)
    # `datetime.date` below: inside the class `date` names the field (the type is resolved in the module).
    date: datetime.date
    expires: datetime.date | None = None

    def active(self, today: datetime.date) -> bool:
        return self.expires is None or today <= self.expires


def load(root: Path, today: date | None = None, path: Path | None = None) -> list[QuarantineEntry]:
    """Active entries of the repository's quarantine file (none when there is no file); `path`: another list to
    read instead (`--quarantine`: on a pull request, its base commit's, so that a pull request cannot quarantine the
    cases it breaks)."""
    path = path if path is not None else root / QUARANTINE_FILE
    if not path.exists():
        return []
    try:
        raw = json.loads(bounded.read_text(path, bounded.OPTION_FILE_MAX_BYTES))
    except RecursionError:
        raise QuarantineError(f"{path}: {bounded.nesting_message('the quarantine list')}") from None
    except (OSError, ValueError) as exc:  # not JSON, not UTF-8, not a regular file, too large
        raise QuarantineError(f"{path}: cannot read the quarantine list: {exc}") from exc
    if not isinstance(raw, list):
        raise QuarantineError(f"{path}: the quarantine list must be a JSON array of entries")
    entries = []
    for position, item in enumerate(raw):
        try:
            entries.append(QuarantineEntry.model_validate(item))
        except ValidationError as exc:
            raise QuarantineError(f"{path}: entry {position}: {first_problem(exc)}") from exc
    today = today or date.today()
    return [entry for entry in entries if entry.active(today)]
