"""benchmarks/host_cache.py --short still runs a real `skill-evals run` per host and writes well-formed figures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO


def test_host_cache_short_mode_runs_both_hosts_and_reports_planned_against_spent(tmp_path: Path) -> None:
    out = tmp_path / "host_cache.json"
    done = subprocess.run([sys.executable, "-m", "benchmarks.host_cache", "--short", "--out", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["benchmark"] == "host_cache" and report["short"] is True
    rows = {(r["host"], r["variant"]): r for r in report["rows"]}
    assert set(rows) == {(host, variant) for host in ("claude-code", "api") for variant in ("after", "after+basis")}
    for row in rows.values():
        assert row["sessions"] >= 2 and row["errors"] == 0
        assert 0 <= row["cache_read_share"] <= 1 and row["usd_per_session"] > 0
        assert row["planned_over_spent"] == row["planned_usd_per_session"] / row["usd_per_session"]
        assert row["prefixes"] == 1
    assert rows[("claude-code", "after")]["session_path"] and rows[("api", "after")]["session_path"] == {}
    assert "measured in" in rows[("claude-code", "after+basis")]["cost_basis"]
    assert rows[("claude-code", "after")]["cost_basis"] == "defaults"  # the `after` rows stay a first run's plan
