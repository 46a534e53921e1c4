"""json+ bins parsed from their raw text for a whole batch (storagebench.ingest._fiorows.RowSink.parse_bins)
give exactly the tables and errors of the typed dict decoding, on real fio json+ outputs and on edits
of their bins text: what fio writes is taken on the fast path, anything else goes back to the decoder."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

import storagebench.ingest as ing
from storagebench.ingest import _fiorows as F

FIO = Path(__file__).parent / "fixtures" / "fio"
TABLES = ("runs", "histograms", "all_clients", "timeseries", "run_totals")
#: real json+ outputs of fio 3.33 (one to four bins blocks each; client/server, randrw, killed)
JSONPLUS = ["single_jsonplus.json", "numjobs4_nogroup.json", "numjobs4_group.json", "randrw_both.json",
            "clientserver.json", "cs_two_jobs.json", "sigint.json", "group_pair_nogroup.json"]


def _dict_decoding(paths):
    """ingest_paths as before the raw bins: every file's bins decoded into a dict by the typed decoder,
    then the table gate, which drops the files it refuses (as ingest does)."""
    items, skip, refused = list(ing._discover(paths, ing.MAX_FILE_BYTES)), set(), []
    while True:
        col, errors = ing._Collector(ing.MAX_FILE_BYTES), []
        ing._run([i for i in items if isinstance(i, ing.IngestError) or i.path not in skip], col, errors)
        frames = col.frames()
        bad = col.gate(frames)
        if not bad:
            return ing._result(col, errors + refused, frames)
        skip.update(bad)
        refused.extend(bad.values())


def _same(fast, slow):
    for t in TABLES:
        pd.testing.assert_frame_equal(getattr(fast, t), getattr(slow, t), check_exact=True, obj=t)
    assert [(e.path, str(e)) for e in fast.errors] == [(e.path, str(e)) for e in slow.errors]
    assert fast.files == slow.files


def _parsed_fast(data: bytes) -> bool:
    """True when the raw bins of this one output are taken on the fast path."""
    sink = F.RowSink(raw_bins=True)
    F.emit_rows(sink, data, "x.json")
    return sink.parse_bins()


@pytest.mark.parametrize("name", JSONPLUS)
def test_real_jsonplus_outputs_take_the_fast_path_and_match(name):
    data = (FIO / name).read_bytes()
    assert _parsed_fast(data)
    _same(ing.ingest_paths([FIO / name]), _dict_decoding([FIO / name]))


def test_the_whole_fixture_tree_matches_the_dict_decoding():
    """Every fio, DiskSPD and Iometer fixture, good and bad, in one batch."""
    fixtures = Path(__file__).parent / "fixtures"
    _same(ing.ingest_paths([fixtures]), _dict_decoding([fixtures]))


def _first_entry(text: str) -> re.Match:
    return re.search(r'"bins" : \{\s*"(\d+)" : (\d+),', text)


def _edit_key(text: str, new: str) -> str:
    m = _first_entry(text)
    return text[:m.start(1)] + new + text[m.end(1):]


def _edit_value(text: str, new: str) -> str:
    m = _first_entry(text)
    return text[:m.start(2)] + new + text[m.end(2):]


def _edit_bins(text: str, new: str) -> str:
    start = text.index('"bins" : {') + len('"bins" : ')
    return text[:start] + new + text[text.index("}", start) + 1:]


def _swap_first_two(text: str) -> str:
    m = re.search(r'"bins" : \{\s*("\d+" : \d+),(\s*)("\d+" : \d+),', text)
    return text[:m.start(1)] + m[3] + "," + m[2] + m[1] + "," + text[m.end():]


def _repeat_first_key(text: str) -> str:
    m = re.search(r'"bins" : \{\s*"(\d+)" : \d+,(\s*)"(\d+)"', text)
    return text[:m.start(3)] + m[1] + text[m.end(3):]


BASE = (FIO / "numjobs4_nogroup.json").read_text()
#: (label, edited output, taken on the fast path)
EDITS = [
    ("json.dumps, default separators", json.dumps(json.loads(BASE), indent=1), True),
    ("json.dumps, compact", json.dumps(json.loads(BASE), separators=(",", ":")), True),
    ("key with a leading space", _edit_key(BASE, " 12"), False),
    ("key with a trailing space", _edit_key(BASE, "12 "), False),
    ("key with a space inside", _edit_key(BASE, "1 2"), False),
    ("key with a leading zero", _edit_key(BASE, "012"), False),
    ("key 00", _edit_key(BASE, "00"), False),
    ("key -0", _edit_key(BASE, "-0"), False),
    ("empty key", _edit_key(BASE, ""), False),
    ("key with a comma", _edit_key(BASE, "1,2"), False),
    ("key with a colon", _edit_key(BASE, "1:2"), False),
    ("key with a tab", _edit_key(BASE, "1\t2"), False),
    ("key with a letter", _edit_key(BASE, "12a"), False),
    ("key as escapes", _edit_key(BASE, "\\u0031\\u0032"), False),
    ("key with a non-ASCII digit", _edit_key(BASE, "1\u0662"), False),
    ("key 2**63-1", _edit_key(BASE, str(2**63 - 1)), False),
    ("key 2**63", _edit_key(BASE, str(2**63)), False),
    ("string count", _edit_value(BASE, '"5"'), False),
    ("string count with a colon", _edit_value(BASE, '"5:3"'), False),
    ("float count", _edit_value(BASE, "5.0"), False),
    ("exponent count", _edit_value(BASE, "5e2"), False),
    ("negative count", _edit_value(BASE, "-5"), False),
    ("count -0", _edit_value(BASE, "-0"), False),
    ("count 2**63-2", _edit_value(BASE, str(2**63 - 2)), True),
    ("count 2**63-1", _edit_value(BASE, str(2**63 - 1)), False),
    ("count 2**63", _edit_value(BASE, str(2**63)), False),
    ("count 10**30", _edit_value(BASE, "1" + "0" * 30), False),
    ("count null", _edit_value(BASE, "null"), False),
    ("count true", _edit_value(BASE, "true"), False),
    ("count an object", _edit_value(BASE, "{}"), False),
    ("count an array", _edit_value(BASE, "[1]"), False),
    ("count 0", _edit_value(BASE, "0"), True),
    ("wider spacing", BASE.replace('" : ', '"  :  '), False),
    ("keys out of order", _swap_first_two(BASE), False),
    ("a repeated key", _repeat_first_key(BASE), False),
    ("bins empty", _edit_bins(BASE, "{}"), True),
    ("bins empty with spaces", _edit_bins(BASE, "{ \n }"), True),
    ("bins an array", _edit_bins(BASE, "[]"), False),
    ("bins null", _edit_bins(BASE, "null"), False),
    ("bins a string", _edit_bins(BASE, '"x"'), False),
    ("bins a number", _edit_bins(BASE, "5"), False),
    ("bins a nested object", _edit_bins(BASE, '{"1" : {"2" : 3}}'), False),
    ("one bin", _edit_bins(BASE, '{"1000" : 7}'), True),
    ("bin 0", _edit_bins(BASE, '{"0" : 7, "1000" : 3}'), True),
]


@pytest.mark.parametrize("label,text,fast", EDITS, ids=[e[0] for e in EDITS])
def test_edited_bins_give_what_the_dict_decoding_gives(tmp_path, label, text, fast):
    assert text != BASE
    data = text.encode()
    try:
        taken = _parsed_fast(data)
    except Exception:  # an error of the file itself (the same as the decoder's: compared below)
        taken = False
    assert taken is fast, label
    # in a batch with good files before and after it: they keep their rows, the edited file gets the
    # decoder's rows or error, in the same order
    for i, name in enumerate(("single_jsonplus.json", "numjobs4_group.json")):
        shutil.copy(FIO / name, tmp_path / f"{i * 2}_{name}")
    (tmp_path / "1_edited.json").write_bytes(data)
    fast_res, slow_res = ing.ingest_paths([tmp_path]), _dict_decoding([tmp_path])
    _same(fast_res, slow_res)
    assert len(fast_res.runs) >= 2  # the good files' rows are there


def test_bins_adding_up_past_int64_are_refused_by_the_table_gate(tmp_path):
    """A count of 2**63 - 2 is a valid int64, but the bins of the block then add up past 2**63 - 1 (the
    int64 sum wraps): more completions than the 2,048 I/Os of the run, which the table gate refuses for
    the file, naming the field and the block; the good file beside it keeps its rows."""
    (tmp_path / "x.json").write_text(_edit_value(BASE, str(2**63 - 2)))
    shutil.copy(FIO / "single_jsonplus.json", tmp_path / "y.json")
    res = ing.ingest_paths([tmp_path])
    assert [e.path for e in res.errors] == [str(tmp_path / "x.json")]
    reason = res.errors[0].reason
    assert "table gate" in reason and "histograms.count" in reason and "more completions than its total_ios" in reason
    assert set(res.runs["source_file"]) == {str(tmp_path / "y.json")} and res.files == 1


def test_a_bad_file_in_a_batch_of_ingest_to_parquet(tmp_path):
    """The batch with the edited file is read again, the other batches not; the tables equal the dict
    decoding's and the factor kinds of the first reading do not leak into the second."""
    src = tmp_path / "src"
    src.mkdir()
    for i, name in enumerate(("single_jsonplus.json", "numjobs4_group.json", "numjobs4_nogroup.json",
                              "randrw_both.json", "group_pair_nogroup.json")):
        shutil.copy(FIO / name, src / f"{i}.json")  # five runs: a run's rows are never split across batches
    (src / "2.json").write_text(_edit_key(BASE, " 12"))
    summary = ing.ingest_to_parquet([src], tmp_path / "out", batch_files=2)
    assert summary.files == 4 and len(summary.errors) == 1 and "2.json" in summary.errors[0].path
    slow = _dict_decoding([src])
    assert [str(e) for e in summary.errors] == [str(e) for e in slow.errors]
    for t in ("runs", "histograms", "run_totals"):
        got = pd.read_parquet(tmp_path / "out" / f"{t}.parquet")
        pd.testing.assert_frame_equal(got, getattr(slow, t).reset_index(drop=True), check_dtype=False, obj=t)


