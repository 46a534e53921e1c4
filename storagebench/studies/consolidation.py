"""Spindle consolidation (seed 003, CloudPhysics): two workloads isolated or sharing one device set.

Two random workloads run at the same time (the spec's ``concurrent: [workload]``), either each on its
own two-device btrfs raid0 ("isolated") or both on one four-device raid0 ("shared", the same number of
devices). Per workload: IOPS and the p90/p99 completion latency of each set-up (from the merged json+
bins of its runs, never an average of percentiles), shared vs isolated, with the set-up as the
experimental unit.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence

import matplotlib.pyplot as plt  # plots, imported here anyway, draws with pyplot
import numpy as np
import pandas as pd

from storagebench import stats
from storagebench import testbed as tb
from storagebench._histogram import merge_histograms, percentiles_from_bins
from storagebench.errors import StudyError
from storagebench.findings import CONFIDENCE
from storagebench.studies import (  # the kit for study authors
    KnownAnswerCheck,
    SetUp,
    SetUpUnit,
    Study,
    StudyData,
    TestbedResult,
    bucket_shares,
    capped,
    caps_text,
    compare_question,
    conf_text,
    count_resolution,
    finish,
    loop_size,
    plain_log_axis,
    ratio_figure,
    setup_variance,
    unit_values,
)

name = "consolidation"
title = "Spindle consolidation: two workloads isolated vs shared (seed 003)"
question = ("Do two concurrent workloads get more IOPS and lower tail latency on one shared four-device set than "
            "each on its own two devices?")

ARM, BASELINE, WORKLOAD = "layout", "isolated", "workload"
#: metric -> (words for a ratio above 1, below 1): higher IOPS is better, higher latency worse.
_METRICS = {"iops": ("better shared", "worse shared"), "clat_p90_ns": ("worse shared", "better shared"),
            "clat_p99_ns": ("worse shared", "better shared")}


#: The spec's ``throttle:`` may cap ``device``: then the layouts are raw capped devices (ka_consolidation).
throttle_roles = ("device",)


def _levels(study: Study, factor: str) -> list:
    return [lv["name"] if isinstance(lv, dict) else lv for lv in study.factors[factor]]


def _other(study: Study) -> str:
    """The layout compared with the baseline (``shared``)."""
    return next(str(lv) for lv in _levels(study, ARM) if lv != BASELINE)


@contextlib.contextmanager
def testbed(study: Study, unit: SetUpUnit) -> Iterator[SetUp]:
    """``isolated``: one btrfs raid0 over two fresh loop devices per workload; ``shared``: one btrfs raid0
    over four holding every workload's file. Targets are named after the workloads' ``target``."""
    layouts = [unit.arm[ARM]] if ARM in unit.arm else _levels(study, ARM)
    if len(layouts) != 1:
        raise StudyError(f"study {study.name}: consolidation builds one layout per set-up; the spec must say "
                         f"setup_factors: [{ARM}]")
    workloads = study.factors[WORKLOAD]
    names = [(w["name"], w.get("target", w["name"])) for w in workloads]
    size = loop_size(study)
    layout = layouts[0]
    if study.throttle:
        with _capped_testbed(study, layout, names, size) as built:
            yield built
        return
    with contextlib.ExitStack() as stack:
        devs = stack.enter_context(tb.loop_devices(2 * len(names), size))
        targets, devices = {}, [{**d.to_dict(), "role": layout} for d in devs]
        if layout == BASELINE:
            for i, (w, target) in enumerate(names):
                fs = stack.enter_context(tb.btrfs_raid0(devs[2 * i:2 * i + 2]))
                devices.append({**fs.to_dict(), "role": f"{layout}: {w}"})
                targets[target] = os.path.join(fs.mountpoint, f"{w}.dat")
            note = (f"isolated: for each workload ({', '.join(w for w, _ in names)}) btrfs raid0 over two fresh "
                    f"{size >> 20} MiB loop devices of its own")
        else:
            fs = stack.enter_context(tb.btrfs_raid0(devs))
            devices.append({**fs.to_dict(), "role": layout})
            targets = {target: os.path.join(fs.mountpoint, f"{w}.dat") for w, target in names}
            note = (f"shared: one btrfs raid0 over {len(devs)} fresh {size >> 20} MiB loop devices holding every "
                    "workload's file")
        notes = (note, "the workloads of one group run as fio processes started together; all loop devices are "
                       "sparse files on one local disk (--direct-io=on): the study measures sharing queues and "
                       "stripes, not spindles")
        yield SetUp(targets=targets, devices=tuple(devices), notes=notes)


@contextlib.contextmanager
def _capped_testbed(study: Study, layout: str, names: list[tuple[str, str]], size: int) -> Iterator[SetUp]:
    """The known-answer layouts: ``isolated`` gives each workload a raw loop device of its own, ``shared`` puts every
    workload on one; each device capped by the spec's ``throttle: device``."""
    with contextlib.ExitStack() as stack:
        devs = stack.enter_context(tb.loop_devices(len(names) if layout == BASELINE else 1, size))
        targets = {target: devs[i if layout == BASELINE else 0].path for i, (_, target) in enumerate(names)}
        note = (f"{layout}: " + (f"each workload ({', '.join(w for w, _ in names)}) on a raw {size >> 20} MiB loop "
                                 "device of its own" if layout == BASELINE else
                                 f"every workload on one raw {size >> 20} MiB loop device"))
        built = SetUp(targets=targets, allow_devices=tuple(d.path for d in devs),
                      devices=tuple({**d.to_dict(), "role": layout} for d in devs), notes=(note,))
        yield capped(stack, study, built, {"device": devs})


