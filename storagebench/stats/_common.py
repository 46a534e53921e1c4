"""Input checks shared by the stats modules, each raising :class:`~storagebench.errors.StatsError` that
names the input and what is allowed (a private module: its names are for the modules of ``stats``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from ..errors import StatsError
from ..findings import CONFIDENCE, confidence_level

#: Fewest runs per arm (or pairs) for a BCa bootstrap CI: below it BCa undercovers badly (a nominal 95%
#: interval covered 0.73-0.83 at n = 3 and 0.84-0.89 at n = 5 on log-normal IOPS, benchmarks/bench_coverage.py
#: --bca), so it is refused rather than reported.
BCA_MIN_N = 10

#: Simulated coverage of a nominal 95% BCa interval at and above :data:`BCA_MIN_N` (benchmarks/bench_coverage.py
#: --bca, 400 sets per cell, CV 20/50/5-vs-50%): carried in the note of every BCa row.
BCA_COVERAGE_NOTE = ("BCa coverage of a nominal 95% CI, simulated on log-normal IOPS: 0.89-0.94 at n = 10, "
                     "0.91-0.96 at n = 20 (benchmarks/bench_coverage.py --bca); the t-based CI (n_boot=None) "
                     "covered 0.93-0.97 from n = 3")


def geometric_mean(values) -> float:
    """Geometric mean of positive values (:func:`scipy.stats.gmean`); NaN when there are none or any is
    not positive (a geometric mean of them is undefined, never a made-up number)."""
    from scipy.stats import gmean  # scipy: already every stats module's import

    x = np.asarray(values, dtype=float).ravel()
    return float(gmean(x)) if x.size and np.isfinite(x).all() and (x > 0).all() else float("nan")


def as_list(cols: str | Sequence[str] | None) -> list[str]:
    """Column names as a list: ``None`` -> ``[]``, ``"a"`` -> ``["a"]``, a sequence -> its list."""
    if cols is None:
        return []
    if isinstance(cols, str):
        return [cols]
    return list(cols)


def require_columns(df: pd.DataFrame, cols: Iterable[str], what: str = "df") -> None:
    """Raise unless ``df`` is a DataFrame holding every column of ``cols`` (``what`` names it in the message)."""
    if not isinstance(df, pd.DataFrame):
        raise StatsError(f"{what} must be a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise StatsError(f"{what} has no column(s) {missing}; columns are {list(df.columns)}")


def check_fraction(value, message: str) -> float:
    """``value`` as a float strictly inside (0, 1), else :class:`StatsError` with ``message``."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise StatsError(message) from None
    if not 0.0 < v < 1.0:
        raise StatsError(message)
    return v


def check_confidence(confidence: float) -> float:
    """``confidence`` as a float in (0, 1), else :class:`StatsError` naming it (the rule of
    :func:`storagebench.findings.confidence_level`; ``None`` is refused here: a stats function's default is
    :data:`storagebench.findings.CONFIDENCE`, in its signature)."""
    if confidence is None:
        raise StatsError(f"confidence must be a number in (0, 1), e.g. {CONFIDENCE:g}, got None")
    return confidence_level(confidence, error=StatsError)


def check_margin(margin):
    """A fraction in (0, 1), or ratio bounds ``(low, high)`` with ``0 < low < 1 < high``."""
    if margin is None:
        return None
    if isinstance(margin, (tuple, list)):
        try:
            lo, hi = (float(v) for v in margin)
        except (TypeError, ValueError):
            raise StatsError(f"margin bounds must be two numbers (low, high), got {margin!r}") from None
        if not 0.0 < lo < 1.0 < hi:
            raise StatsError(f"margin bounds (low, high) must satisfy 0 < low < 1 < high, got {margin!r}")
        return (lo, hi)
    return check_fraction(margin, f"margin must be a fraction in (0, 1) such as 0.01 for 1%, got {margin!r}")


def require_positive_finite(values: pd.Series, name: str) -> None:
    """Raise when ``values`` holds NaN/inf or values <= 0 (ratios and logs need positive numbers)."""
    v = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)
    bad_nan = ~np.isfinite(v)
    if bad_nan.any():
        idx = list(values.index[bad_nan][:5])
        raise StatsError(
            f"metric {name!r} has {int(bad_nan.sum())} NaN/non-numeric/infinite value(s) (first rows {idx}); "
            "drop or fix them explicitly before comparing"
        )
    bad = v <= 0
    if bad.any():
        idx = list(values.index[bad][:5])
        raise StatsError(
            f"metric {name!r} has {int(bad.sum())} value(s) <= 0 (first rows {idx}, values "
            f"{v[bad][:5].tolist()}); ratios and log ratios need values > 0"
        )


def key_tuple(key) -> tuple:
    """A groupby key as a tuple of plain Python values (``np.int64(4)`` becomes ``4``, for messages and rows)."""
    key = key if isinstance(key, tuple) else (key,)
    return tuple(v.item() if isinstance(v, np.generic) else v for v in key)


def capitalise_after(sentence: str, pre: str = "") -> str:
    """Capitalise the first letter after the data-set label ``pre`` (``"vsan_stripe: "``), kept as it is."""
    body = sentence[len(pre):] if pre and sentence.startswith(pre) else sentence
    return (pre if body is not sentence else "") + body[:1].upper() + body[1:]
