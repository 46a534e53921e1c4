"""Stripe width 1 vs 4 (seed 002, StarWind's vSAN stripe-width test) on btrfs.

The six access patterns of the seed on btrfs over one device (width 1) and btrfs with data and metadata
raid0 over four devices (width 4) of the same total capacity; the width-4/width-1 IOPS ratio per pattern
with its CI, the set-up (a fresh filesystem on fresh loop devices) as the experimental unit, Holm-adjusted
over the six patterns.

Testbed (one arm per build): width 1 is btrfs (single profile) on one loop device of four times the
per-device size; width 4 is ``mkfs.btrfs -d raid0 -m raid0`` over four loop devices. All loop devices are
sparse files on the same local disk with ``--direct-io=on``: striping adds queues and parallel
submission, not spindles.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import numpy as np

from storagebench import testbed as tb
from storagebench.findings import CONFIDENCE
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
    ratio_figure,
    unit_values,
)

name = "stripe_width"
title = "Stripe width 1 vs 4 on btrfs (seed 002)"
question = "Does striping over four devices change IOPS, pattern by pattern, compared with one device of the same capacity?"

ARM = "stripe_width"
#: The spec's ``throttle:`` may cap ``device``: every loop device of the build (ka_stripe_width).
throttle_roles = ("device",)


def _width(level) -> int:
    return int(level)


@contextlib.contextmanager
def testbed(study: Study, unit: SetUpUnit) -> Iterator[SetUp]:
    """btrfs on one loop device (width 1) or btrfs raid0 over four (width 4), for the widths of ``unit``."""
    levels = [unit.arm[ARM]] if ARM in unit.arm else [lv["name"] if isinstance(lv, dict) else lv
                                                      for lv in study.factors[ARM]]
    target_of = {(lv["name"] if isinstance(lv, dict) else lv): (lv.get("target") if isinstance(lv, dict) else None)
                 for lv in study.factors[ARM]}
    size = loop_size(study)
    targets, devices, notes, loops = {}, [], [], []
    with contextlib.ExitStack() as stack:
        for level in levels:
            width = _width(level)
            if width == 1:
                one = stack.enter_context(tb.loop_device(4 * size))
                loops.append(one)
                fs = stack.enter_context(tb.filesystem(one, "btrfs"))
                devices += [{**one.to_dict(), "role": f"width {width}"}, {**fs.to_dict(), "role": f"width {width}"}]
                notes.append(f"width 1: btrfs (single profile) on one fresh {4 * size >> 20} MiB loop device")
            else:
                devs = stack.enter_context(tb.loop_devices(width, 4 * size // width))
                loops += devs
                fs = stack.enter_context(tb.btrfs_raid0(devs))
                devices += [{**d.to_dict(), "role": f"width {width}"} for d in devs]
                devices.append({**fs.to_dict(), "role": f"width {width}"})
                notes.append(f"width {width}: btrfs with data and metadata raid0 over {width} fresh "
                             f"{4 * size // width >> 20} MiB loop devices (the same capacity)")
            targets[target_of.get(level) or str(level)] = os.path.join(fs.mountpoint, "stripe.dat")
        notes.append("all loop devices are sparse files on the same local disk with --direct-io=on: striping adds "
                     "queues and parallel submission, not spindles")
        yield capped(stack, study, SetUp(targets=targets, devices=tuple(devices), notes=tuple(notes)),
                     {"device": loops})


def analyse(data: StudyData, *, confidence: float = CONFIDENCE) -> TestbedResult:
    """width 4 / width 1 IOPS per pattern (ratio of geometric means of the set-ups), Holm over the patterns.

    Returns
    -------
    TestbedResult
        ``verdicts``: one row per pattern (:func:`storagebench.stats.verdict`: "faster"/"slower" only
        where the Holm-adjusted p < alpha and the CI lies on that side of 1); ``tables``: ``units``.
    """
    base = min(data.per_run[ARM].unique(), key=_width)
    _, v, findings = compare_arms(data, ARM, base, "iops", by="pattern", up="faster", down="slower",
                                  confidence=confidence)
    units = unit_values(data, "iops", [ARM, "pattern"])
    figures = {"ratios": lambda: ratio_figure(v, ["pattern"], title=f"width 4 / width 1 IOPS per pattern, "
                                                                    f"{conf_text(confidence)} CI")}
    n = v["n"].iloc[0] if len(v) else "0"
    captions = {"ratios": (f"Width 4 / width 1 IOPS per pattern: ratio of the set-up geometric means (n = {n} "
                           f"{'blocks' if data.paired else 'set-ups per arm'}) with its {conf_text(confidence)} CI; "
                           "dashed: 1 (no difference).")}
    return finish(data, title=title, question=question, findings=findings, verdicts=v, tables={"units": units},
                  figures=figures, confidence=confidence, captions=captions)


def known_answer(data: StudyData, result: TestbedResult, *, confidence: float = CONFIDENCE) -> list[KnownAnswerCheck]:
    """Width w over width 1 when every device is capped at C: truth w (w devices of C against one of C).

    Per pattern, the verdict's ratio and CI against ``w``; the raid's overhead is measured beside it, not
    subtracted: ``overhead`` = 1 - (IOPS of width w / (w x C)) / (IOPS of width 1 / C) from the set-up geometric
    means (the share of the w-fold token rate that striping did not turn into IOPS).
    """
    caps = data.study.throttle["device"]
    units = unit_values(data, "iops", [ARM, "pattern"])
    out = []
    for _, r in result.verdicts.iterrows():
        w1, w = _width(r["baseline"]), _width(r["level"])
        g = units[units["pattern"] == r["pattern"]]
        gm = {int(k): float(np.exp(np.log(v["iops"]).mean())) for k, v in g.groupby(ARM)}
        overhead = (1 - (gm[w] / w) / (gm[w1] / w1)) if w in gm and w1 in gm else None
        pr = data.per_run[data.per_run["pattern"] == r["pattern"]]
        reads = "rw" in pr.columns and set(pr["rw"].astype(str)) <= {"randread", "read"}
        cap = caps.get("riops") if reads else None  # IOPS against a read cap: the share of the tokens used
        measured = (f"; measured: width {w} at {gm[w] / (w * cap):.1%} of {w} x {cap}, width {w1} at "
                    f"{gm[w1] / (w1 * cap):.1%} of {w1} x {cap} (overhead = 1 - their ratio)"
                    if cap and overhead is not None else "")
        out.append(KnownAnswerCheck.of(
            f"width {w} / width {w1} IOPS, {r['pattern']}", w / w1, r["ratio"], (r["ci_low"], r["ci_high"]),
            f"every loop device capped at {caps_text(caps)}: width {w} has {w} x the token rate of width {w1}; "
            f"truth = the ratio of the widths (the raid's overhead measured beside it, not subtracted){measured}",
            overhead=overhead,
            # held to fio's counting resolution, as ka_caps: width 1's iodepth-32 queue takes 160 ms to drain at
            # 200 IOPS, width 4's 40 ms, so the two windows' edges do not cancel in the ratio
            resolution=count_resolution(pr, ARM, (r["level"], r["baseline"]))))
    return out
