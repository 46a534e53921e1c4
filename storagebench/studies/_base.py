"""What every testbed study shares: its data, its experimental unit, its findings, its result type.

A study module (see :mod:`storagebench.studies`) builds its testbed and states its question; the rest
is here, once: loading a study directory (:func:`load_data`), the one run-level aggregation
(:func:`_run_totals`), the per-run checks (steady state, cache regime, build), the comparison of arms
with the set-up as the experimental unit (:func:`compare_arms`), and the findings that every write-up
carries (drift, steady state, cache caveats).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt  # plots, imported here anyway, draws with pyplot
import numpy as np
import pandas as pd
from matplotlib.ticker import (
    FixedLocator,
    FuncFormatter,
    LogFormatterSciNotation,
    MaxNLocator,
    NullFormatter,
    NullLocator,
)

from .. import stats
from .. import testbed as tb
from .._caps import caps_text
from .._inputs import completed_runs, open_input
from .._runner import SetUp
from .._store import StudyStore
from .._study import Study, load_study
from ..errors import StatsError, StudyError
from ..findings import CONFIDENCE, Finding, fmt_number
from ..ingest import ingest_study
from ..plots import ratio_forest
from ..runlevel import per_run
from ..schema import MAX_TABLE_BYTES
from ..tables import metric_words
from ..testbed import parse_size
from ._results import FINDINGS_COLUMNS, KnownAnswerCheck, StudyData, TestbedResult, conf_text  # noqa: F401

__all__ = [
    "Finding",
    "StudyData",
    "TestbedResult",
    "load_data",
    "check_study_name",
    "compare_arms",
    "unit_values",
    "tost_plans",
    "setup_variance",
    "finish",
    "ratio_figure",
    "conf_text",
    "plain_log_axis",
    "region_bytes",
    "loop_size",
    "capped",
    "caps_text",
    "KnownAnswerCheck",
]

#: Round of the per-second IOPS log (fio ``log_avg_msec=1000``), s.
ROUND_S = 1.0
#: SNIA PTS steady-state window: rounds, data excursion and fitted-line excursion (fractions of the mean).
PTS_WINDOW, PTS_DATA_LIMIT, PTS_FIT_LIMIT = 5, 0.20, 0.10
#: Columns of a fio IOPS log series that add up to a run's total IOPS in one round.
_LOG_PARTS = ("host", "job", "log_index", "direction")


# ---------------------------------------------------------------------------------------------
# sizes


def capped(stack: contextlib.ExitStack, study: Study, setup: SetUp, devices_by_role: Mapping[str, Sequence[Any]]) -> SetUp:
    """``setup`` with the spec's caps (``throttle:``) on its devices: one throttle (:func:`storagebench.testbed.throttle`)
    entered on ``stack``, whose cgroup every fio run of the build runs in.

    Parameters
    ----------
    stack : contextlib.ExitStack
        The build's stack: the throttle is removed with the build (before its devices).
    study : Study
        Its ``throttle`` maps a device role to caps; roles it does not name are not capped.
    setup : SetUp
        The build.
    devices_by_role : mapping
        Role -> the devices (paths, :class:`storagebench.testbed.LoopDevice` or ``ZramDevice``) that role names.

    Returns
    -------
    SetUp
        With ``cgroup``, ``caps``, the throttle's record among ``devices`` and a note; ``setup`` itself when the spec
        caps nothing.
    """
    caps = {getattr(d, "path", d): study.throttle[role] for role, devs in devices_by_role.items()
            if role in study.throttle for d in devs}
    if not caps:
        return setup
    th = stack.enter_context(tb.throttle(caps))
    words = "; ".join(f"{role}: {caps_text(study.throttle[role])} per device" for role in devices_by_role
                      if role in study.throttle)
    note = (f"known answer: the devices are capped by the kernel's block-I/O throttle (cgroup v{th.version}; {words}); "
            "fio and its workers run in that cgroup. A cap is a token bucket, not a disk: no service time, seek or "
            "queue in the device (docs/testbed.md)")
    return dataclasses.replace(setup, cgroup=th.path, caps=th.caps, devices=(*setup.devices, th.to_dict()),
                               notes=(*setup.notes, note))


def region_bytes(study: Study) -> int:
    """The region each run touches (the spec's ``size``), bytes."""
    if study.size is None:
        raise StudyError(f"study {study.name}: a testbed study needs 'size' (the region each run touches)")
    return parse_size(study.size)


def loop_size(study: Study, minimum: int = 512 << 20) -> int:
    """Size of a loop device for one target of ``study``: twice its region, at least ``minimum`` bytes
    (sparse: only what is written takes space)."""
    return max(minimum, 2 * region_bytes(study))


# ---------------------------------------------------------------------------------------------
# loading


def _run_totals(runs: pd.DataFrame, histograms: pd.DataFrame | None) -> pd.DataFrame:
    """One row per run: jobs, hosts and directions combined by fio's ``sum_thread_stats`` rule.

    :func:`storagebench.runlevel.per_run` (the one owner of "one row per run"): I/Os add up, IOPS =
    I/Os / longest runtime, latency means merged by completed I/Os, percentiles from the merged json+
    bins.
    """
    out = per_run(runs, histograms)
    return out.drop(columns=["direction", "job", "job_index"], errors="ignore")


def _parquet(path: Path) -> pd.DataFrame:
    """A tidy table of the study as stored, through the one reader of inputs (a regular file, bounded)."""
    with open_input(path, max_bytes=MAX_TABLE_BYTES, what="parquet table", error=StudyError) as fh:
        return pd.read_parquet(fh)


def _tables(study_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """``(runs, histograms, timeseries)``: ``tidy/*.parquet`` when they hold exactly the runs of ``raw/``
    and are newer than every one of them, else ingested now (and written to ``tidy/`` when possible)."""
    tidy, raw = study_dir / "tidy", study_dir / "raw"
    names = set(completed_runs(raw))
    newest = max((p.stat().st_mtime for p in raw.glob("*/output.json")), default=0.0)
    paths = [tidy / f"{t}.parquet" for t in ("runs", "histograms")]
    if all(p.exists() and p.stat().st_mtime >= newest for p in paths):
        runs = _parquet(paths[0])
        if set(runs["run_id"].astype(str)) == names:
            ts_path = tidy / "timeseries.parquet"
            ts = _parquet(ts_path) if ts_path.exists() else pd.DataFrame(columns=["run_id", "t_s", "metric",
                                                                                          "value"])
            return runs, _parquet(paths[1]), ts
    res = ingest_study(study_dir)
    with contextlib.suppress(OSError):  # a read-only results tree still gets its analysis
        res.write_parquet(tidy)
    return res.runs, res.histograms, res.timeseries


def _steady(timeseries: pd.DataFrame) -> pd.DataFrame:
    """Per run: the SNIA PTS window test on its per-second total IOPS (jobs and directions added up)."""
    cols = ["run_id", "steady", "steady_rounds", "steady_note"]
    if timeseries.empty or "metric" not in timeseries.columns or not (timeseries["metric"] == "iops").any():
        return pd.DataFrame(columns=cols)
    out = stats.steady_state_timeseries(timeseries, metric="iops", round_s=ROUND_S, by=["run_id"],
                                        sum_over=list(_LOG_PARTS), align="nearest", window=PTS_WINDOW,
                                        data_limit=PTS_DATA_LIMIT, fit_limit=PTS_FIT_LIMIT)
    return out.rename(columns={"rounds": "steady_rounds", "note": "steady_note"})[cols]


def check_study_name(name: str, study: Study, study_dir: str | Path) -> None:
    """Refuse a study directory of another study (``storagebench testbed NAME`` writes ``NAME[-quick]``).

    Raises
    ------
    StudyError
        ``study.yaml`` of ``study_dir`` names a study other than ``name`` or its quick variant.
    """
    if study.name not in (name, f"{name}-quick"):
        raise StudyError(f"{study_dir} holds study {study.name!r}, not {name!r} (or {name}-quick): pass the study "
                         f"it was run as, or the directory of {name}")


def load_data(name: str, study_dir: str | Path) -> StudyData:
    """Read a testbed study directory: spec, tidy tables, one row per run with its checks, set-ups.

    Parameters
    ----------
    name : str
        The study module's name.
    study_dir : str or path
        ``<out>/<study>/`` (``study.yaml``, ``raw/``, ``testbed.json``).

    Returns
    -------
    StudyData

    Raises
    ------
    StudyError
        Not a study directory, or one of another study; runs of one set-up measured on more than one build.
    IngestError
        Nothing ingestible.
    SchemaError
        A run's ``provenance.json`` is not valid (:meth:`storagebench._store.StudyStore.provenance`).
    """
    sdir = Path(study_dir)
    store = StudyStore(sdir)
    if not store.spec_path.exists():
        raise StudyError(f"{sdir} is not a study directory (no study.yaml): run `storagebench testbed {name}` first")
    study = load_study(store.spec_path)
    check_study_name(name, study, sdir)
    runs, hist, ts = _tables(sdir)
    if runs.empty:
        raise StudyError(f"{sdir}: no complete runs in raw/")
    pr = _run_totals(runs, hist)
    if "iodepth" in pr.columns and "numjobs" in pr.columns:
        pr["outstanding_ios"] = pr["iodepth"].astype(int) * pr["numjobs"].astype(int)
    if "setup" not in pr.columns:
        pr["setup"] = 1
    pr["setup"] = pr["setup"].astype(int)
    steady = _steady(ts)
    pr = pr.merge(steady, on="run_id", how="left")
    missing = pr["steady"].isna()
    if "write_iops_log" in study.fixed:  # logged, but not one sample: shorter than a round
        pr.loc[missing, "steady"] = False
        pr.loc[missing, "steady_rounds"] = 0
        pr.loc[missing, "steady_note"] = f"0 rounds logged: steady state needs at least window={PTS_WINDOW} rounds"
    pr["steady"] = pr["steady"].astype(object).where(pr["steady"].notna(), None)
    pr["steady_note"] = pr["steady_note"].fillna("no per-second IOPS log (write_iops_log) in this run")
    prov = store.provenance(pr["run_id"].astype(str))
    pr["build_id"] = [prov[r].set_up.build_id if r in prov and prov[r].set_up is not None else None
                      for r in pr["run_id"].astype(str)]
    devices = {r: p.device for r, p in prov.items() if p.device is not None}
    cache = stats.cache_caveats(pr, devices)
    pr["target_device"] = cache["device"].to_numpy()
    pr["target_rotational"] = cache["rotational"].to_numpy()
    pr["cache_not_medium"] = cache["cache_not_medium"].to_numpy()
    pr["cache_caveat"] = cache["caveat"].to_numpy()
    keys = ["setup", *[f for f in study.setup_factors if f in pr.columns]]
    builds = pr.dropna(subset=["build_id"]).groupby(keys)["build_id"].nunique()
    if (builds > 1).any():
        raise StudyError(f"{sdir}: set-up {dict(zip(keys, builds[builds > 1].index[0], strict=False))} holds runs "
                         f"of {int(builds.max())} testbed builds; a set-up is measured on one build (the runner "
                         "moves a half-measured set-up aside): the raw/ directory was edited by hand")
    return StudyData(name=name, study_dir=sdir, study=study, runs=runs, histograms=hist, timeseries=ts,
                     per_run=pr.sort_values("run_order").reset_index(drop=True),
                     set_ups=tuple(store.setup_records()))


# ---------------------------------------------------------------------------------------------
# comparisons with the set-up as the unit


def unit_values(data: StudyData, metric: str, keys: Sequence[str]) -> pd.DataFrame:
    """One row per experimental unit and ``keys`` cell: the geometric mean of its runs' ``metric``.

    The unit is the set-up (``setup``) when the study has several, else the run; ``block`` is kept.
    """
    pr = data.per_run
    unit = ["setup"] if data.setups > 1 else ["run_id"]
    cols = [*keys, *unit, *(["block"] if data.paired and "block" not in keys else [])]
    cols = list(dict.fromkeys(cols))
    g = pr.assign(_log=np.log(pr[metric].astype(float))).groupby(cols, sort=True, dropna=False)
    out = g["_log"].mean().apply(np.exp).rename(metric).reset_index()
    out["runs"] = g.size().to_numpy()
    return out


def compare_arms(data: StudyData, factor: str, baseline: Any, metric: str, *, by: str | Sequence[str] | None = None,
                 up: str = "higher", down: str = "lower", confidence: float = CONFIDENCE, adjust: str = "holm",
                 margin: float | None = None) -> tuple[stats.comparison.ComparisonTable, pd.DataFrame, list[Finding]]:
    """Compare the arms of ``factor`` with the set-up as the experimental unit, and say what it shows.

    :func:`storagebench.stats.compare` on the per-run table with ``unit="setup"`` (several set-ups) and
    ``pair_on="block"`` (blocks), then :func:`storagebench.stats.verdict` naming the unit.

    Returns
    -------
    (ComparisonTable, DataFrame, list of Finding)
        The comparison, its verdict table (``verdict`` columns plus ``runs``, ``runs_not_steady``,
        ``runs_cache_not_medium``: the runs behind each row) and one finding per row.
    """
    pr = data.per_run
    by_l = [by] if isinstance(by, str) else list(by or [])
    base = _level_like(pr[factor], baseline)
    table = stats.compare(pr, factor, base, metric, by=by_l or None, confidence=confidence, adjust=adjust,
                          margin=margin, **data.design())
    unit = data.unit_words()
    v = stats.verdict(table, unit=unit, blocks=data.design().get("blocks"), up=up, down=down)
    short = stats.verdict_findings(table, unit=unit, blocks=data.design().get("blocks"), up=up, down=down)
    counts = []
    for r in table.rows:
        sel = pr[factor].isin([r.level, r.baseline])
        for k, val in r.group:
            sel &= pr[k] == val
        counts.append((int(sel.sum()), int((pr.loc[sel, "steady"] == False).sum()),  # noqa: E712
                       int(pr.loc[sel, "cache_not_medium"].sum())))
    v["runs"] = [c[0] for c in counts]
    v["runs_not_steady"] = [c[1] for c in counts]
    v["runs_cache_not_medium"] = [c[2] for c in counts]
    v["method"] = [r.method for r in table.rows]
    # the sentence: stats.verdict_findings' short one (the full one, with unit, design and family, is the
    # verdict table's ``text``; those facts are the finding's n, unit and method)
    # the unit in short ("set-up"): the Methods section of the write-up says what it is in full
    findings = [Finding(item.sentence, estimate=row["ratio"], ci=(row["ci_low"], row["ci_high"]),
                        confidence=row["confidence"], n=_units(row["n"], data)[0],
                        unit_of_replication=f"{_units(row['n'], data)[1]}; unit: {unit.split(' (')[0]}", unit="ratio",
                        method=f"{row['method']}; design: {row['design']}; family: {row['family']}", key="verdict")
                for item, (_, row) in zip(short, v.iterrows(), strict=True)]
    return table, v, findings


def tost_plans(data: StudyData, factor: str, baseline: Any, metric: str, *, by: Sequence[str], margin: float,
               confidence: float = CONFIDENCE, power: float = 0.8) -> pd.DataFrame:
    """Per (group, level): how many units the TOST for "within ``margin``" would need.

    The pilot is this study's own units (:func:`unit_values`): with blocks, the per-block ratios
    other/baseline (a paired plan counting blocks); else the two arms' unit values (pooled log SD,
    units per arm). :func:`storagebench.stats.tost_plan` plans at the one-sided 80% upper confidence
    bound of the CV, never at the point estimate.

    Returns
    -------
    pandas.DataFrame
        ``*by, level, units_now, cv_pct, cv_upper_pct, cv_df, cv_confidence, units_needed`` (NaN when no plan can be
        made: fewer than 2 units, no spread, or more than the planner's limit) and ``plan_note``.
    """
    u = unit_values(data, metric, [*by, factor])
    base = _level_like(u[factor], baseline)
    rows = []
    for key, g in u.groupby(list(by), sort=True):
        key = key if isinstance(key, tuple) else (key,)
        b = g[g[factor] == base]
        for lev in [x for x in pd.unique(g[factor]) if x != base]:
            o = g[g[factor] == lev]
            rec = dict(zip(by, key, strict=True), level=lev)
            if data.paired:
                m = b.merge(o, on="block", suffixes=("_b", "_o"))
                pilot = [(m[f"{metric}_o"] / m[f"{metric}_b"]).to_numpy(float)]
                now = len(m)
            else:
                pilot = [b[metric].to_numpy(float), o[metric].to_numpy(float)]
                now = min(len(b), len(o))
            rec.update(units_now=now, cv_pct=math.nan, cv_upper_pct=math.nan, cv_df=math.nan, cv_confidence=math.nan,
                       units_needed=math.nan, plan_note="")
            try:
                pcv = stats.pilot_cv(pilot)
                rec.update(cv_pct=pcv.cv * 100, cv_upper_pct=pcv.cv_upper * 100, cv_df=pcv.df,
                           cv_confidence=pcv.confidence)
                plan = stats.tost_plan(pcv, margin, alpha=1 - confidence, power=power, paired=data.paired)
                rec["units_needed"] = float(plan.n)
            except StatsError as exc:  # no spread, < 2 units, or beyond the planner's limit: no made-up number
                rec["plan_note"] = str(exc)
            rows.append(rec)
    return pd.DataFrame(rows)


def setup_variance(data: StudyData, metric: str, cells: Sequence[str], *,
                   confidence: float = CONFIDENCE) -> tuple[pd.DataFrame, list[Finding]]:
    """How much of the variation is between set-ups, and how many runs per set-up are worth it.

    Per cell (``cells`` levels), :func:`storagebench.stats.variance_components` of ``metric`` with the
    levels set-up > repetition (Kalibera & Jones 2013), and the repetitions per set-up that minimise the
    cost of a given precision with the measured costs: a set-up costs its build and preconditioning
    (``testbed.json``), a run its runtime + ramp_time. Needs >= 2 set-ups and >= 2 repetitions.

    Returns
    -------
    (DataFrame, list of Finding)
        ``*cells, setups, reps, mean, cv_setups_pct`` (sqrt of the set-up component over the mean),
        ``cv_runs_pct``, ``setup_share`` (share of the set-up component in the total),
        ``optimal_runs_per_setup``; and one finding (empty without the design for it).
    """
    pr = data.per_run
    if data.setups < 2 or data.study.repetitions < 2:
        return pd.DataFrame(), []
    build = [sum(r.phases_s.values()) for r in data.set_ups if r.phases_s]
    costs = [float(np.mean(build)) if build else math.nan, float(data.study.run_duration_s)]
    rows = []
    for key, g in pr.groupby(list(cells), sort=True):
        key = key if isinstance(key, tuple) else (key,)
        try:
            vc = stats.variance_components(g, ["setup", "repetition"], metric,
                                           costs=costs if np.isfinite(costs[0]) and costs[0] > 0 else None,
                                           confidence=confidence)
        except StatsError:
            continue
        t2 = np.clip(np.array(vc.t2), 0, None)
        rows.append({**dict(zip(cells, key, strict=True)), "setups": vc.reps[0], "reps": vc.reps[1], "mean": vc.mean,
                     "cv_setups_pct": 100 * math.sqrt(t2[0]) / vc.mean, "cv_runs_pct": 100 * math.sqrt(t2[1]) / vc.mean,
                     "setup_share": t2[0] / t2.sum() if t2.sum() > 0 else math.nan,
                     "optimal_runs_per_setup": vc.optimal_reps[0] if vc.optimal_reps else math.nan,
                     "method": vc.method})
    table = pd.DataFrame(rows)
    if table.empty:
        return table, []
    opt = table["optimal_runs_per_setup"]
    sentence = (f"Variance components of {metric} (set-up > run, Kalibera & Jones 2013) in {len(table)} cells: the "
                f"set-up level holds {table['setup_share'].median():.0%} of the variance (median; from "
                f"{table['setup_share'].min():.0%} to {table['setup_share'].max():.0%}); set-up CV "
                f"{table['cv_setups_pct'].median():.1f}% vs run-to-run CV {table['cv_runs_pct'].median():.1f}% "
                "within a set-up (medians)")
    if opt.notna().any():
        sentence += (f"; with a set-up costing {costs[0]:.0f} s and a run {costs[1]:.0f} s, the cheapest precision "
                     f"comes from {np.nanmedian(opt):.1f} run(s) per set-up (median over cells; more set-ups beyond that)")
    finding = Finding(sentence + ".", estimate=table["setup_share"].median(), n=int(table["setups"].iloc[0]),
                      unit_of_replication=f"set-ups x {int(table['reps'].iloc[0])} runs per cell", unit="share",
                      method=str(table["method"].iloc[0]), key="variance")
    return table, [finding]




def _units(n: Any, data: StudyData) -> tuple[int, str]:
    """What a verdict row rests on: its ``n`` (``"4"``: blocks when paired), or the smaller arm of an
    unpaired ``"3/4"``; and what they are (``blocks``, ``set-ups`` or ``runs``)."""
    what = "set-ups" if data.setups > 1 else "runs"
    arms = str(n).split("/")
    return min(int(x) for x in arms), ("blocks" if data.paired and len(arms) == 1 else what)


def _level_like(series: pd.Series, value: Any) -> Any:
    for v in pd.unique(series):
        if str(v) == str(value):
            return v.item() if isinstance(v, np.generic) else v
    raise StatsError(f"baseline {value!r} is not a level of {series.name!r}: {sorted(map(str, pd.unique(series)))}")


# ---------------------------------------------------------------------------------------------
# what every write-up says


def _range_text(lo: float, hi: float) -> str:
    """``"309 to 678"``, or one number when both ends round to it."""
    a, b = fmt_number(lo), fmt_number(hi)
    return a if a == b else f"{a} to {b}"


def _pct(x: float) -> str:
    """A signed percentage for a sentence: ``+56.8%``, ``-100%``, ``+1,860,000%``."""
    return ("+" if x > 0 else "") + fmt_number(x) + "%"


def common_findings(data: StudyData, *, metric: str = "iops", confidence: float = CONFIDENCE) -> tuple[
        stats.drift.Drift | None, list[Finding], tuple[str, ...]]:
    """The drift check, the steady-state count and the cache caveats of a study, as findings.

    Returns
    -------
    (Drift or None, list of Finding, tuple of str)
        The drift check of ``metric`` (None with fewer than 3 runs), the findings, and the caveats
        (one per device and load whose runs measured a cache).
    """
    pr = data.per_run
    out: list[Finding] = []
    cells = data.factors
    drift = None
    if len(pr) >= 3:
        drift = stats.drift_check(pr, metric, cells=cells, order="run_order", confidence=confidence)
        out.append(Finding(drift.text("per-run IOPS" if metric == "iops" else metric),
                           estimate=drift.pct_over_span, ci=(drift.ci_low_pct, drift.ci_high_pct),
                           confidence=confidence, n=drift.n, unit_of_replication="runs", unit="%",
                           method=drift.method, key="drift"))
    checked = pr["steady"].notna()
    bad = int((pr["steady"] == False).sum())  # noqa: E712
    short = int(pr["steady_note"].str.contains("at least window", na=False).sum())
    if checked.any():
        sentence = (f"Steady state (SNIA PTS window of {PTS_WINDOW} one-second rounds: range <= {PTS_DATA_LIMIT:.0%} "
                    f"and fitted-line excursion <= {PTS_FIT_LIMIT:.0%} of the window mean, on each run's per-second "
                    f"IOPS): {bad} of {int(checked.sum())} runs not steady"
                    + (f" ({short} of them too short to test: fewer than {PTS_WINDOW} rounds)" if short else "")
                    + "; they are flagged in the verdict table (runs_not_steady).")
    else:
        sentence = ("Steady state not checked: the runs logged no per-second IOPS (add write_iops_log and "
                    "log_avg_msec: 1000 to the spec's fixed options).")
    out.append(Finding(sentence, estimate=bad, n=len(pr), unit_of_replication="runs", unit="runs",
                       method="stats.steady_state_timeseries (SNIA Solid State Storage PTS steady-state window)",
                       key="steady"))
    caveats = []
    flagged = pr[pr["cache_not_medium"].astype(bool)]
    if len(flagged):
        arms = [f for f in data.study.setup_factors if f in flagged.columns]
        groups = flagged.groupby(arms, sort=True) if arms else [((), flagged)]
        for key, g in groups:
            key = key if isinstance(key, tuple) else (key,)
            where = ", ".join(f"{k}={v}" for k, v in zip(arms, key, strict=True))
            total = len(pr[(pr[arms] == pd.Series(dict(zip(arms, key, strict=True)))).all(axis=1)]) if arms \
                else len(pr)
            loads = sorted({int(x) for x in g["outstanding_ios"].dropna()}) if "outstanding_ios" in g else []
            lat = g["clat_mean_ns"] / 1e3
            paths = sorted(p for p in g["target_device"].unique() if p)
            on = ", ".join(paths) if 0 < len(paths) <= 3 else f"{len(paths)} devices"
            text = (f"{stats.regime.CACHE_CAVEAT}{' (' + where + ')' if where else ''}: {len(g)} of {total} runs, on "
                    f"{on}, which sysfs calls rotational"
                    + (f", at {', '.join(map(str, loads))} outstanding I/O(s)" if loads else "")
                    + f", completed I/Os in {_range_text(lat.min(), lat.max())} µs on average: a rotating medium "
                    f"needs milliseconds per I/O (below {stats.regime.ROTATIONAL_FLOOR_NS / 1e6:g} ms a cache answered), so "
                    "these runs measured a cache, not the medium.")
            caveats.append(text)
            out.append(Finding(text, estimate=g["clat_mean_ns"].median(), n=len(g), unit_of_replication="runs",
                               unit="ns", method=f"stats.cache_caveats (rotational device, mean clat < "
                                                 f"{stats.regime.ROTATIONAL_FLOOR_NS / 1e6:g} ms)", key="caveat", caveat=True))
    return drift, out, tuple(caveats)


def finish(data: StudyData, *, title: str, question: str, findings: list[Finding], verdicts: pd.DataFrame,
           tables: Mapping[str, pd.DataFrame], figures: Mapping[str, Callable[[], Any]], confidence: float,
           captions: Mapping[str, str] | None = None, metric: str = "iops") -> TestbedResult:
    """Add the common findings (drift, steady state, cache) and figures with their captions, and build the result."""

    drift, common, caveats = common_findings(data, metric=metric, confidence=confidence)
    figs, caps = dict(figures), dict(captions or {})
    pr = data.per_run
    if drift is not None:
        figs.setdefault("drift", lambda: drift_figure(drift))
        caps.setdefault("drift", (
            f"Drift check: each run's {metric_words(metric)} as % from the mean of its cell ({', '.join(drift.cells)}) "
            f"against its position in the sweep ({drift.n} runs), with the fitted common slope: "
            f"{_pct(drift.pct_over_span)} from the first run to the last ({conf_text(confidence)} CI "
            f"{_pct(drift.ci_low_pct)} to {_pct(drift.ci_high_pct)})."))
    if not data.timeseries.empty:
        figs.setdefault("steady", lambda: steady_figure(data))
        bad = int((pr["steady"] == False).sum())  # noqa: E712
        caps.setdefault("steady", (
            f"Per-second IOPS of every run as % of the run's own mean ({len(pr)} runs; a run of one logged second is "
            f"one point); red: the {bad} runs whose "
            f"{PTS_WINDOW}-second SNIA PTS window was not steady (range > {PTS_DATA_LIMIT:.0%} or fitted-line "
            f"excursion > {PTS_FIT_LIMIT:.0%} of the mean, or too short); grey band: ±10%."))
    for name in figs:
        caps.setdefault(name, f"{title}: {name.replace('_', ' ')}.")
    keyed = tuple(dataclasses.replace(f, key=f"{f.kind}:{i}") for i, f in enumerate(findings + common))
    return TestbedResult(
        name=data.name, title=title, question=question, findings=keyed, verdicts=verdicts,
        tables={"per_run": pr, **tables}, figures=figs, confidence=confidence, unit=data.unit_words(),
        drift=drift, runs=len(pr), runs_not_steady=int((pr["steady"] == False).sum()),  # noqa: E712
        runs_cache_not_medium=int(pr["cache_not_medium"].sum()), caveats=caveats, captions=caps)


# ---------------------------------------------------------------------------------------------
# figures (plain matplotlib Figures; numbering, captions and alt text belong to the write-up)


def ratio_figure(verdicts: pd.DataFrame, group: str | Sequence[str], *, title: str,
                 margin: float | None = None):
    """Forest plot of the verdict table's ratios with their CIs (:func:`storagebench.plots.ratio_forest`).

    Rows whose CI is not estimable are left out and counted in the title; with none left, the figure
    says so. ``margin`` (a fraction) draws the equivalence bounds dotted.

    Returns
    -------
    matplotlib.figure.Figure
    """
    ok = verdicts.dropna(subset=["ratio", "ci_low", "ci_high"])
    ok = ok[(ok["ci_low"] > 0) & (ok["ci_high"] > 0)]
    if "metric" in ok:  # "p99 completion latency (clat)", not "clat_p99_ns"
        ok = ok.assign(metric=ok["metric"].map(metric_words))
    height = 1.5 + 0.3 * max(len(ok), 1)
    fig, ax = plt.subplots(figsize=(7, height))
    if ok.empty:
        ax.axis("off")
        ax.text(0.5, 0.5, "no ratio has an estimable CI with these runs", ha="center", va="center")
        return fig
    ratio_forest(ok, group=group, ax=ax)
    groups = [group] if isinstance(group, str) else list(group)
    factor = str(verdicts["factor"].iloc[0]) if "factor" in verdicts and len(verdicts) else "level"
    ax.set_ylabel(", ".join(factor if g == "level" else _short_name(g) for g in groups))  # "datastore", not "level"
    if margin:
        for x in (1 - margin, 1 + margin):
            ax.axvline(x, ls=":", color="grey")
    left = len(verdicts) - len(ok)
    ax.set_title(title + (f" ({left} of {len(verdicts)} left out: CI not estimable)" if left else ""),
                 fontsize="small")
    fig.tight_layout()
    return fig


def plain_log_axis(axis, ticks=None) -> None:
    """Label a log axis with plain numbers (``4``, ``30``, ``1,000``), not ``2^2`` or ``3 x 10^1``.

    Parameters
    ----------
    axis : matplotlib.axis.Axis
        ``ax.xaxis`` or ``ax.yaxis`` of a log-scaled axes.
    ticks : sequence of float, optional
        Put the major ticks exactly there (e.g. the loads measured) and no minor ticks; default: where
        matplotlib puts them, with the minor ticks it would label labelled too.
    """
    def plain(x: float) -> str:  # 0.001, 0.01, 0.1, 1, 30, 1,000: no trailing zeros on an axis
        text = fmt_number(x)
        return text.rstrip("0").rstrip(".") if "." in text and "e" not in text else text

    class _Plain(LogFormatterSciNotation):
        def __call__(self, x, pos=None):  # the same ticks as matplotlib labels, in plain numbers
            return plain(x) if super().__call__(x, pos) else ""

    if ticks is not None:
        axis.set_major_locator(FixedLocator(sorted({float(t) for t in ticks})))
        axis.set_minor_locator(NullLocator())
        axis.set_major_formatter(FuncFormatter(lambda x, _: plain(x)))
        axis.set_minor_formatter(NullFormatter())
        return
    axis.set_major_formatter(_Plain())
    axis.set_minor_formatter(_Plain(labelOnlyBase=False, minor_thresholds=(2, 0.5)))


def _short_name(column: str) -> str:
    """A column's name for an axis label: ``bs`` for ``bs_bytes``, ``load`` for ``load_label``."""
    for suffix in ("_bytes_per_s", "_bytes", "_pct", "_ns", "_ms", "_s", "_label"):
        if column.endswith(suffix) and len(column) > len(suffix):
            return column[: -len(suffix)]
    return column


def drift_figure(drift: stats.drift.Drift):
    """Residuals (log scale, from the cell means) against the run order, with the fitted common slope.

    Returns
    -------
    matplotlib.figure.Figure
    """
    r = drift.residuals
    fig, ax = plt.subplots(figsize=(7, 3))
    ax.scatter(r[drift.order], 100 * np.expm1(r["residual"]), s=12, color="C0")
    if np.isfinite(drift.slope):
        x = np.array([r[drift.order].min(), r[drift.order].max()])
        xm = r[drift.order].mean()
        ax.plot(x, 100 * np.expm1(drift.slope * (x - xm)), color="C3",
                label=f"{_pct(drift.pct_over_span)} first to last run")
        ax.legend(loc="best", fontsize="small")

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # a position in the run order is a whole number
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xlabel("run order (position in the sweep)" if drift.order == "run_order" else
                  f"{drift.order} (position in the sweep)")
    ax.set_ylabel(f"{metric_words(drift.metric)}: % from its cell mean")
    fig.tight_layout()
    return fig


def steady_figure(data: StudyData):
    """Every run's per-second IOPS as % of its own mean, not-steady runs in red.

    Returns
    -------
    matplotlib.figure.Figure
    """
    ts = data.timeseries[data.timeseries["metric"] == "iops"]
    parts = [c for c in _LOG_PARTS if c in ts.columns]
    per = (ts.assign(_round=np.rint(ts["t_s"].astype(float) / ROUND_S).astype(int))
           .groupby(["run_id", *parts, "_round"])["value"].mean().groupby(["run_id", "_round"]).sum())
    flags = data.per_run.set_index("run_id")["steady"]
    fig, ax = plt.subplots(figsize=(7, 3))
    for rid, s in per.groupby(level=0):
        y = s.to_numpy(float)
        bad = flags.get(rid) is False
        # a marker on every round: a run that logged one second is a point, not an invisible line
        ax.plot(s.index.get_level_values(1), 100 * y / y.mean(), color="C3" if bad else "C0", marker="o", ms=3,
                alpha=0.9 if bad else 0.25, lw=1.2 if bad else 0.8)
    ax.axhspan(90, 110, color="grey", alpha=0.1)
    ax.set_xlim(0, max(float(per.index.get_level_values(1).max()), 1.0) + 1)  # from the start of the run
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("second of the run")
    ax.set_ylabel("IOPS, % of the run's mean")
    n_bad = int((data.per_run["steady"] == False).sum())  # noqa: E712
    logged = len(per.index.get_level_values(0).unique())
    ax.set_title(f"{len(data.per_run)} runs, {logged} with a per-second IOPS log; red: {n_bad} not steady "
                 "(SNIA PTS window)", fontsize="small")
    fig.tight_layout()
    return fig
