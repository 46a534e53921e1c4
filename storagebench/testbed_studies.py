"""The four testbed studies: set up Linux devices, run the study, ingest, analyse.

Each study is a spec in ``data/studies/<name>.yaml`` run on devices this module creates with
:mod:`storagebench.testbed` and tears down afterwards (also on error or Ctrl-C):

``rdm_vs_vmfs`` (seed 000)
    Raw loop device vs a file on ext4 and on xfs on identical loop devices, across I/O sizes;
    fs/raw ratio with CI per size, TOST for "within 1%", and the runs that margin would need.
``stripe_width`` (seed 002)
    btrfs raid0 over 4 loop devices vs btrfs on 1, six patterns; ratio with CI, Holm-adjusted p.
``consolidation`` (seed 003)
    Two random workloads at once, isolated on two 2-device sets vs shared on one 4-device set;
    per-workload IOPS and p90/p99 from merged json+ histograms.
``fast_vs_slow`` (seed 004)
    zram (or a tmpfs-backed loop device) vs a loop device on disk under rising load; scores
    normalised to the slow device's lowest load, % improvement with CI, highest load meeting a
    p99 latency QoS limit.

:func:`run_testbed_study` does it all and writes, under ``<out_dir>/<study>/``, the runner's
``raw/``, ``tidy/*.parquet`` (ingest), ``testbed.json`` (what the devices really were) and
``analysis/*.csv`` (the verdict tables). :func:`analyse` recomputes the tables from a study
directory; the notebooks in ``notebooks/studies/`` call it.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import testbed as tb
from .errors import FioError, StatsError, StudyError, TestbedError
from .safeyaml import load_yaml, read_text_capped
from .stats.verdict import NO_CI_VERDICT
from .study import Study, load_study

__all__ = [
    "STUDIES",
    "SPEC_DIR",
    "DEFAULT_QOS_P99_MS",
    "StudyOutcome",
    "study_spec",
    "run_testbed_study",
    "load_tables",
    "analyse",
    "analyse_rdm_vs_vmfs",
    "analyse_stripe_width",
    "analyse_consolidation",
    "analyse_fast_vs_slow",
    "pooled_percentiles",
    "load_testbed_record",
    "verdict_summary",
    "notebook_path",
    "describe_testbed",
    "verdict_text",
    "with_outstanding_ios",
    "improvement_as_ratio",
    "ratio_figure",
    "direction_verdicts",
    "NO_CI_VERDICT",
]

#: The testbed studies, in seed order.
STUDIES: tuple[str, ...] = ("rdm_vs_vmfs", "stripe_width", "consolidation", "fast_vs_slow")
#: Where the specs live (``data/studies`` of the source tree).
SPEC_DIR = Path(__file__).resolve().parents[1] / "data" / "studies"
#: Default QoS limit of fast_vs_slow: p99 completion latency, ms.
DEFAULT_QOS_P99_MS = 5.0

#: ``--quick`` overrides: a grid small enough for tests (seconds), same code path.
_QUICK: dict[str, dict[str, Any]] = {
    "rdm_vs_vmfs": {"runtime": 1, "ramp_time": 0, "repetitions": 2, "size": "16m",
                    "factors": {"datastore": ["raw", "ext4"], "mix": ["rw60_40"], "bs": ["4k"]}},
    "stripe_width": {"runtime": 1, "ramp_time": 0, "repetitions": 2, "size": "16m",
                     "factors": {"pattern": ["8k_randrw_70_30"]}},
    "consolidation": {"runtime": 1, "ramp_time": 0, "repetitions": 2, "size": "16m"},
    "fast_vs_slow": {"runtime": 1, "ramp_time": 0, "repetitions": 2, "size": "16m",
                     "factors": {"load": ["L1", "L3"]}},
}


def _check_name(name: str) -> None:
    if name not in STUDIES:
        raise StudyError(f"testbed study must be one of {list(STUDIES)}, got {name!r}")


def _level_name(level: Any) -> Any:
    return level["name"] if isinstance(level, dict) else level


def study_spec(name: str, *, quick: bool = False, spec_dir: str | os.PathLike[str] | None = None) -> Study:
    """The spec of a testbed study, or its ``--quick`` variant (named ``<name>-quick``).

    Parameters
    ----------
    name : {"rdm_vs_vmfs", "stripe_width", "consolidation", "fast_vs_slow"}
    quick : bool
        Fewer levels, 2 repetitions, 1 s runs, 32 MiB regions: seconds instead of minutes.
    spec_dir : path, optional
        Directory of the YAML specs; default :data:`SPEC_DIR`.

    Raises
    ------
    StudyError
        Unknown study or invalid spec.
    """
    _check_name(name)
    path = Path(spec_dir or SPEC_DIR) / f"{name}.yaml"
    if not quick:
        return load_study(path)
    data = load_yaml(read_text_capped(path, error=StudyError, what="study spec"), where=str(path), error=StudyError)
    if not isinstance(data, dict) or not isinstance(data.get("factors", {}), dict):
        raise StudyError(f"{path}: a study spec must be a mapping of keys (name, factors, ...)")
    q = _QUICK[name]
    data = dict(data, name=f"{name}-quick")
    for key, value in q.items():
        if key == "factors":
            factors = dict(data["factors"])
            for fname, keep in value.items():
                factors[fname] = [lv for lv in factors[fname] if _level_name(lv) in keep]
            data["factors"] = factors
        else:
            data[key] = value
    return load_study(data)


# ---------------------------------------------------------------------------------------------
# testbeds


@dataclass
class _Bed:
    """What a study runs on: target name -> path, devices allowed to be written, descriptions."""

    targets: dict[str, str] = field(default_factory=dict)
    allow: list[str] = field(default_factory=list)
    devices: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    workload_targets: dict[tuple[str, str], str] = field(default_factory=dict)  # consolidation


def _size_bytes(study: Study) -> int:
    return tb.parse_size(str(study.size))


def _loop_size(study: Study, minimum: int = 512 << 20) -> int:
    return max(minimum, 2 * _size_bytes(study))


@contextlib.contextmanager
def _bed_rdm_vs_vmfs(study: Study) -> Iterator[_Bed]:
    levels = [_level_name(lv) for lv in study.factors["datastore"]]
    size = _loop_size(study)
    with contextlib.ExitStack() as stack:
        bed = _Bed()
        for level in levels:
            dev = stack.enter_context(tb.loop_device(size))
            bed.devices.append({**dev.to_dict(), "role": level})
            if level == "raw":
                bed.targets[level] = dev.path
                bed.allow.append(dev.path)
            else:
                fs = stack.enter_context(tb.filesystem(dev, level))
                bed.devices.append({**fs.to_dict(), "role": level})
                bed.targets[level] = os.path.join(fs.mountpoint, "datastore.dat")
        bed.notes.append(
            f"{len(levels)} identical {size >> 20} MiB loop devices over sparse files on the local disk "
            "(losetup --direct-io=on: the loop driver reads and writes its backing file with O_DIRECT); "
            "raw = the first device itself, ext4/xfs = a file on a filesystem made on the others. "
            "Every target was prefilled with fio sequential writes before the sweep, so no run reads holes."
        )
        yield bed


@contextlib.contextmanager
def _bed_stripe_width(study: Study) -> Iterator[_Bed]:
    size = _loop_size(study)
    with contextlib.ExitStack() as stack:
        bed = _Bed()
        one = stack.enter_context(tb.loop_device(4 * size))
        fs1 = stack.enter_context(tb.filesystem(one, "btrfs"))
        four = stack.enter_context(tb.loop_devices(4, size))
        fs4 = stack.enter_context(tb.btrfs_raid0(four))
        bed.targets = {"width1": os.path.join(fs1.mountpoint, "stripe.dat"),
                       "width4": os.path.join(fs4.mountpoint, "stripe.dat")}
        bed.devices += [{**one.to_dict(), "role": "width1"}, {**fs1.to_dict(), "role": "width1"}]
        bed.devices += [{**d.to_dict(), "role": "width4"} for d in four] + [{**fs4.to_dict(), "role": "width4"}]
        bed.notes.append(
            f"width 1: btrfs (single profile) on one {4 * size >> 20} MiB loop device; width 4: btrfs with "
            f"data and metadata raid0 over four {size >> 20} MiB loop devices (same capacity). All loop "
            "devices are sparse files on the same local disk with --direct-io=on: striping adds queues and "
            "parallel submission, not spindles. Files prefilled before the sweep."
        )
        yield bed


@contextlib.contextmanager
def _bed_consolidation(study: Study) -> Iterator[_Bed]:
    size = _loop_size(study)
    workloads = [_level_name(lv) for lv in study.factors["workload"]]
    if len(workloads) != 2:
        raise StudyError(f"consolidation needs exactly 2 workloads, got {workloads}")
    with contextlib.ExitStack() as stack:
        bed = _Bed()
        devs = stack.enter_context(tb.loop_devices(8, size))
        iso = [stack.enter_context(tb.btrfs_raid0(devs[0:2])), stack.enter_context(tb.btrfs_raid0(devs[2:4]))]
        shared = stack.enter_context(tb.btrfs_raid0(devs[4:8]))
        for i, w in enumerate(workloads):
            bed.workload_targets[("isolated", w)] = os.path.join(iso[i].mountpoint, f"{w}.dat")
            bed.workload_targets[("shared", w)] = os.path.join(shared.mountpoint, f"{w}.dat")
        bed.devices += [{**d.to_dict(), "role": ("isolated" if i < 4 else "shared")} for i, d in enumerate(devs)]
        bed.devices += [{**iso[0].to_dict(), "role": f"isolated:{workloads[0]}"},
                        {**iso[1].to_dict(), "role": f"isolated:{workloads[1]}"},
                        {**shared.to_dict(), "role": "shared"}]
        bed.notes.append(
            f"eight {size >> 20} MiB loop devices (sparse files on the local disk, --direct-io=on). "
            f"isolated: btrfs raid0 over devices 1-2 for {workloads[0]!r} and 3-4 for {workloads[1]!r}; "
            "shared: btrfs raid0 over devices 5-8 holding both files. The two workloads of a (layout, "
            "repetition) run as two fio processes started together. All devices share one physical disk, "
            "so the study measures the effect of sharing queues and stripes, not spindles."
        )
        yield bed


@contextlib.contextmanager
def _bed_fast_vs_slow(study: Study) -> Iterator[_Bed]:
    size = _loop_size(study)
    with contextlib.ExitStack() as stack:
        bed = _Bed()
        slow = stack.enter_context(tb.loop_device(size))
        bed.targets["slow"] = slow.path
        bed.devices.append({**slow.to_dict(), "role": "slow"})
        try:
            fast = stack.enter_context(tb.zram_device(size))
            bed.notes.append(
                f"fast: zram device {fast.path} ({size >> 20} MiB, {fast.comp_algorithm} compression; "
                "compressed RAM)."
            )
        except TestbedError as exc:
            fast = stack.enter_context(tb.ram_loop_device(size))
            bed.notes.append(
                f"fast: zram could not be had ({exc}); fell back to a loop device over a file on tmpfs "
                f"(/dev/shm), i.e. RAM copied through the loop driver."
            )
        bed.targets["fast"] = fast.path
        bed.devices.append({**fast.to_dict(), "role": "fast"})
        bed.allow += [slow.path, fast.path]
        bed.notes.append(
            f"slow: a {size >> 20} MiB loop device over a sparse file on the local disk with --direct-io=on "
            "(a virtual disk shared with other tenants: noisy). Both devices prefilled before the sweep."
        )
        yield bed


_BEDS = {
    "rdm_vs_vmfs": _bed_rdm_vs_vmfs,
    "stripe_width": _bed_stripe_width,
    "consolidation": _bed_consolidation,
    "fast_vs_slow": _bed_fast_vs_slow,
}


def _prefill(paths: Sequence[str], size: int, allow: Sequence[str], fio_bin: str = "fio") -> None:
    """Write ``size`` bytes to each target sequentially (fio, 1 MiB, O_DIRECT) so reads hit data."""
    from .fio import process
    from .safety import check_run

    exe = process.find_fio(fio_bin)
    for path in paths:
        opts = {"rw": "write", "bs": "1m", "size": str(size), "direct": 1, "ioengine": "libaio", "iodepth": 8}
        check_run(path, opts, allow_devices=allow)
        cmd = [exe, "--name=prefill", f"--filename={path}", "--rw=write", "--bs=1m", f"--size={size}",
               "--direct=1", "--ioengine=libaio", "--iodepth=8", "--output-format=terse"]
        try:  # its own session, tied to this process, stopped on timeout or Ctrl-C
            proc = process.run(cmd, timeout_s=600, marker=f"--filename={path}")
        except subprocess.TimeoutExpired:
            raise FioError(f"prefill of {path} did not finish within 600 s and was killed", returncode=None) from None
        if proc.returncode != 0:
            raise FioError(f"prefill of {path} failed: {proc.stderr.strip()[-500:]}", returncode=proc.returncode,
                           stderr=proc.stderr)


# ---------------------------------------------------------------------------------------------
# running


@dataclass(frozen=True)
class StudyOutcome:
    """What :func:`run_testbed_study` did.

    Attributes
    ----------
    name : str
        Study name as run (``<name>`` or ``<name>-quick``).
    study_dir : Path
        ``<out_dir>/<name>``.
    wall_s : float
        Wall-clock time of set-up, sweep, tear-down, ingest and analysis, s.
    completed, skipped, failed : int
        Runs measured now, found complete (resume), failed.
    tables : dict of str to DataFrame
        The analysis tables (see :func:`analyse`), also in ``analysis/<key>.csv``.
    testbed : dict
        What the devices were (also ``testbed.json``).
    phases_s : dict of str to float
        Wall time of ``set_up`` (devices, filesystems), ``prefill``, ``sweep``, ``tear_down`` and
        ``analysis`` (ingest + tables), s.
    """

    name: str
    study_dir: Path
    wall_s: float
    completed: int
    skipped: int
    failed: int
    tables: dict[str, pd.DataFrame]
    testbed: dict
    phases_s: dict[str, float] = field(default_factory=dict)


def _run_consolidation(study: Study, bed: _Bed, out_dir: Path, fio_bin: str, progress: bool) -> tuple[int, int, int]:
    """Run each (layout, repetition) pair of workload runs as two concurrent fio processes.

    Each run goes through :func:`storagebench.runner.run_point` (safety check, job file,
    provenance, atomic commit); only the scheduling differs: the two runs of a pair start together.
    """
    from .fio.process import find_fio
    from .runner import run_point
    from .store import StudyStore

    exe = find_fio(fio_bin)
    plan = study.expand()
    store = StudyStore.for_study(out_dir, study)
    with store.lock():  # one sweep at a time in this study's directory
        return _run_pairs(study, bed, store, plan, exe, progress, run_point)


def _run_pairs(study: Study, bed: _Bed, store, plan, exe: str, progress: bool, run_point) -> tuple[int, int, int]:
    store.ensure_spec(study)
    store.cleanup_stale()
    done = store.completed_run_ids()
    groups: dict[tuple[str, int], list] = {}
    for p in plan:  # plan order is the seeded random order: the pairs keep it
        groups.setdefault((p.factors["layout"], p.repetition), []).append(p)
    completed = skipped = failed = 0
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(plan), desc=study.name, unit="run")
    helper = ThreadPoolExecutor(max_workers=2, thread_name_prefix="storagebench-consolidation")
    with helper, ThreadPoolExecutor(max_workers=2) as pool:
        for (layout, _rep), points in groups.items():
            todo = [p for p in points if p.run_id not in done]
            if not todo:
                skipped += len(points)
                continue
            if len(todo) != len(points):  # a pair measured half: measure both again for concurrency
                for p in points:
                    shutil.rmtree(store.run_dir(p.run_id), ignore_errors=True)
                todo = points
            futures = [
                pool.submit(run_point, p, study, store,
                            target=bed.workload_targets[(layout, p.factors["workload"])], targets=None,
                            fio_exe=exe, allow_devices=bed.allow, timeout_s=study.timeout_s, pool=helper)
                for p in todo
            ]
            for f in futures:
                try:
                    f.result()
                    completed += 1
                except FioError:
                    failed += 1
            if bar is not None:
                bar.update(len(points))
    if bar is not None:
        bar.close()
    return completed, skipped, failed


def run_testbed_study(
    name: str,
    *,
    out_dir: str | os.PathLike[str] = "results",
    quick: bool = False,
    progress: bool = False,
    fio_bin: str = "fio",
    qos_p99_ms: float = DEFAULT_QOS_P99_MS,
    spec_dir: str | os.PathLike[str] | None = None,
) -> StudyOutcome:
    """Set up the study's devices, run it, tear them down, ingest and analyse.

    Parameters
    ----------
    name : {"rdm_vs_vmfs", "stripe_width", "consolidation", "fast_vs_slow"}
    out_dir : path
        Results root; the study goes to ``<out_dir>/<name>[-quick]/``.
    quick : bool
        The small ``--quick`` grid (seconds), see :func:`study_spec`.
    progress : bool
        Progress bar on stderr.
    fio_bin : str
        fio executable.
    qos_p99_ms : float
        fast_vs_slow: QoS limit on the p99 completion latency, ms.
    spec_dir : path, optional
        Directory of the YAML specs.

    Returns
    -------
    StudyOutcome

    Raises
    ------
    TestbedError
        Not root, no loop devices, mkfs/mount failed (nothing is left behind).
    StudyError, UnsafeTargetError, FioError
        From the spec, the safety check or fio.

    Notes
    -----
    A rerun resumes: runs already in ``raw/`` are kept (the devices are new, so a resumed study
    mixes two testbeds of the same construction; ``testbed.json`` keeps every set-up).
    """
    study = study_spec(name, quick=quick, spec_dir=spec_dir)
    out = Path(out_dir)
    t0 = time.monotonic()
    phases: dict[str, float] = {}
    tb.require_testbed()
    with _BEDS[name](study) as bed:
        t1 = time.monotonic()
        phases["set_up"] = t1 - t0
        paths = list(bed.targets.values()) + list(bed.workload_targets.values())
        _prefill(paths, _size_bytes(study), bed.allow, fio_bin=fio_bin)
        t2 = time.monotonic()
        phases["prefill"] = t2 - t1
        record = {"study": study.name, "set_up_at": pd.Timestamp.now(tz="UTC").isoformat(),
                  "targets": bed.targets,
                  "workload_targets": {f"{k[0]}/{k[1]}": v for k, v in bed.workload_targets.items()},
                  "devices": bed.devices, "notes": bed.notes}
        if name == "consolidation":
            completed, skipped, failed = _run_consolidation(study, bed, out, fio_bin, progress)
        else:
            from .runner import run_study

            sweep = run_study(study, targets=bed.targets, out_dir=out, fio_bin=fio_bin, progress=progress,
                              allow_devices=bed.allow)
            completed, skipped, failed = len(sweep.completed), len(sweep.skipped), len(sweep.failed)
        t3 = time.monotonic()
        phases["sweep"] = t3 - t2
    t4 = time.monotonic()
    phases["tear_down"] = t4 - t3
    study_dir = out / study.name
    _append_testbed_record(study_dir / "testbed.json", record)
    tables = analyse(study_dir, qos_p99_ms=qos_p99_ms, write=True)
    phases["analysis"] = time.monotonic() - t4
    return StudyOutcome(name=study.name, study_dir=study_dir, wall_s=time.monotonic() - t0, completed=completed,
                        skipped=skipped, failed=failed, tables=tables, testbed=record,
                        phases_s={k: round(v, 3) for k, v in phases.items()})


def _append_testbed_record(path: Path, record: dict) -> None:
    history = []
    if path.exists():
        with contextlib.suppress(ValueError, OSError):
            old = json.loads(path.read_text())
            history = old.get("set_ups", []) if isinstance(old, dict) else []
    history.append(record)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".testbed.", dir=path.parent)
    with os.fdopen(fd, "w") as fh:
        json.dump({"latest": record, "set_ups": history}, fh, indent=2, default=str)
    os.replace(tmp, path)


# ---------------------------------------------------------------------------------------------
# analysis


def load_tables(study_dir: str | os.PathLike[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(runs, histograms)`` of a study: ``tidy/*.parquet`` if present, else ingest ``raw/`` now.

    Raises
    ------
    IngestError
        Nothing ingestible in the study directory.
    """
    sdir = Path(study_dir)
    tidy = sdir / "tidy"
    runs_p, hist_p = tidy / "runs.parquet", tidy / "histograms.parquet"
    raw_mtime = max((p.stat().st_mtime for p in (sdir / "raw").glob("*/output.json")), default=0.0)
    if runs_p.exists() and hist_p.exists() and runs_p.stat().st_mtime >= raw_mtime:
        return pd.read_parquet(runs_p), pd.read_parquet(hist_p)
    from .ingest import ingest_study

    res = ingest_study(sdir)
    with contextlib.suppress(Exception):  # a read-only results tree still gets its analysis
        res.write_parquet(tidy)
    return res.runs, res.histograms


