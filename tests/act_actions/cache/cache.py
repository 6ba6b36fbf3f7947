"""The stand-in's store for actions/cache/restore and actions/cache/save (see restore/action.yml).

GitHub keeps a cache in the scope of the ref whose workflow run saved it; a run restores from its own ref's scope,
then from its base branch's (a pull request) or the default branch's. Keys are immutable: saving a key that exists
is a warning and saves nothing. Restore: the exact key, else the newest entry whose key starts with a restore-key,
in that order of scopes. Every save is logged in saves.jsonl, so a test sees who wrote what.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

STORE = Path(os.environ["SKILL_EVALS_TEST_CACHE"])


def scope_folder(ref: str) -> Path:
    return STORE / ref.replace("/", "_")


def scopes() -> list[str]:
    event = json.loads(Path(os.environ["GITHUB_EVENT_PATH"]).read_text(encoding="utf-8"))
    own = os.environ.get("GITHUB_REF") or "refs/heads/main"
    base = os.environ.get("GITHUB_BASE_REF") or ((event.get("pull_request") or {}).get("base") or {}).get("ref")
    default = (event.get("repository") or {}).get("default_branch") or "main"
    out = [own]
    for branch in (base, default):
        if branch and f"refs/heads/{branch}" not in out:
            out.append(f"refs/heads/{branch}")
    return out


def output(name: str, value: str) -> None:
    with open(os.environ["GITHUB_OUTPUT"], "a", encoding="utf-8") as handle:
        handle.write(f"{name}={value}\n")


def restore(path: str, key: str, restore_keys: list[str]) -> None:
    output("cache-primary-key", key)
    for ref in scopes():
        folder = scope_folder(ref)
        entries = sorted(folder.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True) if folder.is_dir() else []
        exact = [e for e in entries if e.name == key]
        found = exact or [e for prefix in restore_keys for e in entries if prefix and e.name.startswith(prefix)]
        if found:
            shutil.rmtree(path, ignore_errors=True)
            shutil.copytree(found[0], path)
            print(f"restored {found[0].name} from the scope of {ref}")
            output("cache-hit", str(bool(exact)).lower())
            output("cache-matched-key", found[0].name)
            return
    print(f"no cache for {key} in {scopes()}")
    output("cache-hit", "false")


def save(path: str, key: str) -> None:
    ref = os.environ.get("GITHUB_REF") or "refs/heads/main"
    target = scope_folder(ref) / key
    if target.exists():
        print(f"::warning::Failed to save: a cache with the key {key} exists")
        return
    if not Path(path).is_dir():
        print(f"::warning::Path Validation Error: {path} does not exist, no cache is saved")
        return
    shutil.copytree(path, target)
    with open(STORE / "saves.jsonl", "a", encoding="utf-8") as log:
        log.write(json.dumps({"ref": ref, "key": key, "event": os.environ.get("GITHUB_EVENT_NAME"),
                              "at": time.time()}) + "\n")
    print(f"saved {key} in the scope of {ref}")


if __name__ == "__main__":
    STORE.mkdir(parents=True, exist_ok=True)
    if sys.argv[1] == "restore":
        restore(sys.argv[2], sys.argv[3], [line.strip() for line in sys.argv[4].splitlines()])
    else:
        save(sys.argv[2], sys.argv[3])
