"""Schema columns with a role (issue 19, item 1): every column list is derived from the schema, the fio
reader's fast path holds for real fio output, and a table written before a column existed still loads."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from storagebench import schema
from storagebench.errors import SchemaError
from storagebench.ingest import _fiorows, ingest_paths
from storagebench.runlevel import read_run_totals

FIXTURES = Path(__file__).parent / "fixtures"
MULTIJOB = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "fio_multijob"


def test_every_column_declares_a_role_and_runs_columns_a_combine_rule():
    for table, cols in schema.TABLES.items():
        for c in cols:
            assert c.role in schema.ROLES, (table, c.name)
            assert c.unit, (table, c.name)
    keys = {"run_id", "host", "job_index", "direction"}  # the grouping keys of run_totals
    for c in schema.RUNS:
        assert (c.combine is None) == (c.name in keys), c.name
        if c.combine in ("sd", "rate"):
            assert c.of in schema.names("runs", role="metric"), c.name
    with pytest.raises(SchemaError, match=r"role must be one of \['identity', 'factor', 'metric', 'provenance'\]"):
        schema.Column("x", "float64", "1", "x", role="measure")
    with pytest.raises(SchemaError, match="combine must be one of"):
        schema.Column("x", "float64", "1", "x", role="metric", combine="average")
    with pytest.raises(SchemaError, match="role must be one of"):
        schema.columns("runs", role="metrics")


def test_run_totals_carries_every_runs_factor_metric_and_provenance_column():
    totals = {c.name: c for c in schema.RUN_TOTALS}
    for c in schema.RUNS:
        if c.role != "identity" or c.combine is not None:
            t = totals[c.name]
            assert (t.dtype, t.unit, t.valid, t.role, t.combine) == (c.dtype, c.unit, c.valid, c.role, c.combine)


def test_hand_lists_are_derived_from_the_schema():
    from storagebench._study import FIO_FACTORS
    from storagebench.ingest._fiofactors import _UNKNOWN, FACTOR_FIELDS
    from storagebench.plots import FACTOR_LABELS
    from storagebench.stats.comparison import _SCHEMA_FACTORS
    from storagebench.stats.crosstool import CONFIG_COLUMNS
    from storagebench.stats.points import _GUARDED

    factors = schema.names("runs", role="factor")
    assert factors == ("tool", "rw", "bs_bytes", "rwmixread_pct", "random_pct", "iodepth", "numjobs", "ioengine",
                       "direct", "target")
    assert _SCHEMA_FACTORS == factors
    assert set(_GUARDED) == set(factors) - {"target"}
    assert FACTOR_FIELDS == factors[1:] and set(_UNKNOWN) == set(FACTOR_FIELDS)
    assert FIO_FACTORS == ("rw", "bs", "rwmixread", "percentage_random", "iodepth", "numjobs", "ioengine", "direct",
                           "target")
    assert CONFIG_COLUMNS == ("rw", "bs_bytes", "rwmixread_pct", "random_pct", "iodepth", "numjobs")
    assert FACTOR_LABELS["iodepth"] == "iodepth (outstanding I/Os per job)"
    assert FACTOR_LABELS["bs_bytes"] == "I/O size, bs (KiB)"
    assert FACTOR_LABELS["random_pct"] == "random I/O, percentage_random (%)"


def test_a_fio_option_in_the_grid_gets_an_axis_label_with_its_unit():
    from storagebench.plots._style import factor_label
    from storagebench.tables import column_display

    assert factor_label("rate_iops") == "rate_iops (I/Os per s)"
    assert column_display("rate_iops") == ("rate_iops (I/Os per s)", 1.0)
    assert factor_label("thinktime") == "thinktime (µs)"
    assert factor_label("stripe_width") == "stripe width (components)"
    assert factor_label("some_study_column") == "some_study_column"  # no unit known: the name, nothing invented


def _count_slow_path(monkeypatch) -> list:
    """Patch the fio reader's slow path (entered only when a metric is missing, out of range or
    contradictory: :func:`_fiorows._lat_problem` runs there and nowhere else) to count its calls."""
    calls: list = []
    real = _fiorows._lat_problem

    def counted(block):
        calls.append(block)
        return real(block)

    monkeypatch.setattr(_fiorows, "_lat_problem", counted)
    return calls


def test_real_fio_output_stays_on_the_fast_path(monkeypatch):
    """Every row of real fio 3.33 json+ output (the 36 files of the benchmark corpus, the json+ fixture) is read
    on the fio reader's fast path: a metric whose value is NaN by default (a statistic fio prints only when
    asked, read as a required one) would send every row to the slow path and fail here."""
    calls = _count_slow_path(monkeypatch)
    files = sorted(MULTIJOB.glob("*.json"))
    assert len(files) == 36
    res = ingest_paths([*files, FIXTURES / "fio" / "single_jsonplus.json"])
    assert not res.errors and len(res.runs) >= 50
    assert calls == [], f"{len(calls)} latency blocks read on the slow path"
    assert (res.runs["note"] == "").all()
    # each required secondary metric is printed by fio for such a job (so none is NaN by default) ...
    for col, _, _ in _fiorows._REQUIRED:
        assert res.runs[col].notna().all(), col
    # ... and the slow path is what a missing one takes (the counter sees it)
    doc = json.loads((FIXTURES / "fio" / "single_jsonplus.json").read_bytes())
    del doc["jobs"][0]["read"]["slat_ns"]
    from storagebench.ingest.fio import parse_fio_output

    rows = parse_fio_output(json.dumps(doc).encode(), "no_slat.json").runs
    assert calls and "slat_mean_ns NaN" in rows[0]["note"]


def test_optional_metrics_are_read_apart_from_the_fast_path():
    """The reader's table splits into the metrics every fio row has and the optional ones (schema
    ``Valid.optional``): only the former decide the fast path."""
    optional = {c.name for c in schema.RUNS if c.valid is not None and c.valid.optional}
    assert not optional & {col for col, _, _ in _fiorows._REQUIRED}
    assert {col for col, _, _ in _fiorows.SECONDARY} <= set(schema.names("runs", role="metric"))
    assert set(_fiorows.METRIC_FIELDS) == {"iops", "bw_bytes_per_s", "io_bytes", "total_ios", "runtime_s",
                                           *(col for col, _, _ in _fiorows.SECONDARY)}


@pytest.fixture(scope="module")
def tidy(tmp_path_factory):
    """A format-1 tidy directory as ingest writes it (the demo study)."""
    from storagebench.ingest import ingest_study

    d = tmp_path_factory.mktemp("tidy")
    ingest_study(FIXTURES / "study_demo").write_parquet(d)
    return d


def _drop(path: Path, columns: list[str]) -> None:
    """Rewrite a parquet table without ``columns``, keeping its storagebench metadata (a file written before
    those columns existed)."""
    t = pq.read_table(path)
    meta = t.schema.metadata
    pq.write_table(t.drop_columns(columns).replace_schema_metadata(meta), path)


def test_a_format_1_table_without_a_newer_column_still_loads(tidy, tmp_path):
    """Adding a column keeps the format: a table written before it gets the column's unknown value, a note
    names a metric filled with NaN (the table gate's rule), and the file's metadata lists it."""
    import shutil

    d = tmp_path / "tidy"
    shutil.copytree(tidy, d)
    fresh = schema.read_table(d / "runs.parquet", "runs")
    _drop(d / "runs.parquet", ["slat_mean_ns", "usr_cpu_pct", "kernel"])
    assert schema.read_metadata(d / "runs.parquet")["format_version"] == schema.FORMAT_VERSION
    back = schema.read_table(d / "runs.parquet", "runs")
    assert back.attrs["storagebench"]["filled"] == ["slat_mean_ns", "usr_cpu_pct", "kernel"]
    assert back["slat_mean_ns"].isna().all() and back["usr_cpu_pct"].isna().all() and (back["kernel"] == "").all()
    assert back["note"].str.contains("slat_mean_ns, usr_cpu_pct: not in this table").all()
    assert schema.check_rows(back, "runs") == []
    kept = [c for c in fresh.columns if c not in ("slat_mean_ns", "usr_cpu_pct", "kernel", "note")]
    pd.testing.assert_frame_equal(back[kept], fresh[kept])
    # the run-level table of such a directory: the same columns filled
    _drop(d / "run_totals.parquet", ["slat_mean_ns"])
    totals = read_run_totals(d)
    assert totals["slat_mean_ns"].isna().all() and schema.check_rows(totals, "run_totals") == []
    # a key or core column is never filled: that file is refused, naming the column
    _drop(d / "runs.parquet", ["iops"])
    with pytest.raises(SchemaError, match=r"runs.parquet: runs table is missing columns \['iops'\]"):
        schema.read_table(d / "runs.parquet", "runs")
    _drop(d / "histograms.parquet", ["count"])
    with pytest.raises(SchemaError, match=r"histograms table is missing columns \['count'\]"):
        schema.read_table(d / "histograms.parquet")


def test_migrations_form_a_chain():
    assert sorted(schema.MIGRATIONS) == list(range(schema.FORMAT_VERSION))
    df = pd.DataFrame({"x": [1]})
    for v in range(schema.FORMAT_VERSION):
        assert isinstance(schema.MIGRATIONS[v](df, "histograms"), pd.DataFrame)
    # format 0 -> 1: runs written before `note` existed get note ''
    assert schema.MIGRATIONS[0](pd.DataFrame({"iops": [1.0]}), "runs")["note"].tolist() == [""]


def test_unknown_values_come_from_the_schema():
    by = {c.name: c for c in schema.RUNS}
    assert by["bs_bytes"].unknown == -1 and by["repetition"].unknown == 0 and by["error"].unknown == 0
    assert np.isnan(by["rwmixread_pct"].unknown) and by["direct"].unknown is False and by["rw"].unknown == ""
    assert by["started_at"].unknown is None
