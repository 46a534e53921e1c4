"""Safety computed as fio computes it (issue 18, item 5).

Two halves:

* :func:`storagebench.fio.region.job_region` against the installed fio 3.33 itself. fio prints
  ``declare unneeded cache FILE: OFFSET/LENGTH`` (``--debug=io``) when it opens a file for I/O: that
  is its ``f->file_offset``/``f->io_size``; ``layout unlink FILE`` (``--debug=file``) when it lays a
  file out again. Each option set runs on scratch files (1 MiB each) for one or a few I/Os.
* :func:`storagebench._safety.check_run` on real files, a loop device's backing file, and a second
  loop device at an offset over an image whose first loop device holds an idle ext4 (root, real
  loop devices). Every refused case leaves the sha256 of the file or image unchanged, and its
  message names the object and the reason; the few allowed cases really run fio for 1 s.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import resource
import signal
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from storagebench import testbed as tb
from storagebench._devices import DeviceReport
from storagebench._safety import check_run, needed_bytes
from storagebench.errors import TestbedError, UnsafeTargetError
from storagebench.fio.region import job_region

MiB = 1 << 20
U64 = 1 << 64


# ---------------------------------------------------------------------------------------------
# the region rule against fio 3.33

ORACLE_CASES = [
    # size as a percentage of the real file: above 100 % fio reads a byte count near 2**64
    {"size": "50%"}, {"size": "99%"}, {"size": "100%"}, {"size": "101%"}, {"size": "150%"}, {"size": "200%"},
    {"size": "300%"}, {"size": "1%"}, {"size": "2M"},
    # offsets, percentage offsets (rounded up to the block size or offset_align), wrap-around
    {"offset": "10%", "size": "100%"}, {"offset": "10%", "offset_align": "64k", "size": "100k"},
    {"offset": "512k", "size": "600k"}, {"offset": "512k", "size": "512k"}, {"offset": "150%", "size": "1M"},
    {"offset": "150%", "size": "2M"},
    # offset_increment x numjobs
    {"numjobs": 4, "size": "256k", "offset_increment": "256k"},
    {"numjobs": 5, "size": "256k", "offset_increment": "256k"},
    {"numjobs": 3, "size": "10%", "offset_increment": "30%"},
    {"numjobs": 2, "size": "2M"},
    # filesize, fixed and ranges (inside, below, above the real size), and with a percentage size
    {"filesize": "512k"}, {"filesize": "2M"}, {"filesize": "256k-512k"}, {"filesize": "2M-3M"},
    {"filesize": "512k-2M"}, {"filesize": "50%"}, {"filesize": "2M", "size": "50%"},
    # several files, nrfiles, io_size (bounds the I/O, not the region)
    {"filename": "pf:pf2", "size": "1M"}, {"filename": "pf:pf2", "size": "3M"}, {"nrfiles": 3, "size": "300k"},
    {"io_size": "8M", "size": "512k"}, {"io_size": "8M"},
    # fill_device, file_append, block sizes, kb_base
    {"fill_device": 1, "size": "512k"}, {"fill_device": 1, "size": "50%"}, {"file_append": 1, "size": "64k"},
    {"bs": "64k,4k", "size": "10%"}, {"kb_base": 1000, "size": "1000k"},
]

_LINE = re.compile(r"^(io|file)\s+(\d+)\s+(.*)$")
_DECLARE = re.compile(r"declare unneeded cache (\S+): (\d+)/(\d+)$")


def _case_opts(i: int, opts: dict) -> dict:
    """The case's options on its own scratch files ``c<i>pf``, ``c<i>pf2`` (``pf``/``pf2`` in ORACLE_CASES)."""
    out = {"rw": "read", "bs": "4k", "filename": "pf", **opts}
    out["filename"] = ":".join(f"c{i}{n}" for n in str(out["filename"]).split(":"))
    return out