def test_a_file_failing_after_its_bins_leaves_none_of_them(tmp_path):
    """numjobs4_nogroup without the last job's bw_bytes: three blocks of bins are read, then the file is
    refused; its bins text goes with its rows, and the batch stays on the fast path."""
    doc = json.loads(BASE)
    del doc["jobs"][-1]["read"]["bw_bytes"]
    for i, name in enumerate(("single_jsonplus.json", "numjobs4_group.json")):
        shutil.copy(FIO / name, tmp_path / f"{i * 2}_{name}")
    (tmp_path / "1_edited.json").write_text(json.dumps(doc, indent=2).replace('": ', '" : '))
    col, errors = ing._Collector(ing.MAX_FILE_BYTES, raw_bins=True), []
    ing._run(ing._discover([tmp_path], col.max_bytes), col, errors)
    assert len(errors) == 1 and "bw_bytes" in str(errors[0]) and col.files == 2
    assert col.parse_bins()
    fast = ing._result(col, errors)
    _same(fast, _dict_decoding([tmp_path]))
    assert len(fast.histograms) > 0


@pytest.mark.parametrize("label,text,fast", [e for e in EDITS if e[0] in (
    "key with a leading space", "string count", "a repeated key", "keys out of order", "count 0", "one bin")],
    ids=lambda v: v if isinstance(v, str) and len(v) < 40 else "")
def test_block_by_block_steps_give_the_same(tmp_path, monkeypatch, label, text, fast):
    """parse_bins reads the text a few hundred KiB at a time: with one block per step, the edited
    block in the middle of a batch is found (or taken) all the same."""
    monkeypatch.setattr(F, "BINS_STEP", 1)
    for i, name in enumerate(("numjobs4_nogroup.json", "randrw_both.json")):
        shutil.copy(FIO / name, tmp_path / f"{i * 2}_{name}")
    (tmp_path / "1_edited.json").write_text(text)
    col, errors = ing._Collector(ing.MAX_FILE_BYTES, raw_bins=True), []
    ing._run(ing._discover([tmp_path], col.max_bytes), col, errors)
    assert col.parse_bins() is fast or bool(errors)
    _same(ing.ingest_paths([tmp_path]), _dict_decoding([tmp_path]))
