"""Seeded fuzz suite of ingest (issue 8 item 4): it never crashes, never hangs and never invents a number.

Every case is built from the real fio 3.33 / fio 2.1 outputs in ``tests/fixtures/fio`` (or is a
special file made here), ingested with :func:`storagebench.ingest.ingest_paths` under a time limit
(``signal.setitimer``), and classified by an oracle that knows the unmutated source:

``error``
    one :class:`~storagebench.errors.IngestError` for the file, naming it (and, for a mutated
    field, its JSON path or a parent of it), not an ``internal error``, and nothing of the file
    in any table;
``valid``
    every number of every row (and every histogram bin) equal to the unmutated source's, no new note;
``nan_note``
    the rows of the source, each number equal to the source's or an "unknown" value (NaN, -1,
    NaT, False, "") *and* a note on that row naming the mutated field.

Anything else fails the test: a traceback, a hang, a row lost or invented, or a number that differs
from the source without being NaN/-1 with a note (a silent, coerced or invented number). The
counts per class are printed (``pytest -s`` or ``python tests/test_ingest_fuzz.py``).
"""

from __future__ import annotations

import copy
import json
import math
import os
import random
import re
import socket
import stat
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from conftest import Hang, time_limit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storagebench.errors import IngestError
from storagebench.ingest import ingest_paths, ingest_study
from storagebench.schema import RUNS, percentile_column

SEED = 20261125
FIO = Path(__file__).parent / "fixtures" / "fio"
#: single-document sources: field mutations of the whole document
DOC_SOURCES = ["single.json", "single_jsonplus.json", "numjobs4_nogroup.json", "numjobs4_group.json", "two_jobs.json",
               "randrw_70_30.json", "unified_rw.json", "clientserver.json", "fio2_perfkitbenchmarker.json"]
#: sources with text or several documents: field mutations of the last document, byte mutations
TEXT_SOURCES = ["status_interval.json", "note_prefix.json", "error_enospc.json", "sigint.json",
                "killed_status_interval.json"]
TIME_LIMIT_S = 20
#: columns checked number for number (labels and ids are not numbers)
NUMERIC = [c.name for c in RUNS if (c.dtype in ("float64", "int64", "bool") or c.name == "started_at")
           and c.name not in ("repetition", "run_order", "job_index")] + ["rw"]
FACTORS = ["rw", "bs_bytes", "rwmixread_pct", "random_pct", "iodepth", "numjobs", "direct"]
#: keys fio prints as JSON floats (a fraction there is a plausible value, not a mutation to catch)
FLOAT_KEYS = {"iops", "mean", "stddev", "usr_cpu", "sys_cpu"}
#: keys ingest reads (mutations are drawn mostly from these, the rest from everything else)
READ_KEYS = {"iops", "bw_bytes", "bw", "io_bytes", "io_kbytes", "total_ios", "runtime", "min", "max", "mean",
             "stddev", "N", "percentile", "bins", "jobname", "error", "elapsed", "usr_cpu", "sys_cpu", "hostname",
             "port", "timestamp", "timestamp_ms", "fio version", "global options", "job options", "read", "write",
             "trim", "mixed", "lat_ns", "clat_ns", "slat_ns", "lat", "clat", "slat", "jobs", "client_stats",
             "1.000000", "50.000000", "99.000000", "99.990000", "rw", "bs", "iodepth", "numjobs", "rwmixread",
             "direct", "ioengine", "kb_base", "percentage_random"}
OPTION_KEYS = {"rw", "bs", "iodepth", "numjobs", "rwmixread", "direct", "kb_base", "percentage_random"}

_TOKENS = {"NaN": "NaN", "Infinity": "Infinity", "-Infinity": "-Infinity", "1e309": "1e309", "-1e309": "-1e309"}
#: (name, replacement): a callable gets the old value
VALUES = [
    ("string", lambda v: str(v)), ("true", True), ("false", False), ("null", None), ("array", []),
    ("object", {}), ("-1", -1), ("-0.5", -0.5), ("2**63", 2**63), ("2**64+5", 2**64 + 5), ("1e30", 10**30),
    ("10**400", 10**400),
    ("1e308", 1e308), ("-1e308", -1e308), ("1.5", 1.5), ("token NaN", "@NaN"), ("token Infinity", "@Infinity"),
    ("token -Infinity", "@-Infinity"), ("token 1e309", "@1e309"), ("'NaN'", "NaN"), ("'inf'", "inf"),
    ("''", ""), ("'abc'", "abc"), ("nested", lambda v: [v]), ("wrapped", lambda v: {"value": v}),
]
OPTION_VALUES = [("'abc'", "abc"), ("''", ""), ("'-1'", "-1"), ("'NaN'", "NaN"), ("'inf'", "inf"), ("true", True),
                 ("null", None), ("array", []), ("object", {}), ("1.5", 1.5), ("-1", -1), ("2**64", 2**64)]