def _per_run(runs: pd.DataFrame, histograms: pd.DataFrame | None = None,
             percentiles: Sequence[float] = (90.0, 99.0)) -> pd.DataFrame:
    """One row per run: jobs and directions combined (:func:`storagebench.aggregate.combine_jobs`).

    IOPS and bandwidth are summed (a 70/30 run's total), latencies IOPS-weighted, and with
    ``histograms`` the ``clat_p*_ns`` columns come from the run's merged json+ bins.
    """
    from .aggregate import combine_jobs

    out = combine_jobs(runs, histograms, by=("run_id",), percentiles=percentiles)
    # a pure-read run keeps direction='read'; a per-run total belongs to no direction
    return out.drop(columns=["direction", "job", "job_index"], errors="ignore")


def pooled_percentiles(histograms: pd.DataFrame, runs: pd.DataFrame, by: Sequence[str],
                       percentiles: Sequence[float] = (90.0, 99.0)) -> pd.DataFrame:
    """Percentiles of all completions of each ``by`` group, from bins merged across its runs.

    Returns
    -------
    DataFrame
        ``*by, n_runs, completions`` and ``clat_p90_ms`` ... (ms).
    """
    from .histogram import merge_histograms, percentiles_from_bins

    keys = runs[["run_id", *by]].drop_duplicates("run_id")
    h = histograms.merge(keys, on="run_id", how="inner")
    merged = merge_histograms(h, by=list(by))
    rows = []
    for key, g in merged.groupby(list(by), sort=True):
        key = key if isinstance(key, tuple) else (key,)
        pct = percentiles_from_bins(g["bin_ns"].to_numpy(), g["count"].to_numpy(), percentiles)
        rec = dict(zip(by, key, strict=True))
        rec["n_runs"] = int(h.loc[(h[list(by)] == pd.Series(rec)).all(axis=1), "run_id"].nunique())
        rec["completions"] = int(g["count"].sum())
        for p, v in pct.items():
            rec[f"clat_p{p:g}_ms".replace(".", "_")] = v / 1e6
        rows.append(rec)
    return pd.DataFrame(rows)


