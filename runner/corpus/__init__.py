"""The corpus: a library as written, read as the host would load it.

In: a repository folder and its `.skill-evals.toml` (settings.py). Out: the corpus model (library.py) that the
loader (loader.py) reads a library into — skills, subagents, eval cases and probes, each case classified
(classify.py, kind_words.py, tags.py) — and `Finding`s (findings.py) for what could not be read. Files are read
through files.py and bounded.py only (never outside the library, never too big); layout.py finds the skills,
dialects.py names each eval file's shape, outside.py finds eval files kept outside the skill folders, jsonfile.py
and frontmatter.py keep line numbers. What settings from the code under review may decide: trust.py; the settings
file as a commit holds it: committed.py.
"""

# The modules other stages may import: what crosses this stage's boundary (tests/test_architecture.py keeps
# this list true both ways).
__all__ = ["bounded", "claims", "classify", "committed", "decide", "executables", "files", "findings", "frontmatter",
           "kind_words", "layout", "library", "loader", "repopath", "settings", "slash", "trust"]
