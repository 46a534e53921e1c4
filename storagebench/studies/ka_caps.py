"""Known answer outside the testbed studies' questions: two raw devices whose capacity is their cap (issue 20).

Two fresh loop devices, each capped by the kernel's block-I/O throttle (``throttle: {low: ..., high: ...}``), are the
two levels of the study's target factor ``device``; the high/low IOPS ratio, with the set-up as the experimental unit,
must recover the ratio of the caps. This is the check an outside audit made by hand with ``run`` and ``compare``
(200 and 400 read IOPS gave 1.999 [1.996, 2.003]), made a study of its own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from storagebench import testbed as tb
from storagebench.errors import StudyError
from storagebench.findings import CONFIDENCE, fmt_number
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

name = "ka_caps"
title = "Known answer: two devices capped at known rates"
question = "Does the chain (spec, fio, ingest, statistics, verdict) recover the ratio of two devices' caps?"

ARM, BASELINE = "device", "low"
#: Each level of ``device`` is a role the spec's ``throttle:`` caps.
throttle_roles = ("low", "high")


@contextlib.contextmanager
def testbed(study: Study, unit: SetUpUnit) -> Iterator[SetUp]:
    """A fresh raw loop device per ``device`` level of ``unit``, capped by ``throttle: <level>``."""
    levels = [unit.arm[ARM]] if ARM in unit.arm else [lv["name"] if isinstance(lv, dict) else lv
                                                      for lv in study.factors[ARM]]
    missing = [lv for lv in levels if lv not in study.throttle]
    if missing:
        raise StudyError(f"study {study.name}: throttle: must cap every device level; missing {missing}")
    size = loop_size(study)
    with contextlib.ExitStack() as stack:
        devs = {lv: stack.enter_context(tb.loop_device(size)) for lv in levels}
        note = (f"{', '.join(levels)}: a fresh {size >> 20} MiB loop device over a sparse file on the local disk "
                "(--direct-io=on), measured raw")
        built = SetUp(targets={lv: d.path for lv, d in devs.items()}, allow_devices=tuple(d.path for d in devs.values()),
                      devices=tuple({**d.to_dict(), "role": lv} for lv, d in devs.items()), notes=(note,))
        yield capped(stack, study, built, {lv: [d] for lv, d in devs.items()})


def analyse(data: StudyData, *, confidence: float = CONFIDENCE) -> TestbedResult:
    """high / low IOPS (ratio of the set-up geometric means, paired on blocks), and the units."""
    _, v, findings = compare_arms(data, ARM, BASELINE, "iops", up="faster", down="slower", confidence=confidence)
    units = unit_values(data, "iops", [ARM])
    figures = {"ratios": lambda: ratio_figure(v, ["level"], title=f"high / low IOPS, {conf_text(confidence)} CI")}
    n = v["n"].iloc[0] if len(v) else "0"
    captions = {"ratios": (f"high / low IOPS: ratio of the set-up geometric means (n = {n} "
                           f"{'blocks' if data.paired else 'set-ups per arm'}) with its {conf_text(confidence)} CI; "
                           "dashed: 1.")}
    return finish(data, title=title, question=question, findings=findings, verdicts=v, tables={"units": units},
                  figures=figures, confidence=confidence, captions=captions)


def known_answer(data: StudyData, result: TestbedResult, *, confidence: float = CONFIDENCE) -> list[KnownAnswerCheck]:
    """Per level against the baseline: truth = the ratio of their caps (the first key both set); the interval is
    held to fio's counting resolution (:func:`~storagebench.studies.count_resolution`).

    Raises
    ------
    StudyError
        Two levels without a common cap key.
    """
    caps = data.study.throttle
    out = []
    for _, r in result.verdicts.iterrows():
        hi, lo = caps[str(r["level"])], caps[str(r["baseline"])]
        key = next((k for k in ("riops", "wiops", "rbps", "wbps") if k in hi and k in lo), None)
        if key is None:
            raise StudyError(f"study {data.name}: {r['level']} and {r['baseline']} have no cap key in common: {caps}")
        truth = hi[key] / lo[key]
        out.append(KnownAnswerCheck.of(
            f"{r['level']} / {r['baseline']} IOPS", truth, r["ratio"], (r["ci_low"], r["ci_high"]),
            f"{r['level']} capped at {caps_text(hi)}, {r['baseline']} at {caps_text(lo)}: truth = the ratio of the caps, "
            f"{fmt_number(truth)}",
            resolution=count_resolution(data.per_run, ARM, (r["level"], r["baseline"]))))
    return out
