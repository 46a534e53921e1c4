"""Shared fixtures: seeded randomness, closed figures, real fio, root checks."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    plt.close("all")


@pytest.fixture
def rng():
    return np.random.default_rng(20261122)


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture(scope="session")
def fio_bin() -> str:
    path = shutil.which("fio")
    if path is None:
        pytest.skip("fio is not installed (make test installs it as root)")
    return path


@pytest.fixture(scope="session")
def require_root():
    if os.geteuid() != 0:
        pytest.skip("needs root (loop devices, namespaces, drop_caches)")


@pytest.fixture
def testbed_ready(require_root):
    """Root and loop-device support (skip with the reason otherwise); after the test no loop
    device, mount or zram device of ours may be left. Yields :mod:`storagebench.testbed`."""
    from storagebench import testbed as tb
    from storagebench.errors import TestbedError

    try:
        tb.require_testbed()
    except TestbedError as exc:
        pytest.skip(str(exc))
    yield tb
    assert tb.leftovers() == []


@pytest.fixture
def loop_dev(testbed_ready, tmp_path):
    """A blank 8 MiB loop device over a sparse file in ``tmp_path``, torn down after the test."""
    with testbed_ready.loop_device(8 << 20, dir=tmp_path) as dev:
        yield dev


#: The three configurations the captured DiskSPD fixtures (tests/fixtures/diskspd) share with a fio run:
#: name -> fio options. One 1-s run each, on a file.
CROSSTOOL_FIO = {
    "rw7030": {"rw": "randrw", "rwmixread": 70, "bs": "4k", "iodepth": 1, "numjobs": 1},
    "seq64k": {"rw": "read", "bs": "64k", "iodepth": 2, "numjobs": 4},
    "rwrite": {"rw": "randwrite", "bs": "4k", "iodepth": 16, "numjobs": 4},
}


@pytest.fixture(scope="session")
def crosstool_fio_runs(tmp_path_factory, fio_bin) -> Path:
    """A directory ``fio-runs`` holding real 1-s fio runs of :data:`CROSSTOOL_FIO` (``<name>.json``,
    ``--output-format=json``, nothing else), measured once for the session: the cross-tool tests
    (tests/test_stats_crosstool.py, tests/test_notebook_cross_tool.py) only read them."""

    fio_dir = tmp_path_factory.mktemp("fio-runs", numbered=False)
    target = tmp_path_factory.mktemp("fio-target") / "target.dat"
    for name, opts in CROSSTOOL_FIO.items():
        run_fio_json(fio_dir, fio_bin, name, target=target, **opts)
    target.unlink()
    return fio_dir


def run_fio_json(directory: Path, fio_bin: str, name: str, *, target: Path | None = None, **opts) -> Path:
    """One real 1-s fio run (libaio, direct, 32 MiB, ``--output-format=json``) of ``opts`` on ``target``
    (default ``directory/target.dat``), its output written to ``directory/<name>.json``, which is returned."""
    import json
    import subprocess

    target = directory / "target.dat" if target is None else target
    args = [fio_bin, f"--name={name}", f"--filename={target}", "--size=32m", "--time_based", "--runtime=1",
            "--ioengine=libaio", "--direct=1", "--group_reporting", "--output-format=json",
            *(f"--{k}={v}" for k, v in opts.items())]
    out = subprocess.run(args, capture_output=True, text=True, check=True)
    json.loads(out.stdout)
    path = directory / f"{name}.json"
    path.write_text(out.stdout)
    return path


class Hang(Exception):
    """A call that gave no result within :func:`time_limit` (a hang: a FIFO read, an endless loop). Not an
    ``OSError`` (as ``TimeoutError`` is), so code under test that catches ``OSError`` cannot turn a hang into an
    error message."""


@contextlib.contextmanager
def time_limit(seconds: float, what: str = ""):
    """Raise :class:`Hang` in the block after ``seconds`` (SIGALRM; the main thread only), naming ``what``."""
    def _alarm(signum, frame):
        raise Hang(f"{what + ': ' if what else ''}no result after {seconds} s (a hang)")

    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
