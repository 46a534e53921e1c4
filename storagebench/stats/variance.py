"""Where the variation comes from, and how many repetitions each level needs (Kalibera & Jones 2013)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as st

from ..errors import StatsError
from ..findings import CONFIDENCE
from ._common import check_confidence, require_columns


@dataclass(frozen=True)
class VarianceComponents:
    """Kalibera & Jones variance components of a balanced multi-level experiment.

    Levels are listed from the highest (outermost, e.g. ``host``) to the lowest (innermost, e.g. the
    repetition of a run inside a VM), as in libkalibera.

    Attributes
    ----------
    metric : str
    levels : tuple of str
        Level names, high to low.
    reps : tuple of int
        Repetition count ``r`` per level, high to low.
    s2 : tuple of float
        Biased estimators ``S_i^2`` per level, high to low.
    t2 : tuple of float
        Unbiased variance components ``T_i^2`` per level, high to low (may be negative by chance: a
        negative component is estimated as zero contribution).
    mean : float
        Grand mean of the metric.
    ci_low, ci_high, confidence : float
        CI of the grand mean: ``t_{r_n - 1} sqrt(S_n^2 / r_n)`` with ``n`` the highest level (K&J eq. 4).
    costs : tuple of float or None
        Cost of one repetition at each level (seconds), high to low, when given.
    optimal_reps : tuple of float or None
        Optimal ``r_i`` for every level except the highest, high to low (un-rounded).
    method : str
    """

    metric: str
    levels: tuple[str, ...]
    reps: tuple[int, ...]
    s2: tuple[float, ...]
    t2: tuple[float, ...]
    mean: float
    ci_low: float
    ci_high: float
    confidence: float
    costs: tuple[float, ...] | None
    optimal_reps: tuple[float, ...] | None
    method: str

    def to_frame(self) -> pd.DataFrame:
        """Columns ``level, reps, s2, t2, t2_share`` (share of the positive T^2 sum), ``cost_s``,
        ``optimal_reps`` (un-rounded, NaN for the highest level) and ``optimal_reps_ceil``."""
        pos = np.clip(np.array(self.t2), 0, None)
        share = pos / pos.sum() if pos.sum() > 0 else np.full(len(pos), np.nan)
        # optimal_reps covers levels[1:] (every level but the highest)
        opt = [math.nan] * len(self.levels) if self.optimal_reps is None else [math.nan, *self.optimal_reps]
        return pd.DataFrame({
            "level": self.levels,
            "reps": self.reps,
            "s2": self.s2,
            "t2": self.t2,
            "t2_share": share,
            "cost_s": self.costs if self.costs is not None else [math.nan] * len(self.levels),
            "optimal_reps": opt,
            "optimal_reps_ceil": [math.nan if not np.isfinite(v) else float(max(1, math.ceil(v))) for v in opt],
        })


def _cube(df: pd.DataFrame, levels: list[str], metric: str) -> tuple[np.ndarray, tuple[int, ...]]:
    """Values as an array of shape ``reps`` (high to low); raises when the design is not balanced."""
    if df[metric].isna().any() or not np.isfinite(pd.to_numeric(df[metric], errors="coerce")).all():
        raise StatsError(f"metric {metric!r} has NaN/non-numeric values; variance components need complete data")
    for col in levels:
        if df[col].isna().any():
            raise StatsError(f"level column {col!r} has missing values")
    dup = df.duplicated(subset=levels, keep=False)
    if dup.any():
        raise StatsError(
            f"{int(dup.sum())} rows share the same {levels} key (e.g. {tuple(df.loc[dup, levels].iloc[0])}); "
            "the lowest level must identify one measurement")
    # balanced: every parent has the same number of children at each level
    reps = []
    for k, col in enumerate(levels):
        parents = levels[:k]
        if parents:
            counts = df.groupby(parents, sort=False)[col].nunique()
        else:
            counts = pd.Series([df[col].nunique()])
        if counts.nunique() != 1:
            raise StatsError(
                f"unbalanced design at level {col!r}: between {counts.min()} and {counts.max()} values per "
                f"{parents}; Kalibera & Jones needs the same repetition count everywhere")
        reps.append(int(counts.iloc[0]))
    total = int(np.prod(reps))
    if total != len(df):
        raise StatsError(f"expected {total} rows for reps {reps} of {levels}, got {len(df)}")
    # position of each row along each level, numbered within its parent
    pos = [df.groupby(levels[:k], sort=True)[col].rank(method="dense").astype(int).to_numpy() - 1 if k else
           df[col].rank(method="dense").astype(int).to_numpy() - 1 for k, col in enumerate(levels)]
    cube = np.empty(reps)
    cube[tuple(pos)] = pd.to_numeric(df[metric]).to_numpy(dtype=float)
    return cube, tuple(reps)


def _s2_all(cube: np.ndarray) -> list[float]:
    """S_i^2 for i = 1..n (low to high) from the K&J definition (eq. 2, as libkalibera ``Data.Si2``)."""
    reps = cube.shape
    n = len(reps)
    # means[k]: mean over axes k.. (shape reps[:k]); means[n] is the cube itself
    means = [None] * (n + 1)
    means[n] = cube
    for k in range(n - 1, -1, -1):
        means[k] = means[k + 1].mean(axis=-1)
    out = []
    for i in range(1, n + 1):
        index = n - i
        a = means[index + 1]
        b = np.expand_dims(means[index], -1)
        factor = 1.0 / float(np.prod(reps[:index])) / (reps[index] - 1)
        out.append(float(factor * ((a - b) ** 2).sum()))
    return out


def variance_components(df: pd.DataFrame, levels: Sequence[str], metric: str, *,
                        costs: Sequence[float] | None = None, confidence: float = CONFIDENCE) -> VarianceComponents:
    """Variance components per level and optimal repetition counts (Kalibera & Jones 2013).

    Parameters
    ----------
    df : pandas.DataFrame
        One row per lowest-level measurement, e.g. a ``runs`` table of one configuration with columns
        ``host``, ``vm``, ``repetition`` and the metric. The design must be balanced.
    levels : list of str
        Level columns from the highest (outermost) to the lowest (innermost), e.g.
        ``["host", "vm", "repetition"]``. At least 2.
    metric : str
        Metric column (e.g. ``iops`` in 1/s).
    costs : list of float, optional
        Cost (e.g. seconds) of one repetition at each level, high to low, such as
        ``[reboot_s, vm_start_s, run_s]``. Enables ``optimal_reps``.
    confidence : float
        Level of the CI of the grand mean.

    Returns
    -------
    VarianceComponents

    Raises
    ------
    StatsError
        Missing columns, fewer than 2 levels, a level with one repetition, unbalanced design, duplicate
        keys, NaN values, costs of the wrong length or not positive.

    Notes
    -----
    Kalibera, T. & Jones, R. (2013), "Rigorous benchmarking in reasonable time", ISMM '13 (revised
    version, as implemented by libkalibera): with ``i = 1`` the lowest level,
    ``S_i^2 = 1/(prod_{k>i} r_k (r_i - 1)) sum (Ybar_{j_n..j_i} - Ybar_{j_n..j_{i+1}})^2``,
    ``T_1^2 = S_1^2``, ``T_i^2 = S_i^2 - S_{i-1}^2 / r_{i-1}``, and the optimal repetition count of level
    ``i < n`` is ``r_i = sqrt(c_{i+1} T_i^2 / (c_i T_{i+1}^2))`` (c = cost of one repetition at that level).
    Checked against libkalibera's own test data (github.com/softdevteam/libkalibera).
    """
    levels = list(levels)
    if len(levels) < 2:
        raise StatsError(f"levels must name at least 2 columns (high to low), got {levels}")
    if len(set(levels)) != len(levels):
        raise StatsError(f"levels must be distinct, got {levels}")
    require_columns(df, [*levels, metric])
    confidence = check_confidence(confidence)
    cube, reps = _cube(df, levels, metric)
    ones = [lv for lv, r in zip(levels, reps, strict=True) if r < 2]
    if ones:
        raise StatsError(f"levels {ones} have a single repetition; each level needs >= 2 (reps {dict(zip(levels, reps, strict=True))})")
    s2_low_high = _s2_all(cube)
    n = len(reps)
    r_low_high = list(reversed(reps))
    t2_low_high = [s2_low_high[0]] + [s2_low_high[i] - s2_low_high[i - 1] / r_low_high[i - 1] for i in range(1, n)]
    mean = float(cube.mean())
    rn = reps[0]
    half = float(st.t.ppf(0.5 + confidence / 2, rn - 1) * math.sqrt(s2_low_high[-1] / rn))
    opt = None
    costs_t = None
    if costs is not None:
        costs_t = tuple(float(c) for c in costs)
        if len(costs_t) != n or not all(c > 0 and math.isfinite(c) for c in costs_t):
            raise StatsError(f"costs must be {n} positive numbers (high to low, one per level {levels}), got {list(costs)}")
        c_low_high = list(reversed(costs_t))
        vals = []
        for i in range(1, n):  # math index i = 1..n-1 (low to high)
            ti, tn = t2_low_high[i - 1], t2_low_high[i]
            vals.append(math.sqrt(c_low_high[i] / c_low_high[i - 1] * ti / tn) if ti >= 0 and tn > 0 else math.nan)
        opt = tuple(reversed(vals))  # high to low, levels[1:]
    return VarianceComponents(
        metric=metric, levels=tuple(levels), reps=reps, s2=tuple(reversed(s2_low_high)),
        t2=tuple(reversed(t2_low_high)), mean=mean, ci_low=mean - half, ci_high=mean + half,
        confidence=confidence, costs=costs_t, optimal_reps=opt,
        method="Kalibera & Jones (2013) variance components, revised T_i^2; optimal reps sqrt(c_{i+1} T_i^2 / (c_i T_{i+1}^2))",
    )
