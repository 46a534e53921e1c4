"""A fast device vs a slow one under rising load (seed 004, VMware VROOM "EFD vs HDD" under VMmark).

Scores normalised to the slow device at its lowest load, "% improvement" of fast over slow per load with
its CI, and the highest load that still meets a p99 completion-latency QoS limit; the set-up (a fresh
device, preconditioned) is the experimental unit.

Testbed (one arm per build): ``fast`` is a zram device (compressed RAM) hot-added through
``/sys/class/zram-control``, or, when zram cannot be had, a loop device over a file on tmpfs
(``/dev/shm``); ``slow`` is a loop device over a sparse file on the local disk with ``--direct-io=on``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import matplotlib.pyplot as plt  # plots, imported here anyway, draws with pyplot
import pandas as pd

from storagebench import stats
from storagebench import testbed as tb
from storagebench.errors import StatsError, StudyError, TestbedError
from storagebench.findings import CONFIDENCE, Finding, fmt_number
from storagebench.studies import (  # the kit for study authors
    KnownAnswerCheck,
    SetUp,
    SetUpUnit,
    Study,
    StudyData,
    TestbedResult,
    capped,
    caps_text,
    compare_arms,
    conf_text,
    count_resolution,
    finish,
    loop_size,
    plain_log_axis,
    ratio_figure,
    unit_values,
)

name = "fast_vs_slow"
title = "A RAM-backed device vs a loop device on disk under rising load (seed 004)"
question = ("By how much is the fast device faster at each load, and up to which load does each meet a p99 "
            "completion-latency limit?")

ARM, BASELINE, LOAD = "device", "slow", "load"
#: The spec's ``throttle:`` may cap the ``slow`` and the ``fast`` device (ka_fast_vs_slow).
throttle_roles = (BASELINE, "fast")
#: Default QoS limit: p99 completion latency, ms.
DEFAULT_QOS_P99_MS = 5.0


@contextlib.contextmanager
def testbed(study: Study, unit: SetUpUnit) -> Iterator[SetUp]:
    """A fresh loop device on disk (``slow``) or a zram device, else a tmpfs-backed loop device (``fast``)."""
    levels = [unit.arm[ARM]] if ARM in unit.arm else [lv["name"] if isinstance(lv, dict) else lv
                                                      for lv in study.factors[ARM]]
    size = loop_size(study)
    targets, devices, notes, by_role = {}, [], [], {}
    with contextlib.ExitStack() as stack:
        for level in levels:
            if level == BASELINE:
                dev = stack.enter_context(tb.loop_device(size))
                notes.append(f"slow: a fresh {size >> 20} MiB loop device over a sparse file on the local disk with "
                             "--direct-io=on (a virtual disk shared with other tenants: noisy)")
            else:
                try:
                    dev = stack.enter_context(tb.zram_device(size))
                    notes.append(f"fast: zram device {dev.path} ({size >> 20} MiB, {dev.comp_algorithm} compression; "
                                 "compressed RAM)")
                except TestbedError as exc:
                    dev = stack.enter_context(tb.ram_loop_device(size))
                    notes.append(f"fast: zram could not be had ({exc}); a loop device over a file on tmpfs "
                                 "(/dev/shm) instead, i.e. RAM copied through the loop driver")
            targets[level] = dev.path
            by_role[BASELINE if level == BASELINE else "fast"] = [dev]
            devices.append({**dev.to_dict(), "role": level})
        yield capped(stack, study, SetUp(targets=targets, allow_devices=tuple(targets.values()), devices=tuple(devices),
                                         notes=tuple(notes)), by_role)


def check_parameters(*, qos_p99_ms: float) -> None:
    """``qos_p99_ms`` must be a positive, finite number of ms (:class:`StatsError` otherwise)."""
    if isinstance(qos_p99_ms, bool) or not (isinstance(qos_p99_ms, (int, float)) and math.isfinite(qos_p99_ms)
                                            and qos_p99_ms > 0):
        raise StatsError(f"qos_p99_ms must be a positive number of ms, got {qos_p99_ms!r}")


def analyse(data: StudyData, *, confidence: float = CONFIDENCE, qos_p99_ms: float = DEFAULT_QOS_P99_MS) -> TestbedResult:
    """% improvement of fast over slow per load, normalised scores, highest load within the QoS limit.

    Parameters
    ----------
    data : StudyData
    confidence : float
        Level of every CI.
    qos_p99_ms : float
        QoS limit on the p99 completion latency of a set-up (its runs' per-run p99, from merged bins,
        averaged), ms.

    Returns
    -------
    TestbedResult
        ``verdicts``: per load the verdict row fast/slow plus ``outstanding_ios``, ``improvement_pct`` with
        its CI; ``tables``: ``scores`` (set-up IOPS normalised to the slow device at its lowest load,
        :func:`storagebench.stats.saturation.normalize`, with the p99 per load and device and whether it meets the
        limit), ``qos`` (per device the highest load meeting the limit, by the mean and by the upper CI
        bound; :func:`storagebench.stats.qos_max_load`), ``units``.

    Raises
    ------
    StatsError
        ``qos_p99_ms`` not a positive number.
    """
    check_parameters(qos_p99_ms=qos_p99_ms)
    pr = data.per_run
    order = pr.groupby(LOAD)["outstanding_ios"].first().sort_values()
    _, v, findings = compare_arms(data, ARM, BASELINE, "iops", by=LOAD, up="fast is faster", down="fast is slower",
                                  confidence=confidence)
    v["outstanding_ios"] = v[LOAD].map(order).astype(int)
    for col, src in (("improvement_pct", "ratio"), ("improvement_ci_low_pct", "ci_low"),
                     ("improvement_ci_high_pct", "ci_high")):
        v[col] = (v[src] - 1) * 100
    v = v.sort_values("outstanding_ios").reset_index(drop=True)
    units = unit_values(data, "iops", [ARM, LOAD])
    units["outstanding_ios"] = units[LOAD].map(order).astype(int)
    p99 = unit_values(data, "clat_p99_ns", [ARM, LOAD]).rename(columns={"clat_p99_ns": "clat_p99_ns_unit"})
    lowest = int(order.iloc[0])
    scores = stats.saturation.normalize(units, "iops", f"{ARM} == '{BASELINE}' and outstanding_ios == {lowest}",
                             by=[ARM, "outstanding_ios"], confidence=confidence)
    scores[LOAD] = scores["outstanding_ios"].map({int(x): k for k, x in order.items()})
    qos_rows, lat = [], []
    limit_ns = qos_p99_ms * 1e6
    for dev, g in p99.assign(outstanding_ios=p99[LOAD].map(order).astype(int)).groupby(ARM, sort=True):
        q = stats.qos_max_load(g.drop(columns=["run_id"], errors="ignore"), "outstanding_ios", "clat_p99_ns_unit",
                               limit_ns, confidence=confidence)
        t = q.table.rename(columns={"load": "outstanding_ios", "mean": "clat_p99_ms", "ci_low": "clat_p99_ms_ci_low",
                                    "ci_high": "clat_p99_ms_ci_high"})
        for c in ("clat_p99_ms", "clat_p99_ms_ci_low", "clat_p99_ms_ci_high"):
            t[c] = t[c] / 1e6
        t.insert(0, ARM, dev)
        lat.append(t)
        name_of = {int(x): k for k, x in order.items()}
        row = {ARM: dev, "qos_p99_ms": qos_p99_ms, "max_load": name_of.get(q.max_load),
               "max_outstanding_ios": q.max_load, "max_load_confident": name_of.get(q.max_load_confident),
               "max_outstanding_ios_confident": q.max_load_confident, "loads": len(q.table), "method": q.method,
               "note": q.note}
        qos_rows.append(row)
        findings.append(Finding(
            sentence=(f"{dev} meets p99 completion latency <= {qos_p99_ms:g} ms up to "
                      f"{_load_words(row['max_load'], q.max_load)} by the geometric mean of p99 over its units "
                      f"({p99.attrs['estimate']}), and up to "
                      f"{_load_words(row['max_load_confident'], q.max_load_confident)} when the upper bound of "
                      f"its two-sided {conf_text(confidence)} CI, a one-sided {1 - (1 - confidence) / 2:.1%} upper "
                      "confidence bound, must meet it (the defensible claim)."),
            estimate=q.max_load, confidence=confidence, n=t["n"].min() if len(t) else None,
            unit_of_replication="set-ups per load" if len(t) else "none", unit="outstanding I/Os",
            method=q.method, key="qos"))
    qos = pd.DataFrame(qos_rows)
    lat_t = pd.concat(lat, ignore_index=True) if lat else pd.DataFrame()
    if len(lat_t):
        scores = scores.merge(lat_t.drop(columns=["n"], errors="ignore"), on=[ARM, "outstanding_ios"], how="left")
    scores = scores.sort_values([ARM, "outstanding_ios"]).reset_index(drop=True)
    figures = {
        "improvement": lambda: ratio_figure(v.assign(load_label=v[LOAD] + " (" + v["outstanding_ios"].astype(str)
                                                    + " outstanding)"), ["load_label"],
                                            title=f"fast / slow IOPS per load, {conf_text(confidence)} CI"),
        "scores": lambda: _scores_figure(scores, qos_p99_ms),
    }
    n = v["n"].iloc[0] if len(v) else "0"
    captions = {
        "improvement": (f"Fast / slow IOPS per load: ratio of the set-up geometric means (n = {n} "
                        f"{'blocks' if data.paired else 'set-ups per arm'}) with its {conf_text(confidence)} CI; "
                        "dashed: 1 (no difference)."),
        "scores": (f"Left: IOPS of each device normalised to the slow device at its lowest load (geometric means of "
                   f"the set-ups); right: p99 completion latency per load (geometric mean of p99 over the units, "
                   f"{p99.attrs['estimate']}; log scale), the QoS "
                   f"limit of {qos_p99_ms:g} ms dotted."),
    }
    return finish(data, title=title, question=question, findings=findings, verdicts=v,
                  tables={"scores": scores, "qos": qos, "units": units}, figures=figures, confidence=confidence,
                  captions=captions)


def _load_words(name: str | None, oio) -> str:
    if name is None:
        return "no load tested"
    return f"load {name} ({int(oio)} outstanding I/O{'' if int(oio) == 1 else 's'})"


def _scores_figure(scores: pd.DataFrame, qos_p99_ms: float):
    """Normalised IOPS and p99 latency against outstanding I/Os, one line per device."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.2))
    for i, (dev, g) in enumerate(scores.groupby(ARM, sort=True)):
        a.plot(g["outstanding_ios"], g["normalized"], marker="o", color=f"C{i}", label=str(dev))
        if "clat_p99_ms" in g:
            b.plot(g["outstanding_ios"], g["clat_p99_ms"], marker="o", color=f"C{i}", label=str(dev))
    for ax in (a, b):
        ax.set_xscale("log", base=2)
        plain_log_axis(ax.xaxis, ticks=scores["outstanding_ios"].unique())  # the loads measured: 1, 16, ...
        ax.set_xlabel("outstanding I/Os (numjobs x iodepth)")
    a.set_ylabel("IOPS / slow at its lowest load")
    b.set_ylabel("p99 completion latency (ms)")
    b.set_yscale("log")
    plain_log_axis(b.yaxis)
    b.axhline(qos_p99_ms, ls=":", color="grey", label=f"QoS {qos_p99_ms:g} ms")
    b.legend(fontsize="small")
    fig.tight_layout()
    return fig




