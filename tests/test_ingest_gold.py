"""Ingest's tables are exactly those of the ingest before issue 21's speed-ups, on real fio outputs.

The gold tables in ``tests/fixtures/ingest_gold/`` were written by the code of commit ``ecc8f34`` (the ingest
before the speed-ups of issue 21, part 4: block lengths and rows kept as arrays, the duplicate-``iops`` scan
outside the raw json+ bins, the bins' float sum only where a block could overflow) from real fio 3.33 outputs:
every ``*.json`` of ``tests/fixtures/fio`` (good and bad: their errors are gold too) and the 36 multi-job json+
outputs of ``benchmarks/data/fio_multijob`` (numjobs 1-2 without group_reporting: 5 to 46 bins blocks per
file ...), all in one batch, as ``ingest_paths`` reads them. To write them again (only when a change of
the tables is intended, and said in the commit)::

    git archive <ref> storagebench | tar -x -C /tmp/ref
    PYTHONPATH=/tmp/ref python tests/test_ingest_gold.py --write

The tables of this tree must equal them value for value (``assert_frame_equal``, exact, on the gold's
columns, both sides through the same parquet round trip), and the errors message for message. One change
since the gold is intended: a loose file's ``run_id`` is the XXH3-128 hash of its bytes, no longer the SHA-256
(:func:`storagebench.ingest.fio.file_run_id`); the gold's ids are mapped, file by file, before comparing.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import storagebench.ingest as ing
from storagebench.ingest.fio import parse_fio_output

ROOT = Path(__file__).resolve().parents[1]
GOLD = ROOT / "tests" / "fixtures" / "ingest_gold"
TABLES = ("runs", "histograms", "all_clients", "run_totals")


def _sources() -> list[Path]:
    return [*sorted((ROOT / "tests" / "fixtures" / "fio").glob("*.json")),
            *sorted((ROOT / "benchmarks" / "data" / "fio_multijob").glob("*.json"))]


def _relative(text: str) -> str:
    """A path inside the tree as the tree-relative path (the gold was written in another checkout)."""
    return text.replace(str(ROOT) + "/", "")


def _ingest() -> tuple[dict[str, pd.DataFrame], list[list[str]]]:
    res = ing.ingest_paths(_sources())
    tables = {}
    for t in TABLES:
        df = getattr(res, t).copy()
        if "source_file" in df.columns:
            df["source_file"] = df["source_file"].map(_relative, na_action="ignore").astype(df["source_file"].dtype)
        tables[t] = df
    errors = [[_relative(e.path or ""), _relative(e.reason)] for e in res.errors]
    return tables, errors


def _write() -> None:
    tables, errors = _ingest()
    GOLD.mkdir(parents=True, exist_ok=True)
    for t, df in tables.items():
        df.to_parquet(GOLD / f"{t}.parquet", index=False)
    (GOLD / "errors.json").write_text(json.dumps(errors, indent=1) + "\n")


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """This tree's tables of the gold's sources, through the parquet round trip the gold went through."""
    tables, errors = _ingest()
    d = tmp_path_factory.mktemp("ingest_gold")
    out = {}
    for t, df in tables.items():
        df.to_parquet(d / f"{t}.parquet", index=False)
        out[t] = pd.read_parquet(d / f"{t}.parquet")
    return out, errors


def _gold_ids() -> dict[str, str]:
    """The gold's run id of each source (the SHA-256 id of ecc8f34) -> this tree's (XXH3-128)."""
    from storagebench.ingest.fio import file_run_id

    datas = [p.read_bytes() for p in _sources()]
    return {hashlib.sha256(d).hexdigest()[:12]: file_run_id(d) for d in datas}


@pytest.mark.parametrize("table", TABLES)
def test_every_table_equals_the_ingest_before_the_speedups(fresh, table):
    gold = pd.read_parquet(GOLD / f"{table}.parquet")
    if "run_id" in gold.columns and len(gold):
        ids = _gold_ids()
        assert set(gold["run_id"]) <= set(ids), "a gold run id that is no source's SHA-256 id"
        gold["run_id"] = gold["run_id"].map(ids).astype(gold["run_id"].dtype)
    mine = fresh[0][table]
    assert len(gold) > 0 or table == "all_clients"
    missing = [c for c in gold.columns if c not in mine.columns]
    assert not missing, f"{table}: columns gone since the gold: {missing}"
    pd.testing.assert_frame_equal(mine[list(gold.columns)], gold, check_exact=True, obj=table)


def test_the_errors_equal_the_ingest_before_the_speedups(fresh):
    gold = json.loads((GOLD / "errors.json").read_text())
    assert len(gold) >= 3  # the killed, truncated and optionless fixtures
    assert fresh[1] == gold


def test_the_gold_holds_many_bins_blocks_of_real_outputs():
    """The comparison is not vacuous: thousands of bins rows from dozens of blocks, jobs with numjobs 2."""
    hist = pd.read_parquet(GOLD / "histograms.parquet")
    runs = pd.read_parquet(GOLD / "runs.parquet")
    blocks = hist.groupby(["run_id", "host", "job", "job_index", "direction"], observed=True).ngroups
    assert len(hist) > 10_000 and blocks > 50 and (runs["job_index"] > 0).any()


def test_the_iops_scan_outside_the_bins_counts_what_the_whole_text_holds():
    """``_check_duplicate_keys`` counts ``"iops"`` only outside the raw bins: on every real output the count is
    the whole text's."""
    from storagebench.ingest import _fiodoc

    seen = 0
    for p in _sources():
        data = p.read_bytes()
        try:
            doc = _fiodoc.RAW_DECODER.decode(data)
        except Exception:  # noqa: BLE001 - not one document (interval reports, fio's text): not this path
            continue
        entries = [*(doc.jobs or []), *(doc.client_stats or [])]
        raws = [d.clat_ns.bins for e in entries for d in (e.read, e.write, e.trim, e.mixed)
                if d is not _fiodoc._U and d.clat_ns is not _fiodoc._U and type(d.clat_ns.bins) is _fiodoc.msgspec.Raw]
        assert _fiodoc._iops_keys(data, raws) == len(_fiodoc._IOPS_KEY.findall(data)), p.name
        seen += len(raws)
    assert seen > 50


