#!/usr/bin/env python3
"""The action's own files, as the install step left them: a digest recorded once, checked before each later step.

Why: the steps after the library's validator (select, run with the Anthropic key, publish with the GitHub token)
must execute only the action's code. The install step records the digest of what those steps execute as a STEP
OUTPUT (no later step can change an earlier step's outputs); each later step recomputes it and refuses to run on
a difference, naming the changed files.

    verify.py record --dir TEMP --bin SKILL_EVALS --action DIR [--venv DIR]   prints the digest; writes the manifest
    verify.py check DIGEST --dir TEMP --bin SKILL_EVALS --action DIR           exit 0 when unchanged, else 1

What is covered: every file and symlink of the virtual environment (the interpreter link, the scripts, every
module and its compiled .pyc), and of the action's checkout what the steps execute or build the runner image from
(ACTION_PARTS; not its __pycache__ folders, which nothing executes), and the paths of skill-evals, the environment
and the action. The digest is the SHA-256 of that manifest (relative path -> kind and SHA-256 of the content or
the link's target), kept in TEMP under a name derived from the digest; so the manifest file needs no trust of its
own: one that does not hash to the recorded digest is refused.

What it does not protect against: code that runs as the runner's user and knows this check (it can change this
script, the interpreter, or the step's environment before the check runs). That is why the library's validator
runs in a container (--validator-sandbox container) and never on the runner: the check catches what got through
by mistake, it is not the boundary. Run it with `python3 -I` (no PYTHON* variable, no user site, no script folder
on sys.path), by an absolute path recorded at install. Standard library only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

ACTION_PARTS = ("action.yml", "Dockerfile", ".dockerignore", "pyproject.toml", "scripts/action", "runner")
SKIPPED_IN_ACTION = ("__pycache__",)
SHOWN_CHANGES = 10

Manifest = dict[str, str]


def _file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _entry(path: Path) -> str | None:
    """kind:hash of a file or a symlink (never followed); None for anything else."""
    if path.is_symlink():
        return "link:" + os.readlink(path)
    if path.is_file():
        executable = "x" if os.access(path, os.X_OK) else "-"
        return f"file{executable}:{_file_hash(path)}"
    return None


def _walk(root: Path, label: str, skip: tuple[str, ...]) -> Manifest:
    out: Manifest = {}
    if root.is_symlink() or root.is_file():
        entry = _entry(root)
        if entry is not None:
            out[label] = entry
        return out
    if not root.is_dir():
        out[label] = "missing"
        return out
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in skip)
        base = Path(folder)
        for name in sorted(files) + [d for d in dirs if (base / d).is_symlink()]:
            path = base / name
            entry = _entry(path)
            if entry is not None:
                out[f"{label}/{path.relative_to(root).as_posix()}"] = entry
    return out


def manifest(venv: Path | None, action: Path) -> Manifest:
    out: Manifest = {}
    if venv is not None:
        out |= _walk(venv, "venv", ())
    for part in ACTION_PARTS:
        out |= _walk(action / part, f"action/{part}", SKIPPED_IN_ACTION)
    return out


def state_of(binary: str, venv: Path | None, action: Path) -> dict[str, object]:
    """What the digest covers: where skill-evals, the environment and the action are, and every file of them."""
    return {"bin": binary, "venv": str(venv) if venv is not None else None, "action": str(action),
            "files": manifest(venv, action)}


def encode(state: dict[str, object]) -> tuple[str, bytes]:
    data = json.dumps(state, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return hashlib.sha256(data).hexdigest(), data


def manifest_path(folder: Path, digest: str) -> Path:
    return folder / f"skill-evals-manifest-{digest[:16]}.json"


def changes(before: Manifest, after: Manifest) -> list[str]:
    names = sorted(set(before) | set(after))
    return [f"{name} ({'added' if name not in before else 'removed' if name not in after else 'changed'})"
            for name in names if before.get(name) != after.get(name)]


def _recorded(path: Path, expected: str) -> dict | None:
    """The state written at install, when it is the one the digest names (so it needs no trust of its own)."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if hashlib.sha256(data).hexdigest() != expected:
        return None
    loaded = json.loads(data)
    return loaded if isinstance(loaded, dict) else None


def _error(message: str) -> int:
    clean = message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    print(f"::error::skill-evals: {clean}")
    return 1


def check(expected: str, folder: Path, binary: str, action: Path) -> int:
    recorded = _recorded(manifest_path(folder, expected), expected)
    if recorded is None:
        return _error(f"the install step's manifest ({manifest_path(folder, expected)}) is missing or was changed, so "
                      "the action's files cannot be checked and this step does not run")
    if recorded.get("bin") != binary or recorded.get("action") != str(action):
        return _error(f"this step was given skill-evals {binary} in {action}, but the install step recorded "
                      f"{recorded.get('bin')} in {recorded.get('action')}; this step does not run")
    venv = Path(recorded["venv"]) if recorded.get("venv") else None
    now = state_of(binary, venv, action)
    digest, _ = encode(now)
    files: Manifest = now["files"]  # type: ignore[assignment]
    if digest == expected:
        print(f"skill-evals: the action's files are as installed ({len(files)} files, sha256 {digest[:16]}...)")
        return 0
    found = changes(recorded.get("files") or {}, files)
    shown = "; ".join(found[:SHOWN_CHANGES]) + (f"; and {len(found) - SHOWN_CHANGES} more"
                                                if len(found) > SHOWN_CHANGES else "")
    return _error("the action's files changed after the install step, so this step does not run (code that ran "
                  f"since then changed them, e.g. a library validator run with validator-sandbox: none): {shown}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="verify.py", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("command", choices=("record", "check"))
    parser.add_argument("digest", nargs="?", default="")
    parser.add_argument("--dir", type=Path, required=True, help="where the manifest is kept (RUNNER_TEMP)")
    parser.add_argument("--bin", required=True, help="the absolute path of skill-evals")
    parser.add_argument("--action", type=Path, required=True, help="the action's checkout (GITHUB_ACTION_PATH)")
    parser.add_argument("--venv", type=Path, default=None, help="record: the action's virtual environment")
    args = parser.parse_args(argv)
    if args.command == "record":
        digest, data = encode(state_of(args.bin, args.venv, args.action))
        manifest_path(args.dir, digest).write_bytes(data)
        print(digest)
        return 0
    if not args.digest:
        parser.error("check needs the DIGEST the install step recorded")
    return check(args.digest, args.dir, args.bin, args.action)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