BIN_KEYS = ["-5", "abc", "1.5", "1e3", " 7", "+7", "99999999999999999999", "", "0x10", "NaN"]
BIN_COUNTS = [("1.5", 1.5), ("-1", -1), ("'7'", "7"), ("true", True), ("2**64", 2**64), ("null", None),
              ("1e308", 1e308), ("token NaN", "@NaN")]


@dataclass
class Case:
    name: str
    data: bytes
    source: str  # fixture the case was made from
    path: tuple = ()  # mutated JSON path (() for byte mutations)
    hint: str = ""  # word a note or an error must contain ("" = no requirement)
    label: str = ""  # the mutation
    any_option_value: bool = False  # hypothesis: an option may get any valid value (another configuration)
    value: object = None  # the value put at ``path`` (None: deleted or a byte mutation)

    @property
    def options_removed(self) -> bool:
        """An option, or a whole options object, deleted or emptied: fio's defaults apply (as fio
        itself omits "job options" for a job that sets none), so the factors may change; or (hypothesis)
        an option set to another value fio reads: another configuration. Metrics must not change."""
        in_options = any(k in ("job options", "global options") for k in self.path)
        return in_options and (self.label in ("delete", "object", "array") or self.any_option_value)




# ---- building the cases --------------------------------------------------------------------------------


def _dumps(doc) -> bytes:
    """fio's layout (``{`` and ``}`` alone on their lines); "@NaN"-style markers become bare JSON tokens."""
    text = json.dumps(doc, indent=2)
    for marker, token in _TOKENS.items():
        text = text.replace(json.dumps("@" + marker), token)
    return text.encode()