def _window_shares(data: StudyData) -> tuple[pd.Series, float]:
    """Each shared run's share of its device's bucket over its own window (run_id -> fraction), by
    :func:`~storagebench.studies.bucket_shares` from fio's report times, and the largest offset of the ends
    of one set-up's windows, s. A set-up whose runs lack a report time or a runtime counts as aligned (1/k)."""
    ends = data.runs.groupby("run_id")["reported_at"].max() if "reported_at" in data.runs else pd.Series(dtype=object)
    pr = data.per_run[data.per_run[ARM].astype(str) == _other(data.study)]
    keys = [c for c in ("setup", "repetition") if c in pr.columns] or [ARM]
    shares, worst = {}, 0.0
    for _, g in pr.groupby(keys, sort=True, dropna=False):
        e = pd.to_datetime(ends.reindex(g["run_id"]), utc=True)
        t = g["runtime_s"].to_numpy(dtype=float) if "runtime_s" in g else np.full(len(g), np.nan)
        if e.isna().any() or not np.isfinite(t).all() or not (t > 0).all():
            shares.update({r: 1 / len(g) for r in g["run_id"]})
            continue
        end_s = (e - e.min()).dt.total_seconds().to_numpy()
        worst = max(worst, float(end_s.max()))
        shares.update(zip(g["run_id"], bucket_shares(end_s, t, float(data.study.ramp_time or 0)), strict=True))
    return pd.Series(shares, dtype=float), worst


