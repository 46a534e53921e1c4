"""``storagebench calibrate``: what this host can tell apart, measured on the host itself.

Two parts, both in the design of the testbed studies (the set-up as the experimental unit, runs within it):

**A/A.** One configuration (4 KiB random read, iodepth 8, libaio, direct I/O) as two arms ``A`` and ``B``
whose testbeds are built the same way: each set-up a fresh loop device over a fresh sparse file in ``/var/tmp``
(``losetup --direct-io=on``; as non-root, a fresh file there), preconditioned, then ``r`` runs. Set-ups come in
blocks (each block builds A and B once, in a seeded random order). The blocks are split into ``n`` disjoint
groups of ``b`` consecutive blocks; each group is one A/A comparison (:func:`storagebench.stats.compare`, the
set-up as the unit, paired on blocks, at ``alpha = 1 - confidence``). The comparisons share no set-up and no run,
so they are independent up to slow drift of the host over the sweep; the false-positive rate is the share of them
that show a difference, with its Clopper-Pearson interval. The noise floor comes from a variance-components fit of
``log(IOPS)`` over every set-up of both arms (one configuration): REML of the random-intercept model
``log(iops) ~ 1 + (1 | set-up)`` (:func:`storagebench.stats.fit_mixed`), cross-checked by Kalibera & Jones'
estimators (:func:`storagebench.stats.variance_components`) when the design is balanced. A log-scale SD ``s``
is reported as the CV ``sqrt(exp(s^2) - 1)`` (lognormal).

**Smallest detectable ratio** (``mde``) for a budget of ``S`` set-ups per arm in ``S`` blocks and ``R`` runs per
set-up (default 5 x 3, the testbed design): the per-block log difference of the two arms' set-up means has
variance ``sigma_d^2 = 2 (sigma_setup^2 + sigma_run^2 / R)``; the paired t test on ``S`` blocks at two-sided
``alpha`` = 0.05 has power 0.8 at the standardised effect ``d`` that statsmodels' ``TTestPower.solve_power``
returns (the noncentral t; Cohen 1988, ch. 2), so ``mde = exp(d * sigma_d)``.

**Known-answer checks.** Each known-answer study (:func:`storagebench.studies.known_answer_names`, when this
storagebench has them) is run like any testbed study (:func:`storagebench.studies.run`) and its
``TestbedResult.checks`` (truth, estimate, CI, covered) are copied into ``calibration.json``.

The result is ``calibration.json`` (format: :mod:`storagebench._calibfile`) and a write-up, ``report.html``
(``notebooks/calibrate.ipynb`` through :func:`storagebench.publish.publish_report`), in
``<results>/calibration/<host>-<UTC stamp>/`` by default, where a study's write-up finds the latest calibration of
its host (same host name in the runs' provenance).
"""

from __future__ import annotations

import contextlib
import math
import os
import platform
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd

from . import stats
from . import testbed as tb
from ._calibfile import CALIBRATION_DIR, CALIBRATION_FILE, FORMAT_VERSION, Calibration
from ._pubsite import _atomic_write
from ._runner import SetUp, run_study
from ._study import SetUpUnit, Study, load_study
from ._version import __version__
from .errors import StatsError, StudyError, TestbedError
from .findings import CONFIDENCE, Finding, Findings, fmt_number
from .fio.process import fio_version
from .studies import StudyData, conf_text, load_data, plain_log_axis

__all__ = ["AA_SPEC", "NOTEBOOK", "AAPlan", "aa_plan", "aa_study", "analyse_aa", "calibrate", "calibration_figures",
           "calibration_findings", "default_out", "detectable_ratio", "run_aa"]

_ROOT = Path(__file__).resolve().parents[1]
#: The write-up notebook of a calibration (parameter ``study_dir``: the calibration's directory).
NOTEBOOK = _ROOT / "notebooks" / "calibrate.ipynb"
#: The budget the smallest detectable ratio is stated for: set-ups per arm, runs per set-up, power, alpha.
MDE_BUDGET = {"mde_setups_per_arm": 5, "mde_runs_per_setup": 3, "power": 0.8, "alpha": 0.05}