def analyse_rdm_vs_vmfs(runs: pd.DataFrame, *, margin: float = 0.01, confidence: float = 0.95,
                        power: float = 0.8) -> dict[str, pd.DataFrame]:
    """fs/raw ratios per I/O size and mix, TOST for "within ``margin``", runs needed.

    Parameters
    ----------
    runs : DataFrame
        ``runs`` table of the study (factors ``datastore``, ``mix``; ``bs_bytes``).
    margin : float
        Equivalence margin as a fraction (0.01 = "within 1%").
    confidence : float
        CI level; TOST at ``alpha = 1 - confidence``.
    power : float
        Target power of the planned TOST.

    Returns
    -------
    dict
        ``"points"``: per (datastore, mix, bs) mean IOPS and MB/s over repetitions;
        ``"verdicts"``: per (mix, bs_bytes, metric, level): ``ratio, ci_low, ci_high`` (level/raw, ratio
        of geometric means with the Welch CI on log values), ``p_equivalence``, ``equivalent``, ``cv_pct``
        (run-to-run CV from the log-scale SD pooled over both arms, :func:`storagebench.stats.pilot_cv`),
        ``cv_upper_pct`` (its one-sided 80% upper confidence bound, chi-square on ``n_a + n_b - 2`` df),
        ``n_per_arm`` (runs now) and ``n_needed_per_arm`` (runs per arm for the TOST to show "within
        margin" with ``power`` if the true ratio were 1, planned at ``cv_upper_pct``, not at the point
        estimate; :func:`storagebench.stats.tost_sample_size`);
        ``"overall"``: per (metric, level) whether every size was shown equivalent (intersection-union test).
    """
    from .stats import compare, pilot_cv, tost_sample_size

    pr = _per_run(runs)
    pr["bw_MB_per_s"] = pr["bw_bytes_per_s"] / 1e6
    pts = (pr.groupby(["datastore", "mix", "bs_bytes"], sort=True)
           .agg(iops=("iops", "mean"), bw_MB_per_s=("bw_MB_per_s", "mean"), n=("iops", "size")).reset_index())
    out = []
    for metric in ("iops", "bw_bytes_per_s"):
        table = compare(pr, "datastore", "raw", metric, by=["mix", "bs_bytes"], margin=margin,
                        confidence=confidence, adjust="holm")
        df = table.to_frame()
        cvs, uppers, needs = [], [], []
        for _, row in df.iterrows():
            sel = (pr["mix"] == row["mix"]) & (pr["bs_bytes"] == row["bs_bytes"])
            a = pr.loc[sel & (pr["datastore"] == "raw"), metric].to_numpy(float)
            b = pr.loc[sel & (pr["datastore"] == row["level"]), metric].to_numpy(float)
            try:
                pcv = pilot_cv([a, b])
            except StatsError:  # fewer than 2 runs in an arm, or no spread: no plan
                cvs.append(math.nan)
                uppers.append(math.nan)
                needs.append(math.nan)
                continue
            cvs.append(pcv.cv * 100)
            uppers.append(pcv.cv_upper * 100)
            try:
                needs.append(tost_sample_size(pcv, margin, ratio=1.0, alpha=1 - confidence, power=power))
            except StatsError:  # more than n_max runs: reported as NaN, never a made-up number
                needs.append(math.nan)
        df["cv_pct"] = cvs
        df["cv_upper_pct"] = uppers
        df["n_per_arm"] = df["n_other"]
        df["n_needed_per_arm"] = needs
        out.append(df)
    verdicts = pd.concat(out, ignore_index=True)
    keep = ["metric", "mix", "bs_bytes", "level", "baseline", "n_per_arm", "mean_baseline", "mean_other", "ratio",
            "ci_low", "ci_high", "p", "p_adjusted", "margin", "p_equivalence", "equivalent", "cv_pct",
            "cv_upper_pct", "n_needed_per_arm", "note"]
    verdicts = verdicts[keep]
    overall = (verdicts.groupby(["metric", "level"], sort=True)
               .agg(sizes=("bs_bytes", "size"), sizes_equivalent=("equivalent", lambda s: int((s == True).sum())),  # noqa: E712
                    all_equivalent=("equivalent", lambda s: bool((s == True).all())),  # noqa: E712
                    min_ratio_ci_low=("ci_low", "min"), max_ratio_ci_high=("ci_high", "max"),
                    max_n_needed_per_arm=("n_needed_per_arm", "max"))
               .reset_index())
    return {"points": pts, "verdicts": verdicts, "overall": overall}


