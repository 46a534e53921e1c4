#!/usr/bin/env python3
"""Transcribe the published tables of seeds 001 and 002 into tidy CSV under ``data/published/``.

Re-derive every file in ``data/published/`` from the seed text, so that nobody has to trust a hand
transcription::

    .venv/bin/python runners/transcribe_seeds.py                       # seeds in ../shared/seeds
    .venv/bin/python runners/transcribe_seeds.py --seeds DIR --out DIR
    .venv/bin/python runners/transcribe_seeds.py --check               # exit 1 if the CSVs differ

Values are kept exactly as printed (as text when they are labels, as numbers otherwise; thousands
separators removed). Units are in the column names, *as printed* by the source (``bw_mb_per_s`` is the
source's "MB/s", ``bw_kb_per_s`` its "KB Sec"); conversion to the tidy schema's bytes/ns happens once,
in :mod:`storagebench.published`.

Each CSV gets a sidecar ``<name>.yaml`` with the seed file, the document title, the URL when the seed
text gives one, the table caption, the units as printed and the source's typos (kept as printed).
The parser refuses text that does not have the expected shape (wrong number of values on a row,
missing table) rather than guess: a changed seed must fail loudly.
"""

from __future__ import annotations

import argparse
import csv
import io
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SEEDS = ROOT.parent / "shared" / "seeds"
DEFAULT_OUT = ROOT / "data" / "published"


class TranscriptionError(RuntimeError):
    """The seed text does not have the shape this parser expects."""


def _num(token: str) -> float | int:
    """A printed number: ``'29,736'`` -> 29736, ``'0.38'`` -> 0.38, ``'3'`` -> 3."""
    text = token.replace(",", "").strip()
    if not re.fullmatch(r"-?\d+(\.\d+)?", text):
        raise TranscriptionError(f"not a number as printed: {token!r}")
    return float(text) if "." in text else int(text)


def _seed(seeds: Path, prefix: str) -> Path:
    found = sorted(seeds.glob(f"{prefix}_*.txt"))
    if len(found) != 1:
        raise TranscriptionError(f"expected one seed file {prefix}_*.txt in {seeds}, found {found}")
    return found[0]


# ---------------------------------------------------------------------------------------------
# seed 002: StarWind, "Can Automatic Striping make VMware vSAN performance better?"
# ---------------------------------------------------------------------------------------------

_METRICS_002 = ("iops", "bw_mb_per_s", "lat_ms")


def parse_002_qd_threads(lines: list[str]) -> list[dict]:
    """The two 4 KiB random-read threads x outstanding-I/O tables (DiskSPD, then FIO)."""
    rows: list[dict] = []
    tools_seen = []
    for i, line in enumerate(lines):
        m = re.fullmatch(r"VMware Virtual Disk 264GB \(RAW\) over vsanDatastore – 4k random read \((DiskSPD|FIO)\)", line.strip())
        if not m:
            continue
        tool = m.group(1)
        tools_seen.append(tool)
        threads = [int(t) for t in re.findall(r"threads=(\d+)", lines[i + 1])]
        if len(threads) != 4 or lines[i + 2].split().count("IOPS") != len(threads):
            raise TranscriptionError(f"seed 002 {tool} table: unexpected header at line {i + 2}")
        j = i + 3
        while j < len(lines) and lines[j].startswith("QD="):
            head, *values = lines[j].split()
            qd = int(head.removeprefix("QD="))
            if len(values) != 3 * len(threads):
                raise TranscriptionError(f"seed 002 {tool} QD={qd}: {len(values)} values, expected {3 * len(threads)}")
            for k, t in enumerate(threads):
                iops, mb, lat = (_num(v) for v in values[3 * k: 3 * k + 3])
                rows.append({"source_tool": tool, "threads": t, "qd": qd, "bs_kib": 4,
                             "pattern": "4k random read", "iops": iops, "bw_mb_per_s": mb, "lat_ms": lat})
            j += 1
    if tools_seen != ["DiskSPD", "FIO"]:
        raise TranscriptionError(f"seed 002: expected the DiskSPD and FIO sweep tables, found {tools_seen}")
    return rows


