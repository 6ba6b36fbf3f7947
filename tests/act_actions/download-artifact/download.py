"""actions/download-artifact v4, as far as tests/test_action_act.py needs it, out of a folder instead of GitHub."""

import fnmatch
import os
import shutil
import sys
from pathlib import Path


def main() -> int:
    store = Path(os.environ.get("SKILL_EVALS_TEST_ARTIFACTS") or "")
    if not os.environ.get("SKILL_EVALS_TEST_ARTIFACTS") or not store.is_dir():
        print("::error::the download-artifact stand-in needs SKILL_EVALS_TEST_ARTIFACTS (the test sets it)")
        return 1
    target = Path(os.environ.get("TARGET") or os.environ["GITHUB_WORKSPACE"])
    name, pattern = os.environ.get("NAME", ""), os.environ.get("PATTERN", "")
    available = sorted(p.name for p in store.iterdir() if p.is_dir())
    if name:
        if name not in available:
            print(f"::error::Unable to download artifact(s): Artifact not found for name: {name}")
            return 1
        shutil.copytree(store / name, target, dirs_exist_ok=True)
        print(f"Artifact {name} was downloaded to {target}")
    else:
        chosen = [a for a in available if not pattern or fnmatch.fnmatchcase(a, pattern)]
        merge = os.environ.get("MERGE_MULTIPLE") == "true"
        for artifact in chosen:
            shutil.copytree(store / artifact, target if merge else target / artifact, dirs_exist_ok=True)
        print(f"Total of {len(chosen)} artifact(s) downloaded to {target}: {', '.join(chosen)}")
    with open(os.environ["GITHUB_OUTPUT"], "a", encoding="utf-8") as out:
        out.write(f"download-path={target}\n")
    return 0


sys.exit(main())