def _walk(doc, prefix=()):
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield (*prefix, k), v
            yield from _walk(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield (*prefix, i), v
            yield from _walk(v, (*prefix, i))


def _get(doc, path):
    for k in path:
        doc = doc[k]
    return doc


def _set(doc, path, value):
    _get(doc, path[:-1])[path[-1]] = value


def _delete(doc, path):
    parent = _get(doc, path[:-1])
    del parent[path[-1]]


def show(path: tuple) -> str:
    """``("jobs", 0, "read", "iops")`` -> ``jobs[0].read.iops`` (how messages and notes name a value)."""
    out = ""
    for k in path:
        out += f"[{k}]" if isinstance(k, int) else (f".{k}" if out else str(k))
    return out


def _doc_bounds(data: bytes) -> tuple[int, int]:
    """Byte range of the last top-level document (``{``/``}`` lines, as fio writes them)."""
    starts = [m.start() for m in re.finditer(rb"^\{\s*$", data, re.M)]
    ends = [m.end() for m in re.finditer(rb"^\}\s*$", data, re.M)]
    s = starts[-1]
    return s, min(e for e in ends if e > s)


def _field_cases(rng: random.Random, source: str, data: bytes, n: int) -> list[Case]:
    s, e = _doc_bounds(data)
    base = json.loads(data[s:e])
    paths = [p for p, _ in _walk(base)]
    read = [p for p in paths if p[-1] in READ_KEYS and "bins" not in p[:-1]]
    other = [p for p in paths if p not in read and "bins" not in p[:-1]]
    options = [p for p in read if p[-1] in OPTION_KEYS and ("job options" in p or "global options" in p)]
    text_source = source in TEXT_SOURCES
    out = []
    for _ in range(n):
        doc = copy.deepcopy(base)
        r = rng.random()
        if options and not text_source and r < 0.15:
            path = rng.choice(options)
            label, value = rng.choice(OPTION_VALUES)
            _set(doc, path, value)
        elif r < 0.85 or not other:
            path = rng.choice(read)
            if rng.random() < 0.15:
                label = "delete"
                _delete(doc, path)
            else:
                choices = [v for v in VALUES if not (v[0] == "1.5" and path[-1] in FLOAT_KEYS)]
                label, value = rng.choice(choices)
                _set(doc, path, value(_get(doc, path)) if callable(value) else value)
        else:
            path = rng.choice(other)
            label, value = rng.choice(VALUES[:8])
            _set(doc, path, value(_get(doc, path)) if callable(value) else value)
        hint = str(path[-1]) if not isinstance(path[-1], int) else ""
        out.append(Case(f"{source}: {show(path)} <- {label}", data[:s] + _dumps(doc) + data[e:], source, path, hint,
                        label))
    return out


def _bin_cases(rng: random.Random, source: str, data: bytes) -> list[Case]:
    base = json.loads(data)
    blocks = [p for p, v in _walk(base) if p[-1] == "bins" and isinstance(v, dict) and v]
    out = []
    for key in BIN_KEYS:
        doc = copy.deepcopy(base)
        path = rng.choice(blocks)
        bins = _get(doc, path)
        old = rng.choice(sorted(bins))
        bins[key] = bins.pop(old)
        out.append(Case(f"{source}: {show(path)} key {old} -> {key!r}", _dumps(doc), source, path, "bins"))
    for label, value in BIN_COUNTS:
        doc = copy.deepcopy(base)
        path = rng.choice(blocks)
        bins = _get(doc, path)
        bins[rng.choice(sorted(bins))] = value
        out.append(Case(f"{source}: {show(path)} count <- {label}", _dumps(doc), source, path, "bins", label))
    doc = copy.deepcopy(base)  # a bin deleted: no number is invented, but the bins no longer add up to N
    path = rng.choice(blocks)
    _get(doc, path).pop(rng.choice(sorted(_get(doc, path))))
    out.append(Case(f"{source}: {show(path)} one bin deleted", _dumps(doc), source, path, "bins"))
    return out


def _byte_cases(rng: random.Random, source: str, data: bytes, other: bytes) -> list[Case]:
    n = len(data)
    cases = []
    for _ in range(3):
        cut = rng.randrange(1, n - 2)
        cases.append((f"truncated at byte {cut}", data[:cut]))
    for _ in range(2):
        at = rng.randrange(n)
        cases.append((f"garbage bytes at {at}", data[:at] + bytes(rng.randrange(256) for _ in range(16)) + data[at:]))
    at = rng.randrange(n)
    cases.append((f"byte {at} -> 0xff", data[:at] + b"\xff" + data[at + 1:]))
    at = rng.randrange(n)
    cases.append((f"NUL at {at}", data[:at] + b"\x00" + data[at:]))
    cases.append(("document duplicated", data + data))
    cases.append(("another fio document appended", data + b"\n" + other))
    cases.append(("a line of text first", b"fio: something odd happened\n" + data))
    cases.append(("UTF-8 BOM first", b"\xef\xbb\xbf" + data))
    return [Case(f"{source}: {label}", d, source) for label, d in cases]


def _whole_file_cases(rng: random.Random) -> list[Case]:
    deep = b'{"jobs": [{"jobname": "x", "error": 0, "deep": ' + b"[" * 100_000 + b"]" * 100_000 + b"}]}"
    return [Case(f"whole file: {label}", d, "") for label, d in [
        ("empty", b""), ("blanks", b" \n\t\n"), ("random bytes", bytes(rng.randrange(256) for _ in range(4096))),
        ("a JSON array", b"[1, 2, 3]"), ("a JSON string", b'"fio"'), ("null", b"null"), ("{}", b"{}"),
        ("no jobs", b'{"jobs": []}'), ("jobs is an object", b'{"jobs": {}}'), ("job is a number", b'{"jobs": [5]}'),
        ("100,000 nested arrays", deep), ("NaN token", b'{"jobs": NaN}'), ("UTF-16", "{\"jobs\": []}".encode("utf-16")),
        ("lone surrogate", b'{"fio version": "fio-3.33", "jobs": [{"jobname": "\\ud800", "error": 0}]}'),
    ]]


def build_cases() -> list[Case]:
    """The fio-output cases: at least 300, the same ones in every run (seeded)."""
    rng = random.Random(SEED)
    cases: list[Case] = []
    for source in DOC_SOURCES + TEXT_SOURCES:
        data = (FIO / source).read_bytes()
        cases += _field_cases(rng, source, data, 30 if source in DOC_SOURCES else 12)
        other = (FIO / rng.choice(DOC_SOURCES)).read_bytes()
        cases += _byte_cases(rng, source, data, other)
        if source in ("single_jsonplus.json", "numjobs4_nogroup.json", "randrw_70_30.json"):
            cases += _bin_cases(rng, source, data)
    cases += _whole_file_cases(rng)
    return cases


# ---- the oracle -------------------------------------------------------------------------------------------


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if a is pd.NaT or b is pd.NaT:
        return a is b
    return a == b


def _unknown(col: str, value) -> bool:
    if col == "rw":
        return value == ""
    if col == "started_at":
        return value is pd.NaT
    if isinstance(value, bool):
        return value is False
    if isinstance(value, float):
        return math.isnan(value)
    return value == -1


def _rows(df: pd.DataFrame) -> list[dict]:
    return [{c: (None if c not in df else v) for c, v in row.items()} for row in df.to_dict("records")]


def _hist(df: pd.DataFrame) -> Counter:
    return Counter(map(tuple, df[["direction", "bin_ns", "count"]].itertuples(index=False)))


#: the table column a JSON key of fio's output becomes (the table gate's refusals name columns)
_GATE_COLUMN = {"iops": "iops", "bw_bytes": "bw_bytes_per_s", "bw": "bw_bytes_per_s", "io_bytes": "io_bytes",
              "io_kbytes": "io_bytes", "total_ios": "total_ios", "runtime": "runtime_s", "bs": "bs_bytes",
              "blocksize": "bs_bytes", "iodepth": "iodepth", "numjobs": "numjobs", "rwmixread": "rwmixread_pct",
              "rwmixwrite": "rwmixread_pct", "percentage_random": "random_pct", "N": "count", "bins": "count"}


def _mentions(text: str, path: tuple) -> bool:
    if not path:
        return True
    if text.startswith("refused by the table gate: "):  # names the table field and its value instead
        cols = {_GATE_COLUMN.get(str(k)) for k in path} - {None}
        if any(str(k).startswith("percentile") for k in path) or "clat_ns" in path or "clat" in path:
            cols |= {"clat_p", "lat_max_ns", "clat_mean_ns", "count"}
        if "lat_ns" in path or "lat" in path:
            cols |= {"lat_min_ns", "lat_mean_ns", "lat_max_ns"}
        return any(f".{c}" in text or f" {c} " in text or f"{c} =" in text for c in cols)
    need = min(len(path), 2)
    return any(show(path[:k]) in text for k in range(len(path), need - 1, -1)) or str(path[0]) in text and need == 1


def classify(case: Case, res, refs: list, file: str) -> str:
    """error / valid / nan_note (or valid_partial: an earlier complete document of a --status-interval
    source, flagged partial), or an AssertionError saying what went wrong."""
    if res.errors:
        assert len(res.errors) == 1, [str(e) for e in res.errors]
        err = res.errors[0]
        assert isinstance(err, IngestError) and err.path == file, err
        assert not err.reason.startswith("internal error"), err
        assert res.runs.empty and res.histograms.empty and res.all_clients.empty, "a bad file left rows behind"
        token = case.label.split(" ", 1)[1] if case.label.startswith("token ") else None
        quoted = bool(token) and re.search(r"invalid JSON at line \d+, byte \d+: .*" + re.escape(token), err.reason)
        # not JSON (NaN, Infinity): the message quotes the line with its number; else it names the path
        assert quoted or _mentions(err.reason, case.path), f"the error does not name {show(case.path)}: {err.reason}"
        return "error"
    ref, *earlier = refs
    if earlier and res.runs["partial"].all() and not ref.runs["partial"].all():
        for older in earlier:  # the last document was lost: an earlier complete one is used
            try:
                _compare(case, res, older, skip=("partial",))
            except AssertionError:
                continue
            return "valid_partial"
    return _compare(case, res, ref)


#: JSON leaf (relative to a direction block or a job entry) -> (runs column, factor to its unit)
_COLUMN_OF = {("iops",): ("iops", 1.0), ("bw_bytes",): ("bw_bytes_per_s", 1.0), ("io_bytes",): ("io_bytes", 1),
              ("total_ios",): ("total_ios", 1), ("runtime",): ("runtime_s", 1e-3), ("usr_cpu",): ("usr_cpu_pct", 1.0),
              ("sys_cpu",): ("sys_cpu_pct", 1.0), ("bw",): ("bw_bytes_per_s", 1024.0), ("error",): ("error", 1)}
for _blk, _f in (("lat_ns", 1.0), ("clat_ns", 1.0), ("slat_ns", 1.0), ("lat", 1e3), ("clat", 1e3), ("slat", 1e3)):
    _pre = _blk.split("_")[0]
    for _k, _c in (("mean", "mean"), ("stddev", "stdev"), ("min", "min"), ("max", "max")):
        if _pre != "slat" or _k == "mean":
            if not (_pre == "clat" and _k in ("min", "max")):
                _COLUMN_OF[(_blk, _k)] = (f"{_pre}_{_c}_ns", _f)
    if _pre == "clat":
        for _p in (1.0, 5.0, 10.0, 50.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.99):
            _COLUMN_OF[(_blk, "percentile", f"{_p:.6f}")] = (percentile_column(_p), _f)


def _own_number(case: Case, col: str, stored) -> bool:
    """The stored value is the number the mutated file itself holds at the mutated path (in the
    column's unit): a plausible value put there, faithfully stored, not a coerced or invented one."""
    value = case.value
    if not case.path or isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if col == "started_at" and case.path[-1] in ("elapsed", "timestamp", "timestamp_ms"):
        doc = json.loads(case.data)  # fio's rule: time stamp minus the longest elapsed
        ts = doc["timestamp_ms"] / 1000 if "timestamp_ms" in doc else doc.get("timestamp")
        elapsed = max((e.get("elapsed", 0) for e in doc.get("jobs") or doc.get("client_stats")), default=0)
        return stored is not pd.NaT and abs(stored.timestamp() - (ts - elapsed)) < 1e-3
    for n in range(1, 4):
        hit = _COLUMN_OF.get(tuple(case.path[-n:]))
        if hit and hit[0] == col:
            return isinstance(stored, (int, float)) and math.isclose(stored, value * hit[1], rel_tol=1e-12)
    return False


def _counts_moved(case: Case) -> bool:
    return (len(case.path) >= 2 and case.path[-1] in ("total_ios", "io_bytes") and isinstance(case.value, int)
            and not isinstance(case.value, bool) and 0 <= case.value <= 2**63 - 1)


def _compare(case: Case, res, ref, skip=()) -> str:
    noted = False
    exempt = {*FACTORS, "partial"} if case.options_removed else set()  # partial: runtime/size are options
    for table in ("runs", "all_clients"):
        got, want = _rows(getattr(res, table)), _rows(getattr(ref, table))
        if len(got) != len(want) and _counts_moved(case):
            # a plausible I/O count put into a direction block decides whether it gets a row: that
            # row holds the file's own numbers; every other row must be the source's
            direction = case.path[-2]
            mine = [g for g in got if g["direction"] == direction]
            theirs = [w for w in want if w["direction"] == direction]
            got = [g for g in got if g["direction"] != direction]
            want = [w for w in want if w["direction"] != direction]
            col = _COLUMN_OF[(case.path[-1],)][0]
            for g in mine:  # a source row of that direction, or the new one with the file's number (KiB in fio 2.1)
                assert any(all(_same(g[c], w[c]) for c in NUMERIC) for w in theirs) or \
                    g[col] in (case.value, case.value * 1024), "a new row without the file's number"
            noted = True
        assert len(got) == len(want), f"{table}: {len(got)} rows, the source has {len(want)} (lost or invented)"
        for g, w in zip(got, want, strict=True):
            for col in NUMERIC:
                if _same(g[col], w[col]) or col in skip or col in exempt:
                    continue
                if _own_number(case, col, g[col]):
                    noted = True  # counted apart: the file's own number
                    continue
                assert _unknown(col, g[col]), f"silent number: {table}.{col} = {g[col]!r}, source {w[col]!r}"
                assert g["note"], f"{table}.{col} = {g[col]!r} (source {w[col]!r}) without a note"
                noted = True
            if g["note"] != w["note"]:
                assert case.hint in g["note"] or (not case.hint), f"note {g['note']!r} does not name {case.hint!r}"
                noted = True
    got_h, want_h = _hist(res.histograms), _hist(ref.histograms)
    if got_h != want_h:
        assert not (got_h - want_h), f"histogram bins the source does not have: {list((got_h - want_h))[:3]}"
        # bins missing (nothing invented): noted when the file shows they should be there
        if not any("bins" in n or "clat" in n for n in res.runs["note"]):
            return "no_histogram"
        noted = True
    return "nan_note" if noted else "valid"


def _references(source: str, tmp: Path) -> list | None:
    """The source's tables, then (for a file of several documents) those of the file cut after each
    earlier complete document."""
    if not source:
        return None
    data = (FIO / source).read_bytes()
    refs = [ingest_paths([FIO / source])]
    ends = [m.end() for m in re.finditer(rb"^\}\s*$", data, re.M)]
    for k, end in enumerate(ends[:-1]):
        cut = tmp / f"ref-{k}.json"
        cut.write_bytes(data[:end] + b"\n")
        refs.append(ingest_paths([cut]))
    return refs


def run_case(case: Case, tmp: Path, refs: dict) -> str:
    file = tmp / "case.json"
    file.write_bytes(case.data)
    with time_limit(TIME_LIMIT_S):
        res = ingest_paths([file])
    if case.source not in refs:
        refs[case.source] = _references(case.source, tmp)
    ref = refs[case.source]
    if ref is None:  # a whole-file case: no source to compare to
        assert res.errors and not res.runs.size, "a file that is no fio output was ingested"
        return classify(case, res, [res], str(file))
    return classify(case, res, ref, str(file))


def _report(title: str, counts: Counter, capsys=None) -> None:
    line = f"{title}: {sum(counts.values())} cases: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    if capsys is not None:
        with capsys.disabled():
            print("\n" + line)
    else:
        print(line)


# ---- the tests ----------------------------------------------------------------------------------------------


CASES = build_cases()


@pytest.mark.slow
def test_fuzzed_fio_outputs_never_crash_hang_or_invent_a_number(tmp_path, capsys):
    assert len(CASES) >= 300
    refs: dict = {}
    counts: Counter = Counter()
    failures = []
    for case in CASES:
        try:
            counts[run_case(case, tmp_path, refs)] += 1
        except (AssertionError, Hang, Exception) as exc:  # noqa: B014 - every kind is a failure, listed below
            failures.append(f"{case.name}: {type(exc).__name__}: {exc}")
    _report("fuzzed fio outputs", counts + Counter({"FAILED": len(failures)} if failures else {}), capsys)
    assert not failures, "\n".join(failures[:30])
    assert counts["error"] >= 100 and counts["nan_note"] >= 20 and counts["valid"] >= 20, counts


@pytest.mark.slow
@settings(derandomize=True, database=None, max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_any_value_anywhere_is_an_error_the_same_number_or_nan_with_a_note(data, tmp_path_factory):
    """hypothesis: an arbitrary JSON value at an arbitrary path of a real output (derandomized: the
    same examples every run)."""
    source = data.draw(st.sampled_from(DOC_SOURCES))
    raw = (FIO / source).read_bytes()
    doc = json.loads(raw)
    paths = [p for p, _ in _walk(doc) if "bins" not in p[:-1]]
    path = data.draw(st.sampled_from(paths))
    scalar = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                       st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12))
    value = data.draw(st.one_of(scalar, st.lists(scalar, max_size=3), st.dictionaries(st.text(max_size=5), scalar,
                                                                                      max_size=3)))
    _set(doc, path, value)
    case = Case(f"{source}: {show(path)} <- {value!r}", _dumps(doc), source, path,
                str(path[-1]) if not isinstance(path[-1], int) else "", any_option_value=True, value=value)
    run_case(case, tmp_path_factory.mktemp("h"), _HYP_REFS)


