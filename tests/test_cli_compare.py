"""``storagebench compare``: published and file tables, the numbers it prints, and bad input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from storagebench.cli import app
from storagebench.published import load_published, read_published

STRIPE = ["published:vsan_stripe", "--factor", "stripe_width", "--baseline", "1", "--metric", "iops"]
# per tool, paired on the VM count: the two tools measured the same configurations, so a tool is a factor
# (the comparison is made within each), not a second replicate of a VM count
PAIRED = ["--by", "pattern", "--by", "direction", "--by", "source_tool", "--pair-on", "vms"]


def _run(*args: str):
    result = CliRunner().invoke(app, ["compare", *args])
    return result.exit_code, result.output + (result.stderr if hasattr(result, "stderr") else "")


def test_compare_published_stripe_prints_and_writes_paired_ratios(tmp_path):
    out = tmp_path / "cmp.csv"
    code, text = _run(*STRIPE, *PAIRED, "--out", str(out))
    assert code == 0, text
    table = pd.read_csv(out)
    assert len(table) == 12 and set(table.n_baseline) == {12} and set(table.n_other) == {12}
    # the ratio is the geometric mean of a tool's 12 stripe-4 / stripe-1 pairs (one per VM count), computed
    # here from the CSV as printed
    raw = read_published("vsan_stripe")
    wide = raw.pivot_table(index=["pattern", "source_tool", "vms"], columns="stripe_width", values="iops")
    gmr = np.exp(np.log(wide[4].astype(float) / wide[1].astype(float)).groupby(level=["pattern", "source_tool"])
                 .mean())
    got = table.set_index(["pattern", "source_tool"])["ratio"]
    assert len(gmr) == 12
    for key, expected in gmr.items():
        assert got[key] == pytest.approx(expected, rel=1e-12)
        assert key[0] in text
    assert (table.ci_low < table.ratio).all() and (table.ratio < table.ci_high).all()
    assert (table.p_adjusted >= table.p).all() and table.method.str.contains("Holm").all()
    assert "method: geometric mean of the per-pair ratios" in text and f"wrote {out}" in text
    assert "design: paired: each vms key is one block" in text and "family: Holm" in text
    assert (table.estimand == "geometric").all()


def test_compare_by_pattern_is_checked_per_group(tmp_path):
    """Every pattern of seed 002 has one direction: --by pattern alone is not refused any more (the
    direction check is per group), and the arithmetic estimand is there by name."""
    out = tmp_path / "by_pattern.csv"
    code, text = _run(*STRIPE, "--by", "pattern", "--by", "source_tool", "--pair-on", "vms",
                      "--estimand", "arithmetic", "--out", str(out))
    assert code == 0, text
    table = pd.read_csv(out)
    assert len(table) == 12 and (table.estimand == "arithmetic").all() and "Fieller" in text


def test_compare_reads_parquet_and_csv_tables_with_fdr(tmp_path):
    df = load_published("vsan_qd_threads")
    pq, csv = tmp_path / "runs.parquet", tmp_path / "runs.csv"
    df.to_parquet(pq)
    df.to_csv(csv, index=False)
    # (no --pair-on iodepth: iodepth is a factor, and pairing on a factor is refused, as verdict() refuses it)
    args = ["--factor", "source_tool", "--baseline", "DiskSPD", "--metric", "lat_mean_ns", "--by", "numjobs",
            "--adjust", "fdr_bh"]
    outs = []
    for path in (pq, csv):
        code, text = _run(str(path), *args, "--out", str(tmp_path / f"{path.suffix[1:]}.csv"))
        assert code == 0, text
        outs.append(pd.read_csv(tmp_path / f"{path.suffix[1:]}.csv"))
    pd.testing.assert_frame_equal(outs[0], outs[1])
    assert list(outs[0].numjobs) == [1, 2, 4, 8] and set(outs[0].n_other) == {8}
    assert outs[0].method.str.contains("Benjamini & Hochberg").all()


def test_compare_margin_gives_an_equivalence_verdict(tmp_path):
    out = tmp_path / "eq.csv"
    code, text = _run(*STRIPE, *PAIRED, "--margin", "0.5", "--out", str(out))
    assert code == 0, text
    table = pd.read_csv(out)
    assert table.equivalent.notna().all() and table.p_equivalence.notna().all()
    assert "TOST" in text


@pytest.mark.parametrize(
    "args, message",
    [
        (["--where", "stripe_width=1"], "has only one level"),  # a factor with one level
        (["--baseline", "3"], "--baseline (a level of 'stripe_width') must be one of ['1', '4'], got '3'"),
        (["--factor", "stripes"], "--factor must be one of the table's columns"),
        (["--metric", "iopz"], "has no column(s) ['iopz']"),
        (["--metric", "clat_mean_ns"], "metric 'clat_mean_ns' has 288 NaN"),  # not in the published table
        (["--metric", "io_bytes"], "value(s) <= 0"),  # -1 = unknown in the published tables
        (["--by", "patern"], "has no column(s) ['patern']"),
        (["--by", "vms"], "rows mix directions ['mixed', 'read', 'write'] in group {'vms': 1}"),  # per group
        (["--estimand", "fieller"], "estimand must be one of ['arithmetic', 'geometric'], got 'fieller'"),
        (["--where", "nope=1"], "--where column must be one of"),
        (["--where", "pattern"], "--where must be COLUMN=VALUE"),
        (["--adjust", "sidak"], "adjust must be one of"),
        (["--out", "x.txt"], "--out suffix must be one of ['.csv', '.parquet'], got '.txt'"),
    ],
)
def test_compare_bad_input_is_a_clear_error(args, message):
    base = dict(zip(STRIPE[1::2], STRIPE[2::2], strict=True))
    argv = [STRIPE[0]]
    for opt, val in base.items():
        if opt not in args:
            argv += [opt, val]
    code, text = _run(*argv, *args)
    assert code == 1, text
    assert message in " ".join(text.split()), text


def test_compare_unknown_table_or_file_is_a_clear_error(tmp_path):
    code, text = _run("published:vsan_strip", *STRIPE[1:])
    assert code == 1 and "must be one of ['hdd_devices', 'hdd_iops', 'vsan_qd_threads', 'vsan_stripe']" in text
    code, text = _run("published:hdd_devices", *STRIPE[1:])
    assert code == 1 and "inventory" in text
    code, text = _run(str(tmp_path / "missing.parquet"), *STRIPE[1:])
    assert code == 1 and "no such file" in text
    (tmp_path / "t.json").write_text("{}")
    code, text = _run(str(tmp_path / "t.json"), *STRIPE[1:])
    assert code == 1 and "table suffix must be one of ['.csv', '.parquet'], got '.json'" in text


def test_compare_nan_and_zero_metric_in_a_file_are_refused(tmp_path):
    df = load_published("vsan_stripe")
    for bad, message in ((np.nan, "1 NaN"), (0.0, "1 value(s) <= 0")):
        path = tmp_path / "bad.parquet"
        df.assign(iops=df.iops.where(df.index != 5, bad)).to_parquet(path)
        code, text = _run(str(path), *STRIPE[1:], *PAIRED)
        assert code == 1 and message in text, text


def test_compare_unpaired_rows_are_named(tmp_path):
    df = load_published("vsan_stripe")
    drop = (df.stripe_width == 4) & (df.vms == 7) & (df.source_tool == "FIO") & (df.pattern == "1M seq read")
    path = tmp_path / "unpaired.parquet"
    df[~drop].to_parquet(path)
    code, text = _run(str(path), *STRIPE[1:], *PAIRED)
    assert code == 1, text
    assert "keys do not match" in text and "'source_tool': 'FIO'" in text and "only in baseline [(7,)]" in text


def test_compare_groups_of_one_give_explicit_not_estimable_rows(tmp_path):
    out = tmp_path / "n1.csv"
    code, text = _run(*STRIPE, "--by", "pattern", "--by", "direction", "--by", "vms", "--by", "source_tool",
                      "--where", "pattern=1M seq read", "--out", str(out))
    assert code == 0, text
    table = pd.read_csv(out)
    assert len(table) == 24 and set(table.n_baseline) == {1}
    assert table.p.isna().all() and table.ci_low.isna().all()
    assert table.note.str.startswith("not estimable").all() and "not estimable" in text


def test_compare_prints_the_arms_of_its_ratio_as_geometric_means(tmp_path):
    """Beside a ratio of geometric means the per-arm columns are geometric means, named so (``gmean_*``): their
    quotient is the ratio. The arithmetic means stay in the file (``mean_*``, extras), and the arithmetic
    estimand prints its own arms (``mean_*``). Seed 002, stripe width 4 vs 1, paired on the VM count."""
    out = tmp_path / "cmp.csv"
    code, text = _run(*STRIPE, *PAIRED, "--out", str(out))
    assert code == 0, text
    header = next(ln for ln in text.splitlines() if ln.split()[:1] == ["pattern"] and "ci_low" in ln)
    assert "gmean_baseline" in header and "gmean_other" in header and " mean_baseline" not in header
    assert "gmean_* = each arm's geometric mean" in text and "mean(other) - mean(baseline)" not in text
    table = pd.read_csv(out)
    raw = read_published("vsan_stripe")
    wide = raw.pivot_table(index=["pattern", "source_tool", "vms"], columns="stripe_width", values="iops")
    gm = np.exp(np.log(wide.astype(float)).groupby(level=["pattern", "source_tool"]).mean())
    t = table.set_index(["pattern", "source_tool"])
    for key, row in gm.iterrows():
        assert t.loc[key, "gmean_baseline"] == pytest.approx(row[1], rel=1e-12)
        assert t.loc[key, "gmean_other"] == pytest.approx(row[4], rel=1e-12)
        assert t.loc[key, "ratio"] == pytest.approx(row[4] / row[1], rel=1e-12)
        # the arithmetic means are still in the file, and are not the arms of this ratio
        am = wide.loc[key].astype(float).mean()
        assert t.loc[key, "mean_baseline"] == pytest.approx(am[1], rel=1e-12) and am[1] > row[1]
    code, text = _run(*STRIPE, *PAIRED, "--estimand", "arithmetic")
    header = next(ln for ln in text.splitlines() if ln.split()[:1] == ["pattern"] and "ci_low" in ln)
    assert code == 0 and "mean_baseline" in header and "gmean" not in header