def _baseline_like(series: pd.Series, value: Any) -> Any:
    for v in series.unique():
        if str(v) == str(value):
            return v
    raise StatsError(f"baseline {value!r} is not a level of {series.name!r}: {sorted(map(str, series.unique()))}")


def direction_verdicts(df: pd.DataFrame, alpha: float, up: str, down: str) -> np.ndarray:
    """Verdict words per comparison row: a direction only where the CI shows one.

    The rule is :func:`storagebench.stats.verdict_words` (its one owner): ``up`` when the Holm-adjusted
    p < ``alpha`` and the whole ratio CI lies above 1; ``down`` when p < ``alpha`` and the CI lies below
    1; :data:`NO_CI_VERDICT` when a CI bound is NaN (then neither the ratio nor its p-value may be read as
    a direction); otherwise ``"no difference shown"``.

    Parameters
    ----------
    df : DataFrame
        Rows with ``ci_low``, ``ci_high`` (ratio CI) and ``p_adjusted``.
    alpha : float
        1 - confidence.
    up, down : str or array of str
        Words for a ratio above / below 1 (per row, e.g. "better shared" for IOPS and
        "worse shared" for latency).

    Returns
    -------
    numpy.ndarray of str
    """
    from .stats import verdict_words

    return verdict_words(df["ci_low"], df["ci_high"], df["p_adjusted"], alpha, up, down).astype(str)


