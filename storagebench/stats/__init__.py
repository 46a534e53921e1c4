"""Statistics a reviewer would accept: every estimate with its CI, its n and its method.

The public names are this package's ``__all__``: the functions a write-up calls, at most 40 (a test keeps
the count). Everything else -- result types (:class:`~storagebench.stats.comparison.ComparisonTable`,
:class:`~storagebench.stats.drift.Drift` ...), constants and the less common helpers -- stays reachable from
its module (``storagebench.stats.equivalence.tost_sample_size``). The modules declare no ``__all__`` of
their own, and none is hidden by a function of the same name (``stats.compare`` is the function,
``stats.comparison`` its module).

Modules, one per concept:

``ratio``
    The estimand of every comparison: :func:`ratio_ci` gives the ratio other/baseline, its CI and the
    p-value of ratio = 1 from one statistic (default: ratio of geometric means, Welch / paired t on the
    log scale; Fieller's ratio of arithmetic means only by name), :func:`ratio_tost`, :func:`hedges_g`.
``comparison``
    :func:`compare` two (or more) levels of a factor with a baseline, per group: the experimental unit
    (``unit``, ``pair_on``), keys that are not replicates (``blocks``, ``factors``), the estimand, an
    optional BCa CI (n >= 10), rank tests, Holm/BH adjustment over the family, optional TOST;
    ``comparison.adjust_family``: one family per question of a write-up, over every table answering it.
``verdicts``
    :func:`verdict`: plain-words verdicts naming estimand, CI, n, experimental unit, family and alpha;
    :func:`verdict_findings` (a sentence per row), :func:`verdict_summary` (a sentence per table or per
    level, groups sorted by verdict), :func:`methods_table` (what each comparison did);
    :func:`interaction`: does a factor's effect depend on a second factor (ratio of ratios, paired on blocks).
``claims``
    A source's claims checked: :func:`claim_checks` reads how each is tested from its metadata,
    :func:`claim_verdicts` (ratio claims: holds / contradicted / not shown, over any, every or the average
    of the groups), :func:`parameter_claim_verdicts` (a claimed numjobs x iodepth against the sweep's
    plateau), :func:`claim_findings` (the sentences).
``agreement``
    :func:`bland_altman`: bias and limits of agreement of two methods, with CIs (Bland & Altman 1986).
``crosstool``
    :func:`cross_tool`: two load generators (DiskSPD, Iometer, fio) on the same configurations:
    matched pairs, ``compare`` with the tool as the factor, Bland-Altman per group;
    :func:`cross_tool_table` / :func:`cross_tool_findings` (verdicts and sentences for a write-up),
    :func:`tool_littles_law` (does each tool's latency fit its own IOPS?).
``equivalence``
    :func:`tost` ("within 1%"), :func:`tost_plan` / :func:`tost_sample_size` (planned at the CV's upper
    confidence bound, :func:`cv_upper_bound`, :func:`pilot_cv`), :func:`tost_power`, :func:`mean_ci`.
``variance``
    :func:`variance_components`: Kalibera & Jones (2013) per-level variance and optimal repetitions.
``models``
    :func:`fit_model` (OLS + type-II ANOVA with interactions), :func:`fit_mixed` (MixedLM, repeated measures).
``steady``
    :func:`steady_state` (SNIA PTS window criteria over rounds), :func:`steady_state_timeseries` (the same
    criteria on a log's samples: within-run stability when the rounds are one-second samples of one run), :func:`fio_steadystate`.
``drift``
    :func:`drift_check`: a common slope of the residuals in run order with its CI, and a runs test, on the
    experimental unit (the set-up when runs share one).
``regime``
    :func:`cache_caveats`: random-I/O runs whose latency the device class cannot deliver ("cache, not medium").
``points``
    :func:`point_estimates` / :func:`point_means` (per sweep point the geometric mean over its runs with a
    log-scale CI from its own runs, or with the run-to-run SD pooled over the grid by name; the equal-spread check,
    :class:`SpreadCheck`), :func:`point_percentiles` (merged json+ bins); :func:`per_point` (the same in
    the display units of :data:`storagebench.tables.METRICS`, what the figures draw) and :func:`point_table`
    (a table of it for a reader).
``sweep``
    :func:`sweep_summary`: peak, recommended point (with mean and p99), Kneedle knees, cache caveat and n per
    point of a numjobs x iodepth sweep, as a typed result whose :meth:`SweepSummary.findings` the CLI
    prints and the report shows.
``saturation``
    :func:`littles_law` (with :func:`littles_law_table` and :func:`littles_law_summary` for a write-up),
    :func:`find_knee` (Kneedle), :func:`recommend_parameters`, :func:`qos_max_load`,
    :func:`normalize`, :func:`improvement_pct`.
"""

from __future__ import annotations

from .agreement import bland_altman
from .claims import claim_checks, claim_findings, claim_verdicts, parameter_claim_verdicts
from .comparison import compare
from .crosstool import cross_tool, cross_tool_findings, cross_tool_table, tool_littles_law
from .drift import drift_check
from .equivalence import mean_ci, pilot_cv, tost, tost_plan
from .models import fit_mixed, fit_model
from .points import per_point, point_estimates, point_means, point_percentiles, point_table
from .ratio import ratio_ci
from .regime import cache_caveats
from .saturation import (
    littles_law,
    littles_law_summary,
    littles_law_table,
    per_run,
    qos_max_load,
    recommend_parameters,
)
from .steady import steady_state, steady_state_timeseries
from .sweep import rotational_findings, sweep_summary
from .variance import variance_components
from .verdicts import interaction, methods_table, verdict, verdict_findings, verdict_summary

__all__ = [
    # comparisons and their verdicts
    "compare", "ratio_ci", "verdict", "verdict_findings", "verdict_summary", "interaction", "methods_table",
    # two tools, two methods, a source's claims
    "cross_tool", "cross_tool_table", "cross_tool_findings", "tool_littles_law", "bland_altman",
    "claim_checks", "claim_verdicts", "claim_findings", "parameter_claim_verdicts",
    # equivalence and planning
    "tost", "tost_plan", "pilot_cv", "mean_ci",
    # variance, models, steady state, drift, the device's regime
    "variance_components", "fit_model", "fit_mixed", "steady_state", "steady_state_timeseries", "drift_check",
    "cache_caveats",
    # a sweep: its points, its summary, its saturation
    "per_run", "point_estimates", "point_means", "point_percentiles", "per_point", "point_table",
    "sweep_summary", "rotational_findings", "littles_law", "littles_law_table", "littles_law_summary",
    "recommend_parameters", "qos_max_load",
]
