"""Stage 1, the corpus: a library as written, read as the host would load it.

In: a repository folder and its `.skill-evals.toml` (settings.py). Out: a `Library` (library.py) of skills,
subagents, eval cases and probes, each case classified (classify.py), and `Finding`s (findings.py) for what
could not be read. Files are read through files.py only (never outside the library, never too big); layout.py
finds the skills, formats.py names each eval file's shape, jsonfile.py and frontmatter.py keep line numbers.
What settings from the code under review may decide (`--untrusted-settings`), key by key: trust.py; the settings
file as a commit holds it (`--settings-commit`): committed.py.
"""

# The modules other stages may import: what crosses this stage's boundary (tests/test_architecture.py keeps
# this list true both ways).
__all__ = ["bounded", "claims", "classify", "committed", "decide", "executables", "files", "findings", "frontmatter",
           "kind_words", "layout", "library", "loader", "repopath", "settings", "slash", "trust"]
