"""The table gate (issue 18, item 6): every row written by ingest is in the ranges and relations the
schema declares, every NaN says why, and a bad file never loses the batch.

The suite mutates the real DiskSPD XML/text samples (``/work/shared/loadgen-samples`` when present, the
same captures in ``tests/fixtures/diskspd``) and the Iometer fixtures, seeded: numbers set to negative,
2**63, 2**64, 1e309, inf, nan, -0, huge, tiny; elements and lines duplicated and deleted; files cut at
random offsets; percentiles permuted. It adds the fio fuzz corpus of ``tests/test_ingest_fuzz.py``. Each
batch of mutants is ingested with one good file by :func:`storagebench.ingest.ingest_to_parquet`, and the
parquet written is checked by the rules below -- written here, independently of
:func:`storagebench.schema.check_rows` -- and the good file's rows must be exactly its own.
"""

from __future__ import annotations

import json
import math
import random
import re
import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import time_limit

from storagebench.ingest import ingest_paths, ingest_to_parquet
from storagebench.ingest.diskspd import parse_diskspd
from storagebench.ingest.iometer import parse_iometer
from storagebench.ingest.loadgen import detect_format

FIX = Path(__file__).parent / "fixtures"
SHARED = Path("/work/shared/loadgen-samples")
SEED = 18
PER_SOURCE = 45
PER_FILE_LIMIT_S = 5.0
GOOD = FIX / "diskspd" / "virtualclient_Results_DiskSpd.xml"

VALUES = ["-1", "-5", "-2900", str(2**63), str(2**64), "1e309", "-1e309", "inf", "-inf", "nan", "NaN", "-0",
          "1e300", "1e-300", "0", "99999999999999999999", "0.000001", "-0.5"]
PCT = ["clat_p1_ns", "clat_p5_ns", "clat_p10_ns", "clat_p50_ns", "clat_p90_ns", "clat_p95_ns", "clat_p99_ns",
       "clat_p99_5_ns", "clat_p99_9_ns", "clat_p99_99_ns"]
#: the words a note may use for a NaN column, besides the column's name (the schema's groups)
GROUP = {**{c: "clat_p*_ns" for c in PCT}, **{c: "lat_*_ns" for c in ("lat_mean_ns", "lat_stdev_ns", "lat_min_ns",
                                                                       "lat_max_ns")},
         "clat_mean_ns": "clat_*_ns", "clat_stdev_ns": "clat_*_ns"}
FLOAT_METRICS = ["iops", "bw_bytes_per_s", "runtime_s", "lat_mean_ns", "lat_stdev_ns", "lat_min_ns", "lat_max_ns",
                 "clat_mean_ns", "clat_stdev_ns", "slat_mean_ns", *PCT, "usr_cpu_pct", "sys_cpu_pct"]


# ---- the mutants ----------------------------------------------------------------------------------------


def _sources() -> dict[str, bytes]:
    files = sorted((FIX / "diskspd").glob("*.xml")) + sorted((FIX / "diskspd").glob("*.txt"))
    files += sorted((FIX / "iometer").glob("*.csv")) + sorted((FIX / "iometer" / "instantaneous").glob("*.csv"))
    if SHARED.is_dir():
        files += [p for p in sorted(SHARED.iterdir()) if p.suffix in (".xml", ".txt", ".csv")]
    out: dict[bytes, str] = {}
    for p in files:
        out.setdefault(p.read_bytes(), p.name)  # the shared samples are the fixtures' originals: once each
    return {name: data for data, name in out.items()}


_NUM = re.compile(rb"(?<=[>,|\s\"=])-?\d+(?:\.\d+)?(?:e[+-]?\d+)?(?=[<,|\s\"])")
_ELEM = re.compile(rb"<(\w+)>[^<]*</\1>")
_BLOCK = re.compile(rb"<(Target|Bucket|Thread|TimeSpan|Latency|Iops)>.*?</\1>", re.S)
_MS = re.compile(rb"<(?:Read|Write|Total)Milliseconds>([^<]*)</")
_TEXT_PCT = re.compile(rb"^\s*(?:min|\d+th|\d-nines|max)\s*\|(.*)$", re.M)