def analyse_stripe_width(runs: pd.DataFrame, *, confidence: float = 0.95) -> dict[str, pd.DataFrame]:
    """width-4 / width-1 ratio of IOPS per pattern (ratio of geometric means, Welch CI on log values), Holm-adjusted p.

    Returns
    -------
    dict
        ``"points"`` (mean IOPS, MB/s per width and pattern) and ``"verdicts"``: per (metric,
        pattern): ``ratio, ci_low, ci_high, p, p_adjusted, verdict`` where verdict is
        ``"faster"``/``"slower"`` when the Holm-adjusted p < 1 - confidence and the CI lies above/below 1,
        ``"no verdict: CI not estimable"`` when the CI is NaN, else ``"no difference shown"``
        (:func:`direction_verdicts`).
    """
    from .stats import compare

    pr = _per_run(runs)
    pr["bw_MB_per_s"] = pr["bw_bytes_per_s"] / 1e6
    pts = (pr.groupby(["pattern", "stripe_width"], sort=True)
           .agg(iops=("iops", "mean"), bw_MB_per_s=("bw_MB_per_s", "mean"), n=("iops", "size")).reset_index())
    base = _baseline_like(pr["stripe_width"], 1)
    table = compare(pr, "stripe_width", base, "iops", by="pattern", confidence=confidence, adjust="holm")
    df = table.to_frame()
    alpha = 1 - confidence
    df["verdict"] = direction_verdicts(df, alpha, "faster", "slower")
    keep = ["pattern", "level", "baseline", "n_baseline", "n_other", "mean_baseline", "mean_other", "ratio", "ci_low",
            "ci_high", "p", "p_adjusted", "verdict", "note"]
    return {"points": pts, "verdicts": df[keep], "comparison": table}


def analyse_consolidation(runs: pd.DataFrame, histograms: pd.DataFrame, *,
                          confidence: float = 0.95) -> dict[str, pd.DataFrame]:
    """Per workload: IOPS, p90 and p99 shared vs isolated.

    Returns
    -------
    dict
        ``"pooled"``: per (workload, layout) mean IOPS and p90/p99 (ms) of all completions of its runs
        (bins merged, never percentiles averaged); ``"verdicts"``: per (workload, metric in iops,
        clat_p90_ns, clat_p99_ns) the shared/isolated ratio of geometric means of per-run values with its
        Welch CI on log values and
        Holm-adjusted p, and ``verdict`` (:func:`direction_verdicts`: "better shared"/"worse shared" only
        where the CI excludes 1, never beside a CI that is not estimable); ``"per_run"``: per-run IOPS and percentiles.
    """
    from .stats import compare

    pr = _per_run(runs, histograms, (90.0, 99.0))
    pooled = pooled_percentiles(histograms, runs, ["workload", "layout"], (90.0, 99.0))
    iops = pr.groupby(["workload", "layout"], sort=True)["iops"].mean().rename("iops_mean").reset_index()
    pooled = iops.merge(pooled, on=["workload", "layout"])
    frames = []
    for metric in ("iops", "clat_p90_ns", "clat_p99_ns"):
        t = compare(pr, "layout", "isolated", metric, by="workload", confidence=confidence, adjust="holm")
        frames.append(t.to_frame())
    verdicts = pd.concat(frames, ignore_index=True)
    alpha = 1 - confidence
    iops = verdicts["metric"] == "iops"  # higher IOPS is better, higher latency worse
    verdicts["verdict"] = direction_verdicts(verdicts, alpha, np.where(iops, "better shared", "worse shared"),
                                             np.where(iops, "worse shared", "better shared"))
    keep = ["workload", "metric", "level", "baseline", "n_baseline", "n_other", "mean_baseline", "mean_other",
            "ratio", "ci_low", "ci_high", "p", "p_adjusted", "verdict", "note"]
    cols = ["run_id", "workload", "layout", "repetition", "iops", "clat_p90_ns", "clat_p99_ns"]
    return {"pooled": pooled, "verdicts": verdicts[keep], "per_run": pr[[c for c in cols if c in pr.columns]]}


def _load_order(pr: pd.DataFrame) -> pd.DataFrame:
    lo = (pr.assign(outstanding_ios=pr["numjobs"].astype(int) * pr["iodepth"].astype(int))
          .groupby("load")["outstanding_ios"].first().sort_values())
    return lo.reset_index()