@dataclass(frozen=True)
class AAPlan:
    """The A/A design: ``comparisons`` disjoint groups of ``blocks`` blocks, ``runs`` runs per set-up."""

    comparisons: int
    blocks: int
    runs: int
    runtime_s: float
    size: str

    @property
    def setups(self) -> int:
        """Set-ups built in all (both arms)."""
        return 2 * self.comparisons * self.blocks

    @property
    def fio_seconds(self) -> float:
        """fio time of the runs, s (builds and preconditioning not included)."""
        return self.setups * self.runs * self.runtime_s


#: The full and the quick A/A designs (``--quick``: a few minutes on 2 cores).
PLANS = {False: AAPlan(comparisons=20, blocks=3, runs=3, runtime_s=2, size="64m"),
         True: AAPlan(comparisons=6, blocks=2, runs=2, runtime_s=1, size="16m")}

#: The A/A spec: one configuration, two arms built the same way (``arm`` is the set-up factor).
AA_SPEC: dict[str, Any] = {
    "name": "calibration_aa",
    "description": ("A/A calibration: one configuration (4 KiB random read, iodepth 8) as two arms A and B, each "
                    "set-up a fresh loop device over a fresh file, in blocks; disjoint groups of blocks are "
                    "independent A/A comparisons."),
    "factors": {"arm": [{"name": "A", "target": "A"}, {"name": "B", "target": "B"}]},
    "fixed": {"ioengine": "libaio", "direct": 1, "rw": "randread", "bs": "4k", "iodepth": 8, "numjobs": 1,
              "randrepeat": 0},
    "setup_factors": ["arm"],
    "blocks": True,
    "seed": 20,
}


def aa_plan(quick: bool = False, *, comparisons: int | None = None) -> AAPlan:
    """The A/A design of a calibration (:data:`PLANS`), with another number of comparisons if given.

    Raises
    ------
    StudyError
        ``comparisons`` below 1 or above 500.
    """
    plan = PLANS[bool(quick)]
    if comparisons is None:
        return plan
    if isinstance(comparisons, bool) or not isinstance(comparisons, int) or not 1 <= comparisons <= 500:
        raise StudyError(f"comparisons must be a whole number from 1 to 500, got {comparisons!r}")
    return AAPlan(comparisons, plan.blocks, plan.runs, plan.runtime_s, plan.size)


def aa_study(plan: AAPlan) -> Study:
    """The A/A :class:`~storagebench._study.Study` of ``plan`` (named ``calibration_aa``)."""
    return load_study({**AA_SPEC, "runtime": plan.runtime_s, "size": plan.size, "repetitions": plan.runs,
                       "setups": plan.comparisons * plan.blocks})


def _aa_testbed(study: Study, scratch: Path, fio_bin: str) -> Callable[[SetUpUnit], Any]:
    """One set-up of the A/A: a fresh loop device over a fresh file (root), else a fresh file; preconditioned."""
    root = os.geteuid() == 0
    size = tb.parse_size(study.size)

    @contextlib.contextmanager
    def build(unit: SetUpUnit) -> Iterator[SetUp]:
        arms = [unit.arm["arm"]] if "arm" in unit.arm else ["A", "B"]
        with contextlib.ExitStack() as stack:
            targets, devices, allow = {}, [], []
            for arm in arms:
                if root:
                    dev = stack.enter_context(tb.loop_device(max(2 * size, 64 << 20)))
                    targets[arm], allow = dev.path, [*allow, dev.path]
                    devices.append({**dev.to_dict(), "role": f"arm {arm}"})
                else:
                    path = scratch / f"setup-{unit.setup}-{arm}.dat"
                    path.unlink(missing_ok=True)
                    stack.callback(path.unlink, missing_ok=True)
                    targets[arm] = str(path)
                    devices.append({"kind": "file", "path": str(path), "role": f"arm {arm}"})
            t0 = time.monotonic()
            tb.precondition(list(targets.values()), size, allow_devices=allow, fio_bin=fio_bin)
            note = ("a fresh loop device (direct I/O) over a fresh sparse file in /var/tmp" if root
                    else "a fresh file (not root: no loop device)")
            yield SetUp(targets=targets, allow_devices=tuple(allow), devices=tuple(devices),
                        notes=(f"each arm's set-up: {note}, its region written twice before the runs",),
                        phases_s={"precondition": round(time.monotonic() - t0, 3)})

    return build


