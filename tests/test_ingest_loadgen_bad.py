"""Bad DiskSPD and Iometer inputs: each gives one clear IngestError naming the file, no crash, no rows.

Every bad input is CONSTRUCTED here from a fixture (captured DiskSPD, constructed Iometer) by the
edit written in its builder. They go through ``ingest_paths`` as a user would pass them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from storagebench.ingest import ingest_paths
from storagebench.ingest.diskspd import parse_diskspd

FIX = Path(__file__).parent / "fixtures"
PKB = (FIX / "diskspd" / "pkb_diskspd_result_2018.xml").read_text()
VCX = (FIX / "diskspd" / "virtualclient_Results_DiskSpd.xml").read_text()
RW = (FIX / "diskspd" / "virtualclient_DiskSpdExample-ReadWrite.txt").read_text()
W8K = (FIX / "diskspd" / "virtualclient_Write8k.txt").read_text(encoding="utf-8-sig")
IOM = (FIX / "iometer" / "iometer_1.1.0_two_tests.csv").read_text()
OLD = (FIX / "iometer" / "iometer_2006.07.27_two_managers.csv").read_bytes().decode()

BOMB = """<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>
<Results><System><ComputerName>&lol3;</ComputerName></System></Results>"""
XXE = """<?xml version="1.0"?>
<!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]>
<Results><System><ComputerName>&x;</ComputerName></System></Results>"""


def _drop_line(text: str, pattern: str, nth: int = 0) -> str:
    lines = text.split("\n")
    hits = [i for i, ln in enumerate(lines) if re.search(pattern, ln)]
    del lines[hits[nth]]
    return "\n".join(lines)


def _sub_once(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def _iometer_all_field(text: str, col: int, value: str, row: str = "ALL,") -> str:
    lines = text.split("\n")
    k = next(i for i, ln in enumerate(lines) if ln.startswith(row))
    f = lines[k].split(",")
    f[col] = value
    lines[k] = ",".join(f)
    return "\n".join(lines)


# (id, file name, bytes, expected words in the reason)
BAD = [
    # ---- DiskSPD XML
    ("xml-truncated", "a.xml", PKB[: len(PKB) // 2].encode(), "not well-formed XML"),
    ("xml-billion-laughs", "bomb.xml", BOMB.encode(), "refused"),
    ("xml-external-entity", "xxe.xml", XXE.encode(), "refused"),
    ("xml-no-timespan", "empty.xml", b"<Results><System><ComputerName>x</ComputerName></System></Results>",
     "no <TimeSpan> results"),
    ("xml-no-test-time", "t.xml", re.sub(r"<TestTimeSeconds>.*?</TestTimeSeconds>", "", PKB).encode(),
     "missing <TestTimeSeconds>"),
    ("xml-interrupted", "z.xml", _sub_once(PKB, "<TestTimeSeconds>30.02", "<TestTimeSeconds>0.00").encode(),
     "interrupted"),
    ("xml-counts-do-not-add-up", "c.xml", _sub_once(PKB, "<IOCount>22645</IOCount>", "<IOCount>22646</IOCount>")
     .encode(), "do not add up"),
    ("xml-thread-trimmed", "th.xml", re.sub(r"<Thread>\s*<Id>3</Id>.*?</Thread>", "", PKB, flags=re.S).encode(),
     "ThreadCount is 4 but 3"),
    ("xml-non-numeric-count", "n.xml", _sub_once(PKB, "<ReadCount>22645</ReadCount>", "<ReadCount>lots</ReadCount>")
     .encode(), "must be a count from 0 to 2**63-1"),
    ("xml-percentile-twice", "p.xml", _sub_once(VCX, "<Percentile>99</Percentile>", "<Percentile>98</Percentile>")
     .encode(), "listed twice"),
    ("xml-utf16-without-bom", "u.xml", PKB.encode("utf-16-le"), "no byte-order mark"),
    # ---- DiskSPD text
    ("text-no-total-line", "nt.txt", _drop_line(RW, r"^total:", 1).encode(), "no 'total:' line"),
    ("text-trimmed-thread-row", "tr.txt", _drop_line(W8K, r"^\s+7 \|", 0).encode(), "rows sum to"),
    ("text-edited-thread-iops", "ed.txt", _sub_once(RW, "|    1189.03 |", "|    1289.03 |").encode(), "does not match"),
    ("text-edited-total-mib", "mib.txt", _sub_once(RW, "total:         146169856 |        35686 |       4.64",
                                                    "total:         146169856 |        35686 |       4.94").encode(),
     "does not match"),
    ("text-read-plus-write", "rw.txt", _sub_once(_sub_once(RW, "102645760 |        25060", "102645760 |        25061"),
                                                  "102645760 |        25060", "102645760 |        25061").encode(),
     "!= Total IO total"),
    ("text-no-results", "nr.txt", RW.split("Results for timespan")[0].encode(), "no 'Results for timespan'"),
    ("text-interrupted", "int.txt", (RW.split("actual test time")[0].rsplit("\n", 3)[0]
                                     + "\nThe test was interrupted before the measurements began. No results are "
                                       "displayed.\n").encode(), "no 'actual test time:'"),
    ("text-cut-mid-row", "cut.txt", RW[: RW.index("Read IO") + 250].encode(), "cut line"),
    ("text-utf16-without-bom", "u.txt", RW.encode("utf-16-le"), "no byte-order mark"),
    ("diskspd-for-linux", "lin.txt", b"Results for job 0:\nSystem info:\ntest time: 10s\n", "DiskSPD for Linux"),
    # ---- Iometer
    ("iometer-cut-mid-block", "cut.csv", IOM[: IOM.rindex("'Time Stamp")].encode(), "cut mid-block"),
    ("iometer-cut-mid-row", "row.csv", IOM[: IOM.index("ALL,") + 120].encode(), "cut mid-row"),
    ("iometer-no-all-row", "noall.csv", _drop_line(IOM, r"^ALL,", 0).encode(), "no ALL row"),
    ("iometer-parts-do-not-add-up", "parts.csv", _iometer_all_field(OLD, 29, "1", row="DISK,").encode(),  # Read I/Os
     "sum to"),
    ("iometer-iops-sum", "iops.csv", _iometer_all_field(IOM, 6, "50000").encode(), "Read IOps + Write IOps"),
    ("iometer-non-numeric", "nn.csv", _iometer_all_field(IOM, 32, "many").encode(), "non-numeric"),
    ("iometer-specs-never-end", "spec.csv", IOM[: IOM.index("'End access specifications")].encode(),
     "never end"),
    ("iometer-instantaneous", "inst.csv", IOM.replace("'Target Type,", "TimeStamp,'Target Type,").encode(),
     "instantaneous"),
    ("iometer-decimal-disagrees", "dec.csv", _iometer_all_field(IOM, 12, "1").encode(), "not the same rate"),
    ("iometer-icf-is-not-results", "seed000.icf", (FIX / "iometer" / "seed000.icf").read_bytes(), "configuration"),
]


def test_there_are_twenty_or_more():
    assert len(BAD) >= 20 and len({b[0] for b in BAD}) == len(BAD)


@pytest.mark.parametrize(("name", "data", "words"), [(b[1], b[2], b[3]) for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_gives_a_clear_error(tmp_path, name, data, words):
    path = tmp_path / name
    path.write_bytes(data)
    res = ingest_paths(path)
    assert res.runs.empty and res.histograms.empty and res.timeseries.empty and res.files == 0
    assert len(res.errors) == 1, res.errors
    err = res.errors[0]
    assert err.path == str(path)
    assert words in err.reason, err.reason


def test_a_directory_ingests_the_good_ones_and_names_the_bad(tmp_path):
    for _id, name, data, _ in BAD[:10]:
        (tmp_path / f"{_id}-{name}").write_bytes(data)
    good = {"good.xml": PKB.encode(), "good.txt": RW.encode(), "good.csv": IOM.encode(),
            "notes.md": b"# not a result\n", "image.bin": bytes(range(256)) * 4}
    for name, data in good.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "fio.json").write_bytes((FIX / "fio" / "single.json").read_bytes())
    res = ingest_paths(tmp_path)
    assert sorted(res.runs["tool"].unique()) == ["diskspd", "fio", "iometer"]
    assert res.files == 4  # three load-generator files + one fio output; notes and binary skipped
    named = sorted(Path(e.path).name.split("-")[0] for e in res.errors)
    assert len(res.errors) == 10 and named == sorted(b[0].split("-")[0] for b in BAD[:10])


def test_strict_false_keeps_the_good_runs_of_a_pasted_file():
    bad = _drop_line(RW, r"^total:", 1)
    res = parse_diskspd((RW + "\n" + bad).encode(), "two.txt", strict=False)
    assert len(res.runs) == 1 and len(res.problems) == 1 and "no 'total:' line" in res.problems[0]
