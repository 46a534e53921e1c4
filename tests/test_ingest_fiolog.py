"""fio log files (real fio 3.33 per-I/O logs in tests/fixtures/fio/logs) → timeseries."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import xxhash

from storagebench.errors import IngestError
from storagebench.ingest import ingest_paths
from storagebench.ingest.fiolog import is_fio_log, parse_fio_log


@pytest.fixture
def logs(fixtures_dir):
    return fixtures_dir / "fio" / "logs"


def _raw(path):
    rows = [[float(x) for x in line.split(",")] for line in path.read_text().splitlines() if line.strip()]
    return np.array(rows)


@pytest.mark.parametrize("kind,metric,factor", [("iops", "iops", 1), ("bw", "bw_bytes_per_s", 1024),
                                                ("lat", "lat_ns", 1), ("clat", "clat_ns", 1),
                                                ("slat", "slat_ns", 1)])
def test_log_values_and_units(logs, kind, metric, factor):
    path = logs / f"logs_{kind}.1.log"
    df = parse_fio_log(path, run_id="r1")
    raw = _raw(path)
    assert len(df) == len(raw) == 256  # 1 MiB / 4 KiB, one line per I/O
    assert (df["metric"] == metric).all() and (df["job"] == "logs").all() and (df["log_index"] == 1).all()
    assert np.array_equal(df["t_s"].to_numpy(), raw[:, 0] / 1000.0)
    assert np.array_equal(df["value"].to_numpy(), raw[:, 1] * factor)
    assert list(df["direction"]) == [["read", "write", "trim"][int(d)] for d in raw[:, 2]]


def test_log_counts_match_fio_json(logs):
    """Per-I/O logs: one line per completed I/O, so lines per direction == fio's total_ios."""
    res = ingest_paths([logs])
    assert res.ok and res.files == 6
    iops = res.timeseries[res.timeseries["metric"] == "iops"]
    per_dir = iops.groupby("direction").size().to_dict()
    assert per_dir == dict(zip(res.runs["direction"], res.runs["total_ios"], strict=True))
    # logs beside one fio output carry that output's run_id
    run_id = xxhash.xxh3_128_hexdigest((logs / "output.json").read_bytes())[:12]
    assert set(res.timeseries["run_id"]) == {run_id} == set(res.runs["run_id"])
    # the mean clat of the log equals fio's clat mean (same I/Os), to fio's printed precision
    clat = res.timeseries[(res.timeseries["metric"] == "clat_ns") & (res.timeseries["direction"] == "read")]
    fio_mean = res.runs.set_index("direction").loc["read", "clat_mean_ns"]
    assert clat["value"].mean() == pytest.approx(fio_mean, rel=1e-6)


def test_fio2_latency_logs_are_microseconds(logs):
    df3 = parse_fio_log(logs / "logs_lat.1.log", run_id="r")
    df2 = parse_fio_log(logs / "logs_lat.1.log", run_id="r", fio_version="fio-2.2.10")
    assert np.array_equal(df2["value"].to_numpy(), df3["value"].to_numpy() * 1000)


def test_bad_logs(tmp_path, logs):
    assert is_fio_log("x_iops.1.log") and not is_fio_log("x_hist.1.log") and not is_fio_log("output.json")
    bad = tmp_path / "job_bw.1.log"
    bad.write_text("0, 10, 0, 4096\nhello, world\n")
    with pytest.raises(IngestError, match="not a fio log") as exc:
        parse_fio_log(bad, run_id="r")
    assert exc.value.path == str(bad)
    wrongdir = tmp_path / "job_iops.2.log"
    wrongdir.write_text("0, 1, 0, 4096, 0\n1, 1, 7, 4096, 0\n")
    with pytest.raises(IngestError, match=r"direction must be one of \[0, 1, 2\], got \[7\]"):
        parse_fio_log(wrongdir, run_id="r")
    with pytest.raises(IngestError, match="not a fio log name"):
        parse_fio_log(logs / "output.json", run_id="r")
    empty = tmp_path / "job_slat.1.log"
    empty.write_text("")
    assert parse_fio_log(empty, run_id="r").empty
    shutil.copy(logs / "logs_iops.1.log", tmp_path / "logs_iops.1.log")
    res = ingest_paths([tmp_path])
    assert {e.path for e in res.errors} == {str(bad), str(wrongdir)}
    assert len(res.timeseries) == 256
