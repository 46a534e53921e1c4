"""histogram.py against real fio 3.33 json+ output: bin values, fio's percentile rule, merging."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storagebench._histogram import merge_histograms, percentiles_from_bins, plat_idx_to_val, plat_val_to_idx
from storagebench.errors import SchemaError, StatsError
from storagebench.ingest import ingest_paths

JSONPLUS = ["single_jsonplus.json", "numjobs4_nogroup.json", "numjobs4_group.json", "two_jobs.json",
            "randrw_70_30.json", "clientserver.json", "sigint.json"]


def _entries(doc):
    return doc.get("jobs") or doc.get("client_stats")


def test_plat_idx_to_val_matches_fio_bucket_layout():
    # first 2 * 64 buckets are exact (fio stat.c: idx < FIO_IO_U_PLAT_VAL << 1)
    assert [plat_idx_to_val(i) for i in range(128)] == list(range(128))
    # bucket 128: error_bits 1, base 128, k 0 -> 128 + 0.5 * 2 = 129
    assert plat_idx_to_val(128) == 129
    # bucket 192: error_bits 2, base 256 -> 256 + 0.5 * 4 = 258
    assert plat_idx_to_val(192) == 258
    values = [plat_idx_to_val(i) for i in range(29 * 64)]
    assert values == sorted(values) and len(set(values)) == len(values)
    assert all(plat_val_to_idx(v) == i for i, v in enumerate(values))
    with pytest.raises(SchemaError, match=r"idx must be in \[0, 1856\)"):
        plat_idx_to_val(1856)


@pytest.mark.parametrize("name", JSONPLUS)
def test_percentiles_from_bins_equal_fio_printed_percentiles(fixtures_dir, name):
    text = (fixtures_dir / "fio" / name).read_text()
    doc = json.loads(text[text.index("{"):])  # sigint.json starts with "fio: terminating on signal 2"
    checked = 0
    for entry in _entries(doc):
        for ddir in ("read", "write", "trim"):
            clat = entry[ddir]["clat_ns"]
            if not clat["N"] or entry["jobname"] == "All clients":  # fio prints no bins/percentiles there
                continue
            printed = {float(k): v for k, v in clat["percentile"].items()}
            got = percentiles_from_bins([int(k) for k in clat["bins"]], list(clat["bins"].values()),
                                        printed, total=clat["N"])
            assert got == printed, f"{name} {entry['jobname']} {ddir}"
            # every bin key is a fio bucket value
            assert all(plat_idx_to_val(plat_val_to_idx(int(k))) == int(k) for k in clat["bins"])
            checked += 1
    assert checked >= 1


def test_merged_client_bins_cover_fio_all_clients(fixtures_dir):
    """fio prints no bins or percentiles for "All clients": they come from the merged per-server bins."""
    path = fixtures_dir / "fio" / "clientserver.json"
    doc = json.loads(path.read_text())
    res = ingest_paths([path])
    assert res.histograms["host"].nunique() == 2
    merged = merge_histograms(res.histograms, by=["run_id", "direction"])
    allc = next(e for e in doc["client_stats"] if e["jobname"] == "All clients")["read"]["clat_ns"]
    assert "bins" not in allc and "percentile" not in allc
    assert merged["count"].sum() == allc["N"]
    per_host = {h: g for h, g in res.histograms.groupby("host")}
    for g in per_host.values():  # each host's count is its own N
        assert g["count"].sum() == allc["N"] // 2
    p = percentiles_from_bins(merged["bin_ns"], merged["count"], [50.0, 99.0], total=allc["N"])
    lo = min(percentiles_from_bins(g["bin_ns"], g["count"], [50.0])[50.0] for g in per_host.values())
    hi = max(percentiles_from_bins(g["bin_ns"], g["count"], [50.0])[50.0] for g in per_host.values())
    assert lo <= p[50.0] <= hi
    assert allc["min"] <= p[50.0] <= p[99.0] <= merged["bin_ns"].max()


def test_merge_histograms_sums_counts_per_bin():
    h = pd.DataFrame({"direction": ["read", "read", "read", "write"], "bin_ns": [100, 100, 200, 100],
                      "count": [1, 2, 5, 7]})
    m = merge_histograms(h, by=["direction"])
    assert m.to_dict("list") == {"direction": ["read", "read", "write"], "bin_ns": [100, 200, 100],
                                 "count": [3, 5, 7]}
    with pytest.raises(SchemaError, match="missing columns"):
        merge_histograms(h.drop(columns="count"))


def test_percentile_rule_edges():
    # 10 samples in 10 bins: p50 -> first bin where cumsum >= 5
    assert percentiles_from_bins(range(1, 11), [1] * 10, [50, 100]) == {50.0: 5, 100.0: 10}
    # unsorted input is sorted by bin value
    assert percentiles_from_bins([30, 10, 20], [1, 1, 1], [34.0]) == {34.0: 20}
    with pytest.raises(StatsError, match="at least one completion"):
        percentiles_from_bins([], [], [50])
    with pytest.raises(StatsError, match=r"in \(0, 100\]"):
        percentiles_from_bins([1], [1], [0.0])


def test_threshold_on_an_integer_follows_fio_333_double_rule():
    """p=30, N=100: fio 3.33 (double) stops where the running sum reaches exactly 30 (seen in a real
    fio 3.33 run: 3248 ns, not 3280 ns); fio's later long-double rule takes the next bucket."""
    bins, counts = [3216, 3248, 3280, 3440], [29, 1, 1, 69]
    assert percentiles_from_bins(bins, counts, [30.0]) == {30.0: 3248}
    assert percentiles_from_bins(bins, counts, [30.0], precision="long double") == {30.0: 3280}
    with pytest.raises(StatsError, match="precision must be one of"):
        percentiles_from_bins(bins, counts, [30.0], precision="float")