def _cv(log_variance: float) -> float:
    """The CV of a lognormal with log-scale variance ``log_variance`` (a negative estimate counts as 0)."""
    return math.sqrt(math.expm1(max(0.0, log_variance)))


def detectable_ratio(var_setup: float, var_run: float, *, setups: int, runs: int, power: float = 0.8,
                     alpha: float = 0.05) -> float:
    """Smallest ratio a paired comparison of ``setups`` blocks with ``runs`` runs per set-up detects.

    Parameters
    ----------
    var_setup, var_run : float
        Log-scale variance components: between set-ups and between runs within a set-up.
    setups : int
        Set-ups per arm, one per block (>= 2).
    runs : int
        Runs per set-up (>= 1).
    power, alpha : float
        Power of the two-sided paired t test at level ``alpha``.

    Returns
    -------
    float
        ``exp(d * sigma_d)`` with ``sigma_d^2 = 2 (var_setup + var_run / runs)`` and ``d`` the standardised effect
        at which the paired t test on ``setups`` differences has ``power`` (statsmodels ``TTestPower``, noncentral
        t; Cohen 1988).

    Raises
    ------
    StatsError
        Fewer than 2 set-ups, fewer than 1 run, negative or NaN variances, power or alpha outside (0, 1).
    """
    from statsmodels.stats.power import TTestPower

    if setups < 2 or runs < 1:
        raise StatsError(f"a budget needs >= 2 set-ups per arm and >= 1 run per set-up, got {setups} x {runs}")
    if not (0 < power < 1 and 0 < alpha < 1):
        raise StatsError(f"power and alpha must lie in (0, 1), got {power!r} and {alpha!r}")
    if not (var_setup >= 0 and var_run >= 0):
        raise StatsError(f"variances must be >= 0, got {var_setup!r} and {var_run!r}")
    sd = math.sqrt(2 * (var_setup + var_run / runs))
    d = float(TTestPower().solve_power(effect_size=None, nobs=setups, alpha=alpha, power=power,
                                       alternative="two-sided"))
    return math.exp(d * sd)


def _components(pr: pd.DataFrame) -> dict[str, Any]:
    """Log-scale variance components of IOPS over the set-ups of both arms: REML, and K&J when balanced."""
    df = pr.assign(unit=pr["arm"].astype(str) + "-" + pr["setup"].astype(str), log_iops=np.log(pr["iops"]))
    out: dict[str, Any] = {"setups": int(df["unit"].nunique()), "runs": len(df)}
    fit = stats.fit_mixed(df, "log_iops ~ 1", groups="unit")
    var = dict(zip(fit.variance["component"], fit.variance["variance"].astype(float), strict=True))
    v_setup = next(v for k, v in var.items() if k != "residual")
    out.update(var_setup=float(v_setup), var_run=float(var["residual"]), converged=bool(fit.converged),
               method=("REML random-intercept model log(iops) ~ 1 + (1 | set-up) (statsmodels MixedLM via "
                       "stats.fit_mixed); CV = sqrt(exp(var) - 1)"), note=fit.note)
    with contextlib.suppress(StatsError):  # unbalanced (a failed run): the REML fit stands alone
        vc = stats.variance_components(df.assign(repetition=df["repetition"].astype(int)), ["unit", "repetition"],
                                       "log_iops")
        # T^2 of the set-up level as estimated: negative by chance when the set-ups differ less than their runs
        out["kalibera_jones"] = {"var_setup": vc.t2[0], "var_run": vc.t2[1], "method": vc.method}
    return out


def _binomial_ci(k: int, n: int, confidence: float) -> tuple[float, float]:
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    return float(ci.low), float(ci.high)


