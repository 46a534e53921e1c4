"""Raw block device vs a file in a filesystem ("RDM vs VMFS", seed 000).

VMware's VROOM post compared RDM and VMFS5 datastores across I/O sizes and called the result "within
1%" from the average of deltas. Here the same question is asked of a raw loop device and a file on
ext4 and on xfs on identical loop devices, and "within 1%" is tested (TOST on the log ratio, Schuirmann
1987) with the set-up as the experimental unit, together with the number of set-ups such a claim
would need.

Testbed (one arm per build): ``raw`` is a fresh loop device itself; ``ext4``/``xfs`` are a file of the
spec's ``size`` on that filesystem made on a fresh loop device of the same size.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import matplotlib.pyplot as plt  # plots, imported here anyway, draws with pyplot
import numpy as np

from storagebench import testbed as tb
from storagebench.errors import StatsError
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
    finish,
    loop_size,
    plain_log_axis,
    ratio_figure,
    tost_plans,
    unit_values,
)

name = "rdm_vs_vmfs"
title = 'Raw device vs a file in a filesystem ("RDM vs VMFS", seed 000)'
question = ("Is a file on ext4 or xfs within 1% of the raw block device it sits on, in IOPS, at every I/O size "
            "and mix?")

#: The factor whose levels are the arms (one testbed build each) and the baseline level.
ARM, BASELINE = "datastore", "raw"
#: The spec's ``throttle:`` may cap ``device``: every loop device of the build (ka_rdm_vs_vmfs).
throttle_roles = ("device",)


@contextlib.contextmanager
def testbed(study: Study, unit: SetUpUnit) -> Iterator[SetUp]:
    """One fresh loop device per datastore level of ``unit`` (all levels when the spec has no ``setup_factors``):
    the device itself for ``raw``, a file on a filesystem made on it otherwise."""
    levels = [unit.arm[ARM]] if ARM in unit.arm else [lv["name"] if isinstance(lv, dict) else lv
                                                      for lv in study.factors[ARM]]
    size = loop_size(study)
    targets, allow, devices, loops = {}, [], [], []
    with contextlib.ExitStack() as stack:
        for level in levels:
            dev = stack.enter_context(tb.loop_device(size))
            loops.append(dev)
            devices.append({**dev.to_dict(), "role": level})
            if level == BASELINE:
                targets[level] = dev.path
                allow.append(dev.path)
            else:
                fs = stack.enter_context(tb.filesystem(dev, level))
                devices.append({**fs.to_dict(), "role": level})
                targets[level] = os.path.join(fs.mountpoint, "datastore.dat")
        note = (f"{', '.join(levels)}: a fresh {size >> 20} MiB loop device over a sparse file on the local disk "
                "(losetup --direct-io=on: the loop driver reads and writes its backing file with O_DIRECT); raw = "
                "the device itself, ext4/xfs = a file on that filesystem made on it")
        yield capped(stack, study, SetUp(targets=targets, allow_devices=tuple(allow), devices=tuple(devices),
                                         notes=(note,)), {"device": loops})


def check_parameters(*, margin: float, power: float) -> None:
    """``margin`` and ``power`` must be fractions in (0, 1) (:class:`StatsError` otherwise)."""
    for key, value in (("margin", margin), ("power", power)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
            raise StatsError(f"{key} must be a fraction in (0, 1), got {value!r}")


def analyse(data: StudyData, *, confidence: float = CONFIDENCE, margin: float = 0.01, power: float = 0.8) -> TestbedResult:
    """fs/raw IOPS ratio per (mix, I/O size) with its CI, TOST for "within ``margin``", set-ups needed.

    Parameters
    ----------
    data : StudyData
    confidence : float
        Level of every CI; each TOST one-sided test at ``alpha = 1 - confidence``.
    margin : float
        Equivalence margin as a fraction (0.01: "within 1%", ratio bounds 0.99 and 1.01).
    power : float
        Target power of the planned TOST.

    Returns
    -------
    TestbedResult
        ``verdicts``: per (mix, bs_bytes, level) the verdict row with ``p_equivalence``/``equivalent``
        and the plan (``cv_pct``, ``cv_upper_pct``, ``units_needed``: set-ups per arm, or blocks, for the
        TOST to show "within margin" with ``power`` at the CV's 80% upper bound); ``tables``: ``units``
        (the set-up means), ``plan``. IOPS only: at a fixed I/O size MB/s is IOPS x size, the same ratio.
    """
    check_parameters(margin=margin, power=power)
    table, v, findings = compare_arms(data, ARM, BASELINE, "iops", by=["mix", "bs_bytes"], up="faster",
                                      down="slower", confidence=confidence, margin=margin)
    v["p_equivalence"] = [r.p_equivalence for r in table.rows]
    v["margin"] = margin
    plan = tost_plans(data, ARM, BASELINE, "iops", by=["mix", "bs_bytes"], margin=margin, confidence=confidence,
                      power=power)
    v = v.merge(plan, on=["mix", "bs_bytes", "level"], how="left")
    what = "set-ups per arm" if not data.paired else "blocks (one set-up of every arm each)"
    for lev, g in v.groupby("level", sort=True):
        shown = int((g["equivalent"] == True).sum())  # noqa: E712
        lo, hi = g["ci_low"].min(), g["ci_high"].max()
        findings.append(Finding(
            sentence=(f"{lev} vs raw, all {len(g)} (mix, I/O size) points: \"within {margin:.0%}\" shown at {shown} "
                      f"of {len(g)} (TOST at alpha = {1 - confidence:g} each; the claim for every size at once is "
                      f"their intersection-union test, shown only if all are); the {conf_text(confidence)} CIs of the "
                      f"ratio span {fmt_number(lo)} to {fmt_number(hi)}."),
            estimate=shown, ci=(lo, hi), confidence=confidence, n=len(g),
            unit_of_replication=f"comparison{'' if len(g) == 1 else 's'}", unit="points shown",
            method="TOST on the log ratio (Schuirmann 1987) per point; intersection-union over points (Berger & "
                   "Hsu 1996)", key="equivalence"))
        need = g["units_needed"]
        beyond = g[need.isna() & g["cv_upper_pct"].notna()]
        if len(beyond):
            findings.append(Finding(
                sentence=(f"{lev} vs raw: at {len(beyond)} point(s) the CV between units (up to "
                          f"{fmt_number(beyond['cv_upper_pct'].max())}% at its "
                          f"{conf_text(beyond['cv_confidence'].iloc[0])} upper confidence bound; point estimate "
                          f"{fmt_number(beyond['cv_pct'].max())}%) is so large that no number of {what} up to the "
                          f"planner's limit would show \"within {margin:.0%}\" with {power:.0%} power"
                          + ("." if "n_max" in beyond["plan_note"].iloc[0] else f" ({beyond['plan_note'].iloc[0]}).")),
                confidence=beyond["cv_confidence"].iloc[0], n=g["units_now"].max(), unit_of_replication="units now",
                unit="units", method="stats.tost_plan at stats.pilot_cv's upper bound (Browne 1995)", key="plan"))
        if need.notna().any():
            worst = g.loc[need.idxmax()]
            findings.append(Finding(
                sentence=(f"{lev} vs raw: showing \"within {margin:.0%}\" at "
                          + (f"the other {int(need.notna().sum())} points" if len(beyond) else "every point")
                          + f" with {power:.0%} power would "
                          f"need up to {int(need.max())} {what} (now {int(g['units_now'].max())}), planned at the "
                          f"{conf_text(worst['cv_confidence'])} upper confidence bound of the CV between units "
                          f"({fmt_number(worst['cv_upper_pct'])}% at {worst['mix']}, {int(worst['bs_bytes']) // 1024} "
                          f"KiB; point estimate {fmt_number(worst['cv_pct'])}%)."),
                estimate=need.max(), confidence=worst["cv_confidence"], n=g["units_now"].max(),
                unit_of_replication="units now", unit="units",
                method="stats.tost_plan at stats.pilot_cv's upper bound (Browne 1995)", key="plan"))
    units = unit_values(data, "iops", [ARM, "mix", "bs_bytes"])
    figures = {
        "ratios": lambda: ratio_figure(v, ["level", "mix", "bs_bytes"], margin=margin,
                                       title=f"fs / raw IOPS per (datastore, mix, I/O size), {conf_text(confidence)} CI; "
                                             f"dotted: the ±{margin:.0%} margin"),
        "iops_vs_size": lambda: _iops_vs_size(units),
    }
    n = v["n"].iloc[0] if len(v) else "0"
    captions = {
        "ratios": (f"fs / raw IOPS per (datastore, mix, I/O size): ratio of the set-up geometric means (n = {n} "
                   f"{'blocks' if data.paired else 'set-ups per arm'}) with its {conf_text(confidence)} CI; dashed: 1 "
                   f"(no difference), dotted: the ±{margin:.0%} equivalence margin."),
        "iops_vs_size": (f"IOPS against I/O size (log-log), one panel per mix and one line per datastore: the "
                         f"geometric mean over its {data.setups} set-ups; points: the set-ups."),
    }
    return finish(data, title=title, question=question, findings=findings, verdicts=v,
                  tables={"units": units, "plan": plan}, figures=figures, confidence=confidence, captions=captions)


def _iops_vs_size(units):
    """Set-up means of IOPS against I/O size, one panel per mix, one line per datastore (points: set-ups)."""
    mixes = sorted(units["mix"].unique())
    fig, axes = plt.subplots(1, len(mixes), figsize=(4 * len(mixes), 3.2), squeeze=False, sharey=True)
    for ax, mix in zip(axes[0], mixes, strict=True):
        g = units[units["mix"] == mix]
        for i, (lev, h) in enumerate(g.groupby(ARM, sort=True)):
            ax.scatter(h["bs_bytes"] / 1024, h["iops"], s=10, color=f"C{i}", alpha=0.5)
            m = h.groupby("bs_bytes")["iops"].apply(lambda x: float(np.exp(np.log(x).mean())))
            ax.plot(m.index / 1024, m.to_numpy(), color=f"C{i}", label=str(lev))
        ax.set_xscale("log", base=2)
        plain_log_axis(ax.xaxis, ticks=units["bs_bytes"].unique() / 1024)  # the I/O sizes measured, KiB
        ax.set_yscale("log")
        plain_log_axis(ax.yaxis)
        ax.set_xlabel("I/O size (KiB)")
        ax.set_title(str(mix), fontsize="small")
    axes[0][0].set_ylabel("IOPS (set-up geometric mean)")
    axes[0][-1].legend(fontsize="small")
    fig.tight_layout()
    return fig


def known_answer(data: StudyData, result: TestbedResult, *, confidence: float = CONFIDENCE) -> list[KnownAnswerCheck]:
    """A file on a filesystem over a device capped at C against the device itself: truth 1.0 at every point.

    Per (datastore, mix, I/O size) the verdict's ratio and CI against 1, with the TOST for "within ``margin``"
    (``tost_margin``, ``tost_p``: equivalence shown when ``tost_p < 1 - confidence``).
    """
    caps = data.study.throttle["device"]
    return [KnownAnswerCheck.of(
        f"{r['level']} / raw IOPS, {r['mix']}, {int(r['bs_bytes']) // 1024} KiB", 1.0, r["ratio"],
        (r["ci_low"], r["ci_high"]),
        f"the raw device and the device under the filesystem are each capped at {caps_text(caps)}, and the "
        "filesystem adds no I/O of its own to a preallocated file's reads: truth 1.0",
        tost_margin=float(r["margin"]), tost_p=float(r["p_equivalence"]))
        for _, r in result.verdicts.iterrows()]
