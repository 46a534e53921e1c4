"""safety: real loop devices holding real data are refused; blank ones pass with an override."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from storagebench import testbed as tb
from storagebench._safety import UnsafeJobFileError, check_run, device_report, lint_jobfile, modifying_reason
from storagebench.errors import JobFileError, TestbedError, UnsafeTargetError

PAYLOAD = b"storagebench safety canary\n" * 40000  # ~1 MiB


def _sha256_of_file_on(dev: tb.LoopDevice) -> str:
    with tb.filesystem(dev, "ext4", mkfs=False, mount_options="ro") as fs:
        return hashlib.sha256(Path(fs.mountpoint, "canary.bin").read_bytes()).hexdigest()


@pytest.fixture(autouse=True)
def _nothing_left_behind():
    """Runs last: every loop device, mount and zram set up by a test is gone afterwards."""
    yield
    assert tb.leftovers() == []


@pytest.fixture
def ext4_loop(require_root):
    """An unmounted loop device holding ext4 with a canary file of known sha256."""
    try:
        cm = tb.loop_device("64M")
        dev = cm.__enter__()
    except TestbedError as exc:  # no loop support here
        pytest.skip(f"no loop devices: {exc}")
    try:
        with tb.filesystem(dev, "ext4") as fs:
            Path(fs.mountpoint, "canary.bin").write_bytes(PAYLOAD)
        yield dev, hashlib.sha256(PAYLOAD).hexdigest()
    finally:
        cm.__exit__(None, None, None)


@pytest.fixture
def blank_loop(require_root):
    with tb.loop_device("32M") as dev:
        yield dev


@pytest.mark.root
@pytest.mark.parametrize("rw", ["write", "randwrite", "randrw", "trim", "rw", "randtrimwrite"])
def test_write_and_trim_refused_on_ext4_device(ext4_loop, rw):
    dev, sha = ext4_loop
    with pytest.raises(UnsafeTargetError) as err:
        check_run(dev.path, {"rw": rw, "bs": "4k", "size": "1M"})
    msg = str(err.value)
    assert f"refusing {rw} on {dev.path}" in msg
    assert "ext4" in msg and "UUID" in msg
    assert f"--allow-device {dev.path}" in msg
    assert _sha256_of_file_on(dev) == sha


@pytest.mark.root
def test_fio_never_runs_when_refused_and_data_is_intact(ext4_loop, fio_bin, tmp_path):
    """The guarded call path: check_run first, fio only if it passes; the canary survives."""
    dev, sha = ext4_loop
    opts = {"rw": "randwrite", "bs": "4k", "size": "8M", "direct": 1}
    ran = False
    with pytest.raises(UnsafeTargetError):
        check_run(dev.path, opts)
        ran = True
        subprocess.run([fio_bin, "--name=x", f"--filename={dev.path}", "--rw=randwrite", "--bs=4k",
                        "--size=8M", "--direct=1"], check=True, capture_output=True)
    assert not ran
    assert _sha256_of_file_on(dev) == sha


@pytest.mark.root
def test_reads_allowed_on_ext4_device(ext4_loop):
    dev, _ = ext4_loop
    check_run(dev.path, {"rw": "randread", "bs": "4k"})
    check_run(dev.path, {"rw": "read", "verify": "crc32c", "verify_only": 1})


@pytest.mark.root
def test_override_names_exact_device(ext4_loop, blank_loop):
    dev, sha = ext4_loop
    # naming another device does not lift the refusal
    with pytest.raises(UnsafeTargetError):
        check_run(dev.path, {"rw": "write", "size": "1M"}, allow_devices=[blank_loop.path])
    check_run(dev.path, {"rw": "write", "size": "1M"}, allow_devices=[dev.path])
    devno = device_report(dev.path, probe=False).devno
    check_run(dev.path, {"rw": "write", "size": "1M"}, allow_devices=[devno])
    assert _sha256_of_file_on(dev) == sha  # check_run itself changed nothing


@pytest.mark.root
def test_override_works_on_blank_device_and_fio_really_writes(blank_loop, fio_bin):
    dev = blank_loop
    opts = {"rw": "write", "bs": "64k", "size": "4M"}
    check_run(dev.path, opts)  # blank with an explicit size: allowed without override
    with pytest.raises(UnsafeTargetError, match="whole device"):
        check_run(dev.path, {"rw": "write", "bs": "64k"})  # no size
    with pytest.raises(UnsafeTargetError, match="whole device"):
        check_run(dev.path, {"rw": "write", "size": 0})
    # sizes read by jobfile.parse_size (fio's kb_base=1024 rule): any spelling of zero is the whole device
    for zero in ("0", "0k", "0KiB", "0.0m"):
        with pytest.raises(UnsafeTargetError, match="whole device"):
            check_run(dev.path, {"rw": "write", "size": zero})
    for bounded in ("64KiB", "4m", "4k-8k", "10%"):
        check_run(dev.path, {"rw": "write", "size": bounded})
    check_run(dev.path, {"rw": "write"}, allow_devices=[dev.path])
    before = hashlib.sha256(Path(dev.path).read_bytes()[: 4 << 20]).hexdigest()
    subprocess.run([fio_bin, "--name=w", f"--filename={dev.path}", "--rw=write", "--bs=64k", "--size=4M",
                    "--direct=1"], check=True, capture_output=True)
    after = hashlib.sha256(Path(dev.path).read_bytes()[: 4 << 20]).hexdigest()
    assert before != after


@pytest.mark.root
def test_mounted_device_refused_even_with_override(blank_loop):
    dev = blank_loop
    with tb.filesystem(dev, "ext4") as fs:
        with pytest.raises(UnsafeTargetError) as err:
            check_run(dev.path, {"rw": "randwrite", "size": "1M"}, allow_devices=[dev.path])
        assert "mounted" in str(err.value) and fs.mountpoint in str(err.value)
        # the backing file of a mounted loop device gets the device's rules
        with pytest.raises(UnsafeTargetError, match="backing file"):
            check_run(dev.backing_file, {"rw": "write", "size": "1M"})


@pytest.mark.root
def test_symlink_to_device_gets_device_rules(ext4_loop, tmp_path):
    dev, _ = ext4_loop
    link = tmp_path / "innocent.dat"
    link.symlink_to(dev.path)
    with pytest.raises(UnsafeTargetError, match="which resolves to /dev/loop"):
        check_run(str(link), {"rw": "write", "size": "1M"})


@pytest.mark.root
def test_partition_table_refused(blank_loop):
    dev = blank_loop
    # a minimal MBR (no fdisk here): one Linux partition from LBA 2048, boot signature 0x55AA
    import struct

    mbr = bytearray(512)
    mbr[446:462] = struct.pack("<B3sB3sII", 0, b"\x00\x02\x00", 0x83, b"\xff\xff\xff", 2048,
                               dev.size_bytes // 512 - 2048)
    mbr[510:512] = b"\x55\xaa"
    with open(dev.path, "r+b") as fh:
        fh.write(mbr)
        os.fsync(fh.fileno())
    with pytest.raises(UnsafeTargetError, match="dos partition table"):
        check_run(dev.path, {"rw": "write", "size": "1M"})


@pytest.mark.root
def test_root_device_refused():
    root = next(line.split()[2] for line in Path("/proc/self/mountinfo").read_text().splitlines()
                if line.split()[4] == "/")
    major, minor = (int(x) for x in root.split(":"))
    node = next((p for p in Path("/dev").iterdir() if p.is_block_device()
                 and os.major(p.stat().st_rdev) == major and os.minor(p.stat().st_rdev) == minor), None)
    if node is None:
        pytest.skip(f"no device node for the root filesystem ({root})")
    with pytest.raises(UnsafeTargetError, match="root filesystem"):
        check_run(str(node), {"rw": "write", "size": "1M"}, allow_devices=[str(node)])


def test_regular_files(tmp_path):
    f = tmp_path / "data.bin"
    rec = check_run(str(f), {"rw": "randwrite", "size": "1M"})  # missing: fio lays it out
    assert rec["targets"][0]["kind"] == "new" and rec["modifying"] == "randwrite"
    f.write_bytes(b"x" * (1 << 20))
    rec = check_run(str(f), {"rw": "randrw", "size": "1M"})
    assert rec["targets"][0]["kind"] == "file" and rec["targets"][0]["size_bytes"] == 1 << 20
    # shorter than the job's region: fio would lay it out again, even for a read
    with pytest.raises(UnsafeTargetError, match="holds 1,048,576 bytes but the job needs 2,097,152"):
        check_run(str(f), {"rw": "randread", "size": "2M"})
    st = f.stat()
    check_run(str(f), {"rw": "randread", "size": "2M"}, own_files=[(os.major(st.st_dev), os.minor(st.st_dev),
                                                                   st.st_ino)])  # we made it: fio may grow it
    with pytest.raises(UnsafeTargetError, match="it is a directory"):
        check_run(str(tmp_path), {"rw": "write", "size": "1M"})
    # relative paths are resolved in fio's working directory, not ours
    (tmp_path / "sub").mkdir()
    rec = check_run("../data.bin", {"rw": "randread", "size": "1M"}, cwd=tmp_path / "sub")
    assert rec["targets"][0]["resolved"] == str(f)
    with pytest.raises(UnsafeTargetError, match="inside the study's results directory"):
        check_run(str(tmp_path / "results" / "x.dat"), {"rw": "write", "size": "1M"},
                  forbidden_roots=[tmp_path / "results"])


def test_char_devices():
    check_run("/dev/null", {"rw": "write", "size": "1M"})
    if os.path.exists("/dev/mem"):
        with pytest.raises(UnsafeTargetError, match="character device"):
            check_run("/dev/mem", {"rw": "write", "size": "1M"})


def test_modifying_reason():
    assert modifying_reason({"rw": "randrw:8"}) == "randrw"
    assert modifying_reason({"readwrite": "trimwrite"}) == "trimwrite"
    assert modifying_reason({}) is None  # fio's default rw=read
    assert modifying_reason({"rw": "read", "ioengine": "falloc"}) == "ioengine=falloc"
    assert "read_iolog" in modifying_reason({"rw": "read", "read_iolog": "x.log"})
    with pytest.raises(UnsafeTargetError, match="must be one of"):
        modifying_reason({"rw": "randomwrite"})


def test_bad_allow_devices(tmp_path):
    with pytest.raises(UnsafeTargetError, match="does not exist"):
        check_run("/dev/null", {"rw": "write", "size": "1M"}, allow_devices=["/dev/nonexistent-xyz"])
    with pytest.raises(UnsafeTargetError, match="not a device"):
        check_run("/dev/null", {"rw": "write", "size": "1M"}, allow_devices=[str(tmp_path)])


def test_lint_jobfile_refuses_exec(tmp_path):
    text = "[global]\nexec_prerun=rm -rf /tmp/x\n\n[seq]\nrw=read\nsize=1M\n"
    with pytest.raises(UnsafeJobFileError, match="exec_prerun") as err:
        lint_jobfile(text)
    assert isinstance(err.value, JobFileError) and isinstance(err.value, UnsafeTargetError)
    lint_jobfile(text, allow_exec=True)
    with pytest.raises(UnsafeJobFileError, match="ioengine=exec"):
        lint_jobfile("[a]\nioengine=exec\nprogram=/bin/true\n")
    with pytest.raises(UnsafeJobFileError, match="exec_postrun"):
        lint_jobfile("[a]\nrw=read\nexec_postrun=reboot ; comment\n")
    with pytest.raises(UnsafeJobFileError, match="ioengine=external"):
        lint_jobfile("[a]\nioengine=external:/tmp/evil.so\n")
    # an included file is read and linted too
    (tmp_path / "other.fio").write_text("[global]\nexec_postrun=/bin/sh -c 'rm -rf ~'\n")
    with pytest.raises(UnsafeJobFileError, match="exec_postrun"):
        lint_jobfile("include other.fio\n[a]\nrw=read\n", base_dir=tmp_path)
    with pytest.raises(UnsafeTargetError, match="exec_prerun"):
        check_run("/dev/null", {"rw": "read", "exec_prerun": "true"})


@pytest.mark.root
def test_lint_jobfile_checks_targets(ext4_loop):
    dev, _ = ext4_loop
    text = f"[global]\nfilename={dev.path}\nsize=1M\n[reader]\nrw=randread\n[writer]\nrw=randwrite\n"
    with pytest.raises(UnsafeTargetError, match=r"\[writer\].*refusing randwrite"):
        lint_jobfile(text)
    lint_jobfile(text, allow_devices=[dev.path])


def _tiny_study(name: str, rw: str, size: str | None = "4m") -> dict:
    spec = {"name": name, "factors": {"rw": [rw]}, "fixed": {"bs": "64k", "direct": 1, "ioengine": "psync"},
            "runtime": 1, "repetitions": 1}
    if size is not None:
        spec["size"] = size
    return spec


@pytest.mark.root
@pytest.mark.parametrize("rw", ["write", "randwrite", "randrw", "trim"])
def test_runner_refuses_studies_on_ext4_device(ext4_loop, fio_bin, tmp_path, rw):
    """Through run_study: refused before fio runs, message names device and reason, canary intact."""
    from storagebench._runner import run_study
    from storagebench._study import load_study

    dev, sha = ext4_loop
    study = load_study(_tiny_study(f"unsafe-{rw}", rw))
    with pytest.raises(UnsafeTargetError) as err:
        run_study(study, target=dev.path, out_dir=tmp_path, progress=False)
    msg = str(err.value)
    assert f"refusing {rw} on {dev.path}" in msg and "ext4" in msg and "--allow-device" in msg
    raw = tmp_path / f"unsafe-{rw}" / "raw"
    assert not raw.exists() or not any(p.is_dir() and not p.name.startswith(".") for p in raw.iterdir())
    assert _sha256_of_file_on(dev) == sha


@pytest.mark.root
def test_runner_override_on_blank_device(blank_loop, fio_bin, tmp_path):
    """No size on a blank device = the whole device: refused, then run with --allow-device."""
    from storagebench._runner import run_study
    from storagebench._study import load_study

    dev = blank_loop
    study = load_study(_tiny_study("whole-device", "write", size=None))
    with pytest.raises(UnsafeTargetError, match="whole device"):
        run_study(study, target=dev.path, out_dir=tmp_path, progress=False)
    before = hashlib.sha256(Path(dev.path).read_bytes()).hexdigest()
    res = run_study(study, target=dev.path, out_dir=tmp_path, progress=False, allow_devices=[dev.path])
    assert res.ok and len(res.completed) == 1
    assert hashlib.sha256(Path(dev.path).read_bytes()).hexdigest() != before