def known_answer(data: StudyData, result: TestbedResult, *, confidence: float = CONFIDENCE) -> list[KnownAnswerCheck]:
    """Shared / isolated IOPS per workload when every device is capped at C: truth 1 / (workloads on the shared
    device), 0.5 for two identical workloads (the throttle serves one queue per cgroup and device in order),
    over windows that line up.

    The workloads are separate fio processes, and fio starts a process's jobs in steps of 100 ms
    (``backend.c``, ``run_threads``), so their measured windows can be offset by ``d``: the run that ends last
    then runs its last ``d`` alone. That offset is measured, from fio's report times (``reported_at``), and the
    truth follows from it by the bucket model (:func:`~storagebench.studies.bucket_shares`): the geometric mean
    over set-ups of each run's share, stated as the check's ``overhead`` (truth x k - 1), never hidden.
    """
    caps = data.study.throttle["device"]
    k = len(data.study.factors[WORKLOAD])
    shares, worst = _window_shares(data)
    pr = data.per_run[data.per_run[ARM].astype(str) == _other(data.study)].assign(
        share=lambda f: f["run_id"].map(shares).fillna(1 / k))
    offset = (f" where the runs' windows line up; fio's report times put one set-up's windows up to "
              f"{worst * 1e3:.0f} ms apart, and the run that ends last runs that part alone: the truth is the "
              f"bucket model's over the measured windows (overhead = truth x {k} - 1)")
    v = result.verdicts[result.verdicts["metric"] == "iops"]
    checks = []
    for _, r in v.iterrows():
        truth = float(np.exp(np.log(pr.loc[pr[WORKLOAD].astype(str) == str(r[WORKLOAD]), "share"]).mean()))
        checks.append(KnownAnswerCheck.of(
            f"shared / isolated IOPS, {r[WORKLOAD]}", truth, r["ratio"], (r["ci_low"], r["ci_high"]),
            f"isolated: each of the {k} identical workloads alone on a device capped at {caps_text(caps)}; shared: "
            f"all on one such device, whose token bucket they share evenly: truth 1/{k}{offset}",
            overhead=truth * k - 1,
            resolution=count_resolution(data.per_run, ARM, (_other(data.study), BASELINE),
                                        by={WORKLOAD: r[WORKLOAD]})))
    # the total of the workloads needs no fairness between them: k devices' tokens against one device's
    u = unit_values(data, "iops", [ARM, WORKLOAD])
    keys = [c for c in (ARM, "setup", "block") if c in u.columns]
    total = u.groupby(keys, sort=True, dropna=False)["iops"].sum().reset_index()
    d = data.design()
    t = stats.compare(total, ARM, BASELINE, "iops", pair_on=d.get("pair_on"), unit=d.get("unit"),
                      confidence=confidence).rows[0]
    per_setup = pr.groupby([c for c in ("setup", "repetition") if c in pr.columns] or [ARM])["share"].sum() / k
    truth = float(np.exp(np.log(per_setup).mean()))
    checks.append(KnownAnswerCheck.of(
        "shared / isolated IOPS, all workloads together", truth, t.ratio, (t.ci_low, t.ci_high),
        f"isolated: {k} devices each capped at {caps_text(caps)}; shared: one such device: the workloads together "
        f"get 1/{k} of the tokens, however the one device splits them: truth 1/{k}{offset}",
        overhead=truth * k - 1,
        resolution=count_resolution(data.per_run, ARM, (_other(data.study), BASELINE),
                                    together=[c for c in ("setup", "repetition") if c in data.per_run.columns])))
    return checks


def pooled_percentiles(data: StudyData, by: Sequence[str], percentiles: Sequence[float] = (90.0, 99.0)) -> pd.DataFrame:
    """Percentiles of all completions of each ``by`` group, from the json+ bins merged across its runs.

    Returns
    -------
    pandas.DataFrame
        ``*by, n_runs, completions`` and ``clat_p90_ms``, ``clat_p99_ms`` ... (ms). Descriptive: the
        runs are pooled, so there is no CI (the verdicts use per-run percentiles with set-ups as units).
    """
    keys = data.per_run[["run_id", *by]].drop_duplicates("run_id")
    h = data.histograms.merge(keys, on="run_id", how="inner")
    merged = merge_histograms(h, by=list(by))
    n_runs = h.groupby(list(by))["run_id"].nunique()
    rows = []
    for key, g in merged.groupby(list(by), sort=True):
        key = key if isinstance(key, tuple) else (key,)
        pct = percentiles_from_bins(g["bin_ns"].to_numpy(), g["count"].to_numpy(), percentiles)
        rec = dict(zip(by, key, strict=True))
        rec["n_runs"] = int(n_runs.loc[key if len(key) > 1 else key[0]])
        rec["completions"] = int(g["count"].sum())
        for p, val in pct.items():
            rec[f"clat_p{p:g}_ms".replace(".", "_")] = val / 1e6
        rows.append(rec)
    return pd.DataFrame(rows)


