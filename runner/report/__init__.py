"""Reports: rendered from results.json only (never from memory of the run); see rollup.py first.

In: a `Results` (and, for HTML, the run folder's transcripts). Out: the terminal tables (terminal.py), the Markdown
rollup (markdown.py), one self-contained HTML page (html.py), JUnit XML (junit.py), by name in formats.py; history
across runs (history.py); probe calibration at a terminal (probes.py); versions.py words the host and its versions.
"""

# The modules other stages may import: what crosses this stage's boundary (tests/test_architecture.py keeps
# this list true both ways).
__all__ = ["formats", "history", "markdown", "probes", "rollup", "terminal", "versions"]