def _mutate(rng: random.Random, name: str, data: bytes) -> tuple[str, bytes]:
    kind = rng.choice(["number", "number", "number", "numbers", "element", "block", "line", "truncate", "permute"])
    if kind in ("number", "numbers"):
        spots = list(_NUM.finditer(data))
        out = data
        for m in sorted(rng.sample(spots, min(len(spots), 1 if kind == "number" else 4)), key=lambda m: -m.start()):
            out = out[:m.start()] + rng.choice(VALUES).encode() + out[m.end():]
        return kind, out
    if kind in ("element", "block") and data.lstrip()[:1] in (b"<", b"\xef"):
        spots = list((_ELEM if kind == "element" else _BLOCK).finditer(data))
        if spots:
            m = rng.choice(spots)
            if rng.random() < 0.6:  # duplicated (a second <TestTimeSeconds>, the same <Target> twice ...)
                return f"{kind} duplicated", data[:m.end()] + data[m.start():m.end()] + data[m.end():]
            return f"{kind} deleted", data[:m.start()] + data[m.end():]
    if kind == "permute":
        spots = list(_MS.finditer(data)) or list(_TEXT_PCT.finditer(data))
        if len(spots) >= 2:
            a, b = sorted(rng.sample(spots, 2), key=lambda m: m.start())
            va, vb = a.group(1), b.group(1)
            out = data[:a.start(1)] + vb + data[a.end(1):b.start(1)] + va + data[b.end(1):]
            return "percentiles permuted", out
    if kind == "truncate" or kind == "permute":
        return "truncated", data[:rng.randrange(1, len(data))]
    lines = data.split(b"\n")
    i = rng.randrange(len(lines))
    if rng.random() < 0.5:
        return "line duplicated", b"\n".join(lines[:i + 1] + lines[i:])
    return "line deleted", b"\n".join(lines[:i] + lines[i + 1:])


def build_mutants() -> list[tuple[str, bytes]]:
    """(label, bytes) of every mutant: seeded, the same in every run."""
    rng = random.Random(SEED)
    out = []
    for name, data in _sources().items():
        for k in range(PER_SOURCE):
            kind, mutant = _mutate(rng, name, data)
            if mutant != data:
                out.append((f"{name}#{k} {kind}", mutant))
    return out


# ---- the independent check of a written table ------------------------------------------------------


def _named(note: str, col: str) -> bool:
    words = [col] + ([GROUP[col]] if col in GROUP else [])
    return any(re.search(rf"(?<![A-Za-z0-9_]){re.escape(w)}(?![A-Za-z0-9_])", note or "") for w in words)


def check_runs(df: pd.DataFrame, table: str) -> list[str]:
    """What is wrong with written ``runs``/``run_totals`` rows (empty: nothing)."""
    bad = []
    for i, r in enumerate(df.to_dict("records")):
        where = f"{table}[{i}] {r.get('source_file', '')}"
        for c in ("io_bytes", "total_ios"):
            if not (r[c] == -1 or 0 <= r[c] <= 2**63 - 1):
                bad.append(f"{where}: {c} = {r[c]}")
        for c in FLOAT_METRICS:
            v = r[c]
            if isinstance(v, float) and math.isnan(v):
                if not _named(r["note"], c):
                    bad.append(f"{where}: {c} NaN without a note naming it ({r['note']!r})")
            elif not (math.isfinite(v) and 0 <= v < 2.0**63):
                bad.append(f"{where}: {c} = {v!r}")
        for c in ("rwmixread_pct", "random_pct"):
            if not (math.isnan(r[c]) or 0 <= r[c] <= 100):
                bad.append(f"{where}: {c} = {r[c]!r}")
        for c in ("bs_bytes", "iodepth", "numjobs"):
            if not (r[c] == -1 or r[c] >= 1):
                bad.append(f"{where}: {c} = {r[c]!r}")
        known = [r[c] for c in PCT if not math.isnan(r[c])]
        if known != sorted(known):
            bad.append(f"{where}: percentiles not monotone {known}")
        trio = [r[c] for c in ("lat_min_ns", "lat_mean_ns", "lat_max_ns") if not math.isnan(r[c])]
        if trio != sorted(trio):
            bad.append(f"{where}: min/mean/max {trio}")
        if known and not math.isnan(r["lat_max_ns"]) and max(known) > r["lat_max_ns"] * 1.02:
            bad.append(f"{where}: a percentile {max(known)} above the maximum {r['lat_max_ns']}")
        for rate, count in (("iops", "total_ios"), ("bw_bytes_per_s", "io_bytes")):
            if r[count] >= 0 and not math.isnan(r[rate]) and not math.isnan(r["runtime_s"]):
                slack = 0.01 * r[count] + 0.01 * r[rate] + 1030 * r["runtime_s"] + 2
                if abs(r[rate] * r["runtime_s"] - r[count]) > slack:
                    bad.append(f"{where}: {rate} {r[rate]} x {r['runtime_s']} s != {count} {r[count]}")
    return bad