_HYP_REFS: dict = {}


# ---- point.json and provenance.json ----------------------------------------------------------------------

GOOD_POINT = {"study": "fz", "run_id": "run0", "repetition": 1, "run_order": 3,
              "factors": {"stripe": 4, "pattern": "p4k"}, "options": {"iodepth": 8}}
POINT_CASES = [
    ("run_id is a number", {"run_id": 5}), ("run_id missing", {"run_id": None}), ("run_id empty", {"run_id": ""}),
    ("repetition is a string", {"repetition": "1"}), ("repetition is true", {"repetition": True}),
    ("repetition is -5", {"repetition": -5}), ("repetition is 2**63", {"repetition": 2**63}),
    ("repetition is 1.5", {"repetition": 1.5}), ("run_order is -2", {"run_order": -2}),
    ("run_order is an object", {"run_order": {}}), ("study is a number", {"study": 5}),
    ("study is a list", {"study": ["a"]}), ("factors is a list", {"factors": [1, 2]}),
    ("factors is a string", {"factors": "stripe=4"}), ("a factor is an object", {"factors": {"stripe": {"a": 1}}}),
    ("a factor is 2**70", {"factors": {"stripe": 2**70}}), ("options is a string", {"options": "iodepth=8"}),
    ("an option is an object", {"options": {"iodepth": {}}}), ("an option is abc", {"options": {"iodepth": "abc"}}),
]
WHOLE_POINT_CASES = [("a JSON array", b"[1]"), ("a string", b'"run0"'), ("invalid JSON", b'{"run_id": '),
                     ("empty", b""), ("NaN token", b'{"run_id": "r", "repetition": NaN}'), ("not UTF-8", b'{"run_id": "\xff"}')]
