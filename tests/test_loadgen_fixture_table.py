"""runners/loadgen_fixture_table.py: every DiskSPD / Iometer fixture's totals, ingested vs printed (issue 12)."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT


def test_every_fixture_total_equals_what_the_tool_printed():
    out = subprocess.run([sys.executable, str(ROOT / "runners" / "loadgen_fixture_table.py"), "--check"],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = [ln.split(" | ") for ln in out.stdout.splitlines() if ln.startswith("| ") and not ln.startswith("| file")]
    files = {r[0].lstrip("| ") for r in rows}
    assert len(files) == 7  # 5 captured DiskSPD outputs, 2 constructed Iometer files
    assert {r[1] for r in rows} == {"captured", "constructed"}
    # read straight from the text report, independently of the parser: the 'total:' row of 'Read IO'
    assert any(r[0].endswith("virtualclient_DiskSpdExample-ReadWrite.txt") and r[3:6] == ["read", "iops", "834.98"]
               and r[7] == "834.98" for r in rows)
    assert "62 numbers from 7 fixtures; 62 equal" in out.stdout
