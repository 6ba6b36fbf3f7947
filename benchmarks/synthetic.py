"""A synthetic corpus shaped like Project Aegis, N times larger, for scale benchmarks.

Copy 0 is the source library as it is; copy i (i >= 1) is every skill again under the name
`<name>-c<i>`, with every mention of a skill name inside its files (frontmatter `name`, the eval
files' `skill`, `expected_skill`, `should_not_trigger`, `overlaps_with`, paths and prose; not the
frontmatter `description`, which would outgrow its limit) renamed the same way, so each copy is a
self-consistent library of its own and the whole validates as cleanly as the source (on Aegis x10:
17,400 cases, the same findings as Aegis ten times over). Templates (`_template`) and subagents are copied once: they are not cases.

    python -m benchmarks.synthetic --copies 10 --dest /tmp/aegis-x10
"""

from __future__ import annotations

import argparse
import re
import shutil
from pathlib import Path

from pydantic import BaseModel

REPO = Path(__file__).resolve().parent.parent
AEGIS_SKILLS = REPO / "tests" / "corpora" / "project-aegis" / "dot-claude" / "skills"


class SyntheticCorpus(BaseModel):
    root: Path            # a repository root holding .claude/skills and .claude/agents
    skills_dir: Path
    copies: int
    skills: int           # skill folders written, templates included
    files: int


def _skill_names(skills_dir: Path) -> list[str]:
    return sorted(p.name for p in skills_dir.iterdir() if (p / "SKILL.md").exists() and not p.name.startswith("_"))


def _renamer(names: list[str], suffix: str) -> re.Pattern[str]:
    # Longest first so `ab-test-designer` is never renamed as `ab-test` + rest; a name followed by
    # " (subagent)" names an agent, which is copied once and keeps its name.
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(rf"(?<![A-Za-z0-9_-])({alternatives})(?![A-Za-z0-9_-])(?! \(subagent\))")


def _rename_skill_md(text: str, pattern: re.Pattern[str], suffix: str) -> str:
    """Rename `name:` and the body, never the description: Aegis descriptions sit near the
    1,024-character limit, and a longer name in each mention would push them over it."""
    match = re.match(r"---\n(.*?\n)---\n", text, flags=re.S)
    if match is None:
        return pattern.sub(lambda m: m.group(1) + suffix, text)
    front = re.sub(r"(?m)^(name:\s*)(\S+)\s*$", lambda m: m.group(1) + m.group(2) + suffix, match.group(1))
    body = pattern.sub(lambda m: m.group(1) + suffix, text[match.end():])
    return f"---\n{front}---\n{body}"


def _copy_skill(source: Path, target: Path, pattern: re.Pattern[str] | None, suffix: str) -> int:
    written = 0
    for path in sorted(source.rglob("*")):
        destination = target / path.relative_to(source)
        if path.is_dir():
            destination.mkdir(parents=True, exist_ok=True)
            continue
        destination.parent.mkdir(parents=True, exist_ok=True)
        raw = path.read_bytes()
        if pattern is not None:
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                destination.write_bytes(raw)  # not text: no names to rename inside
            else:
                renamed = _rename_skill_md(text, pattern, suffix) if path.name == "SKILL.md" else \
                    pattern.sub(lambda m: m.group(1) + suffix, text)
                destination.write_text(renamed, encoding="utf-8")
        else:
            destination.write_bytes(raw)
        written += 1
    return written


def generate(dest: Path, copies: int, source: Path = AEGIS_SKILLS) -> SyntheticCorpus:
    """Write `copies` renamed copies of the skills at `source` under dest/.claude/skills."""
    if copies < 1:
        raise ValueError(f"copies must be at least 1, got {copies}")
    skills_dir = dest / ".claude" / "skills"
    skills_dir.mkdir(parents=True, exist_ok=True)
    names = _skill_names(source)
    folders = sorted(p for p in source.iterdir() if p.is_dir())
    skills = files = 0
    for copy in range(copies):
        suffix = f"-c{copy}" if copy else ""
        pattern = _renamer(names, suffix) if copy else None
        for folder in folders:
            if folder.name.startswith("_") and copy:
                continue  # a template is not a skill: one is enough
            files += _copy_skill(folder, skills_dir / (folder.name + suffix if folder.name in names else folder.name),
                                 pattern, suffix)
            skills += 1
    agents = source.parent / "agents"
    if agents.is_dir():
        shutil.copytree(agents, dest / ".claude" / "agents", dirs_exist_ok=True)
    return SyntheticCorpus(root=dest, skills_dir=skills_dir, copies=copies, skills=skills, files=files)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=10)
    parser.add_argument("--dest", type=Path, required=True)
    parser.add_argument("--source", type=Path, default=AEGIS_SKILLS)
    args = parser.parse_args()
    corpus = generate(args.dest, args.copies, args.source)
    print(corpus.model_dump_json(indent=2))


if __name__ == "__main__":
    main()