PROV_CASES = [("started_at is a number", {"started_at": 5}), ("started_at is not a time", {"started_at": "yesterday"}),
              ("started_at in 9999", {"started_at": "9999-01-01T00:00:00Z"}), ("fio_version is a number",
                                                                              {"fio_version": 3.33}),
              ("kernel is a list", {"kernel": ["6.1"]}), ("hostname is an object", {"hostname": {}}),
              ("provenance is a list", None)]


def _run_dir(root: Path, name: str, point: bytes, prov: bytes | None = None) -> Path:
    d = root / "raw" / name
    d.mkdir(parents=True)
    (d / "output.json").write_bytes((FIO / "single_jsonplus.json").read_bytes())
    (d / "point.json").write_bytes(point)
    if prov is not None:
        (d / "provenance.json").write_bytes(prov)
    return d


def test_fuzzed_point_and_provenance_json_give_per_run_errors(tmp_path, capsys):
    cases = []
    for label, change in POINT_CASES:
        point = {**GOOD_POINT, **change}
        if change.get("run_id", "x") is None:
            point.pop("run_id")
        cases.append((f"point.json: {label}", json.dumps(point).encode(), None))
    cases += [(f"point.json: {label}", data, None) for label, data in WHOLE_POINT_CASES]
    good_prov = {"fio_version": "fio-3.33", "kernel": "6.1", "hostname": "h", "started_at": "2026-11-22T05:00:00Z"}
    for label, change in PROV_CASES:
        prov = [good_prov] if change is None else {**good_prov, **change}
        cases.append((f"provenance.json: {label}", json.dumps(GOOD_POINT).encode(), json.dumps(prov).encode()))
    assert len(cases) >= 20
    counts: Counter = Counter()
    for i, (label, point, prov) in enumerate(cases):
        study = tmp_path / f"s{i}"
        _run_dir(study, "good", json.dumps(GOOD_POINT).encode())
        bad = _run_dir(study, "zbad", point, prov)
        with time_limit(TIME_LIMIT_S):
            res = ingest_study(study)
        good = res.runs[res.runs["source_file"].str.contains("/good/")]
        assert len(good) == 1 and good.iloc[0]["note"] == "", label  # the good run is always kept
        if not res.errors:  # an option fio would not read: its factor unknown, with a note
            (row,) = res.runs[res.runs["source_file"].str.contains("/zbad/")].to_dict("records")
            assert label == "point.json: an option is abc", f"{label}: accepted"
            assert row["iodepth"] == -1 and "iodepth='abc'" in row["note"], row["note"]
            assert row["iops"] == good.iloc[0]["iops"]
            counts["nan_note"] += 1
            continue
        assert len(res.runs) == 1 and len(res.errors) == 1, (label, res.errors)
        err = res.errors[0]
        assert err.path.startswith(str(bad)) and not err.reason.startswith("internal error"), (label, err)
        assert Path(err.path).name in ("point.json", "provenance.json", "zbad"), (label, err)
        counts["error"] += 1
    _report("fuzzed point.json/provenance.json", counts, capsys)