def analyse(data: StudyData, *, confidence: float = CONFIDENCE) -> TestbedResult:
    """Per workload and metric (IOPS, p90 and p99 completion latency): shared / isolated.

    Returns
    -------
    TestbedResult
        ``verdicts``: per (workload, metric) the verdict row (ratio of geometric means of the set-ups;
        a set-up's IOPS the geometric mean of its runs, its p90/p99 from the merged json+ bins of its runs
        (:func:`storagebench.studies.unit_values`); Holm over every workload and metric: the study's one
        question is one family);
        ``tables``: ``pooled`` (per workload and layout, percentiles of all completions from merged bins,
        descriptive), ``units`` and ``variance`` (set-up vs run variance components per workload and
        layout, and the runs per set-up worth making; :func:`setup_variance`).
    """
    # one question (the module's ``question``: IOPS and tail latency, both workloads), so one family of its
    # metrics x workloads tests, never one family per metric
    _, v, findings = compare_question(data, ARM, BASELINE, _METRICS, question=question, by=WORKLOAD,
                                      confidence=confidence)
    pooled = pooled_percentiles(data, [WORKLOAD, ARM])
    units = unit_values(data, "iops", [WORKLOAD, ARM])
    variance, f = setup_variance(data, "iops", [WORKLOAD, ARM], confidence=confidence)
    findings += f
    figures = {"ratios": lambda: ratio_figure(v, [WORKLOAD, "metric"], title=f"shared / isolated per workload "
                                                                            f"and metric, {conf_text(confidence)} CI"),
               "tails": lambda: _tails(data)}
    n = v["n"].iloc[0] if len(v) else "0"
    # what a unit's percentile is: from the merged bins of its runs, or (no bins) said to be a mean of percentiles
    tail_words = unit_values(data, "clat_p99_ns", [WORKLOAD, ARM]).attrs["estimate"].replace("p99", "p90 and p99")
    captions = {
        "ratios": (f"Shared / isolated per workload and metric (IOPS; p90 and p99 completion latency: {tail_words}): "
                   f"ratio of the units' geometric means (n = {n} "
                   f"{'blocks' if data.paired else 'set-ups per arm'}) with its {conf_text(confidence)} CI; dashed: 1."),
        "tails": ("p99 completion latency of every run (points, log scale; each from the run's merged json+ bins) by "
                  "workload and layout; bars: the geometric mean of the runs' p99 (a summary of the points, not the "
                  "p99 of their merged bins: that is the pooled table)."),
    }
    return finish(data, title=title, question=question, findings=findings, verdicts=v,
                  tables={"pooled": pooled, "units": units, "variance": variance}, figures=figures,
                  confidence=confidence, captions=captions)


def _tails(data: StudyData):
    """Per-run p99 completion latency by workload and layout (points: runs; bars: geometric mean)."""
    pr = data.per_run
    fig, ax = plt.subplots(figsize=(6, 3))
    labels = []
    for i, ((w, lay), g) in enumerate(pr.groupby([WORKLOAD, ARM], sort=True)):
        y = g["clat_p99_ns"].to_numpy(float) / 1e6
        ax.scatter(np.full(len(y), i), y, s=12, color=f"C{i % 2}", alpha=0.7)
        ax.hlines(float(np.exp(np.log(y).mean())), i - 0.3, i + 0.3, color="k")
        labels.append(f"{w}\n{lay}")
    ax.set_xticks(range(len(labels)), labels)
    ax.set_ylabel("p99 clat per run (ms)")
    ax.set_yscale("log")
    plain_log_axis(ax.yaxis)
    fig.tight_layout()
    return fig