def analyse_fast_vs_slow(runs: pd.DataFrame, histograms: pd.DataFrame, *, qos_p99_ms: float = DEFAULT_QOS_P99_MS,
                         confidence: float = 0.95) -> dict[str, pd.DataFrame]:
    """Normalised scores, % improvement of fast over slow per load, highest load within QoS.

    Parameters
    ----------
    runs, histograms : DataFrame
        Tables of the study (factors ``device``, ``load``; ``numjobs``, ``iodepth``).
    qos_p99_ms : float
        QoS limit on the p99 completion latency of a run (all I/Os), ms.
    confidence : float
        CI level.

    Returns
    -------
    dict
        ``"scores"``: per (device, load) ``outstanding_ios`` (numjobs x iodepth), ``score`` =
        IOPS / IOPS of the slow device at its lowest load (ratio of geometric means, Welch CI on log values;
        the baseline itself is exactly 1 without a CI)
        (:func:`storagebench.stats.saturation.normalize`), and the per-run p99 completion latency
        (from each run's merged bins; ms) mean with its t CI, ``meets``/``meets_confident``;
        ``"improvement"``: per load ``improvement_pct`` = (fast/slow - 1) x 100 with its CI (ratio of
        geometric mean IOPS, Welch CI on log values) and Holm-adjusted p; ``"qos"``: per device the highest load
        before the first load whose mean p99 exceeds the limit (``max_load``) and the same with the
        upper CI bound (``max_load_confident``, the defensible claim;
        :func:`storagebench.stats.saturation.qos_max_load`).
    """
    from .stats import compare, normalize, qos_max_load

    if not (isinstance(qos_p99_ms, (int, float)) and qos_p99_ms > 0):
        raise StatsError(f"qos_p99_ms must be a positive number of ms, got {qos_p99_ms!r}")
    pr = _per_run(runs, histograms, (99.0,))
    order = _load_order(pr)
    pr = pr.drop(columns=["outstanding_ios"], errors="ignore").merge(order, on="load")
    lowest = int(order["outstanding_ios"].iloc[0])
    scores = normalize(pr, "iops", f"device == 'slow' and outstanding_ios == {lowest}",
                       by=["device", "outstanding_ios"], confidence=confidence)
    scores = scores.merge(order, on="outstanding_ios")
    scores = scores.rename(columns={"mean": "iops_mean", "normalized": "score", "ci_low": "score_ci_low",
                                    "ci_high": "score_ci_high"})
    def at(outstanding):  # load name of an outstanding-I/O level
        return None if outstanding is None else order.loc[order["outstanding_ios"] == outstanding, "load"].iloc[0]

    qos_rows, lat_tables = [], []
    for dev, g in pr.groupby("device", sort=True):
        q = qos_max_load(g, "outstanding_ios", "clat_p99_ns", qos_p99_ms * 1e6, confidence=confidence)
        lt = q.table.rename(columns={"load": "outstanding_ios"})
        lt.insert(0, "device", dev)
        lat_tables.append(lt)
        qos_rows.append({"device": dev, "qos_p99_ms": qos_p99_ms,
                         "max_load": at(q.max_load), "max_outstanding_ios": q.max_load,
                         "max_load_confident": at(q.max_load_confident),
                         "max_outstanding_ios_confident": q.max_load_confident,
                         "loads": len(q.table), "method": q.method, "note": q.note})
    lat = pd.concat(lat_tables, ignore_index=True)
    lat = lat.rename(columns={"mean": "clat_p99_ms", "ci_low": "clat_p99_ms_ci_low", "ci_high": "clat_p99_ms_ci_high"})
    for c in ("clat_p99_ms", "clat_p99_ms_ci_low", "clat_p99_ms_ci_high"):
        lat[c] = lat[c] / 1e6
    scores = scores.merge(lat.drop(columns=["n"]), on=["device", "outstanding_ios"], how="left")
    scores = scores.sort_values(["device", "outstanding_ios"]).reset_index(drop=True)
    t = compare(pr, "device", "slow", "iops", by="load", confidence=confidence, adjust="holm").to_frame()
    t = t.merge(order, on="load").sort_values("outstanding_ios")
    imp = pd.DataFrame({
        "load": t["load"], "outstanding_ios": t["outstanding_ios"], "n_slow": t["n_baseline"], "n_fast": t["n_other"],
        "iops_slow": t["mean_baseline"], "iops_fast": t["mean_other"],
        "improvement_pct": (t["ratio"] - 1) * 100, "ci_low_pct": (t["ci_low"] - 1) * 100,
        "ci_high_pct": (t["ci_high"] - 1) * 100, "p": t["p"], "p_adjusted": t["p_adjusted"], "note": t["note"],
    }).reset_index(drop=True)
    return {"scores": scores, "improvement": imp, "qos": pd.DataFrame(qos_rows)}


def analyse(study_dir: str | os.PathLike[str], *, qos_p99_ms: float = DEFAULT_QOS_P99_MS,
            write: bool = False) -> dict[str, pd.DataFrame]:
    """The analysis tables of a testbed study directory (which study: from its ``study.yaml`` name).

    Parameters
    ----------
    study_dir : path
        ``<out_dir>/<name>`` or ``<out_dir>/<name>-quick``.
    qos_p99_ms : float
        fast_vs_slow's QoS limit, ms.
    write : bool
        Also write each table to ``analysis/<key>.csv``.

    Returns
    -------
    dict of str to DataFrame
        See ``analyse_<study>``.

    Raises
    ------
    StudyError
        Not a testbed study directory.
    """
    sdir = Path(study_dir)
    spec = sdir / "study.yaml"
    try:
        name = load_yaml(read_text_capped(spec, error=StudyError, what="study spec"), where=str(spec),
                         error=StudyError)["name"]
    except (StudyError, KeyError, TypeError) as exc:
        raise StudyError(f"{sdir} is not a study directory (no readable study.yaml with a name)") from exc
    if not isinstance(name, str):
        raise StudyError(f"{sdir} is not a study directory (study.yaml's name is not a string)")
    base = name.removesuffix("-quick")
    _check_name(base)
    runs, hist = load_tables(sdir)
    if base == "rdm_vs_vmfs":
        tables = analyse_rdm_vs_vmfs(runs)
    elif base == "stripe_width":
        tables = analyse_stripe_width(runs)
    elif base == "consolidation":
        tables = analyse_consolidation(runs, hist)
    else:
        tables = analyse_fast_vs_slow(runs, hist, qos_p99_ms=qos_p99_ms)
    tables = {k: v for k, v in tables.items() if isinstance(v, pd.DataFrame)}
    if write:
        adir = sdir / "analysis"
        adir.mkdir(parents=True, exist_ok=True)
        for key, df in tables.items():
            df.to_csv(adir / f"{key}.csv", index=False)
    return tables


def load_testbed_record(study_dir: str | os.PathLike[str]) -> dict:
    """The latest ``testbed.json`` record of a study: devices and what they really are."""
    path = Path(study_dir) / "testbed.json"
    try:
        return json.loads(path.read_text())["latest"]
    except (OSError, ValueError, KeyError) as exc:
        raise StudyError(f"{path}: no testbed record ({exc})") from exc