def known_answer(data: StudyData, result: TestbedResult, *, confidence: float = CONFIDENCE) -> list[KnownAnswerCheck]:
    """Fast / slow IOPS per load when both devices are capped (the fast one far below what it does uncapped): truth
    = the ratio of their caps.

    Raises
    ------
    StudyError
        The spec does not cap both devices with a common key.
    """
    caps = data.study.throttle
    fast, slow = caps.get("fast", {}), caps.get(BASELINE, {})
    key = next((k for k in ("riops", "wiops", "rbps", "wbps") if k in fast and k in slow), None)
    if key is None:
        raise StudyError(f"study {data.name}: a known answer needs throttle: caps of both slow and fast with a "
                         f"common key, got {caps}")
    truth = fast[key] / slow[key]
    # every set-up of a capped device may count exactly cap x runtime I/Os: no spread, a degenerate t CI; the
    # interval is then the counting resolution (KnownAnswerCheck.of), never narrower than it in any case
    return [KnownAnswerCheck.of(
        f"fast / slow IOPS, load {r[LOAD]}", truth, r["ratio"], (r["ci_low"], r["ci_high"]),
        f"fast (zram) capped at {caps_text(fast)}, slow (loop) at {caps_text(slow)}, both below what the device does "
        f"uncapped at every load: truth = the ratio of the caps, {fmt_number(truth)}",
        resolution=count_resolution(data.per_run, ARM, ("fast", BASELINE), by={LOAD: r[LOAD]}))
        for _, r in result.verdicts.iterrows()]
