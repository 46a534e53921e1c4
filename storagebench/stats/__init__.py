"""Statistics a reviewer would accept: every estimate with its CI, its n and its method.

Modules, one per concept:

``compare``
    :func:`compare` two (or more) levels of a factor with a baseline: Welch / paired t on log ratios,
    Fieller (log-scale fallback, :func:`ratio_ci`) or BCa ratio CIs, rank tests, Hedges' g, Holm/BH adjustment, optional TOST.
``agreement``
    :func:`bland_altman`: bias and limits of agreement of two methods, with CIs (Bland & Altman 1986).
``crosstool``
    :func:`cross_tool`: two load generators (DiskSPD, Iometer, fio) on the same configurations:
    matched pairs, ``compare`` with the tool as the factor, Bland-Altman per group.
``equivalence``
    :func:`tost` ("within 1%"), :func:`tost_sample_size` / :func:`tost_power`, :func:`mean_ci`.
``variance``
    :func:`variance_components`: Kalibera & Jones (2013) per-level variance and optimal repetitions.
``models``
    :func:`fit_model` (OLS + type-II ANOVA with interactions), :func:`fit_mixed` (MixedLM, repeated measures).
``steady``
    :func:`steady_state` (SNIA PTS window test), :func:`steady_state_timeseries`, :func:`fio_steadystate`.
``saturation``
    :func:`littles_law`, :func:`find_knee` (Kneedle), :func:`recommend_parameters`, :func:`qos_max_load`,
    :func:`normalize`, :func:`improvement_pct`.
"""

from __future__ import annotations

from .agreement import Agreement, bland_altman
from .compare import (
    ADJUST_METHODS,
    Comparison,
    ComparisonTable,
    RatioCI,
    adjust_pvalues,
    compare,
    fieller_ratio_ci,
    hedges_g,
    ratio_ci,
    summary_table,
)
from .crosstool import CONFIG_COLUMNS, CrossTool, cross_tool
from .equivalence import Equivalence, Estimate, mean_ci, tost, tost_power, tost_sample_size
from .models import MixedModel, Model, fit_mixed, fit_model
from .saturation import (
    Knee,
    QosResult,
    Recommendation,
    find_knee,
    improvement_pct,
    littles_law,
    normalize,
    per_run,
    qos_max_load,
    recommend_parameters,
)
from .steady import FioSteadyState, SteadyState, fio_steadystate, steady_state, steady_state_timeseries
from .variance import VarianceComponents, variance_components

__all__ = [
    "Agreement",
    "bland_altman",
    "CONFIG_COLUMNS",
    "CrossTool",
    "cross_tool",
    "ADJUST_METHODS",
    "Comparison",
    "ComparisonTable",
    "RatioCI",
    "adjust_pvalues",
    "compare",
    "fieller_ratio_ci",
    "hedges_g",
    "ratio_ci",
    "summary_table",
    "Equivalence",
    "Estimate",
    "mean_ci",
    "tost",
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
    "normalize",
    "per_run",
    "qos_max_load",
    "recommend_parameters",
    "FioSteadyState",
    "SteadyState",
    "fio_steadystate",
    "steady_state",
    "steady_state_timeseries",
]