def _ci_text(est: float, lo: float, hi: float, fmt: str = "{:.3f}") -> str:
    e = fmt.format(est) if np.isfinite(est) else "n/a"
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return f"{e} [CI not estimable]"
    return f"{e} [{fmt.format(lo)}, {fmt.format(hi)}]"


def verdict_summary(name: str, tables: Mapping[str, pd.DataFrame], confidence: float = 0.95) -> dict[str, pd.DataFrame]:
    """Human-readable verdict tables (strings with units and CIs) for the CLI and the write-ups.

    Parameters
    ----------
    name : str
        Study name (``-quick`` suffix allowed).
    tables : mapping
        Result of :func:`analyse`.
    confidence : float
        Level the CIs were computed at (for the headers).

    Returns
    -------
    dict of str to DataFrame
        One or two tables per study, columns named with their units.
    """
    base = name.removesuffix("-quick")
    _check_name(base)
    ci = f"{confidence:.0%} CI"
    if base == "rdm_vs_vmfs":
        v = tables["verdicts"]
        v = v[v["metric"] == "iops"]
        out = pd.DataFrame({
            "mix": v["mix"], "I/O size (KiB)": (v["bs_bytes"] // 1024).astype(int), "datastore": v["level"],
            "IOPS raw": v["mean_baseline"].round(0), "IOPS fs": v["mean_other"].round(0),
            f"ratio fs/raw [{ci}]": [_ci_text(*r) for r in zip(v["ratio"], v["ci_low"], v["ci_high"], strict=True)],
            "TOST p (±1%)": v["p_equivalence"].round(4),
            "within 1%?": v["equivalent"].map({True: "yes", False: "not shown"}).fillna("n/a"),
            "run CV (%)": v["cv_pct"].round(2), "run CV, 80% upper bound (%)": v["cv_upper_pct"].round(2),
            "runs/arm now": v["n_per_arm"],
            "runs/arm for ±1% (80% power at the CV's upper bound)": v["n_needed_per_arm"],
        })
        return {"verdicts": out.reset_index(drop=True), "overall": tables["overall"]}
    if base == "stripe_width":
        v = tables["verdicts"]
        out = pd.DataFrame({
            "pattern": v["pattern"], "IOPS width 1": v["mean_baseline"].round(0), "IOPS width 4": v["mean_other"].round(0),
            f"ratio 4/1 [{ci}]": [_ci_text(*r) for r in zip(v["ratio"], v["ci_low"], v["ci_high"], strict=True)],
            "p": v["p"].round(4), "p (Holm)": v["p_adjusted"].round(4), "verdict": v["verdict"],
        })
        return {"verdicts": out.reset_index(drop=True)}
    if base == "consolidation":
        v = tables["verdicts"]
        unit = {"iops": "IOPS", "clat_p90_ns": "p90 clat (ms)", "clat_p99_ns": "p99 clat (ms)"}
        scale = v["metric"].map({"iops": 1.0, "clat_p90_ns": 1e-6, "clat_p99_ns": 1e-6})
        out = pd.DataFrame({
            "workload": v["workload"], "metric": v["metric"].map(unit),
            "isolated (mean of runs)": (v["mean_baseline"] * scale).round(3),
            "shared (mean of runs)": (v["mean_other"] * scale).round(3),
            f"ratio shared/isolated [{ci}]": [_ci_text(*r) for r in zip(v["ratio"], v["ci_low"], v["ci_high"],
                                                                          strict=True)],
            "p (Holm)": v["p_adjusted"].round(4), "verdict": v["verdict"],
        })
        pooled = tables["pooled"].rename(columns={"iops_mean": "IOPS (mean of runs)", "clat_p90_ms": "p90 clat (ms)",
                                                  "clat_p99_ms": "p99 clat (ms)", "n_runs": "runs",
                                                  "completions": "I/Os in merged histogram"})
        return {"verdicts": out.reset_index(drop=True), "pooled": pooled}
    imp = tables["improvement"]
    out = pd.DataFrame({
        "load": imp["load"], "outstanding I/Os": imp["outstanding_ios"],
        "IOPS slow": imp["iops_slow"].round(0), "IOPS fast": imp["iops_fast"].round(0),
        f"% improvement [{ci}]": [_ci_text(*r, fmt="{:.1f}") for r in
                                  zip(imp["improvement_pct"], imp["ci_low_pct"], imp["ci_high_pct"], strict=True)],
        "p (Holm)": imp["p_adjusted"].round(4),
    })
    q = tables["qos"][["device", "qos_p99_ms", "max_load", "max_outstanding_ios", "max_load_confident",
                       "max_outstanding_ios_confident"]]
    return {"improvement": out.reset_index(drop=True), "qos": q}


def notebook_path(name: str) -> Path:
    """``notebooks/studies/<name>.ipynb`` of a testbed study (``-quick`` suffix allowed)."""
    base = name.removesuffix("-quick")
    _check_name(base)
    return Path(__file__).resolve().parents[1] / "notebooks" / "studies" / f"{base}.ipynb"


def describe_testbed(study_dir: str | os.PathLike[str]) -> str:
    """Markdown: what the devices of a study really were (from ``testbed.json``) and the host."""
    rec = load_testbed_record(study_dir)
    lines = [f"- {n}" for n in rec.get("notes", [])]
    for d in rec.get("devices", []):
        if d.get("kind") == "loop":
            lines.append(f"- `{d['path']}` ({d.get('role')}): loop device, {d['size_bytes'] >> 20} MiB over "
                         f"`{d['backing_file']}` on {d.get('backing_fs') or '?'}, direct I/O "
                         f"{'on' if d.get('direct_io') else 'off (buffered through the page cache)'}")
        elif d.get("kind") == "zram":
            lines.append(f"- `{d['path']}` ({d.get('role')}): zram, {d['size_bytes'] >> 20} MiB, "
                         f"{d.get('comp_algorithm') or '?'} compression")
        elif d.get("kind") == "filesystem":
            lines.append(f"- {d['fstype']} ({d.get('profile')}) over {', '.join(d['devices'])} ({d.get('role')})")
    lines.append(f"- set up at {rec.get('set_up_at')}; targets: "
                 + ", ".join(f"{k} = `{v}`" for k, v in {**rec.get("targets", {}),
                                                          **rec.get("workload_targets", {})}.items()))
    return "\n".join(lines)


def _fmt_ci(est: float, lo: float, hi: float, fmt: str = "{:.3f}") -> str:
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return f"{fmt.format(est)} (CI not estimable with these runs)"
    return f"{fmt.format(est)} (95% CI {fmt.format(lo)} to {fmt.format(hi)})"


def verdict_text(name: str, tables: Mapping[str, pd.DataFrame]) -> str:
    """Markdown sentences stating the study's verdicts with their CIs, generated from the tables."""
    base = name.removesuffix("-quick")
    _check_name(base)
    out: list[str] = []
    if base == "rdm_vs_vmfs":
        v = tables["verdicts"]
        v = v[v["metric"] == "iops"]
        for lvl, g in v.groupby("level", sort=True):
            eq = int((g["equivalent"] == True).sum())  # noqa: E712
            lo, hi = g["ratio"].idxmin(), g["ratio"].idxmax()
            out.append(
                f"- **{lvl} vs raw**: IOPS ratio from {_fmt_ci(g.loc[lo, 'ratio'], g.loc[lo, 'ci_low'], g.loc[lo, 'ci_high'])}"
                f" ({g.loc[lo, 'mix']}, {g.loc[lo, 'bs_bytes'] // 1024} KiB) to "
                f"{_fmt_ci(g.loc[hi, 'ratio'], g.loc[hi, 'ci_low'], g.loc[hi, 'ci_high'])} "
                f"({g.loc[hi, 'mix']}, {g.loc[hi, 'bs_bytes'] // 1024} KiB). \"Within 1%\" (TOST, alpha 0.05) is shown "
                f"at {eq} of {len(g)} (mix, size) points; with the run-to-run CV seen here "
                f"({g['cv_pct'].min():.1f}% to {g['cv_pct'].max():.1f}%; planned at its 80% upper confidence bound, "
                f"up to {g['cv_upper_pct'].max():.1f}%), showing it would need up to "
                f"{int(np.nanmax(g['n_needed_per_arm'])) if np.isfinite(g['n_needed_per_arm']).any() else 'n/a'} "
                f"runs per arm (80% power) instead of {int(g['n_per_arm'].max())}.")
    elif base == "stripe_width":
        for _, r in tables["verdicts"].iterrows():
            out.append(f"- **{r['pattern']}**: width 4 / width 1 IOPS = {_fmt_ci(r['ratio'], r['ci_low'], r['ci_high'])}, "
                       f"Holm-adjusted p = {r['p_adjusted']:.3g}: {r['verdict']}.")
    elif base == "consolidation":
        names = {"iops": "IOPS", "clat_p90_ns": "p90 latency", "clat_p99_ns": "p99 latency"}
        for _, r in tables["verdicts"].iterrows():
            out.append(f"- **{r['workload']}, {names[r['metric']]}**: shared / isolated = "
                       f"{_fmt_ci(r['ratio'], r['ci_low'], r['ci_high'])}, Holm p = {r['p_adjusted']:.3g}: {r['verdict']}.")
        for _, r in tables["pooled"].iterrows():
            out.append(f"- pooled over {r['n_runs']} runs, {r['workload']} {r['layout']}: p90 {r['clat_p90_ms']:.3g} ms, "
                       f"p99 {r['clat_p99_ms']:.3g} ms ({r['completions']} I/Os in the merged histogram).")
    else:
        imp = tables["improvement"]
        ratios = improvement_as_ratio(imp).assign(p_adjusted=imp["p_adjusted"].to_numpy())
        words = direction_verdicts(ratios, 0.05, "fast is faster", "fast is slower")
        for (_, r), word in zip(imp.iterrows(), words, strict=True):
            out.append(f"- **{r['load']}** ({r['outstanding_ios']} outstanding I/Os): IOPS of fast vs slow "
                       f"{_fmt_ci(r['improvement_pct'], r['ci_low_pct'], r['ci_high_pct'], '{:+.1f}%')}, "
                       f"Holm p = {r['p_adjusted']:.3g}: {word}.")
        for _, r in tables["qos"].iterrows():
            ml = r["max_load"] if isinstance(r["max_load"], str) else "none"
            mlc = r["max_load_confident"] if isinstance(r["max_load_confident"], str) else "none"
            out.append(f"- **{r['device']}** meets p99 <= {r['qos_p99_ms']:g} ms up to load {ml} (mean p99), "
                       f"and up to {mlc} when the upper 95% confidence bound must meet it.")
    return "\n".join(out)


def with_outstanding_ios(runs: pd.DataFrame) -> pd.DataFrame:
    """``runs`` plus ``outstanding_ios`` = numjobs x iodepth (the load axis of fast_vs_slow)."""
    return runs.assign(outstanding_ios=runs["numjobs"].astype(int) * runs["iodepth"].astype(int))


def improvement_as_ratio(improvement: pd.DataFrame) -> pd.DataFrame:
    """The ``improvement`` table as fast/slow ratios (``ratio, ci_low, ci_high``) for a forest plot."""
    return pd.DataFrame({"load": improvement["load"], "ratio": 1 + improvement["improvement_pct"] / 100,
                         "ci_low": 1 + improvement["ci_low_pct"] / 100, "ci_high": 1 + improvement["ci_high_pct"] / 100})


def ratio_figure(name: str, tables: Mapping[str, pd.DataFrame], ax=None):
    """Forest plot of the study's ratios with their CIs (:func:`storagebench.plots.ratio_forest`).

    rdm_vs_vmfs: fs/raw IOPS per (datastore, mix, size) with the ±1% margin dotted; stripe_width:
    width 4/width 1 per pattern; consolidation: shared/isolated per (workload, metric);
    fast_vs_slow: fast/slow IOPS per load. Rows whose CI is not estimable are left out and said
    so in the title; with none left, the Axes says that instead of plotting.

    Returns
    -------
    matplotlib.axes.Axes
    """
    import matplotlib.pyplot as plt

    from .plots import ratio_forest

    base = name.removesuffix("-quick")
    _check_name(base)
    if base == "rdm_vs_vmfs":
        df, group = tables["verdicts"].query("metric == 'iops'"), ["level", "mix", "bs_bytes"]
    elif base == "stripe_width":
        df, group = tables["verdicts"], "pattern"
    elif base == "consolidation":
        df, group = tables["verdicts"], ["workload", "metric"]
    else:
        df, group = improvement_as_ratio(tables["improvement"]), "load"
    ok = df.dropna(subset=["ratio", "ci_low", "ci_high"])
    ok = ok[(ok["ci_low"] > 0) & (ok["ci_high"] > 0)]
    if ok.empty:
        if ax is None:
            _, ax = plt.subplots(figsize=(6, 1.5))
        ax.axis("off")
        ax.text(0.5, 0.5, "no ratio has an estimable CI with these runs (too few repetitions)", ha="center",
                va="center")
        return ax
    ax = ratio_forest(ok, group=group, ax=ax)
    if base == "rdm_vs_vmfs":
        for x in (0.99, 1.01):
            ax.axvline(x, ls=":", color="grey")
    if len(ok) < len(df):
        ax.set_title(f"{len(df) - len(ok)} of {len(df)} ratios left out: CI not estimable", fontsize="small")
    return ax
