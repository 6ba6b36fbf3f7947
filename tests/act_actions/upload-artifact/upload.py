"""actions/upload-artifact v4, as far as tests/test_action_act.py needs it, into a folder instead of GitHub."""

import glob
import hashlib
import os
import shutil
import sys
from pathlib import Path


def hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def found_files(lines: list[str], include_hidden: bool) -> tuple[list[Path], Path | None]:
    """The files the path lines name, and the root they are stored under (v4: the folder named, or the files'
    least common ancestor)."""
    files: list[Path] = []
    roots: list[Path] = []
    for line in lines:
        for match in sorted(glob.glob(line, recursive=True)) or []:
            path = Path(match).absolute()
            if path.is_dir():
                roots.append(path)
                files += [p for p in sorted(path.rglob("*")) if p.is_file()
                          and (include_hidden or not hidden(p, path))]
            elif path.is_file():
                roots.append(path.parent)
                files.append(path)
    if not files:
        return [], None
    root = Path(os.path.commonpath([str(r) for r in roots])) if len(roots) > 1 else roots[0]
    return files, root


def main() -> int:
    store = os.environ.get("SKILL_EVALS_TEST_ARTIFACTS")
    if not store:
        print("::error::the upload-artifact stand-in needs SKILL_EVALS_TEST_ARTIFACTS (the test sets it)")
        return 1
    name = os.environ["NAME"]
    lines = [line.strip() for line in os.environ["PATHS"].splitlines() if line.strip()]
    files, root = found_files(lines, os.environ.get("INCLUDE_HIDDEN") == "true")
    if not files or root is None:
        mode = os.environ.get("IF_NO_FILES_FOUND", "warn")
        message = f"No files were found with the provided path: {' '.join(lines)}. No artifacts will be uploaded."
        if mode == "error":
            print(f"::error::{message}")
            return 1
        if mode == "warn":
            print(f"::warning::{message}")
        return 0
    target = Path(store) / name
    if target.exists():
        if os.environ.get("OVERWRITE") != "true":
            print(f"::error::Failed to CreateArtifact: an artifact with this name already exists on the workflow "
                  f"run: {name}")
            return 1
        shutil.rmtree(target)
    digest = hashlib.sha256()
    for path in files:
        relative = path.relative_to(root)
        (target / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target / relative)
        digest.update(str(relative).encode() + b"\0" + path.read_bytes())
    artifact_id = len([p for p in Path(store).iterdir() if p.is_dir()])
    url = (f"{os.environ.get('GITHUB_SERVER_URL', 'https://github.com')}/{os.environ.get('GITHUB_REPOSITORY', '')}"
           f"/actions/runs/{os.environ.get('GITHUB_RUN_ID', '')}/artifacts/{artifact_id}")
    with open(os.environ["GITHUB_OUTPUT"], "a", encoding="utf-8") as out:
        out.write(f"artifact-id={artifact_id}\nartifact-url={url}\nartifact-digest={digest.hexdigest()}\n")
    print(f"Artifact {name} has been successfully uploaded! Final size is {sum(p.stat().st_size for p in files)} "
          f"bytes. Artifact ID is {artifact_id}")
    return 0


sys.exit(main())