def test_a_duplicated_iops_is_still_refused_on_the_raw_bins_path(tmp_path):
    text = (ROOT / "tests" / "fixtures" / "fio" / "single_jsonplus.json").read_text()
    twice = re.sub(r'"iops" : ([0-9.]+),', r'"iops" : 1.0, "iops" : \1,', text, count=1)
    assert twice != text
    (tmp_path / "twice.json").write_text(twice)
    (tmp_path / "good.json").write_text(text)
    res = ing.ingest_paths([tmp_path])
    assert [Path(e.path).name for e in res.errors] == ["twice.json"]
    assert "'iops' appears twice" in res.errors[0].reason and len(res.runs) == 1


def test_the_bins_sum_check_without_the_float_sum_gives_the_same_notes():
    """``RowSink.check_bins`` skips the float64 sum when no block can pass 2**63 - 1; near that bound it
    takes it, and a block whose int64 sum wraps is still noted as more than 2**63 - 1."""
    from storagebench.ingest import _fiorows as F

    def noted(counts, n):
        sink = F.RowSink()
        for k in range(len(n)):
            sink.runs.append(tuple([""] * len(F.RUN_FIELDS)))
            sink.hist_blocks.append(("r", "local", "j", k, "read", n[k]))
            sink.hist_n.append(5)
            sink.hist_checks.append((k, ("jobs", k, "read")))
            sink.hist_rows.append(k)
        sink.check_bins(np.array(counts, dtype=np.int64), np.array(n, dtype=np.int64))
        return [r[F.RUN_FIELDS.index("note")] for r in sink.runs]

    assert noted([2, 3, 1, 4], [2, 2]) == ["", ""]
    assert noted([2, 3, 1, 1], [2, 2]) == ["", "jobs[1].read.clat_ns.bins add up to 2 completions, clat_ns.N is 5"]
    big = 2**62
    notes = noted([big, big, 1, 2], [2, 2])
    assert notes[0] == f"jobs[0].read.clat_ns.bins add up to more than {2**63 - 1} completions, clat_ns.N is 5"
    assert notes[1] == "jobs[1].read.clat_ns.bins add up to 3 completions, clat_ns.N is 5"
    half = 2**61  # 2**61 x 2 bins: past 2**53, the float sum is made; no block passes 2**63 - 1
    assert noted([half, half, 5], [2, 1]) == [f"jobs[0].read.clat_ns.bins add up to {2**62} completions, clat_ns.N is 5",
                                              ""]
    near = 2**62 - 100  # an exact sum of 2**63 - 200 whose float64 sum rounds to 2**63: "more than", as before
    assert noted([near, near, 5], [2, 1])[0] == (f"jobs[0].read.clat_ns.bins add up to more than {2**63 - 1} "
                                                 "completions, clat_ns.N is 5")
    small = 2**26  # 2**26 x 2 bins < 2**53: the float sum is skipped, the int64 sum exact
    assert noted([small, small, 5], [2, 1])[0] == f"jobs[0].read.clat_ns.bins add up to {2**27} completions, clat_ns.N is 5"


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        raise SystemExit("usage: PYTHONPATH=<tree of the reference commit> python tests/test_ingest_gold.py --write")
    _write()


@pytest.mark.parametrize("value", ["[1, 2]", '{"a": 1}', "null", "true", '"\\ud800"'],
                         ids=["list", "object", "null", "bool", "lone-surrogate"])
def test_an_option_the_decoder_refuses_gives_its_error_on_the_raw_path(tmp_path, value):
    """The raw path decodes ``job options`` and ``global options`` apart (once per distinct text): a value
    :data:`~storagebench.ingest._fiodoc.DECODER` refuses gives the file DECODER's own error, as before."""
    text = (ROOT / "tests" / "fixtures" / "fio" / "single_jsonplus.json").read_text()
    bad = text.replace('"rw" : "randread",', f'"rw" : {value},', 1)
    assert bad != text
    (tmp_path / "bad.json").write_text(bad)
    (tmp_path / "good.json").write_text(text)
    res = ing.ingest_paths([tmp_path])
    with pytest.raises(ing.IngestError) as slow:
        parse_fio_output(bad.encode(), str(tmp_path / "bad.json"))
    assert [(e.path, e.reason) for e in res.errors] == [(str(tmp_path / "bad.json"), slow.value.reason)]
    assert len(res.runs) == 1