_PATTERN_RE = re.compile(r"\d+[kM] (?:random|seq) (?:\d+%read/\d+%write|write|read)")


def parse_002_stripe(lines: list[str]) -> list[dict]:
    """The two 'Number of disk stripes per object=N' tables: 6 patterns x 1..12 VMs x DiskSPD/FIO."""
    rows: list[dict] = []
    widths = []
    for i, line in enumerate(lines):
        m = re.fullmatch(r"Number of disk stripes per object=(\d+)", line.strip())
        if not m:
            continue
        width = int(m.group(1))
        widths.append(width)
        patterns = _PATTERN_RE.findall(lines[i + 1])
        if " ".join(patterns) != lines[i + 1].strip() or len(patterns) != 6:
            raise TranscriptionError(f"seed 002 stripe={width}: cannot split patterns {lines[i + 1]!r}")
        tools = re.findall(r"(DiskSPD|FIO) \((Strite|Stripe)=(\d+)\)", lines[i + 2])
        if len(tools) != 2 * len(patterns) or any(int(w) != width for _, _, w in tools):
            raise TranscriptionError(f"seed 002 stripe={width}: unexpected tool header {lines[i + 2]!r}")
        ncol = len(tools)
        if lines[i + 3].split().count("IOPS") != ncol:
            raise TranscriptionError(f"seed 002 stripe={width}: unexpected metric header")
        j = i + 4
        body = []
        while j < len(lines) and re.match(r"\d+x VM ", lines[j]):
            body.append(lines[j])
            j += 1
        settings = re.findall(r"threads=(\d+) Outstanding I/O=(\d+)", lines[j])
        if len(settings) != ncol:
            raise TranscriptionError(f"seed 002 stripe={width}: expected {ncol} 'threads= Outstanding I/O=' cells")
        for rowtext in body:
            m2 = re.match(r"(\d+)x VM (.*)", rowtext)
            vms = int(m2.group(1))
            values = m2.group(2).split()
            if len(values) != 3 * ncol:
                raise TranscriptionError(f"seed 002 stripe={width} {vms}x VM: {len(values)} values, expected {3 * ncol}")
            for c, (tool, label, _) in enumerate(tools):
                iops, mb, lat = (_num(v) for v in values[3 * c: 3 * c + 3])
                rows.append({"stripe_width": width, "vms": vms, "pattern": patterns[c // 2],
                             "source_tool": tool, "header_as_printed": f"{tool} ({label}={width})",
                             "threads": int(settings[c][0]), "qd": int(settings[c][1]),
                             "iops": iops, "bw_mb_per_s": mb, "lat_ms": lat})
    if widths != [1, 4]:
        raise TranscriptionError(f"seed 002: expected stripe width tables [1, 4], found {widths}")
    return rows


# ---------------------------------------------------------------------------------------------
# seed 001: StorageIO, "How many IOPS can a HDD HHDD SSD do with VMware?"
# ---------------------------------------------------------------------------------------------

def _cells(line: str) -> list[str]:
    cells = [c.strip() for c in line.split("|")]
    return cells[:-1] if cells and cells[-1] == "" else cells


def parse_001_seq_read(lines: list[str]) -> tuple[list[dict], list[str]]:
    """The 4 KiB and 16 KiB %sequential x %read tables (1 worker, raw device)."""
    rows: list[dict] = []
    captions = []
    header = "IO Size for test | Workload Pattern of test | Avg. Resp (R+W) ms | Avg. IOP Sec (R+W) | Bandwidth KB Sec (R+W) |"
    for i, line in enumerate(lines):
        if line.strip() != header:
            continue
        j = i + 1
        while j < len(lines) and re.match(r"\d+KB \|", lines[j]):
            size, pattern, resp, iops, kb = _cells(lines[j])
            m = re.fullmatch(r"(\d+)% Seq (\d+)% Read", pattern)
            if m is None:
                raise TranscriptionError(f"seed 001: unexpected workload pattern {pattern!r}")
            rows.append({"io_size_as_printed": size, "io_size_kb": int(size.removesuffix("KB")),
                         "seq_pct": int(m.group(1)), "read_pct": int(m.group(2)),
                         "resp_ms": _num(resp), "iops": _num(iops), "bw_kb_per_s": _num(kb)})
            j += 1
        captions.append(lines[j].strip())
    if len(captions) != 2 or len(rows) != 32:
        raise TranscriptionError(f"seed 001: expected two 16-row tables, found {len(captions)} tables, {len(rows)} rows")
    for r in rows:  # the caption of each table names the device and worker count
        r["caption"] = captions[0] if r["io_size_kb"] == 4 else captions[1]
        r["workers"] = int(re.search(r"thread count (\d+)", r["caption"]).group(1))
    return rows, captions


def parse_001_devices(lines: list[str]) -> tuple[list[dict], str]:
    """The device inventory table (model, interface, RPM ...), values as printed."""
    for i, line in enumerate(lines):
        if line.startswith("Device | Vendor | Make | Model |"):
            names = ["device", "vendor", "make", "model", "form_factor_in", "capacity", "interface",
                     "rpm_as_printed", "raw_test_result"]
            if len(_cells(line)) != len(names):
                raise TranscriptionError(f"seed 001: unexpected inventory header {line!r}")
            rows = []
            j = i + 1
            while j < len(lines) and "|" in lines[j]:
                cells = _cells(lines[j])
                if len(cells) != len(names):
                    raise TranscriptionError(f"seed 001 inventory: {len(cells)} cells in {lines[j]!r}")
                rows.append(dict(zip(names, cells, strict=True)))
                j += 1
            return rows, lines[j].strip()
    raise TranscriptionError("seed 001: device inventory table not found")


# ---------------------------------------------------------------------------------------------

def _csv_text(rows: list[dict]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


#: The claims of seed 002, quoted (the "..." elides the article's aside).
QD_CLAIM = ("With the VM configuration in mind, we decided to use the following test utility parameters: threads=4 "
            "and Outstanding I/O=16.")
STRIPE_CLAIMS = ["switching to a higher number of disk stripes per object can give you some more IOPS",
                 "this parameter is a game-changer for writing performance",
                 "Automatic Striping ... provides slightly better performance gain than stripe width set manually"]


def _yaml_text(meta: dict) -> str:
    return yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=110)


def transcribe(seeds: Path) -> dict[str, str]:
    """All published tables as ``{file name: text}`` (CSV and sidecar YAML)."""
    p1, p2 = _seed(seeds, "001"), _seed(seeds, "002")
    l1 = p1.read_text(encoding="utf-8").splitlines()
    l2 = p2.read_text(encoding="utf-8").splitlines()
    src2 = {"seed_file": p2.name, "title": l2[0].strip(), "publisher": "StarWind (blog article)",
            "url": None, "url_note": "the seed text does not give the article's own URL; it cites "
            "https://blogs.vmware.com/virtualblocks/2016/09/19/vsan-stripes/ for Automatic Striping"}
    src1 = {"seed_file": p1.name, "title": l1[0].strip(), "publisher": "Server StorageIO (Greg Schulz)",
            "updated": l1[1].removeprefix("Updated ").strip(), "url": "https://storageioblog.com",
            "url_note": "the seed text says 'First published on https://storageioblog.com' (site, not post)"}
    setup2 = ("4-node VMware vSAN 6.5U1 cluster (Dell R730, 1x Intel P3700 2TB cache + 4x Intel S3500 480GB "
              "capacity per host); test disk: 264 GB vmdk (RAW, PVSCSI) on vsanDatastore, one per VM")
    out: dict[str, str] = {}

    qd = parse_002_qd_threads(l2)
    out["vsan_qd_threads.csv"] = _csv_text(qd)
    out["vsan_qd_threads.yaml"] = _yaml_text({
        "name": "vsan_qd_threads", "kind": "runs", "rows": len(qd), "source": src2,
        "tables": ["VMware Virtual Disk 264GB (RAW) over vsanDatastore – 4k random read (DiskSPD)",
                   "VMware Virtual Disk 264GB (RAW) over vsanDatastore – 4k random read (FIO)"],
        "setup": setup2 + "; one VM; 4 KiB random read; 60 s per point (diskspd -d60 / fio runtime=60)",
        "commands_as_printed": {"DiskSPD": "diskspd.exe -t<threads> -b4k -r -w0 -o<QD> -d60 -Sh -L #1",
                                "FIO": "ioengine=windowsaio direct=1 time_based runtime=60 bs=4k rw=randread "
                                       "iodepth=<QD> numjobs=<threads> filename=\\\\.\\PhysicalDrive1"},
        "columns": {"source_tool": "DiskSPD or FIO, as printed in the table title",
                    "threads": "threads=N column group (DiskSPD -t / fio numjobs)",
                    "qd": "QD=N row: outstanding I/O per thread (DiskSPD -o / fio iodepth)",
                    "bs_kib": "4 (4k random read)", "pattern": "as printed",
                    "iops": "IOPS as printed", "bw_mb_per_s": "'MB/s' as printed (binary MB: see README)",
                    "lat_ms": "'Latency (ms)' as printed (mean latency)"},
        "claims": [QD_CLAIM],
        # how the claim is tested (storagebench.stats.claim_checks): our reading, not the article's words
        "claim_checks": [{
            "claim": QD_CLAIM, "kind": "parameters", "numjobs": 4, "iodepth": 16, "metric": "iops",
            "reading": "threads=4 (numjobs) and Outstanding I/O=16 (iodepth per thread) give the highest 4 KiB "
                       "random read IOPS of the sweep: they lie on its plateau, reached with no more outstanding "
                       "I/Os than needed"}],
    })

    st = parse_002_stripe(l2)
    out["vsan_stripe.csv"] = _csv_text(st)
    out["vsan_stripe.yaml"] = _yaml_text({
        "name": "vsan_stripe", "kind": "runs", "rows": len(st), "source": src2,
        "tables": ["Number of disk stripes per object=1", "Number of disk stripes per object=4"],
        "setup": setup2 + "; 1..12 VMs (one added per step, cloned to the next node); every tool at "
                 "threads=4, Outstanding I/O=16 per VM; values are the whole cluster's (all VMs)",
        "columns": {"stripe_width": "Number of disk stripes per object (1 or 4)",
                    "vms": "'Nx VM' row", "pattern": "I/O pattern as printed (6 patterns)",
                    "source_tool": "DiskSPD or FIO", "header_as_printed": "the column header, typo kept",
                    "threads": "from the 'threads=4 Outstanding I/O=16' footer", "qd": "idem",
                    "iops": "IOPS as printed", "bw_mb_per_s": "'MB/s' as printed (binary MB: see README)",
                    "lat_ms": "'Latency (ms)' as printed"},
        "typos_kept": ["'Strite' for 'Stripe' in every DiskSPD column header (kept in header_as_printed)",
                       "'3' for '3.00' in 9x VM, stripe=1, DiskSPD 4k random read latency"],
        "claims": STRIPE_CLAIMS,
        # how each claim is tested (storagebench.stats.claim_checks): our reading, not the article's words.
        # Stripe width 1 on the 264 GB test disk is Automatic Striping (> 255 GB), stripe width 4 the manual
        # setting; "can give you some more" holds if it does for one pattern, "a game-changer for writing"
        # is read as at least +20% on every write pattern, the Automatic Striping claim as the average over
        # the six patterns.
        "claim_checks": [
            {"claim": STRIPE_CLAIMS[0], "factor": "stripe_width", "level": 4, "baseline": 1, "metric": "iops",
             "expect": "higher", "over": "any",
             "reading": "stripe width 4 gives more IOPS than stripe width 1 for at least one I/O pattern"},
            {"claim": STRIPE_CLAIMS[1], "factor": "stripe_width", "level": 4, "baseline": 1, "metric": "iops",
             "expect": "higher", "over": "every", "where": {"direction": "write"}, "min_ratio": 1.2,
             "reading": "stripe width 4 gives at least 20% more IOPS than stripe width 1 on every write pattern"},
            {"claim": STRIPE_CLAIMS[2], "factor": "stripe_width", "level": 4, "baseline": 1, "metric": "iops",
             "expect": "lower", "over": "average",
             "reading": "Automatic Striping is stripe width 1 on the 264 GB test disk; averaged over the six "
                        "patterns, stripe width 4 (set manually) gives fewer IOPS than stripe width 1"},
        ],
    })

    sr, captions = parse_001_seq_read(l1)
    out["hdd_iops.csv"] = _csv_text(sr)
    out["hdd_iops.yaml"] = _yaml_text({
        "name": "hdd_iops", "kind": "runs", "rows": len(sr), "source": src1,
        "tables": captions,
        "setup": "Dell/WD 1TB 7200 RPM 3.5in 3Gb SATA HDD (WD1003FBYX in the inventory), raw device mapped "
                 "(RDM) into an Ubuntu 12.04 VM on vSphere 5.1, raw (non file system) I/O, 1 worker, "
                 "4 minutes per step; tool and queue depth not stated",
        "columns": {"io_size_as_printed": "'IO Size for test' (4KB = 4,096 bytes per the text)",
                    "io_size_kb": "the same as an integer (KiB)",
                    "seq_pct": "N% Seq", "read_pct": "N% Read",
                    "resp_ms": "'Avg. Resp (R+W) ms' as printed (one decimal)",
                    "iops": "'Avg. IOP Sec (R+W)' as printed",
                    "bw_kb_per_s": "'Bandwidth KB Sec (R+W)' as printed (KB = 1024 bytes: see README)",
                    "caption": "table caption", "workers": "thread count from the caption"},
        "claims": ["Note the high IOP rate with 100 percent sequential reads and a small IO size which might "
                   "be a result of locality of reference due to drive level cache or buffering."],
    })

    dev, dev_caption = parse_001_devices(l1)
    out["hdd_devices.csv"] = _csv_text(dev)
    out["hdd_devices.yaml"] = _yaml_text({
        "name": "hdd_devices", "kind": "inventory", "rows": len(dev), "source": src1,
        "tables": [dev_caption],
        "columns": {"device": "HDD / SSHD / SSD as printed", "vendor": "as printed", "make": "as printed",
                    "model": "as printed", "form_factor_in": "inches", "capacity": "as printed (GB/TB)",
                    "interface": "as printed", "rpm_as_printed": "'RPM Speed' as printed (not always an RPM)",
                    "raw_test_result": "empty in the source (links in the original page)"},
        "typos_kept": ["'HDD' device type for the Seagate 600 SSD ST480HM000 (an SSD)",
                       "'840 PRo' for '840 Pro'",
                       "'HDD' / 'SSD' / 'SSHD' in the RPM column for several drives",
                       "'7.2K(1)': footnote (1) marks the Momentus XT as a hybrid HDD (HHDD)",
                       "ST3000DM01 and ST6000NM00 look truncated (ST3000DM001, ST6000NM00xx)"],
    })
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=Path, default=DEFAULT_SEEDS, help=f"seed directory (default {DEFAULT_SEEDS})")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output directory (default {DEFAULT_OUT})")
    ap.add_argument("--check", action="store_true", help="compare with the files in --out, write nothing")
    args = ap.parse_args(argv)
    try:
        files = transcribe(args.seeds)
    except (TranscriptionError, OSError) as exc:
        print(f"transcribe_seeds: error: {exc}", file=sys.stderr)
        return 1
    differ = []
    for name, text in files.items():
        path = args.out / name
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                differ.append(name)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path} ({text.count(chr(10)) - 1 if name.endswith('.csv') else 'meta'} rows)")
    if differ:
        print(f"transcribe_seeds: differ from the seed text: {differ}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