def analyse_aa(data: StudyData, plan: AAPlan, *, confidence: float = CONFIDENCE) -> dict[str, Any]:
    """The A/A part of ``calibration.json`` from the A/A study's data.

    Parameters
    ----------
    data : StudyData
        The A/A study (:func:`storagebench.studies.load_data` of ``calibration_aa``).
    plan : AAPlan
        Its design: the blocks are split into ``plan.comparisons`` groups of ``plan.blocks`` consecutive blocks.
    confidence : float
        Level of each comparison's CI; a comparison shows a difference at ``p < 1 - confidence``.

    Returns
    -------
    dict
        ``n`` (comparisons with both arms measured), ``false_positives``, ``false_positive_rate``,
        ``false_positive_ci`` (Clopper-Pearson), ``cv_run``, ``cv_setup``, ``mde`` (for :data:`MDE_BUDGET`),
        ``mde_table``, ``components``, ``comparisons`` (one row each), and the methods in words.

    Raises
    ------
    StatsError
        No runs, or a variance fit that cannot be made.
    """
    pr = data.per_run.copy()
    if pr.empty:
        raise StatsError("the A/A study has no runs")
    alpha = 1 - confidence
    pr["comparison"] = (pr["block"].astype(int) - 1) // plan.blocks + 1
    rows = []
    for k, sub in pr.groupby("comparison", sort=True):
        if sub["arm"].nunique() < 2 or sub["block"].nunique() < 2:
            continue
        row = stats.compare(sub, "arm", "A", "iops", unit="setup", pair_on="block", blocks=["block"],
                            confidence=confidence).rows[0]
        rows.append({"index": int(k), "blocks": sorted(int(b) for b in sub["block"].unique()),
                     "ratio": float(row.ratio), "ci_low": float(row.ci_low), "ci_high": float(row.ci_high),
                     "p": float(row.p), "shown": bool(row.p < alpha and (row.ci_low > 1 or row.ci_high < 1))})
    n, k = len(rows), sum(r["shown"] for r in rows)
    comp = _components(pr)
    b = MDE_BUDGET
    mde = detectable_ratio(comp["var_setup"], comp["var_run"], setups=b["mde_setups_per_arm"],
                           runs=b["mde_runs_per_setup"], power=b["power"], alpha=b["alpha"])
    table = [{"setups_per_arm": s, "runs_per_setup": r,
              "mde": detectable_ratio(comp["var_setup"], comp["var_run"], setups=s, runs=r)}
             for s in (3, 5, 10, 20) for r in (1, 3, 5)]
    lo, hi = _binomial_ci(k, n, confidence) if n else (math.nan, math.nan)
    return {
        "n": n, "false_positives": k, "false_positive_rate": k / n if n else None,
        "false_positive_ci": [lo, hi] if n else None, "alpha": alpha,
        "cv_run": _cv(comp["var_run"]), "cv_setup": _cv(comp["var_setup"]), "mde": mde,
        "mde_budget": dict(b), "mde_table": table,
        "mde_method": ("paired t on the per-block log ratio of set-up means; sigma_d^2 = 2 (var_setup + var_run / "
                       "runs); d from statsmodels TTestPower.solve_power (noncentral t, Cohen 1988); mde = "
                       "exp(d sigma_d)"),
        "how": (f"{plan.comparisons} groups of {plan.blocks} consecutive blocks (each block one fresh set-up of A "
                f"and one of B, {plan.runs} runs each); each group one comparison B/A (stats.compare, the set-up as "
                f"the unit, paired on blocks, alpha {alpha:g}); the groups share no set-up and no run: independent "
                "comparisons up to slow drift of the host"),
        "components": comp, "comparisons": rows,
    }


