"""Statistics a reviewer would accept: every estimate with its CI, its n and its method.

The public names are this package's ``__all__``, imported below from its modules; the modules declare
no ``__all__`` of their own (one list of the surface, not two).

Modules, one per concept:

``ratio``
    The estimand of every comparison: :func:`ratio_ci` gives the ratio other/baseline, its CI and the
    p-value of ratio = 1 from one statistic (default: ratio of geometric means, Welch / paired t on the
    log scale; Fieller's ratio of arithmetic means only by name), :func:`ratio_tost`, :func:`hedges_g`.
``compare``
    :func:`compare` two (or more) levels of a factor with a baseline, per group: the experimental unit
    (``unit``, ``pair_on``), keys that are not replicates (``blocks``, ``factors``), the estimand, an
    optional BCa CI (n >= 10), rank tests, Holm/BH adjustment over the family, optional TOST.
``verdict``
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
    :func:`steady_state` (SNIA PTS window test), :func:`steady_state_timeseries`, :func:`fio_steadystate`.
``drift``
    :func:`drift_check`: a common slope of the residuals in run order with its CI, and a runs test.
``regime``
    :func:`cache_caveats`: runs whose latency the device class cannot deliver ("cache, not medium").
``points``
    :func:`point_estimates` / :func:`point_means` (per sweep point the geometric mean over its runs with a
    log-scale CI, the run-to-run SD pooled over the grid and the equal-spread assumption checked,
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

from ..tables import metric_words
from .agreement import Agreement, bland_altman
from .claims import (
    CLAIM_VERDICTS,
    ParameterClaim,
    RatioClaim,
    claim_checks,
    claim_findings,
    claim_verdicts,
    parameter_claim_verdicts,
)
from .compare import (
    ADJUST_METHODS,
    Comparison,
    ComparisonTable,
    Design,
    adjust_pvalues,
    compare,
    summary_table,
)
from .crosstool import (
    CONFIG_COLUMNS,
    CrossTool,
    cross_tool,
    cross_tool_findings,
    cross_tool_table,
    tool_littles_law,
)
from .drift import Drift, drift_check
from .equivalence import (
    Equivalence,
    Estimate,
    PlanningCV,
    SamplePlan,
    cv_upper_bound,
    mean_ci,
    pilot_cv,
    tost,
    tost_plan,
    tost_power,
    tost_sample_size,
)
from .models import MixedModel, Model, fit_mixed, fit_model
from .points import (
    POINT_METHODS,
    PointEstimates,
    SpreadCheck,
    attach_factors,
    per_point,
    point_estimates,
    point_means,
    point_percentiles,
    point_table,
)
from .ratio import ESTIMANDS, RatioCI, fieller_ratio_ci, hedges_g, ratio_ci, ratio_tost
from .regime import CACHE_CAVEAT, ROTATIONAL_FLOOR_NS, cache_caveats
from .saturation import (
    Knee,
    QosResult,
    Recommendation,
    find_knee,
    improvement_pct,
    littles_law,
    littles_law_summary,
    littles_law_table,
    normalize,
    per_run,
    qos_max_load,
    recommend_parameters,
)
from .steady import FioSteadyState, SteadyState, fio_steadystate, steady_state, steady_state_timeseries
from .sweep import (
    SweepPoint,
    SweepSummary,
    half_revolution_ms,
    rotational_findings,
    sweep_summary,
)
from .variance import VarianceComponents, variance_components
from .verdict import (
    interaction,
    methods_table,
    verdict,
    verdict_findings,
    verdict_summary,
    verdict_words,
)

__all__ = [
    "Agreement",
    "bland_altman",
    "CONFIG_COLUMNS",
    "CrossTool",
    "cross_tool",
    "cross_tool_findings",
    "cross_tool_table",
    "metric_words",
    "tool_littles_law",
    "ADJUST_METHODS",
    "Comparison",
    "ComparisonTable",
    "Design",
    "ESTIMANDS",
    "RatioCI",
    "adjust_pvalues",
    "compare",
    "fieller_ratio_ci",
    "hedges_g",
    "ratio_ci",
    "ratio_tost",
    "summary_table",
    "Drift",
    "drift_check",
    "CACHE_CAVEAT",
    "ROTATIONAL_FLOOR_NS",
    "cache_caveats",
    "Equivalence",
    "Estimate",
    "PlanningCV",
    "SamplePlan",
    "cv_upper_bound",
    "mean_ci",
    "pilot_cv",
    "tost",
    "tost_plan",
    "tost_power",
    "tost_sample_size",
    "VarianceComponents",
    "variance_components",
    "MixedModel",
    "Model",
    "fit_mixed",
    "fit_model",
    "Knee",
    "QosResult",
    "Recommendation",
    "find_knee",
    "improvement_pct",
    "littles_law",
    "littles_law_summary",
    "littles_law_table",
    "normalize",
    "per_run",
    "qos_max_load",
    "recommend_parameters",
    "FioSteadyState",
    "SteadyState",
    "fio_steadystate",
    "steady_state",
    "steady_state_timeseries",
    "attach_factors",
    "POINT_METHODS",
    "PointEstimates",
    "SpreadCheck",
    "point_estimates",
    "point_means",
    "point_percentiles",
    "per_point",
    "point_table",
    "SweepPoint",
    "SweepSummary",
    "sweep_summary",
    "half_revolution_ms",
    "rotational_findings",
    "interaction",
    "verdict",
    "verdict_findings",
    "verdict_summary",
    "verdict_words",
    "methods_table",
    "CLAIM_VERDICTS",
    "ParameterClaim",
    "RatioClaim",
    "claim_checks",
    "claim_findings",
    "claim_verdicts",
    "parameter_claim_verdicts",
]
