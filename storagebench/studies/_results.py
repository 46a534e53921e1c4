"""The result types of a testbed study: its loaded tables (:class:`StudyData`) and its result
(:class:`TestbedResult`). Private: study authors import them from :mod:`storagebench.studies`."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import stats
from .._study import Study
from ..findings import Finding, Findings, fmt_number
from ..records import TestbedRecord
from ..tables import metric_words, table

#: Columns of :meth:`TestbedResult.findings_frame` (``analysis/findings.csv``).
FINDINGS_COLUMNS = ("kind", "sentence", "estimate", "ci_low", "ci_high", "confidence", "n", "unit_of_replication",
                    "unit", "method")


# ---------------------------------------------------------------------------------------------
# result types


@dataclass(frozen=True)
class KnownAnswerCheck:
    """One known answer of a known-answer study: the truth its caps give, what the whole chain estimated.

    Attributes
    ----------
    name : str
        What is checked (``"width 4 / width 1 IOPS"``, ``"ext4 / raw IOPS, 4k"`` ...).
    truth : float
        The value the caps give by :attr:`rule` (a ratio, or IOPS).
    estimate : float
        The study's estimate (the same scale as ``truth``).
    ci_low, ci_high : float
        Its confidence interval at the study's ``confidence`` (NaN when not estimable).
    covered : bool
        ``ci_low <= truth <= ci_high``.
    rule : str
        How the truth follows from the caps, in words.
    tost_margin : float or None
        Where equivalence is shown: the margin of the TOST test, a fraction (0.01 = within 1%).
    tost_p : float or None
        Its p-value (the larger of the two one-sided p-values); equivalence shown when ``< 1 - confidence``.
    overhead : float or None
        A measured overhead the truth depends on (a fraction), when there is one: stated, never hidden in
        :attr:`truth`.
    resolution : float or None
        The counting resolution of the estimate, when given: a half-width on the log scale
        (:func:`count_resolution`: the I/Os at the edges of fio's measured windows). The stated interval
        (:attr:`ci_low`, :attr:`ci_high`) is never narrower than ``estimate x exp(+-resolution)``.
    """

    name: str
    truth: float
    estimate: float
    ci_low: float
    ci_high: float
    covered: bool
    rule: str
    tost_margin: float | None = None
    tost_p: float | None = None
    overhead: float | None = None
    resolution: float | None = None

    @classmethod
    def of(cls, name: str, truth: float, estimate: float, ci: tuple[float, float], rule: str,
           **extra: Any) -> KnownAnswerCheck:
        """A check with :attr:`covered` computed from the stated interval: ``covered`` is true exactly when
        ``ci_low <= truth <= ci_high`` (``False`` when the interval is not finite).

        With ``resolution=r`` (a log half-width, :func:`count_resolution`) the interval is widened to at least
        ``estimate x exp(+-r)``: a CI narrower than what one counted I/O per run moves the estimate is not
        honest, and a CI of zero width (set-ups that counted exactly the same I/Os: no spread, the t CI
        degenerate) is then the resolution interval itself; the rule text says so. Without ``resolution`` the
        CI is stated as given.
        """
        lo, hi = float(ci[0]), float(ci[1])
        r = extra.get("resolution")
        if r is not None and math.isfinite(float(r)) and float(r) > 0 and math.isfinite(float(estimate)):
            r = float(r)
            extra["resolution"] = r
            lo = float(estimate) * math.exp(-r) if not math.isfinite(lo) else min(lo, float(estimate) * math.exp(-r))
            hi = float(estimate) * math.exp(r) if not math.isfinite(hi) else max(hi, float(estimate) * math.exp(r))
            rule = (f"{rule}; the interval is never narrower than the counting resolution, a factor "
                    f"exp(+-{r:.2g}) on the estimate (fio counts whole I/Os in its window, and a run's outstanding "
                    f"I/Os at the window's edges may fall either side: per arm the largest outstanding I/Os / "
                    f"counted I/Os of a run, the two arms added)")
        covered = bool(math.isfinite(lo) and math.isfinite(hi) and lo <= truth <= hi)
        return cls(name=name, truth=float(truth), estimate=float(estimate), ci_low=lo, ci_high=hi,
                   covered=covered, rule=rule, **extra)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (``calibration.json``'s ``checks[]``)."""
        return dataclasses.asdict(self)


def count_resolution(per_run: pd.DataFrame, factor: str, arms: tuple[Any, Any], by: Mapping[str, Any] | None = None,
                     together: Sequence[str] = ()) -> float:
    """The counting resolution of a ratio of two arms' IOPS, a log half-width: the sum over the two arms of the
    largest ``outstanding_ios / total_ios`` of a run (or of a group of concurrent runs, ``together``).

    fio counts whole I/Os in its measured window, and the I/Os in flight at the window's edges (up to the
    run's outstanding I/Os, numjobs x iodepth) can fall either side of it: I/Os queued when the ramp ends that
    complete inside the window, I/Os still queued when the runtime ends (docs/testbed.md, "End of a run").
    So a run's count is known to +-outstanding I/Os (+-1 at iodepth 1), its log IOPS to
    ``outstanding_ios / total_ios``; an arm's geometric mean over runs and set-ups to the largest such step;
    the log of the ratio to the sum over the two arms.

    Parameters
    ----------
    per_run : pandas.DataFrame
        :attr:`StudyData.per_run` (columns ``factor``, ``total_ios``, ``outstanding_ios`` and those of ``by``).
    factor : str
        The arm factor (``device`` ...).
    arms : tuple
        ``(other, baseline)`` levels of ``factor``.
    by : mapping, optional
        The cell (column -> level) both arms share, e.g. ``{"load": "L2"}``.
    together : sequence of str, optional
        Columns whose groups are added up before the ratio (``("setup", "repetition")`` for the total of
        concurrent workloads): their counts and outstanding I/Os are summed per group.

    Returns
    -------
    float
        The log half-width; NaN when a column is missing or an arm has no run with I/Os.
    """
    need = {factor, "total_ios", "outstanding_ios", *(by or {}), *together}
    if not need <= set(per_run.columns):
        return math.nan
    sel = pd.Series(True, index=per_run.index)
    for col, level in (by or {}).items():
        sel &= per_run[col].astype(str) == str(level)
    out = 0.0
    for arm in arms:
        g = per_run.loc[sel & (per_run[factor].astype(str) == str(arm)), ["total_ios", "outstanding_ios", *together]]
        g = g.assign(total_ios=pd.to_numeric(g["total_ios"], errors="coerce"),
                     outstanding_ios=pd.to_numeric(g["outstanding_ios"], errors="coerce").clip(lower=1))
        if together:
            g = g.groupby(list(together), sort=True, dropna=False)[["total_ios", "outstanding_ios"]].sum()
        g = g[g["total_ios"] > 0]
        if g.empty:
            return math.nan
        out += float((g["outstanding_ios"] / g["total_ios"]).max())
    return out


def bucket_shares(ends_s: Sequence[float], runtimes_s: Sequence[float], ramp_s: float) -> np.ndarray:
    """Each concurrent run's share of one token bucket over its own measured window, from when the windows ended.

    Runs that share one capped device split its tokens evenly among those issuing I/O at the time (a token
    bucket serves one queue in order, docs/testbed.md). Run ``j`` issues I/O over ``[e_j - T_j - ramp, e_j]``
    (its ramp, then its measured window ``[e_j - T_j, e_j]``); with ``n(t)`` the runs issuing I/O at ``t``, its
    IOPS over its window is the cap times ``(1 / T_j) * integral of 1 / n(t)`` over the window. Windows that
    line up give every run ``1 / k``; fio processes whose windows are offset (fio starts a process's jobs in
    steps of 100 ms, ``backend.c`` ``run_threads``) give the run that ends last more: its last ``d`` runs alone.

    Parameters
    ----------
    ends_s : sequence of float
        When each run's measured window ended, s on one clock (fio's ``timestamp_ms``, the ``reported_at``
        column: the same clean-up after the window in every run cancels).
    runtimes_s : sequence of float
        Each run's measured runtime ``T_j``, s (fio's ``runtime``).
    ramp_s : float
        The ``ramp_time`` before every window, s.

    Returns
    -------
    numpy.ndarray
        One share per run, a fraction of the cap (``1 / k`` for ``k`` aligned windows).

    Raises
    ------
    ValueError
        Lengths differ, or a time is not finite and positive (runtime) / finite (end).
    """
    e = np.asarray(ends_s, dtype=float)
    t = np.asarray(runtimes_s, dtype=float)
    if e.shape != t.shape or e.ndim != 1 or not (np.isfinite(e).all() and np.isfinite(t).all() and (t > 0).all()
                                                 and math.isfinite(ramp_s) and ramp_s >= 0):
        raise ValueError(f"bucket_shares needs one finite end and one positive runtime per run and a ramp >= 0, "
                         f"got ends {e.tolist()}, runtimes {t.tolist()}, ramp {ramp_s}")
    lo = e - t - ramp_s  # each run issues I/O from the start of its ramp to the end of its window
    edges = np.unique(np.concatenate([lo, e - t, e]))
    mid = (edges[:-1] + edges[1:]) / 2
    width = np.diff(edges)
    issuing = ((lo[:, None] <= mid) & (mid < e[:, None])).sum(axis=0)
    out = np.empty(len(e))
    for j in range(len(e)):
        inside = (mid >= e[j] - t[j]) & (mid < e[j])
        out[j] = float((width[inside] / issuing[inside]).sum() / t[j])
    return out


@dataclass(frozen=True)
class StudyData:
    """A testbed study directory, read once: tables, per-run checks and set-up records.

    Attributes
    ----------
    name : str
        The study module's name (``rdm_vs_vmfs`` ...).
    study_dir : Path
    study : Study
        The spec as run (``study.yaml``).
    runs, histograms, timeseries : pandas.DataFrame
        The tidy tables (ingest).
    per_run : pandas.DataFrame
        One row per run (:func:`_run_totals`): the factors, ``run_order``, ``repetition``, ``setup`` and
        ``block`` of the design, the metrics (IOPS and bandwidth summed over jobs and directions,
        latencies, ``clat_p90_ns``/``clat_p99_ns`` from the run's merged json+ bins), ``outstanding_ios``
        (numjobs x iodepth), ``build_id`` (the testbed build it ran on), ``steady`` (within-run
        stability: the SNIA PTS criteria on its one-second IOPS samples, not PTS rounds; True/False; None
        without a log), ``steady_rounds``, ``steady_note``,
        ``target_device`` and ``target_rotational`` (the block device under the run's target, from
        provenance) and ``cache_not_medium``/``cache_caveat`` (:func:`storagebench.stats.cache_caveats`).
    set_ups : tuple of TestbedRecord
        Every build of the testbed (``testbed.json``), oldest first.
    """

    name: str
    study_dir: Path
    study: Study
    runs: pd.DataFrame
    histograms: pd.DataFrame
    timeseries: pd.DataFrame
    per_run: pd.DataFrame
    set_ups: tuple[TestbedRecord, ...] = ()

    @property
    def factors(self) -> list[str]:
        """The study's factor columns (``target`` excluded)."""
        return [f for f in self.study.factors if f != "target" and f in self.per_run.columns]

    @property
    def setups(self) -> int:
        """Set-ups per arm in the spec; under adaptive set-ups (``precision:``), the most any arm got (at least 2:
        the set-up stays the unit however few were measured)."""
        if self.study.adaptive_setups and "setup" in self.per_run.columns and len(self.per_run):
            return max(2, int(self.per_run["setup"].max()))
        return self.study.setups

    @property
    def paired(self) -> bool:
        """Arms are compared within blocks (``blocks: true``)."""
        return bool(self.study.blocks) and "block" in self.per_run.columns

    def design(self) -> dict[str, Any]:
        """``unit``/``pair_on``/``blocks`` for :func:`storagebench.stats.compare`."""
        out: dict[str, Any] = {}
        if self.setups > 1:
            out["unit"] = "setup"
        if self.paired:
            out["pair_on"] = "block"
            out["blocks"] = ["block"]
        return out

    def unit_words(self) -> str:
        """The experimental unit of the arm comparisons, in words (the pairing is in the design's words)."""
        arms = "/".join(self.study.setup_factors) or "whole"
        if self.setups > 1:
            count = (f"{self.study.precision['min_repetitions']} to {self.study.precision['max_repetitions']} per arm, "
                     "as many as the adaptive rule (precision:) asked" if self.study.adaptive_setups
                     else f"{self.setups} per arm")
            return (f"set-up (the {arms} testbed built afresh: new loop files, mkfs, file placement, "
                    f"preconditioning; {count}"
                    + (", each block holding one set-up of every arm in random order" if self.paired else "") + ")")
        return ("run (a fresh fio process on the one build of the testbed: the build-to-build variation is not "
                "sampled)")


@dataclass(frozen=True)
class TestbedResult:
    """What :func:`storagebench.studies.analyse` returns for a testbed study.

    Attributes
    ----------
    name, title, question : str
        The study, its title and the question it answers.
    findings : tuple of storagebench.findings.Finding
        Plain sentences, each with its estimate, CI, n, unit of replication and method, keyed
        ``<kind>:<position>`` (``verdict:0``, ``drift:5``; :attr:`~storagebench.findings.Finding.kind`).
    verdicts : pandas.DataFrame
        The verdict table: one row per comparison (:func:`storagebench.stats.verdict` columns plus the
        study's keys, ``runs``, ``runs_not_steady`` and ``runs_cache_not_medium``).
    tables : mapping of str to DataFrame
        Further tables (``per_run``, ``units``, study-specific ones).
    figures : mapping of str to callable
        Figure name -> function returning a :class:`matplotlib.figure.Figure`.
    captions : mapping of str to str
        Figure name -> its caption, generated from the results (what is drawn, n, the CI level).
    confidence : float
        Level of every CI; ``alpha = 1 - confidence`` for every test.
    unit : str
        The experimental unit in words.
    drift : storagebench.stats.drift.Drift
    runs, runs_not_steady, runs_cache_not_medium : int
        Runs analysed, runs not stable within the run (PTS criteria on one-second samples; or too short to
        test), runs
        with a "cache, not medium" caveat.
    caveats : tuple of str
    checks : tuple of KnownAnswerCheck
        The known answers of a known-answer study (:func:`storagebench.studies.known_answer_names`); empty
        for the others.
    """

    __test__ = False  # not a pytest test class

    name: str
    title: str
    question: str
    findings: tuple[Finding, ...]
    verdicts: pd.DataFrame
    tables: Mapping[str, pd.DataFrame]
    figures: Mapping[str, Callable[[], Any]]
    confidence: float
    unit: str
    drift: stats.drift.Drift | None
    runs: int
    runs_not_steady: int
    runs_cache_not_medium: int
    caveats: tuple[str, ...] = ()
    captions: Mapping[str, str] = dataclasses.field(default_factory=dict)
    checks: tuple[KnownAnswerCheck, ...] = ()

    def checks_frame(self) -> pd.DataFrame:
        """One row per known-answer check (:class:`KnownAnswerCheck`'s fields; no rows for an ordinary study)."""
        cols = [f.name for f in dataclasses.fields(KnownAnswerCheck)]
        return pd.DataFrame([c.to_dict() for c in self.checks], columns=cols)

    def checks_table(self, digits: int = 4):
        """The known-answer checks for a reader (:func:`storagebench.tables.table`): what is checked, the truth, the
        estimate with its CI in one column, whether the CI covers the truth, the TOST margin and p where shown, a
        measured overhead where there is one, and the rule of the truth.

        Returns
        -------
        pandas.io.formats.style.Styler
        """
        frame = self.checks_frame()
        keep = [c for c in ("tost_margin", "tost_p", "overhead") if frame[c].notna().any()]
        frame = frame[["name", "truth", "estimate", "ci_low", "ci_high", "covered", *keep, "rule"]]
        frame = frame.astype({c: float for c in keep})
        if "overhead" in keep:  # a fraction of the truth's rule (1 - efficiency, a window offset): as a percentage
            frame["overhead"] = [f"{100 * v:+.2f}%" if v == v else "" for v in frame["overhead"]]
        return table(frame, digits=digits, confidence=self.confidence,
                     labels={"name": "check", "covered": "CI covers the truth", "tost_margin": "TOST margin",
                             "tost_p": "TOST p", "overhead": "measured overhead", "rule": "rule of the truth"})

    @property
    def alpha(self) -> float:
        """``1 - confidence``."""
        return 1.0 - self.confidence

    @property
    def text(self) -> str:
        """The findings as Markdown bullets (every number generated from the statistics)."""
        return "\n".join(f"- {f.sentence}" for f in self.findings)

    @property
    def methods_text(self) -> str:
        """Markdown: the experimental unit, then each distinct method once, with the kinds of finding it gave."""
        seen: dict[str, list[str]] = {}
        for f in self.findings:
            if f.method:
                seen.setdefault(f.method, [])
                if f.kind not in seen[f.method]:
                    seen[f.method].append(f.kind)
        lines = [f"- Experimental unit of the comparisons: {self.unit}."]
        lines += [f"- *{', '.join(kinds)}*: {method}" for method, kinds in seen.items()]
        return "\n".join(lines)

    def verdict_summary(self, digits: int = 3) -> pd.DataFrame:
        """The verdict table in short: the study's keys, ``level``, ``metric``, ``ratio [CI]`` (at
        :attr:`confidence`), ``n``, ``p_adjusted``, ``verdict`` and the flagged-run counts."""
        v = self.verdicts
        keys = list(v.columns[:list(v.columns).index("factor")]) if "factor" in v.columns else []

        def ci(r) -> str:
            if not (np.isfinite(r["ci_low"]) and np.isfinite(r["ci_high"])):
                return f"{r['ratio']:.{digits}g} [CI not estimable]"
            return f"{r['ratio']:.{digits}g} [{r['ci_low']:.{digits}g}, {r['ci_high']:.{digits}g}]"

        out = v[keys + ["level", "metric"]].copy()
        out[f"ratio [{conf_text(self.confidence)} CI]"] = [ci(r) for _, r in v.iterrows()]
        for c in ("n", "p_adjusted", "verdict", "runs_not_steady", "runs_cache_not_medium"):
            out[c] = v[c]
        out["p_adjusted"] = out["p_adjusted"].map(lambda p: f"{p:.2g}" if np.isfinite(p) else "n/a")
        return out.reset_index(drop=True)

    def verdict_table(self, digits: int = 3):
        """The verdict table for a reader (:func:`storagebench.tables.table`): the study's keys in their display
        units, ``level``, the metric in words, the ratio with its CI in one column, ``n``, ``p_adjusted``,
        ``verdict`` and the flagged-run counts; no index column.

        Returns
        -------
        pandas.io.formats.style.Styler
        """

        v = self.verdicts
        keys = list(v.columns[:list(v.columns).index("factor")]) if "factor" in v.columns else []
        cols = [*keys, "level", "metric", "ratio", "ci_low", "ci_high", "n", "p_adjusted", "verdict",
                "runs_not_steady", "runs_cache_not_medium"]
        frame = v[[c for c in cols if c in v.columns]].assign(metric=v["metric"].map(metric_words))
        paired = len(v) > 0 and "design" in v and str(v["design"].iloc[0]).startswith("paired")
        factor = str(v["factor"].iloc[0]) if len(v) and "factor" in v else "level"
        return table(frame, digits=digits, confidence=self.confidence,
                     labels={"level": factor, "n": "n (blocks)" if paired else "n (per arm)"})

    def report_findings(self) -> Findings:
        """The findings as :class:`storagebench.findings.Findings` (titled with the question), which a
        write-up displays first."""
        return Findings(self.findings, title=self.question)

    def table_for_reader(self, key: str) -> tuple[pd.DataFrame, str]:
        """A table of :attr:`tables` as a write-up shows it, and a line saying what was left out.

        ``per_run`` (68 columns: every field of the run-level table) is cut to the run's place in the design
        (the factors, set-up, block, run order), what it measured (IOPS, bandwidth, mean latency, completion
        latency percentiles p50/p99/p99.9) and its checks (steady state, cache caveat); columns with one value
        in every row are named once in the line instead. Other tables are shown whole. The full table is
        :attr:`tables` (``analysis/<key>.csv`` of a study run by ``storagebench testbed``).

        Returns
        -------
        (pandas.DataFrame, str)
            The table, and the line (empty when nothing was left out; why, for a table without rows).
        """
        frame = self.tables[key]
        if frame.empty:  # say why instead of showing an empty table
            why = {"variance": "variance components need at least 2 set-ups per arm and 2 runs per set-up "
                               "(setup_variance)"}.get(key, "nothing to show with these runs")
            return frame, f"no rows: {why}."
        if key != "per_run":
            return frame, ""
        factors = [c for c in self.verdicts.columns[:list(self.verdicts.columns).index("factor")]] \
            if "factor" in self.verdicts.columns else []
        arm = [str(self.verdicts["factor"].iloc[0])] if "factor" in self.verdicts.columns and len(self.verdicts) else []
        wanted = [*arm, *factors, "setup", "block", "run_order", "run_id", "outstanding_ios", "iops", "bw_bytes_per_s",
                  "lat_mean_ns", "clat_p50_ns", "clat_p99_ns", "clat_p99_9_ns", "steady", "steady_rounds",
                  "cache_not_medium"]
        cols = [c for c in dict.fromkeys(wanted) if c in frame.columns]
        constant = [c for c in cols if c not in (*arm, *factors) and frame[c].astype(str).nunique() == 1]
        shown = frame[[c for c in cols if c not in constant]]
        def cell(v) -> str:
            if isinstance(v, (bool, np.bool_)):
                return "yes" if v else "no"
            return fmt_number(v) if isinstance(v, (int, float, np.number)) else str(v)

        same = "; ".join(f"{c.replace('_', ' ')} {cell(frame[c].iloc[0])}" for c in constant)
        note = (f"{len(shown.columns)} of its {len(frame.columns)} columns"
                + (f"; the same in every run: {same}" if same else "")
                + f". Every column: analysis/{key}.csv of the study directory (storagebench testbed writes it).")
        return shown, note

    def findings_frame(self) -> pd.DataFrame:
        """One row per finding (``analysis/findings.csv``): ``kind, sentence, estimate, ci_low, ci_high,
        confidence, n, unit_of_replication, unit, method`` (:class:`storagebench.findings.Finding`'s fields;
        NaN where a finding has no such number). The experimental unit in full is :attr:`unit`."""
        return pd.DataFrame([
            {"kind": f.kind, "sentence": f.sentence, "estimate": f.estimate,
             "ci_low": f.ci[0] if f.ci else None, "ci_high": f.ci[1] if f.ci else None, "confidence": f.confidence,
             "n": f.n, "unit_of_replication": f.unit_of_replication, "unit": f.unit, "method": f.method}
            for f in self.findings], columns=FINDINGS_COLUMNS).astype(
                {"estimate": float, "ci_low": float, "ci_high": float, "confidence": float, "n": "Int64"})


def conf_text(confidence: float) -> str:
    """A confidence level as text with the digits it needs: ``95%``, ``99.5%``."""
    return f"{confidence:.{max(0, -int(math.floor(math.log10(1 - confidence))) - 2)}%}"