def _bounded() -> None:
    """In the oracle's fio: no file may grow past 16 MiB (a layout the rule got wrong fails with EFBIG
    instead of filling the disk; SIGXFSZ ignored so that fio sees the error and stops)."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (16 * MiB, 16 * MiB))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


@pytest.fixture(scope="module")
def fio_oracle(tmp_path_factory, fio_bin):
    """Every ORACLE_CASES option set as one job of ONE fio 3.33 run (about 1 s), each on its own 1 MiB files.

    Returns ``{case: (laid_out, Counter((file, offset, length)), size of c<i>pf after)}``: what fio laid out
    (``layout unlink``) and the regions it opened for I/O (the last ``declare unneeded cache`` line per
    process and file: after any layout). ``create_serialize=0`` makes each job size and lay out its own
    files in its own process.
    """
    if "3.33" not in subprocess.run([fio_bin, "--version"], capture_output=True, text=True).stdout:
        pytest.skip("the region rule is fio 3.33's; another fio is installed")
    work = tmp_path_factory.mktemp("oracle")
    lines = []
    for i, opts in enumerate(ORACLE_CASES):
        for n in ("pf", "pf2"):
            (work / f"c{i}{n}").write_bytes(b"\1" * MiB)
        o = _case_opts(i, opts)
        nfiles = len(o["filename"].split(":"))
        lines += [f"[c{i}]", "ioengine=psync", "create_serialize=0", f"number_ios={nfiles + 1}"]
        lines += [f"{k}={v}" for k, v in o.items()]
    (work / "oracle.fio").write_text("\n".join(lines) + "\n")
    proc = subprocess.Popen([fio_bin, "--debug=io,file", "oracle.fio"], cwd=work, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True, preexec_fn=_bounded)
    try:
        output, _ = proc.communicate(timeout=120)
    finally:  # fio's job processes outlive a killed parent: end the whole session, by its id
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    laid: set[str] = set()
    last: dict[tuple[str, str], tuple[int, int]] = {}
    for line in output.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        pid, text = m.group(2), m.group(3).strip()
        if text.startswith("layout unlink "):
            laid.add(text.split()[-1])
        d = _DECLARE.search(text)
        if d:
            last[(pid, d.group(1))] = (int(d.group(2)), int(d.group(3)))
    out = {}
    for i in range(len(ORACLE_CASES)):
        mine = {f"c{i}pf", f"c{i}pf2"}
        regions = Counter((f, off, ln) for (_, f), (off, ln) in last.items() if f in mine and ln)
        out[i] = (bool(laid & mine), regions, (work / f"c{i}pf").stat().st_size if (work / f"c{i}pf").exists() else 0)
    return out


@pytest.mark.parametrize("i", range(len(ORACLE_CASES)),
                         ids=[",".join(f"{k}={v}" for k, v in o.items()) for o in ORACLE_CASES])
def test_region_matches_fio(fio_oracle, i):
    """The region and the layout decision are fio's own, for each option set."""
    full = _case_opts(i, ORACLE_CASES[i])
    ours = job_region(full, {f"c{i}pf": MiB, f"c{i}pf2": MiB})
    laid_out, fio, size_after = fio_oracle[i]
    assert laid_out == any(r.lays_out for r in ours), (ours, fio)
    if laid_out:
        if max(r.fio_end for r in ours) >= 1 << 62:
            # fio cannot make a file that large: the layout unlinked it and left it empty (a failed ftruncate),
            # or wrote zeroes until the oracle's 16 MiB file-size limit (fill_device)
            assert size_after in (0, 16 * MiB)
        return
    if all(r.exact for r in ours):
        assert fio == Counter((r.path, r.start, r.end - r.start) for r in ours if r.end > r.start)
    else:  # a random filesize range: fio's length lies in what we say it may be
        assert fio and all(any(f == r.path and off == r.start and ln <= r.end - r.start for r in ours)
                           for f, off, ln in fio)


def test_percentages_above_100_are_byte_counts():
    """fio 3.33 options.c str_size_cb: '101%' is -1ULL - 101, a percentage only up to 100 (parse_is_percent)."""
    for pct in (50, 99, 100):
        (r,) = job_region({"filename": "f", "size": f"{pct}%", "rw": "randread"}, {"f": 10 * MiB})
        assert not r.lays_out and r.end <= 10 * MiB
    for pct in (101, 150, 200, 300):
        (r,) = job_region({"filename": "f", "size": f"{pct}%", "rw": "randread"}, {"f": 10 * MiB})
        assert r.lays_out and r.end == U64 - 1 - pct
        assert f"size={pct}% (fio 3.33 reads a percentage above 100 as {U64 - 1 - pct:,} bytes)" in r.basis
    assert needed_bytes({"size": "101%"}, 10 * MiB) == U64 - 102
    assert needed_bytes({"size": "50%", "offset": "25%"}, 10 * MiB) == 10 * MiB * 3 // 4
    assert needed_bytes({"size": "1M", "offset_increment": "1M", "numjobs": 4}, 0) == 4 * MiB


def test_only_the_holder_named_lifts_a_signature():
    """A partition's filesystem is lifted by naming the partition, not its whole disk; another loop
    device's filesystem by naming that loop device, not the target."""
    rep = DeviceReport(path="/dev/sdz", resolved="/dev/sdz", devno="8:0", name="sdz", partitions=("sdz1",),
                       signatures=({"device": "/dev/sdz1", "type": "ext4", "offset": "0x438", "owner": "8:1",
                                    "owner_path": "/dev/sdz1", "where": "a partition of /dev/sdz"},))
    assert [o for o, _, _ in rep.data_problems(set())] == ["8:0", "8:1"]
    assert [o for o, _, _ in rep.data_problems({"8:0"})] == ["8:1"]  # the whole disk named: its table only
    assert rep.data_problems({"8:0", "8:1"}) == []
    (_, path, text), = rep.data_problems({"8:0"})
    assert path == "/dev/sdz1" and "ext4" in text and "a partition of /dev/sdz" in text


