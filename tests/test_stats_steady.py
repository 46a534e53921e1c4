"""Tests of storagebench.stats.steady: SNIA PTS window test and fio's steadystate block (real fio output)."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st

from storagebench.errors import StatsError
from storagebench.stats import steady_state, steady_state_timeseries
from storagebench.stats.steady import fio_steadystate


def test_pts_window_on_a_preconditioning_curve():
    # write IOPS falling from FOB to a plateau, as in a PTS preconditioning: round 9 ends the first window
    # whose range <= 20% and fitted-line excursion <= 10% of the window mean
    y = [90_000, 70_000, 52_000, 41_000, 35_000, 32_000, 31_000, 30_500, 30_200, 30_100, 30_050, 30_000]
    r = steady_state(y)
    assert r.steady and r.window == 5
    w = np.array(y[r.first_round - 4:r.first_round + 1], dtype=float)
    assert (w.max() - w.min()) / w.mean() <= 0.20
    fit = st.linregress(np.arange(5), w)
    assert abs(fit.slope) * 4 / w.mean() <= 0.10
    # every earlier window fails one of the two criteria
    earlier = r.windows[r.windows.end_round < r.first_round]
    assert not earlier["steady"].any()
    assert r.data_range_pct == pytest.approx((w.max() - w.min()) / w.mean())
    assert "SNIA" in r.method


def test_pts_slope_criterion_alone_can_fail():
    # a steady ramp: range 16% (passes 20%) but the fitted line also spans 16% (> 10%): not steady
    y = [100, 104, 108, 112, 116]
    r = steady_state(y)
    assert not r.steady and r.first_round is None
    assert r.data_range_pct == pytest.approx(16 / 108) and r.fit_range_pct == pytest.approx(16 / 108)
    assert steady_state(y, fit_limit=0.2).steady


def test_steady_state_bad_input():
    with pytest.raises(StatsError, match="at least window=5"):
        steady_state([1, 2, 3])
    with pytest.raises(StatsError, match="NaN"):
        steady_state([1, 2, np.nan, 4, 5])
    with pytest.raises(StatsError, match="window must be"):
        steady_state([1, 2, 3], window=2)
    with pytest.raises(StatsError, match="data_limit"):
        steady_state([1, 2, 3, 4, 5], data_limit=20)


def test_steady_state_on_timeseries_table():
    t = np.arange(0, 20, 0.5)
    iops = np.where(t < 6, 50_000 - 4_000 * t, 26_000) + np.tile([100, -100], len(t) // 2)
    ts = pd.DataFrame({"run_id": "r1", "host": "local", "job": "j", "direction": "write", "t_s": t,
                       "metric": "iops", "value": iops.astype(float)})
    ts = pd.concat([ts, ts.assign(run_id="short", t_s=ts.t_s / 10)])
    out = steady_state_timeseries(ts, metric="iops", round_s=1.0).set_index("run_id")
    assert out.loc["r1", "steady"] and out.loc["r1", "rounds"] == 20
    assert out.loc["r1", "steady_at_s"] == pytest.approx(out.loc["r1", "first_round"] + 1)
    assert not out.loc["short", "steady"] and "at least window" in out.loc["short", "note"]
    with pytest.raises(StatsError, match="no rows with metric 'lat_ns'"):
        steady_state_timeseries(ts, metric="lat_ns")


@pytest.mark.parametrize("name", ["fio_steadystate_iops_deviation.json", "fio_steadystate_iops_slope.json"])
def test_fio_block_from_captured_runs_recomputes(fixtures_dir, name):
    """Real fio 3.33 output (capture commands in tests/fixtures/stats/README.md). The criterion recomputed
    from the samples with fio's rule (as fio's t/steadystate_tests.py does) matches fio's within 0.5%."""
    out = json.loads((fixtures_dir / "stats" / name).read_text())
    (ss,) = fio_steadystate(out)
    assert ss.metric == "iops" and ss.percent and ss.duration_s == 3 and len(ss.iops) == 3
    assert ss.recomputed_criterion == pytest.approx(ss.criterion, rel=0.005)
    if ss.criterion_kind == "deviation":
        assert ss.attained and ss.limit == 20.0 and abs(ss.criterion) < ss.limit
    else:
        assert not ss.attained and abs(ss.criterion) > ss.limit
    # the job object alone works too
    assert fio_steadystate(out["jobs"][0])[0] == ss


def test_fio_block_from_a_live_run(fio_bin, tmp_path):
    out = tmp_path / "ss.json"
    subprocess.run([fio_bin, "--name=live", f"--filename={tmp_path / 'f'}", "--size=8M", "--rw=randread",
                    "--bs=4k", "--ioengine=psync", "--time_based", "--runtime=3", "--ss=bw:50%", "--ss_dur=2",
                    "--output-format=json", f"--output={out}"], check=True, capture_output=True, timeout=60)
    (ss,) = fio_steadystate(json.loads(out.read_text()))
    assert ss.metric == "bw_bytes_per_s" and ss.criterion_kind == "deviation" and ss.duration_s == 2
    assert ss.recomputed_criterion == pytest.approx(ss.criterion, rel=0.005)


def test_fio_block_missing_or_malformed(fixtures_dir):
    out = json.loads((fixtures_dir / "stats" / "fio_steadystate_iops_deviation.json").read_text())
    job = dict(out["jobs"][0])
    job.pop("steadystate")
    with pytest.raises(StatsError, match="none of the 1 fio job"):
        fio_steadystate({"fio version": "fio-3.33", "jobs": [job]})
    bad = json.loads(json.dumps(out))
    bad["jobs"][0]["steadystate"]["ss"] = "latency:5"
    with pytest.raises(StatsError, match="must look like"):
        fio_steadystate(bad)
    with pytest.raises(StatsError, match="not fio JSON"):
        fio_steadystate({"foo": 1})


def test_steady_state_on_real_fio_iops_log(fixtures_dir):
    """Real fio 3.33 per-I/O logs (tests/fixtures/fio/logs, 30 ms of a run) through ingest: rounds of 5 ms
    give the per-round means that steady_state() then judges; the table agrees with a direct call."""
    from storagebench.ingest import ingest_paths

    ts = ingest_paths([fixtures_dir / "fio" / "logs"]).timeseries
    out = steady_state_timeseries(ts, metric="iops", round_s=0.005)
    sel = ts[ts.metric == "iops"]
    assert len(out) == sel.groupby(["run_id", "host", "job", "direction"]).ngroups >= 1
    for _, row in out.iterrows():
        one = sel[sel.direction == row["direction"]]
        per_round = one.groupby(np.floor(one.t_s / 0.005).astype(int))["value"].mean()
        direct = steady_state(per_round.to_numpy())
        assert row["rounds"] == len(per_round) >= 5
        assert bool(row["steady"]) == direct.steady
        assert row["data_range_pct"] == pytest.approx(direct.data_range_pct)