def check_tables(out: Path) -> list[str]:
    bad = []
    runs = pd.read_parquet(out / "runs.parquet")
    bad += check_runs(runs, "runs")
    bad += check_runs(pd.read_parquet(out / "run_totals.parquet"), "run_totals")
    if (out / "all_clients.parquet").exists():
        bad += check_runs(pd.read_parquet(out / "all_clients.parquet"), "all_clients")
    if (out / "timeseries.parquet").exists():
        ts = pd.read_parquet(out / "timeseries.parquet")
        for c in ("t_s", "value"):
            v = ts[c].to_numpy(dtype=float)
            if not (np.isfinite(v) & (v >= 0)).all():
                bad.append(f"timeseries.{c}: {sorted(set(v[~(np.isfinite(v) & (v >= 0))].tolist()))[:5]}")
    hist = pd.read_parquet(out / "histograms.parquet")
    if len(hist):
        if (hist["count"] < 0).any() or (hist["bin_ns"] < 0).any():
            bad.append("histograms: a negative bin or count")
        keys = ["run_id", "host", "job", "job_index"]
        sums = hist.groupby([*keys, "direction"])["count"].sum()
        ios = runs.assign(slack=np.where(runs["tool"] == "fio", runs["iodepth"].clip(lower=0) *
                                         runs["numjobs"].clip(lower=1), 0))
        for key, total in sums.items():
            mine = ios[(ios[keys] == pd.Series(dict(zip(keys, key[:4], strict=True)))).all(axis=1)]
            same = mine[mine["direction"] == key[4]]
            rows = same if len(same) or key[4] != "mixed" else mine
            if len(rows) and (rows["total_ios"] >= 0).all() and total > (rows["total_ios"] + rows["slack"]).sum():
                bad.append(f"histograms {key}: {total} completions, {rows['total_ios'].sum()} I/Os")
    return bad


# ---- running it ------------------------------------------------------------------------------------------




def _batches(files: list[tuple[str, bytes]], root: Path, good: Path, size: int):
    for b in range(0, len(files), size):
        d = root / f"batch{b // size}"
        d.mkdir(parents=True)
        shutil.copy(good, d / ("000_good" + good.suffix))
        names = {}
        for k, (label, data) in enumerate(files[b:b + size]):
            p = d / f"m{k:03d}{Path(label.split('#')[0]).suffix or '.json'}"
            p.write_bytes(data)
            names[str(p)] = label
        yield d, names


def _run_suite(files, tmp_path, good, size=60):
    """Ingest ``files`` in batches with ``good``; the outcome of every file, and what went wrong."""
    ref = ingest_paths([good])
    assert ref.ok and len(ref.runs)
    ref_runs = ref.runs.drop(columns=["source_file"]).reset_index(drop=True)
    problems, outcome = [], {"refused": 0, "written": 0}
    for d, names in _batches(files, tmp_path, good, size):
        out = d.with_suffix(".tidy")
        with time_limit(120, f"batch {d.name}"):
            summary = ingest_to_parquet([d], out, batch_files=len(names) + 1)
        for e in summary.errors:
            if e.reason.startswith("internal error") or "Traceback" in e.reason:
                problems.append(f"{names.get(e.path, e.path)}: {e.reason}")
        refused = {e.path for e in summary.errors}
        outcome["refused"] += len(refused & set(names))
        outcome["written"] += len(set(names) - refused)
        problems += [f"{d.name}: {p}" for p in check_tables(out)]
        runs = pd.read_parquet(out / "runs.parquet")
        good_rows = runs[runs["source_file"].str.endswith("000_good" + good.suffix)]
        got = good_rows.drop(columns=["source_file"]).reset_index(drop=True)
        try:
            pd.testing.assert_frame_equal(got, ref_runs[got.columns.tolist()], check_dtype=False)
        except AssertionError as exc:
            problems.append(f"{d.name}: the good file's rows changed or were lost: {exc}")
    return problems, outcome


MUTANTS = build_mutants()


def test_at_least_300_mutants_of_the_real_samples():
    assert len(MUTANTS) >= 300, len(MUTANTS)
    kinds = {label.split(" ", 1)[1] for label, _ in MUTANTS}
    assert {"number", "numbers", "truncated", "percentiles permuted", "element duplicated", "block duplicated",
            "line deleted"} <= kinds, kinds