# ---------------------------------------------------------------------------------------------
# real files and loop devices


def _sha(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@contextlib.contextmanager
def _loop(backing: Path, offset: int = 0):
    """A loop device of ours over ``backing`` at ``offset``; detached by its exact path."""
    cmd = ["losetup", "--find", "--show"] + (["--offset", str(offset)] if offset else []) + [str(backing)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        pytest.skip(f"no loop devices: {proc.stderr.strip()}")
    dev = proc.stdout.strip()
    try:
        yield dev
    finally:
        for _ in range(50):
            try:
                now = Path(f"/sys/block/{os.path.basename(dev)}/loop/backing_file").read_text().strip()
            except OSError:
                break
            if now.removesuffix(" (deleted)") != str(backing):
                break  # gone, or someone else's now: not ours to touch
            if subprocess.run(["losetup", "-d", dev], capture_output=True, timeout=30).returncode == 0:
                break


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    """A plain 1 MiB file; a 16 MiB image holding ext4 with loop A over it at offset 0 (idle) and loop B
    at offset 1 MiB; a second ext4 image with only loop C at offset 1 MiB over it."""
    if os.geteuid() != 0:
        pytest.skip("needs root (loop devices)")
    try:
        tb.require_testbed()
    except TestbedError as exc:
        pytest.skip(f"no loop support: {exc}")
    d = tmp_path_factory.mktemp("region")
    plain = d / "plain.bin"
    plain.write_bytes(os.urandom(MiB))
    img, img2 = d / "image.img", d / "image2.img"
    for p in (img, img2):
        with open(p, "wb") as fh:
            fh.truncate(16 * MiB)
        subprocess.run(["mkfs.ext4", "-q", "-F", str(p)], check=True, capture_output=True, timeout=60)
    with _loop(img) as a, _loop(img, MiB) as b, _loop(img2, MiB) as c:
        yield {"plain": str(plain), "image": str(img), "image2": str(img2), "A": a, "B": b, "C": c}


def _refused(bed, target_key, opts, *, allow=(), match=(), fio_target=None):
    """check_run refuses; the file or image is unchanged; the message says each of ``match``."""
    target = bed[target_key]
    image = {"B": bed["image"], "A": bed["image"], "C": bed["image2"]}.get(target_key, target)
    before = _sha(image)
    with pytest.raises(UnsafeTargetError) as err:
        check_run(fio_target or target, opts, allow_devices=[bed[k] if k in bed else k for k in allow])
    assert _sha(image) == before
    msg = str(err.value)
    assert target in msg
    for m in match:
        assert re.search(m, msg), (m, msg)
    return msg


LAYOUT = r"lay it out again: it unlinks the file"


@pytest.mark.root
@pytest.mark.parametrize("pct", [50, 99, 100, 101, 150, 200, 300])
@pytest.mark.parametrize("where", ["plain", "image"])
def test_percentage_sizes(bed, where, pct):
    """randread size=N%: allowed up to 100 %, refused above (fio would truncate the file), on a plain file and
    on the backing file of an idle loop device holding ext4."""
    opts = {"rw": "randread", "bs": "4k", "size": f"{pct}%"}
    if pct <= 100:
        before = _sha(bed[where])
        check_run(bed[where], opts)
        assert _sha(bed[where]) == before
        return
    msg = _refused(bed, where, opts, match=[LAYOUT, rf"needs {U64 - 1 - pct:,}",
                                            rf"size={pct}% \(fio 3.33 reads a percentage above 100"])
    if where == "image":
        assert f"backing file of {bed['A']}" in msg


@pytest.mark.root
@pytest.mark.parametrize("opts, needs", [
    ({"offset": "512k", "size": "600k"}, 1_138_688),
    ({"offset": "150%", "size": "2M"}, 2_097_001),  # fio's 64-bit sum wraps to a small end
    ({"numjobs": 5, "size": "256k", "offset_increment": "256k"}, 5 * 256 * 1024),
    ({"numjobs": 2, "size": "2M"}, 2 * MiB),
    ({"filesize": "2M"}, 2 * MiB),
    ({"filesize": "2M-3M"}, 3 * MiB - 1),
    ({"filesize": "50%"}, U64 - 51),
    ({"fill_device": 1}, U64 - 1),
    ({"file_append": 1, "size": "64k"}, MiB + 64 * 1024),
    ({"filename": "{t}:{t}2", "size": "3M"}, 3 * MiB // 2),
])
def test_regions_past_the_end_refused_on_a_plain_file(bed, opts, needs):
    opts = {k: (v.format(t=bed["plain"]) if isinstance(v, str) else v) for k, v in opts.items()}
    target = opts.pop("filename", None)  # a target of two files: size is split between them
    if target:
        Path(bed["plain"] + "2").write_bytes(b"\0" * MiB)
    try:
        _refused(bed, "plain", {"rw": "randread", "bs": "4k", **opts}, fio_target=target,
                 match=[LAYOUT, rf"holds 1,048,576 bytes but the job needs {needs:,}", "from "])
    finally:
        Path(bed["plain"] + "2").unlink(missing_ok=True)


@pytest.mark.root
@pytest.mark.parametrize("opts", [
    {"offset": "512k", "size": "512k"}, {"offset": "50%", "size": "50%"},
    {"numjobs": 4, "size": "256k", "offset_increment": "256k"}, {"numjobs": 3, "size": "10%", "offset_increment": "30%"},
    {"filesize": "256k-512k"}, {"filesize": "512k-2M"}, {"nrfiles": 3, "size": "300k"},
    {"io_size": "8M", "size": "50%"}, {"io_size": "8M"},
])
def test_regions_inside_allowed(bed, opts):
    before = _sha(bed["plain"])
    check_run(bed["plain"], {"rw": "randread", "bs": "4k", **opts})
    assert _sha(bed["plain"]) == before


@pytest.mark.root
def test_loop_backing_file(bed):
    """The image behind idle loop devices: writes refused unless its loop device is named; a layout never."""
    _refused(bed, "image", {"rw": "randwrite", "size": "64k"},
             match=[f"backing file of {bed['A']}", f"--allow-device {bed['A']}"])
    # naming loop A: its own ext4 is lifted, but the image is also behind loop B
    _refused(bed, "image", {"rw": "randwrite", "size": "64k"}, allow=["A"], match=["backing file of /dev/loop"])
    # a layout of a loop device's backing file is refused even when the loop devices are named
    _refused(bed, "image", {"rw": "randread", "size": "32M"}, allow=["A", "B"],
             match=[LAYOUT, "holds 16,777,216 bytes but the job needs 33,554,432", f"backing file of {bed['A']}"])


@pytest.mark.root
@pytest.mark.parametrize("rw", ["randwrite", "write", "trim", "randrw"])
@pytest.mark.parametrize("size", ["64k", "50%", "101%"])
def test_second_loop_at_an_offset(bed, rw, size):
    """Loop B (offset 1 MiB) over the image whose loop A holds an idle ext4: refused, even with B named."""
    opts = {"rw": rw, "bs": "4k", "size": size}
    for allow in ((), ("B",)):
        _refused(bed, "B", opts, allow=allow,
                 match=[bed["A"], "ext4", "another loop device over", "overlapping", f"--allow-device {bed['A']}"])
    # the same with A named too: lifted (data at rest, named by its holder); not run
    before = _sha(bed["image"])
    check_run(bed["B"], opts, allow_devices=[bed["A"], bed["B"]])
    assert _sha(bed["image"]) == before


@pytest.mark.root
def test_image_signature_no_loop_device_shows(bed):
    """Loop C at offset 1 MiB over an image with ext4 at byte 0 and no loop device there: the image itself is probed."""
    opts = {"rw": "randwrite", "bs": "4k", "size": "64k"}
    for allow in ((), ("C",)):
        _refused(bed, "C", opts, allow=allow,
                 match=[bed["image2"], "ext4", "the backing file itself, from its byte 0",
                        f"--allow-device {bed['image2']}"])
    check_run(bed["C"], opts, allow_devices=[bed["C"], bed["image2"]])


def _fio_read(fio_bin: str, target: str, opts: dict) -> int:
    args = [fio_bin, "--name=r", f"--filename={target}", "--ioengine=psync", "--runtime=1", "--time_based",
            "--output-format=json"] + [f"--{k}={v}" for k, v in opts.items()]
    out = subprocess.run(args, capture_output=True, text=True, timeout=60, check=True).stdout
    return json.loads(out[out.index("{"):])["jobs"][0]["read"]["io_bytes"]


@pytest.mark.root
@pytest.mark.parametrize("where, size", [("plain", "50%"), ("image", "100%")])
def test_allowed_reads_really_run_and_change_nothing(bed, fio_bin, where, size):
    """What the check lets through, fio runs (1 s) without laying anything out: the sha256 is unchanged."""
    opts = {"rw": "randread", "bs": "4k", "size": size}
    before = _sha(bed[where])
    check_run(bed[where], opts)
    assert _fio_read(fio_bin, bed[where], opts) > 0
    assert _sha(bed[where]) == before