def default_out(results: str | os.PathLike[str] = "results") -> Path:
    """``<results>/calibration/<host>-<UTC stamp>/``: where a study's write-up looks for its host's calibration."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    host = "".join(c if c.isalnum() or c in "-_." else "_" for c in socket.gethostname())[:64] or "host"
    return Path(results) / CALIBRATION_DIR / f"{host}-{stamp}"


def _machine_id() -> str | None:
    for p in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        with contextlib.suppress(OSError):
            text = Path(p).read_text(encoding="ascii", errors="replace").strip()
            if text:
                return text[:64]
    return None


def _host(fio_bin: str) -> dict[str, Any]:
    uname = platform.uname()
    return {"hostname": socket.gethostname(), "machine_id": _machine_id(), "kernel": uname.release,
            "os": f"{uname.system} {uname.machine}", "cpu_count": os.cpu_count(), "python": sys.version.split()[0],
            "fio_version": fio_version(fio_bin), "root": os.geteuid() == 0}


def _known_answer(out: Path, names: list[str], *, quick: bool, progress: bool, fio_bin: str) -> tuple[list, dict]:
    """Run the known-answer studies ``names`` and collect their checks."""
    from . import studies

    if not names:
        return [], {"note": "this storagebench has no known-answer studies (storagebench.studies.known_answer_names)"}
    checks, dirs = [], {}
    for i, name in enumerate(names, 1):
        _say(progress, f"calibrate: known-answer study {i} of {len(names)}: {name}")
        res = studies.run(name, out_dir=out / "known", quick=quick, progress=progress, fio_bin=fio_bin,
                          confidence=CONFIDENCE)
        dirs[name] = os.path.relpath(res.study_dir, out)
        for c in res.result.checks:
            extra = {k: getattr(c, k) for k in ("tost_margin", "tost_p", "overhead") if getattr(c, k, None) is not None}
            checks.append({"study": name, "name": c.name, "truth": c.truth, "estimate": c.estimate,
                           "ci_low": c.ci_low, "ci_high": c.ci_high, "covered": bool(c.covered), "rule": c.rule,
                           **extra})
    return checks, {"studies": names, "study_dirs": dirs}


def _known_names(known: Sequence[str] | None) -> list[str]:
    from . import studies

    every = studies.known_answer_names()
    if known is None:
        return every
    unknown = [n for n in known if n not in every]
    if unknown:
        raise StudyError(f"known-answer study must be one of {every}, got {unknown}")
    return list(dict.fromkeys(known))


def _say(progress: bool, text: str) -> None:
    if progress:
        print(text, file=sys.stderr, flush=True)


def run_aa(out: Path, plan: AAPlan, *, progress: bool = False, fio_bin: str = "fio",
           confidence: float = CONFIDENCE) -> tuple[dict[str, Any], Path]:
    """Measure the A/A study of ``plan`` into ``out/calibration_aa/`` and analyse it (:func:`analyse_aa`).

    Raises
    ------
    TestbedError
        A loop device could not be made (root) or a tool is missing.
    UnsafeTargetError, FioError
        From the safety check or fio.
    """
    study = aa_study(plan)
    _say(progress, f"calibrate: A/A, {plan.setups} set-ups x {plan.runs} runs of {plan.runtime_s:g} s "
                   f"({plan.fio_seconds:.0f} s of fio, plus builds)")
    with tempfile.TemporaryDirectory(prefix="sb-calibrate-", dir="/var/tmp") as scratch:
        sweep = run_study(study, out_dir=out, fio_bin=fio_bin, progress=progress,
                          testbed=_aa_testbed(study, Path(scratch), fio_bin))
    if sweep.failed:
        raise TestbedError(f"A/A: {len(sweep.failed)} run(s) failed (kept under {sweep.root}/failed/); first: "
                           f"{next(iter(sweep.errors.values()), '?')}")
    data = load_data("calibration_aa", sweep.root)
    return analyse_aa(data, plan, confidence=confidence), sweep.root


def calibrate(out: str | os.PathLike[str] | None = None, *, quick: bool = False, comparisons: int | None = None,
              known: Sequence[str] | None = None, progress: bool = False, fio_bin: str = "fio",
              report: bool = True) -> Path:
    """Calibrate this host: the A/A part, the known-answer checks, ``calibration.json`` and the write-up.

    Parameters
    ----------
    out : path, optional
        Directory of the calibration; default :func:`default_out` (``results/calibration/<host>-<stamp>/``,
        where study write-ups find it). Created; an existing ``calibration.json`` in it is refused.
    quick : bool
        The quick A/A (:data:`PLANS`) and the quick known-answer studies.
    comparisons : int, optional
        Number of A/A comparisons (default the plan's).
    known : sequence of str, optional
        The known-answer studies to run; default every one (:func:`storagebench.studies.known_answer_names`);
        ``[]``: none.
    progress : bool
        Phases and the runner's progress bar (ETA) on stderr.
    fio_bin : str
        fio executable.
    report : bool
        Write ``report.html`` (:data:`NOTEBOOK` through :func:`storagebench.publish.publish_report`).

    Returns
    -------
    Path
        ``calibration.json``.

    Raises
    ------
    StudyError
        ``out`` already holds a calibration, bad ``comparisons``, or a ``known`` study that is not a known-answer
        study (the message lists them): all before anything is measured.
    TestbedError, UnsafeTargetError, FioError
        From the builds and runs.
    """
    t0 = time.monotonic()
    plan = aa_plan(quick, comparisons=comparisons)
    names = _known_names(known)
    out = Path(out) if out is not None else default_out()
    if (out / CALIBRATION_FILE).exists():
        raise StudyError(f"{out / CALIBRATION_FILE} exists: give calibrate a new --out directory")
    out.mkdir(parents=True, exist_ok=True)
    _say(progress, f"calibrate: into {out} (interrupted, the same --out resumes)")
    host = _host(fio_bin)
    aa, aa_dir = run_aa(out, plan, progress=progress, fio_bin=fio_bin, confidence=CONFIDENCE)
    checks, known_runs = _known_answer(out, names, quick=quick, progress=progress, fio_bin=fio_bin)
    doc = {
        "format_version": FORMAT_VERSION, "kind": "storagebench calibration",
        "date": datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z"),
        "storagebench_version": __version__, "quick": bool(quick), "host": host,
        "budget": {**MDE_BUDGET, "aa_comparisons": plan.comparisons, "aa_blocks_per_comparison": plan.blocks,
                   "aa_runs_per_setup": plan.runs, "aa_runtime_s": plan.runtime_s, "aa_size": plan.size,
                   "aa_setups": plan.setups, "aa_fio_seconds": plan.fio_seconds,
                   "wall_s": round(time.monotonic() - t0, 1)},
        "configuration": {**AA_SPEC["fixed"], "size": plan.size, "runtime_s": plan.runtime_s},
        "checks": checks, "known_answer": known_runs, "aa": aa, "aa_study_dir": os.path.relpath(aa_dir, out),
    }
    path = out / CALIBRATION_FILE
    _atomic_write(path, orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY).decode())
    if report:
        from .publish import publish_report

        publish_report(out, notebooks=[NOTEBOOK])
    return path


# ---------------------------------------------------------------------------------------------
# the write-up


def calibration_findings(cal: Calibration) -> Findings:
    """The findings of a calibration's write-up: the A/A false-positive rate, the noise floor, the smallest
    detectable ratio with its budget, and one per known-answer check (text from the file: shown through the
    HTML gate by :class:`storagebench.findings.Findings`)."""
    aa, out = cal.aa, []
    if aa.n:
        fpr = aa.false_positive_rate or 0.0
        lo, hi = _binomial_ci(aa.false_positives, aa.n, CONFIDENCE)
        out.append(Finding(
            f"On identical arms, {aa.false_positives} of {aa.n} independent A/A comparisons showed a difference: "
            f"a false-positive rate of {fpr:.0%} ({conf_text(CONFIDENCE)} CI {lo:.0%} to {hi:.0%}) against the "
            f"nominal {1 - CONFIDENCE:.0%}.", estimate=fpr, ci=(lo, hi), confidence=CONFIDENCE, n=aa.n,
            unit_of_replication="independent A/A comparisons (disjoint set-ups)", unit="share",
            method="paired t on the per-block log ratio of set-up geometric means; Clopper-Pearson CI", key="aa_fpr"))
    if aa.cv_run is not None and aa.cv_setup is not None:
        out.append(Finding(
            f"Noise floor of this host: run-to-run CV {100 * aa.cv_run:.1f}% within a set-up, set-up-to-set-up CV "
            f"{100 * aa.cv_setup:.1f}% (IOPS).", estimate=aa.cv_setup, unit="CV",
            unit_of_replication="set-ups of one configuration", key="noise_floor",
            method="REML random-intercept model of log(IOPS) (stats.fit_mixed); CV = sqrt(exp(var) - 1)"))
    if aa.mde is not None and {"mde_setups_per_arm", "mde_runs_per_setup"} <= set(cal.budget):
        b = cal.budget
        out.append(Finding(
            f"With {b['mde_setups_per_arm']:g} set-ups per arm and {b['mde_runs_per_setup']:g} runs per set-up, the "
            f"smallest ratio this host detects is {aa.mde:.3g} (power {b.get('power', 0.8):g}, two-sided alpha "
            f"{b.get('alpha', 0.05):g}); a smaller effect is 'not shown', not absent.", estimate=aa.mde,
            unit="ratio", key="mde", method="paired t power (statsmodels TTestPower, noncentral t; Cohen 1988)"))
    for i, c in enumerate(cal.checks):
        has_ci = c.ci_low is not None and c.ci_high is not None
        verdict = (f"({fmt_number(c.ci_low)} to {fmt_number(c.ci_high)}): the CI "
                   f"{'covers' if c.covered else 'MISSES'} the truth" if has_ci else
                   "with no CI (not estimable: no spread between the set-ups), so nothing covers the truth")
        out.append(Finding(
            f"Known answer {c.name}: truth {fmt_number(c.truth)}, estimate "
            f"{'not estimable' if c.estimate is None else fmt_number(c.estimate)} {verdict}.", estimate=c.estimate,
            ci=(c.ci_low, c.ci_high) if has_ci else None, unit="ratio", key=f"check:{i}",
            method=c.rule or "the known-answer study's own rule"))
    if not cal.checks:
        out.append(Finding("No known-answer checks were run: this storagebench has no known-answer studies.",
                           caveat=True, key="no_checks"))
    return Findings(tuple(out), title=f"What can this host ({cal.hostname}) tell apart?")


def _forest(ax, rows: list[tuple[str, float, float, float]], xlabel: str) -> None:
    """A forest of (label, estimate, CI low, CI high) on a log axis, dashed at 1."""
    labels, est, lo, hi = (list(c) for c in zip(*rows, strict=True))
    y = np.arange(len(labels))[::-1]
    ax.errorbar(est, y, xerr=[np.subtract(est, lo), np.subtract(hi, est)], fmt="o", color="black", capsize=3)
    ax.axvline(1.0, ls="--", color="grey")
    ax.set_yticks(y, labels)
    ax.set_xscale("log")
    plain_log_axis(ax.xaxis)  # 0.5, 1, 2: not 2 x 10^-1 labels running into each other
    ax.set_xlabel(xlabel)


def calibration_figures(cal: Calibration) -> dict[str, tuple[Callable[[], Any], str]]:
    """Figure name -> (function drawing it, caption): the A/A comparisons, the smallest detectable ratio by
    budget and, when there are any, the known-answer checks."""
    import matplotlib.pyplot as plt

    out: dict[str, tuple[Callable[[], Any], str]] = {}
    level = conf_text(CONFIDENCE)
    if cal.aa.comparisons:
        def aa_fig():
            cs = cal.aa.comparisons
            fig, ax = plt.subplots(figsize=(7, 1.5 + 0.3 * len(cs)))
            _forest(ax, [(f"comparison {c.index}", c.ratio, c.ci_low, c.ci_high) for c in cs],
                    "IOPS ratio B/A (no unit, log scale)")
            fig.tight_layout()
            return fig
        out["aa"] = (aa_fig, f"A/A comparisons: IOPS ratio B/A of identical arms with its {level} CI, one row per "
                             "independent comparison; dashed: 1 (no difference).")
    if cal.aa.mde_table:
        def mde_fig():
            t = pd.DataFrame(cal.aa.mde_table, columns=["setups", "runs", "mde"])
            fig, ax = plt.subplots(figsize=(7, 4))
            for runs, g in t.groupby("runs"):
                ax.plot(g["setups"], g["mde"], marker="o", label=f"{runs} run(s) per set-up")
            ax.set_xlabel("set-ups per arm (count)")
            ax.set_ylabel("smallest detectable IOPS ratio (no unit)")
            ax.legend()
            fig.tight_layout()
            return fig
        out["mde"] = (mde_fig, "Smallest ratio detectable by budget (power 0.8, two-sided alpha 0.05), from this "
                               "host's variance components.")
    if any(c.ci_low is not None and c.ci_high is not None and c.estimate is not None for c in cal.checks):
        def checks_fig():
            cs = [c for c in cal.checks if c.ci_low is not None and c.ci_high is not None and c.estimate is not None]
            fig, ax = plt.subplots(figsize=(7, 1.5 + 0.3 * len(cs)))
            _forest(ax, [(c.name, c.estimate / c.truth, c.ci_low / c.truth, c.ci_high / c.truth) for c in cs],
                    "estimate / truth (no unit, log scale)")
            fig.tight_layout()
            return fig
        left = sum(c.ci_low is None or c.ci_high is None or c.estimate is None for c in cal.checks)
        out["checks"] = (checks_fig, f"Known-answer checks: estimate over truth with its {level} CI; dashed: 1 "
                                     "(the truth recovered)" + (f"; {left} check(s) without a CI left out." if left
                                                                else "."))
    return out