def test_a_factor_with_levels_of_two_types_is_refused_per_run(tmp_path):
    _run_dir(tmp_path, "a", json.dumps({**GOOD_POINT, "run_id": "a", "factors": {"stripe": 4}}).encode())
    _run_dir(tmp_path, "b", json.dumps({**GOOD_POINT, "run_id": "b", "factors": {"stripe": "4"}}).encode())
    _run_dir(tmp_path, "c", json.dumps({**GOOD_POINT, "run_id": "c", "factors": {"stripe": 8.5}}).encode())
    res = ingest_study(tmp_path)
    assert list(res.runs["run_id"]) == ["a", "c"] and list(res.runs["stripe"]) == [4.0, 8.5]
    (err,) = res.errors
    assert "factor 'stripe' = '4' is a string, but a number in" in err.reason and err.path.endswith("b/output.json")


# ---- special files -------------------------------------------------------------------------------------------


def _special_files(root: Path) -> list[tuple[str, Path, str]]:
    """(label, what to ingest, expected class) for files that are not plain fio outputs."""
    tree = root / "tree"
    tree.mkdir()
    good = (FIO / "single_jsonplus.json").read_bytes()
    (tree / "good.json").write_bytes(good)
    out = []
    os.mkfifo(tree / "fifo.json")
    out.append(("a FIFO named *.json in a directory", tree / "fifo.json", "error"))
    os.symlink("/dev/zero", tree / "zero.json")
    out.append(("a symlink to /dev/zero in a directory", tree / "zero.json", "error"))
    os.mknod(tree / "null.json", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    out.append(("a character device node (1:3) named *.json", tree / "null.json", "error"))
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tree / "sock.json"))
    sock.close()
    out.append(("a socket named *.json", tree / "sock.json", "error"))
    outside = root / "outside.json"
    outside.write_bytes(good)
    os.symlink(outside, tree / "out.json")
    out.append(("a symlink to a fio output outside the tree", tree / "out.json", "error"))
    os.symlink(root, tree / "updir")
    out.append(("a symlink to a directory outside the tree", tree / "updir", "error"))
    os.symlink(tree / "nowhere.json", tree / "broken.json")
    out.append(("a broken symlink", tree / "broken.json", "error"))
    os.symlink(tree / "good.json", tree / "alias.json")
    out.append(("a symlink to a fio output inside the tree", tree / "alias.json", "valid"))
    os.symlink(tree, tree / "loop")
    out.append(("a symlink to the tree itself (a loop)", tree / "loop", "skipped"))
    name = os.fsdecode(b"r\xe9sultat-\xff.json")  # Latin-1 bytes: not UTF-8
    (tree / name).write_bytes(good)
    out.append(("a non-UTF-8 file name", tree / name, "valid"))
    sub = tree / os.fsdecode(b"dir-\xfe")
    sub.mkdir()
    (sub / "in.json").write_bytes(good)
    out.append(("a file in a non-UTF-8 directory name", sub / "in.json", "valid"))
    big = tree / "big.json"
    big.write_bytes(good + b" " * 70_000)
    out.append(("a file above the size cap (64 KiB here)", big, "error"))
    return out


