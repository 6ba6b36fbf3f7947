"""What a batched run keeps on disk so that a resume polls a batch instead of paying for it again.

`<run>/batches/<batch id>.json` holds one batch's id and its custom_ids, each with a digest of its request. It is
written as soon as the batch is created, before any polling (runner.execute.batch.broker), and marked delivered once
its results were read: a delivered batch is never reused (a sample is used once), an undelivered one is polled again
by the next process that rebuilds the same requests.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from runner.execute.rundir import RunDir, safe_name

BATCHES = "batches"  # the folder of batch records inside a run folder


class BatchRecord(BaseModel):
    batch_id: str
    created_at: str
    requests: dict[str, str]  # custom_id -> digest of the request
    delivered: bool = False


class BatchStore:
    """`<run>/batches/<batch id>.json`, one record per batch, written atomically."""

    def __init__(self, folder: Path):
        self.folder = folder

    def _path(self, batch_id: str) -> Path:
        return self.folder / f"{safe_name(batch_id)}.json"

    def save(self, record: BatchRecord) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        RunDir(self.folder).write_json(self._path(record.batch_id).name, record.model_dump_json(indent=1))

    def undelivered(self) -> list[BatchRecord]:
        if not self.folder.is_dir():
            return []
        records = []
        for path in sorted(self.folder.glob("*.json")):
            try:
                record = BatchRecord.model_validate_json(path.read_text(encoding="utf-8"))
            except ValueError:
                continue  # a torn write: that batch is not reused (its requests are sent again)
            if not record.delivered:
                records.append(record)
        return records

    def delivered(self, record: BatchRecord) -> None:
        self.save(record.model_copy(update={"delivered": True}))


def summary(folder: Path) -> str:
    """One line for the end of a batched run: what was sent, and what a resume would poll again."""
    records = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            records.append(BatchRecord.model_validate_json(path.read_text(encoding="utf-8")))
        except ValueError:
            continue
    pending = [r.batch_id for r in records if not r.delivered]
    line = (f"Message Batches: {len(records)} batch(es), {sum(len(r.requests) for r in records)} request(s); "
            f"records in {folder}")
    if pending:
        line += f"; results not yet delivered (a resume polls them): {', '.join(pending)}"
    return line
