"""What a numjobs x iodepth sweep found: peak, recommended point, caveats, n per point.

:func:`sweep_summary` is the one analysis behind ``storagebench demo``'s summary and the *Findings*
section of ``notebooks/analyze.ipynb``: the CLI prints :meth:`SweepSummary.findings`, the notebook
displays it, so the terminal and the page say the same thing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..errors import SchemaError, StatsError
from ..findings import CONFIDENCE, Finding, Findings, fmt_ci, fmt_number, fmt_p
from ..records import DeviceInfo, provenance_records
from ._common import check_confidence
from .points import PointEstimates, point_estimates, point_percentiles
from .regime import ROTATIONAL_FLOOR_NS, cache_caveats
from .saturation import PLATEAU_FRACTION, Recommendation, per_run, recommend_parameters
from .steady import steadystate_sentence

#: Mean latency (ms) below which a rotational device cannot have served a random I/O from its platters:
#: half a revolution alone is 2 ms at 15,000 rpm and 4.2 ms at 7,200 rpm (rotational latency = 30 / rpm s).
#: The one floor of the cache rule (:data:`storagebench.stats.regime.ROTATIONAL_FLOOR_NS`), in ms.
CACHE_LATENCY_MS = ROTATIONAL_FLOOR_NS / 1e6


@dataclass(frozen=True)
class SweepPoint:
    """One point of a sweep with its estimates.

    Attributes
    ----------
    numjobs, iodepth : int
    n : int
        Runs (repetitions) of the point.
    iops, iops_ci_low, iops_ci_high : float
        Geometric mean IOPS (1/s) over the runs and its log-scale CI (NaN bounds when not estimable).
    lat_mean_ms : float
        Mean total latency (fio ``lat``), ms: the geometric mean over the runs of each run's mean.
    clat_p99_ms : float or None
        p99 completion latency, ms, from the merged json+ bins of the point's runs (``None`` without histograms).
    lat_mean_ci_low_ms, lat_mean_ci_high_ms : float
        Log-scale CI of ``lat_mean_ms`` (NaN when not estimable).
    """

    numjobs: int
    iodepth: int
    n: int
    iops: float
    iops_ci_low: float
    iops_ci_high: float
    lat_mean_ms: float
    clat_p99_ms: float | None
    lat_mean_ci_low_ms: float = math.nan
    lat_mean_ci_high_ms: float = math.nan

    @property
    def outstanding_ios(self) -> int:
        """``numjobs x iodepth``."""
        return self.numjobs * self.iodepth

    @property
    def label(self) -> str:
        """``numjobs=4 × iodepth=16``."""
        return f"numjobs={self.numjobs} × iodepth={self.iodepth}"


@dataclass(frozen=True)
class SweepSummary:
    """Result of :func:`sweep_summary`.

    Attributes
    ----------
    study : str
        Study name(s) of the runs.
    n_runs : int
        Completed runs analysed.
    runs_per_point : (int, int)
        Fewest and most runs of a point.
    confidence : float
    peak : SweepPoint
        The point with the highest geometric-mean IOPS.
    recommended : SweepPoint
        The point :func:`storagebench.stats.recommend_parameters` chooses.
    recommendation : Recommendation
        Its full result (rule, Kneedle knees of IOPS, mean and p99 latency, per-point table).
    cache_caveat : str
        Why the numbers may describe a cache rather than the device; "" when no sign of one.
    points : pandas.DataFrame
        Per point: ``numjobs, iodepth, n, iops, iops_ci_low, iops_ci_high, iops_log_sd, lat_mean_ns`` (+ its
        CI and log SD) and, with histograms, ``clat_p50_ns, clat_p99_ns``.
    estimates : PointEstimates or None
        How the per-point CIs were computed (:func:`storagebench.stats.point_estimates`): method, pooled
        df and the equal-spread check per column.
    plateau : SweepPoint or None
        Where the IOPS plateau starts (fewest outstanding I/Os reaching the fraction of the peak), ignoring
        the tail.
    steadystate : str
        What fio's own steady-state detection did to the runs (:func:`storagebench.stats.steady.steadystate_sentence`;
        '' when no run had a rule); the last sentence of :meth:`methods`.
    """

    study: str
    n_runs: int
    runs_per_point: tuple[int, int]
    confidence: float
    peak: SweepPoint
    recommended: SweepPoint
    recommendation: Recommendation
    cache_caveat: str
    points: pd.DataFrame
    estimates: PointEstimates | None = None
    plateau: SweepPoint | None = None
    steadystate: str = ""

    @property
    def at_grid_edge(self) -> bool:
        """The recommended point is the largest load measured: no saturation was seen."""
        return self.recommendation.at_grid_edge

    def ci_method(self, column: str = "iops") -> str:
        """How the CIs of ``column`` were computed, in one sentence (:meth:`SpreadCheck.method_text`)."""
        if self.estimates is None or column not in self.estimates.checks:
            return f"{self.confidence:.0%} CI over the runs of each point"
        return self.estimates.method_text(column)

    def key_points(self) -> pd.DataFrame:
        """One row per point the findings name: the peak, the recommended point, the start of the IOPS plateau
        and the Kneedle knees of IOPS, mean latency and p99 completion latency.

        Returns
        -------
        pandas.DataFrame
            ``point`` (what it is), ``numjobs``, ``iodepth``, ``outstanding_ios``, ``n``, ``iops`` with
            ``iops_ci_low``/``iops_ci_high`` (1/s), ``lat_mean_ns`` with its CI (ns), ``clat_p99_ns`` (ns,
            with histograms), ``share_of_peak_pct`` (% of the peak IOPS); a knee Kneedle did not find has NaN
            values and says so in ``point``.
        """
        cols = ["numjobs", "iodepth", "n", "iops", "iops_ci_low", "iops_ci_high", "lat_mean_ns", "lat_mean_ns_ci_low",
                "lat_mean_ns_ci_high", *(["clat_p99_ns"] if "clat_p99_ns" in self.points.columns else [])]
        idx = self.points.set_index(["numjobs", "iodepth"])
        rows = []

        def add(name: str, nj, qd) -> None:
            row = {"point": name, "numjobs": nj, "iodepth": qd}
            if nj is not None and (nj, qd) in idx.index:
                r = idx.loc[(nj, qd)]
                row.update({c: r[c] for c in cols[2:]})
            rows.append(row)

        add("peak IOPS", self.peak.numjobs, self.peak.iodepth)
        add("recommended", self.recommended.numjobs, self.recommended.iodepth)
        if self.plateau is not None:
            add(f"start of the IOPS plateau (>= {self.recommendation.fraction:.0%} of the peak)",
                self.plateau.numjobs, self.plateau.iodepth)
        for _, k in self.recommendation.knees.iterrows():
            found = np.isfinite(float(k["numjobs"]))
            name = f"knee of {k['curve']}" + ("" if found else f": {k['note'] or 'none found'}")
            add(name, int(k["numjobs"]) if found else None, int(k["iodepth"]) if found else None)
        out = pd.DataFrame(rows, columns=["point", *cols])
        for c in ("numjobs", "iodepth", "n"):  # float: a knee not found is NaN (an empty cell in a table)
            out[c] = out[c].astype(float)
        out.insert(3, "outstanding_ios", out["numjobs"] * out["iodepth"])
        out["share_of_peak_pct"] = 100.0 * out["iops"] / self.peak.iops
        return out

    def methods(self) -> list[str]:
        """The methods behind the findings, one sentence each (for a report's *Methods* section)."""
        rec = self.recommendation
        out = [
            "Per run: the rows of a run (jobs, directions) are combined with fio's own group-reporting rule "
            "(sum_thread_stats in fio's stat.c): IOPS and bandwidth add up, mean latencies are weighted by "
            "completed I/Os.",
            f"Per point, IOPS: {self.ci_method('iops')}.",
            f"Per point, mean latency: {self.ci_method('lat_mean_ns')}.",
            "Percentiles (p50, p99 completion latency, clat) come from the merged json+ histograms of all runs "
            "of a point, read with fio's percentile rule (stat.c), never from averaged percentiles; they have "
            "no CI.",
            f"Recommended point: {rec.rule}. Knees by Kneedle (Satopää, Albrecht, Irwin & Raghavan 2011, "
            "\u201cFinding a \u2018Kneedle\u2019 in a Haystack\u201d, ICDCS Workshops; the kneed package), "
            "sensitivity S = 1, on the best point per outstanding-I/O count against log2 outstanding I/Os. A p99 "
            "read from one point's merged bins has no CI and is noisy on a busy host, so its knee can move by a "
            "step or two between repeats of the sweep; the table of knees shows the numbers it rests on.",
        ]
        if self.steadystate:
            out.append(self.steadystate)
        return out

    def findings(self) -> Findings:
        """The sweep's findings in plain sentences (peak, recommended point with mean and p99 and the rule,
        caveats, n per point)."""
        unit = "fio runs of the point, in random order"  # reads after "n = 2"
        ci_method = self.ci_method("iops")
        p99_method = "p99 from the merged json+ latency bins of the point's runs (fio's percentile rule)"
        rule = self.recommendation

        def iops_text(p: SweepPoint) -> str:
            return f"{fmt_number(p.iops)} IOPS ({fmt_ci(p.iops_ci_low, p.iops_ci_high, self.confidence)})"

        def lat_text(p: SweepPoint) -> str:
            out = f"mean latency {fmt_number(p.lat_mean_ms)} ms"
            if p.clat_p99_ms is not None:
                out += f", p99 completion latency {fmt_number(p.clat_p99_ms)} ms"
            return out

        pk, rc = self.peak, self.recommended
        items = [Finding(
            f"Peak: {iops_text(pk)} at {pk.label}, with {lat_text(pk)}.",
            estimate=pk.iops, ci=(pk.iops_ci_low, pk.iops_ci_high), confidence=self.confidence, n=pk.n,
            unit_of_replication=unit, method=ci_method + ("; " + p99_method if pk.clat_p99_ms is not None else ""),
            unit="IOPS", key="peak_iops")]
        same = (rc.numjobs, rc.iodepth) == (pk.numjobs, pk.iodepth)
        tk = rule.tail_knee
        tail_bound = tk is not None and np.isfinite(tk.x)
        share = f"{rc.iops / pk.iops:.0%} of the peak"
        if tail_bound:
            nxt = self.points.assign(oio=self.points["numjobs"] * self.points["iodepth"])
            past = nxt[nxt["oio"] > tk.x]
            where = (f"the fewest outstanding I/Os ({rc.outstanding_ios}) reaching {rule.fraction:.0%} of the best "
                     f"IOPS at or below the p99 knee ({tk.x:g} outstanding I/Os, Kneedle)")
            if len(past) and "clat_p99_ns" in past.columns and past["clat_p99_ns"].notna().any():
                lo99, hi99 = (fmt_number(past["clat_p99_ns"].agg(f) * 1e-6) for f in ("min", "max"))
                where += f"; past that knee p99 is {lo99 if lo99 == hi99 else f'{lo99} to {hi99}'} ms"
            pl = self.plateau
            if pl is not None and (pl.numjobs, pl.iodepth) != (rc.numjobs, rc.iodepth):
                where += (f". The IOPS plateau ({rule.fraction:.0%} of the peak) starts at {pl.label}: "
                          f"{fmt_number(pl.iops)} IOPS at p99 {fmt_number(pl.clat_p99_ms)} ms")
                if pl.outstanding_ios >= int(self.points["numjobs"].mul(self.points["iodepth"]).max()):
                    where += ", the grid's largest load, so IOPS may still rise beyond it"
        elif self.at_grid_edge:
            where = (f"IOPS still rise at the largest load measured ({rc.outstanding_ios} outstanding I/Os), so "
                     f"{rc.label} is the grid's edge, not a knee: extend iodepth or numjobs before using it")
        else:
            where = (f"the fewest outstanding I/Os ({rc.outstanding_ios}) that reach {rule.fraction:.0%} of the "
                     f"peak; more outstanding I/Os add latency but almost no IOPS")
            if rc.clat_p99_ms is None:
                where += " (no p99 without histograms, so the tail is not weighed)"
        if tk is not None and not tail_bound:  # the rule that applied: the plain plateau, and why
            where += (f" ({'no p99 knee inside the grid' if 'inside the grid' in tk.note else 'no p99 knee'} "
                      "(Kneedle), so the tail did not bound the choice)")
        what = f"the peak point itself, {rc.label}" if same else f"{rc.label}, {iops_text(rc)}, {share}, with {lat_text(rc)}"
        items.append(Finding(
            f"Recommended test point: {what}: {where}.",
            estimate=rc.iops, ci=(rc.iops_ci_low, rc.iops_ci_high), confidence=self.confidence, n=rc.n,
            unit_of_replication=unit, method=f"rule: {rule.rule}", unit="IOPS", key="recommended"))
        if self.cache_caveat:
            items.append(Finding(self.cache_caveat, key="cache", caveat=True))
        items.append(self._runs_per_point())
        return Findings(tuple(items), title=f"What IOPS and latency does this target give over {len(self.points)} "
                                            f"numjobs × iodepth points?")

    def _runs_per_point(self) -> Finding:
        """The finding on how often each point was measured and what its CIs rest on (a caveat without CIs or
        with unequal spread)."""
        pct = f"{self.confidence:.0%}"
        n_lo, n_hi = self.runs_per_point
        if n_hi < 2:
            reps = (f"Each of the {len(self.points)} points was measured once ({self.n_runs} runs), so there are no "
                    "confidence intervals: set repetitions: 3 or more in the study spec to see how much these "
                    "numbers move between runs.")
            caveat = True
        else:
            count = f"n = {n_lo}" if n_lo == n_hi else f"n = {n_lo} to {n_hi}"
            reps = (f"Each of the {len(self.points)} points was measured {count} times ({self.n_runs} fio runs in "
                    f"a seeded random order). ")
            check = self.estimates.checks["iops"] if self.estimates is not None else None
            caveat = False
            if check is None:
                reps += f"Every interval is a {pct} CI over those runs."
            elif check.method == "pooled_log":
                reps += (f"Every {pct} CI is on the log scale, with the run-to-run spread pooled over all "
                         f"{check.points} points ({check.df_resid} residual df), which assumes the same "
                         f"coefficient of variation at every point")
                reps += (f"; {check.test}'s test does not reject it at {check.alpha:.0%} (p = {fmt_p(check.p)})."
                         if check.test else "; with one run at most points it cannot be checked.")
            elif check.requested == "auto" and check.rejected:
                caveat = True
                reps += (f"The spread between runs differs from point to point ({check.test} p = {fmt_p(check.p)}, "
                         f"SD of log IOPS {fmt_number(check.log_sd_min, 2)} to {fmt_number(check.log_sd_max, 2)}), "
                         f"so each {pct} CI rests on its point's own {n_lo if n_lo == n_hi else 'few'} runs and is "
                         "wide: rerun on a quiet host or add repetitions.")
            elif check.method == "log_t":
                reps += (f"Every {pct} CI is on the log scale from the point's own runs (n - 1 df), not pooled over "
                         "the points: pooling when the CV differs between points would make the noisy points' CIs "
                         "too narrow" + (f" ({check.test} p = {fmt_p(check.p)}, SD of log IOPS "
                                         f"{fmt_number(check.log_sd_min, 2)} to {fmt_number(check.log_sd_max, 2)})."
                                         if check.test else "."))
            else:
                reps += f"Every interval is a {pct} CI from the point's own runs ({check.short()})."
        return Finding(reps, n=n_lo, unit_of_replication="fio runs per point", key="runs_per_point",
                             method="repetitions of the study spec", caveat=caveat)


def completed_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The rows of completed runs: a run with any job in error (``error != 0``) or killed (``partial``) is left
    out whole, as the run-level table flags it (:mod:`storagebench.runlevel`), never averaged with its good jobs.

    Parameters
    ----------
    runs : pandas.DataFrame
        A ``runs`` table, or a run-level table (its ``n_jobs_error`` counts too).

    Returns
    -------
    pandas.DataFrame
        The rows of the runs left.

    Raises
    ------
    SchemaError
        No such row.
    """
    bad = np.zeros(len(runs), dtype=bool)
    for col in ("error", "n_jobs_error"):
        if col in runs.columns:
            bad |= (pd.to_numeric(runs[col], errors="coerce").fillna(0) != 0).to_numpy()
    if "partial" in runs.columns:
        bad |= runs["partial"].fillna(False).astype(bool).to_numpy()
    df = runs
    if bad.any():
        keep = ~runs["run_id"].isin(runs.loc[bad, "run_id"]) if "run_id" in runs.columns else ~bad
        df = runs[np.asarray(keep, dtype=bool)]
    if df.empty:
        raise SchemaError("`runs` has no rows of completed, error-free runs (error == 0, partial == False).")
    return df


def _rotational(provenance: Any) -> bool | None:
    flags = {r.device.rotational for r in provenance_records(provenance) if r.device is not None}
    flags.discard(None)
    return next(iter(flags)) if len(flags) == 1 else None


def _cache_caveat(runs: pd.DataFrame, points: pd.DataFrame, provenance: Any) -> str:
    if "direct" in runs.columns and (pd.to_numeric(runs["direct"], errors="coerce") == 0).any():
        return ("Some runs used buffered I/O (direct=0): their reads may have been served from the page cache, "
                "so those numbers describe memory, not the device.")
    rot = _rotational(provenance)
    if rot:
        low = points.loc[(points["numjobs"] * points["iodepth"]).idxmin()]
        lat_ms = float(low["lat_mean_ns"]) * 1e-6
        # the one rule (stats.cache_caveats, random I/O only) on the lightest load's mean latency
        at = runs[(runs["numjobs"] == low["numjobs"]) & (runs["iodepth"] == low["iodepth"])]
        pattern = {}
        if "rw" in at.columns:
            pattern["rw"] = ",".join(sorted(map(str, at["rw"].dropna().unique())))
        if "random_pct" in at.columns:
            pattern["random_pct"] = pd.to_numeric(at["random_pct"], errors="coerce").max()
        if not pattern:  # random or sequential unknown: the rule cannot be applied
            return ""
        row = points.loc[[low.name]].assign(**pattern)
        if cache_caveats(row, DeviceInfo(rotational=rot), latency="lat_mean_ns")["cache_not_medium"].iloc[0]:
            return (f"The target's device reports itself rotational, yet at the lightest load of random I/O "
                    f"(numjobs={int(low['numjobs'])} × iodepth={int(low['iodepth'])}) an I/O took "
                    f"{fmt_number(lat_ms)} ms on average, less than half a revolution of any disk (2 ms at "
                    "15,000 rpm): a cache (the drive's, a controller's or the hypervisor's) served these I/Os, so "
                    "the numbers describe that cache, not the platters.")
    return ""


def sweep_summary(runs: pd.DataFrame, histograms: pd.DataFrame | None = None, *, provenance: Any = None,
                  confidence: float = CONFIDENCE, fraction: float = PLATEAU_FRACTION, method: str = "auto") -> SweepSummary:
    """Peak, recommended point, knees, caveats and n per point of a numjobs x iodepth sweep.

    The estimand of a point is the geometric mean of its runs' IOPS (and of their mean latencies), with
    a log-scale CI from its own runs (:func:`storagebench.stats.point_estimates`);
    the recommended point follows the one rule of :func:`storagebench.stats.recommend_parameters` (the
    cheapest load reaching 95% of the IOPS available before the p99 knee, Kneedle).

    Parameters
    ----------
    runs : pandas.DataFrame
        Tidy ``runs`` table with ``run_id``, ``numjobs``, ``iodepth``, ``iops`` (1/s), ``lat_mean_ns`` (ns).
    histograms : pandas.DataFrame, optional
        Tidy ``histograms`` table; gives the p99 completion latency per point (merged bins) and its knee.
    provenance : Provenance, mapping or sequence of them, optional
        ``provenance.json`` records (:func:`storagebench.publish.study_provenance`, or their JSON form:
        :func:`storagebench.records.provenance_records`); the device's ``rotational`` flag feeds the
        cache caveat.
    confidence : float
        Level of the CIs.
    fraction : float
        Share of the best admissible point that counts as saturated
        (:func:`storagebench.stats.recommend_parameters`).
    method : str
        CI method (:data:`storagebench.stats.points.POINT_METHODS`; default ``auto``).

    Returns
    -------
    SweepSummary

    Raises
    ------
    SchemaError
        No completed run, a column is missing, or a provenance record is malformed.
    StatsError
        Fewer than 3 points, IOPS or latency <= 0 in a run (named), bad ``confidence``, ``fraction`` or
        ``method`` (from the functions called).
    """
    confidence = check_confidence(confidence)
    done = completed_runs(runs)
    for c in ("run_id", "numjobs", "iodepth", "iops", "lat_mean_ns"):
        if c not in done.columns:
            raise SchemaError(f"`runs` has no column {c!r}; a sweep summary needs run_id, numjobs, iodepth, iops "
                              "and lat_mean_ns")
    by = ["numjobs", "iodepth"]
    pr = per_run(done, latency="lat_mean_ns")
    est = point_estimates(pr, by, ["iops", "lat_mean_ns"], confidence=confidence, method=method)
    pts = est.table
    hist = histograms if histograms is not None and len(histograms) else None
    if hist is not None:
        pts = pts.merge(point_percentiles(hist, done, by, (50.0, 99.0)), on=by, how="left")
    rec = recommend_parameters(done, fraction=fraction, histograms=hist, confidence=confidence, method=method)

    def point(nj: int, qd: int) -> SweepPoint:
        r = pts[(pts["numjobs"] == nj) & (pts["iodepth"] == qd)].iloc[0]
        p99 = r.get("clat_p99_ns")
        return SweepPoint(int(nj), int(qd), int(r["n"]), float(r["iops"]), float(r["iops_ci_low"]),
                          float(r["iops_ci_high"]), float(r["lat_mean_ns"]) * 1e-6,
                          None if p99 is None or pd.isna(p99) else float(p99) * 1e-6,
                          float(r["lat_mean_ns_ci_low"]) * 1e-6, float(r["lat_mean_ns_ci_high"]) * 1e-6)

    top = pts.loc[pts["iops"].idxmax()]
    study = "/".join(sorted(map(str, done["study"].dropna().unique()))) if "study" in done.columns else ""
    return SweepSummary(study=study, n_runs=int(pr["run_id"].nunique()),
                        runs_per_point=(int(pts["n"].min()), int(pts["n"].max())), confidence=confidence,
                        peak=point(top["numjobs"], top["iodepth"]), recommended=point(rec.numjobs, rec.iodepth),
                        recommendation=rec, cache_caveat=_cache_caveat(done, pts, provenance), points=pts,
                        estimates=est, plateau=point(*rec.plateau) if rec.plateau else None,
                        steadystate=steadystate_sentence(done))


def half_revolution_ms(rpm: float) -> float:
    """Mean rotational latency of a disk, ms: half a revolution, ``30,000 / rpm`` (4.17 ms at 7,200 rpm).

    Raises
    ------
    StatsError
        ``rpm`` is not a positive number.
    """
    if isinstance(rpm, bool) or not isinstance(rpm, (int, float)) or not rpm > 0:
        raise StatsError(f"rpm must be a positive number of revolutions per minute, got {rpm!r}")
    return 30_000.0 / float(rpm)


def _cell_words(table: pd.DataFrame, i: Any, lat_ms: pd.Series) -> str:
    """One published cell in words: size, %sequential, %read, IOPS and response time."""
    r = table.loc[i]
    parts = []
    if "bs_bytes" in table.columns:
        parts.append(f"{int(r['bs_bytes']) // 1024} KiB")
    if "random_pct" in table.columns:
        parts.append(f"{100 - float(r['random_pct']):g}% sequential")
    if "rwmixread_pct" in table.columns:
        parts.append(f"{float(r['rwmixread_pct']):g}% read")
    at = f"{fmt_number(lat_ms[i])} ms" if lat_ms[i] > 0 else "a response time printed as 0 ms"
    return " ".join(parts) + f": {fmt_number(r['iops'])} IOPS at {at}"


def _stream_mib_s(table: pd.DataFrame, rows: pd.Index) -> pd.Series:
    """Bandwidth of ``rows`` in MiB/s: ``bw_bytes_per_s``, else IOPS x ``bs_bytes``; empty when neither."""
    if "bw_bytes_per_s" in table.columns:
        return table.loc[rows, "bw_bytes_per_s"].astype(float) / 2**20
    if "bs_bytes" in table.columns:
        return table.loc[rows, "iops"].astype(float) * table.loc[rows, "bs_bytes"].astype(float) / 2**20
    return pd.Series(dtype=float)


def _claim_verdict(table: pd.DataFrame, cached: pd.Series, stream: pd.Series, *, cache_ms: float, rpm: float) -> str:
    """The verdict on a claim that a cache served the fast cells: random cells by the rule, sequential ones not."""
    lat_ms, half, parts = table["lat_mean_ns"].astype(float) * 1e-6, half_revolution_ms(rpm), []
    if cached.any():
        hits = [_cell_words(table, i, lat_ms) for i in table.index[cached]]
        parts.append(f"holds for {len(hits)} random-I/O cell(s) that respond in under {fmt_number(cache_ms)} ms "
                     f"({'; '.join(hits)}), faster than any mechanical access (half a revolution alone is "
                     f"{fmt_number(half)} ms at {rpm:,.0f} rpm), so a buffer or cache served them; the table cannot "
                     "say which one (the drive's read-ahead, a controller or the host)")
    if stream.any():
        hits = [_cell_words(table, i, lat_ms) for i in table.index[stream]]
        mib = _stream_mib_s(table, table.index[stream])
        rate = (f" at {fmt_number(mib.min())} to {fmt_number(mib.max())} MiB/s" if len(mib) > 1 and mib.min() != mib.max()
                else (f" at {fmt_number(mib.iloc[0])} MiB/s" if len(mib) else ""))
        parts.append(f"is not shown for the {len(hits)} sequential cell(s) that respond in under "
                     f"{fmt_number(cache_ms)} ms ({'; '.join(hits)}): they stream{rate}, a rate a rotating medium "
                     "delivers by itself, since sequential I/O reads consecutive sectors without a seek per I/O; "
                     "the table cannot tell a cache from the platters' stream, so it does not show one")
    if not parts:
        return f"is not supported: no cell responds in under {fmt_number(cache_ms)} ms"
    return "; it ".join(parts)


def rotational_findings(table: pd.DataFrame, *, rpm: float, device: str, claim: str = "",
                        cache_ms: float = CACHE_LATENCY_MS,
                        unit_of_replication: str = "published cells, one value each (no repetitions)",
                        title: str = "", provenance: str = "") -> tuple[Findings, pd.Series]:
    """What a rotating disk's IOPS table says: the IOPS it delivers from its platters, and which cells are set apart.

    A cell that responds in under ``cache_ms`` (1 ms) on average is set apart from the platters' IOPS, as
    one of two kinds. **Random** I/O that fast is faster than any mechanical access (a random I/O waits
    half a revolution on average, :func:`half_revolution_ms`, 4.2 ms at 7,200 rpm, plus a seek): a buffer
    or cache served it, by the one rule :func:`storagebench.stats.regime.cache_caveats`. **Sequential**
    I/O that fast is the medium streaming (consecutive sectors, no seek per I/O): not evidence of a cache,
    and not an access rate either. The range of IOPS over the other cells answers "how many IOPS does it
    do".

    Parameters
    ----------
    table : pandas.DataFrame
        One row per workload: ``iops`` (1/s), ``lat_mean_ns`` (ns), ``rw`` and/or ``random_pct`` (%, random
        or sequential: :func:`storagebench.stats.regime.is_random`); optionally ``bs_bytes``,
        ``bw_bytes_per_s``, ``rwmixread_pct`` to name the cells set apart.
    rpm : float
        Spindle speed (7,200 for the seed 001 drive), for the sentence.
    cache_ms : float
        Response time (ms) below which a cell is set apart (default :data:`CACHE_LATENCY_MS`).
    device : str
        The device in words, for the sentence ("a Dell/WD 1 TB 7,200 rpm SATA HDD").
    claim : str, optional
        A claim that a cache served the fast cells, to give a verdict on (from the source's metadata).
    unit_of_replication : str
        What one row is.
    title, provenance : str
        As in :class:`~storagebench.findings.Findings`.

    Returns
    -------
    (Findings, pandas.Series of bool)
        The findings, and per row whether it was set apart (under ``cache_ms``: a cache-served random
        cell or a sequential stream; the findings say which).

    Raises
    ------
    SchemaError
        ``iops`` or ``lat_mean_ns`` is missing, or no row is left for the platters.
    StatsError
        Neither ``rw`` nor ``random_pct``: random and sequential cannot be told apart.
    """
    for c in ("iops", "lat_mean_ns"):
        if c not in table.columns:
            raise SchemaError(f"`table` has no column {c!r}; it has {sorted(map(str, table.columns))}")
    half_revolution_ms(rpm)  # refuses a bad rpm before anything is read
    lat_ms = table["lat_mean_ns"].astype(float) * 1e-6
    rule = cache_caveats(table, DeviceInfo(rotational=True), latency="lat_mean_ns", floor_ns=cache_ms * 1e6)
    cached = pd.Series(rule["cache_not_medium"].to_numpy(bool), index=table.index)
    stream = (lat_ms < cache_ms) & ~pd.Series(rule["random"].to_numpy(bool), index=table.index)
    apart = cached | stream
    platters = table.loc[~apart, "iops"].astype(float)
    if platters.empty:
        raise SchemaError(f"every row of `table` responds in less than {cache_ms:g} ms: nothing came from the platters")
    n = len(platters)
    more = []
    if cached.any():
        more.append(f"{int(cached.sum())} random-I/O cell(s) were served from a cache")
    if stream.any():
        mib = _stream_mib_s(table, table.index[stream])
        rate = f" at {fmt_number(mib.min())} to {fmt_number(mib.max())} MiB/s" if len(mib) else ""
        more.append(f"{int(stream.sum())} sequential cell(s) stream{rate} (the platters' transfer rate, no seek "
                    "per I/O: not an access rate, and no sign of a cache)")
    items = [Finding(
        f"{device[0].upper() + device[1:]} does {fmt_number(platters.min())} to {fmt_number(platters.max())} IOPS "
        f"(median {fmt_number(platters.median())}) over the {n} workloads that respond in "
        f"{fmt_number(cache_ms)} ms or more"
        + (f"; {' and '.join(more)}." if more else "."),
        estimate=float(platters.median()), n=n, unit_of_replication=unit_of_replication, unit="IOPS",
        method=f"range and median of the table's IOPS over the cells that respond in {fmt_number(cache_ms)} ms or "
               "more; no CI: one value per cell", key="platter_iops")]
    if claim:
        verdict = _claim_verdict(table, cached, stream, cache_ms=cache_ms, rpm=rpm)
        items.append(Finding(f"The article's claim \u201c{claim.strip()}\u201d {verdict}.", n=len(table),
                             unit_of_replication=unit_of_replication, key="claim_cache",
                             method=f"stats.cache_caveats: random I/O under {fmt_number(cache_ms)} ms, below any "
                                    "mechanical access time (rotational latency 30,000 / rpm ms, seek >= ~1 ms), "
                                    "came from a cache; sequential I/O streams from the medium without a seek"))
    return Findings(tuple(items), title=title, provenance=provenance), apart