def test_every_mutant_parses_or_is_refused_within_the_time_limit():
    """0 tracebacks, 0 hangs: each mutant alone, through its parser, with a per-file time limit."""
    bad = []
    for label, data in MUTANTS:
        t0 = time.perf_counter()
        try:
            with time_limit(PER_FILE_LIMIT_S, label):
                fmt = detect_format(data)
                if fmt == "iometer":
                    parse_iometer(data, label).rows()
                elif fmt in ("diskspd-xml", "diskspd-text"):
                    parse_diskspd(data, label).rows()
        except Exception as exc:  # noqa: BLE001 - an IngestError is a refusal; anything else a defect
            if type(exc).__name__ != "IngestError":
                bad.append(f"{label}: {type(exc).__name__}: {exc}")
        assert time.perf_counter() - t0 < PER_FILE_LIMIT_S
    assert not bad, "\n".join(bad[:20])


def test_mutated_loadgen_files_write_only_declared_values_and_never_lose_the_batch(tmp_path):
    problems, outcome = _run_suite(MUTANTS, tmp_path, GOOD)
    assert not problems, "\n".join(problems[:30])
    assert outcome["refused"] > 50 and outcome["written"] > 50, outcome  # both kinds met: the suite bites


def test_the_fio_fuzz_corpus_writes_only_declared_values(tmp_path):
    from test_ingest_fuzz import build_cases

    cases = [(f"{c.name}.json", c.data) for c in build_cases()]
    assert len(cases) >= 300
    problems, outcome = _run_suite(cases, tmp_path, FIX / "fio" / "single_jsonplus.json", size=100)
    assert not problems, "\n".join(problems[:30])
    assert outcome["refused"] > 50 and outcome["written"] > 50, outcome


# ---- the cases the issue names, one by one ---------------------------------------------------------------


def _one(tmp_path, name: str, data: bytes):
    d = tmp_path / "in"
    d.mkdir(exist_ok=True)
    (d / name).write_bytes(data)
    shutil.copy(GOOD, d / "good.xml")
    res = ingest_paths([d])
    assert set(res.runs["source_file"]) >= {str(d / "good.xml")}, "the good file lost its rows"
    mine = [e for e in res.errors if e.path == str(d / name)]
    return res, (mine[0].reason if mine else None), res.runs[res.runs["source_file"] == str(d / name)]


VC = GOOD.read_text()
PKB = (FIX / "diskspd" / "pkb_diskspd_result_2018.xml").read_text()


@pytest.mark.parametrize("label,text,expect", [
    ("count 2**63", VC.replace("<ReadCount>", f"<ReadCount>{2**63}", 1), "ReadCount"),
    ("negative read count", re.sub(r"<ReadCount>\d+", "<ReadCount>-5", VC, count=1), "ReadCount"),
    ("TestTimeSeconds 1e-300", re.sub(r"<TestTimeSeconds>[^<]*", "<TestTimeSeconds>1e-300", VC, count=1),
     "TestTimeSeconds is 1e-300"),
    ("second TestTimeSeconds", VC.replace("<TestTimeSeconds>", "<TestTimeSeconds>60.00</TestTimeSeconds>"
                                          "<TestTimeSeconds>", 1), "<TestTimeSeconds> appears 2 times"),
    ("target twice", re.sub(r"(<Thread>.*?)(<Target>.*?</Target>)", r"\1\2\2", VC, count=1, flags=re.S),
     "listed twice"),
    ("negative bytes", re.sub(r"<ReadBytes>\d+", "<ReadBytes>-4096", VC, count=1), "ReadBytes"),
    ("p99 above the max", re.sub(r"(<Percentile>99</Percentile>\s*<ReadMilliseconds>)[^<]*", r"\g<1>99999", VC,
                                 count=1), "clat_p99_ns"),
    ("nan bucket", re.sub(r'Read="[^"]*"', 'Read="nan"', VC, count=1), "timeseries.value"),
    ("negative bucket", re.sub(r'Read="[^"]*"', 'Read="-3"', VC, count=1), "timeseries.value"),
    ("rwmixread -2900", re.sub(r"<WriteRatio>\d+", "<WriteRatio>3000", VC, count=1), "rwmixread_pct"),
])
def test_the_named_diskspd_cases_are_refused_with_the_field_and_value(tmp_path, label, text, expect):
    res, reason, rows = _one(tmp_path, "x.xml", text.encode())
    assert reason is not None and expect in reason, (label, reason)
    assert rows.empty


