"""Benchmarks of the runner (`python -m benchmarks.<name> [--short] --out FILE.json`).

They are measurements, never timed unit tests: each prints a table and writes JSON; the test
suite only runs their short modes to check they still run and produce well-formed output.
"""