def test_special_files_are_refused_by_name_and_never_block(tmp_path, capsys):
    cases = _special_files(tmp_path)
    tree = tmp_path / "tree"
    with time_limit(TIME_LIMIT_S):
        res = ingest_paths([tree], max_file_bytes=64 * 1024)
    errors = {e.path: e.reason for e in res.errors}
    sources = set(res.runs["source_file"])
    counts: Counter = Counter()
    for label, path, expected in cases:
        key = str(path)
        if expected == "error":
            assert key in errors, (label, sorted(errors))
            assert not errors[key].startswith("internal error")
            assert any(w in errors[key] for w in ("not a regular file", "outside the tree", "broken symlink",
                                                   "size cap")), (label, errors[key])
        elif expected == "valid":
            shown = key.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            assert shown in sources, (label, sorted(sources))
        else:
            assert key not in errors and not any(s.startswith(key) for s in sources), label
        counts[expected] += 1
    assert "\\xff.json" in "".join(sources) and "dir-\\xfe" in "".join(sources)
    assert len(res.runs) == 4 and set(res.runs["iops"]) == {40960.0}  # good, alias, the two non-UTF-8 names
    assert "bytes, more than the size cap of 65,536 bytes" in errors[str(tree / "big.json")]
    # named explicitly, each special file is refused as well (the FIFO without blocking)
    for label, path, expected in cases:
        if expected == "error" and "outside" not in label:
            with time_limit(TIME_LIMIT_S):
                one = ingest_paths([path], max_file_bytes=64 * 1024)
            assert one.errors and not one.errors[0].reason.startswith("internal error"), label
    # the parquet route: the non-UTF-8 names reach runs.parquet as text
    res.write_parquet(tmp_path / "pq")
    assert "\\xff.json" in "".join(pd.read_parquet(tmp_path / "pq" / "runs.parquet")["source_file"])
    _report("special files", counts, capsys)


if __name__ == "__main__":  # the table for the lead: python tests/test_ingest_fuzz.py
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        refs: dict = {}
        counts: Counter = Counter()
        for c in CASES:
            try:
                counts[run_case(c, Path(d), refs)] += 1
            except (AssertionError, Hang) as exc:
                counts["FAILED"] += 1
                print(f"FAILED {c.name}: {exc}")
        _report("fuzzed fio outputs", counts)
    _ = pytest