@pytest.mark.parametrize("label,text,col", [
    ("negative latency", re.sub(r"<AverageReadMilliseconds>[^<]*", "<AverageReadMilliseconds>-0.5", VC, count=1),
     "lat_mean_ns"),
    ("negative stdev", re.sub(r"<ReadLatencyStdev>[^<]*", "<ReadLatencyStdev>-2", VC, count=1), "lat_stdev_ns"),
    ("inf latency", re.sub(r"<AverageReadMilliseconds>[^<]*", "<AverageReadMilliseconds>inf", VC, count=1),
     "lat_mean_ns"),
    ("truncated percentile table", re.sub(r"<Bucket>\s*<Percentile>99</Percentile>.*?</Bucket>", "", VC, count=1,
                                          flags=re.S), "clat_p99_ns"),
])
def test_a_bad_secondary_value_is_nan_with_a_note_naming_it(tmp_path, label, text, col):
    """fio's rule for DiskSPD too: a latency that cannot be is NaN, and the note names the column."""
    res, reason, rows = _one(tmp_path, "x.xml", text.encode())
    assert reason is None, reason
    read = rows[rows["direction"] == "read"].iloc[0]
    assert math.isnan(read[col]) and _named(read["note"], col), (label, read["note"])


def test_fio_contradictions_are_refused(tmp_path):
    doc = json.loads((FIX / "fio" / "single.json").read_text())
    doc["jobs"][0]["read"]["iops"] = 0  # 2,048 I/Os in 0.042 s
    text = (FIX / "fio" / "single.json").read_text()
    i = text.index('"iops" :')
    dup = text[:i] + '"iops" : 0,\n      ' + text[i:]
    d = tmp_path / "in"
    d.mkdir()
    (d / "zero.json").write_text(json.dumps(doc))
    (d / "dup.json").write_text(dup)
    shutil.copy(FIX / "fio" / "single_jsonplus.json", d / "good.json")
    res = ingest_paths([d])
    why = {Path(e.path).name: e.reason for e in res.errors}
    assert "runs.iops = 0.0" in why["zero.json"] and "total_ios = 2048" in why["zero.json"]
    assert "'iops' appears twice" in why["dup.json"]
    assert set(res.runs["source_file"]) == {str(d / "good.json")}


def test_an_int64_overflow_loses_only_its_file(tmp_path):
    """A count >= 2**63 used to raise OverflowError when the batch's frames were built: the whole batch
    was lost. Now its file is refused and the other files are written."""
    bad = PKB.replace("<ReadCount>", f"<ReadCount>{2**64}", 1)
    res, reason, rows = _one(tmp_path, "o.xml", bad.encode())
    assert reason is not None and "2**63-1" in reason and rows.empty
    assert len(res.runs) >= 1


# ---- Iometer's instantaneous file: a real format, now ingested -----------------------------------------

INST = FIX / "iometer" / "instantaneous" / "iometer_1.1.0_instantaneous.csv"


def test_an_iometer_instantaneous_file_gives_its_run_and_its_intervals():
    """The final ALL row is the run (runtime from the whole-run WORKER row's raw ticks); the update
    intervals become the run's time series (t_s from the test's time stamp, per direction)."""
    res = ingest_paths([INST])
    assert res.ok, res.errors
    (run,) = res.runs.to_dict("records")
    assert run["tool"] == "iometer" and run["direction"] == "read" and run["total_ios"] == 48000
    assert run["runtime_s"] == pytest.approx(4.005, abs=1e-3)
    assert run["iops"] * run["runtime_s"] == pytest.approx(48000, rel=1e-5)
    ts = res.timeseries
    iops = ts[ts["metric"] == "iops"]
    assert iops["t_s"].tolist() == pytest.approx([1.002, 2.0, 3.004, 4.004])
    assert iops["value"].tolist() == pytest.approx([12010 / 1.002, 11890 / 0.998, 12105 / 1.004, 11995 / 1.001],
                                                   rel=1e-5)
    assert ts[ts["metric"] == "lat_ns"]["value"].tolist() == pytest.approx([331000, 335000, 329000, 333000])
    assert res.histograms["count"].sum() == 48000


def test_a_negative_interval_in_an_instantaneous_file_is_refused(tmp_path):
    text = INST.read_text()
    lines = text.split("\n")
    i = next(k for k, ln in enumerate(lines) if ",WORKER,Worker 1,," in ln)
    parts = lines[i].split(",")
    parts[8] = "-12000"  # the interval's Read IOps
    lines[i] = ",".join(parts)
    d = tmp_path / "in"
    d.mkdir()
    (d / "inst.csv").write_text("\n".join(lines))
    shutil.copy(INST, d / "good.csv")
    res = ingest_paths([d])
    assert [Path(e.path).name for e in res.errors] == ["inst.csv"]
    assert "timeseries.value = -" in res.errors[0].reason
    assert len(res.runs) == 1