def _fio_loop(bins, counts, plist):
    """fio stat.c calc_clat_percentiles, literally: walk the buckets in increasing latency, keep a running
    sum, and report a percentile when the sum reaches p / 100.0 * N (double)."""
    pooled = {}
    for b, c in zip(bins, counts, strict=True):
        pooled[int(b)] = pooled.get(int(b), 0) + int(c)
    keys = sorted(pooled)
    n = sum(pooled.values())
    out, j, s = {}, 0, 0
    for k in keys:
        s += pooled[k]
        while j < len(plist) and s >= plist[j] / 100.0 * n:
            out[plist[j]] = k
            j += 1
    return out


@settings(max_examples=200, deadline=None, database=None)
@given(data=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 1855), st.integers(0, 50)), min_size=1,
                     max_size=60),
       off_grid=st.booleans())
def test_grouped_percentiles_is_fios_loop_on_every_group(data, off_grid):
    """The vectorised rule (a dense bucket array per group, or a sort for bins off fio's grid) gives fio's
    own loop on each group's pooled bins."""
    from storagebench._histogram import grouped_percentiles, plat_idx_to_vals

    plist = [1.0, 5.0, 10.0, 30.0, 50.0, 90.0, 99.0, 99.5, 99.9, 99.99, 100.0]
    g = np.array([d[0] for d in data])
    b = plat_idx_to_vals(np.array([d[1] for d in data]))
    c = np.array([d[2] for d in data])
    if off_grid:  # one extra bin with no completions off fio's grid: the sort path
        g, b, c = np.r_[g, 0], np.r_[b, 2**40 + 1], np.r_[c, 0]
    got = grouped_percentiles(g, b, c, 5, plist)
    for k in range(5):
        sel = g == k
        if c[sel].sum() == 0:
            assert np.isnan(got[k]).all()
            continue
        want = _fio_loop(b[sel], c[sel], plist)
        assert [int(v) for v in got[k]] == [want[p] for p in plist], k


def test_grid_index_finds_every_bucket_and_refuses_other_values():
    from storagebench._histogram import FIO_IO_U_PLAT_NR, grid_index, plat_idx_to_val

    idx = np.arange(FIO_IO_U_PLAT_NR, dtype=np.int64)
    vals = np.array([plat_idx_to_val(i) for i in idx], dtype=np.int64)
    many = np.tile(vals, 40)  # beyond one step of its chunked loop
    assert np.array_equal(grid_index(many), np.tile(idx, 40))
    assert grid_index(many[:0]) is not None and len(grid_index(many[:0])) == 0
    for bad in (vals[200] + 1, -1, 2**53, vals[-1] * 2):  # off the grid, negative, too big, past the last bucket
        edited = many.copy()
        edited[-3] = bad
        assert grid_index(edited) is None, bad


@pytest.mark.parametrize("on_grid", [True, False])
def test_grouped_percentiles_with_counts_past_float_and_int64(on_grid):
    """Issue 19: counts past 2**53 were summed as float64 (inexact) and cast back past 2**63 with numpy's
    "invalid value encountered in cast" warning. Now no warning: a group whose counts add up past 2**63 - 1
    is NaN, a group past 2**53 gets fio's rule exactly, and the other groups are untouched, on fio's grid
    (dense sums) and off it (sorted)."""
    import warnings

    from storagebench._histogram import grouped_percentiles

    bins = [plat_idx_to_val(i) for i in (100, 200, 300)] if on_grid else [1001, 2003, 3007]
    groups = [0, 0, 0, 1, 1, 1, 2, 2, 2]
    counts = [1, 2**53 + 1, 2**53, 5, 2**62, 2**62, 10, 80, 10]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = grouped_percentiles(np.array(groups), np.array(bins * 3), np.array(counts), 3, [50, 99])
    assert out[0].tolist() == [bins[1], bins[2]]  # 2**53 + 1 reaches half of 2**54 + 2; 99 % needs the third bin
    assert np.isnan(out[1]).all()
    assert out[2].tolist() == [bins[1], bins[2]]
