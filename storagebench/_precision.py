"""The study key ``precision:``: adaptive repetitions, checked, and the time a study takes to answer.

A study with ``precision:`` plans up to ``max_repetitions`` runs per point (the run ids are those of a fixed
sweep with that many repetitions: repetition k of a point has one id) and measures them in rounds
(:mod:`storagebench._runrounds`), stopping each point when its target is reached or its budget is spent::

    precision: {metric: iops, ci_rel_half_width: 0.03, min_repetitions: 3, max_repetitions: 30}
    precision: {compare: stripe_width, equivalence_margin: 0.05, max_repetitions: 20}

Keys (:data:`KEYS`):

* ``metric``: the run-level metric the rule reads (a metric column of the runs table, ``schema.names("runs",
  role="metric")``, that is positive: not ``error``/``partial``); default ``iops``;
* ``ci_rel_half_width``: a point stops when the CI of its geometric mean is at most this wide on each
  side (0.03: +-3 %), a fraction in (0, 1);
* ``confidence``: of that CI, default :data:`storagebench.findings.CONFIDENCE`;
* ``min_repetitions`` (default 3, at least 2) and ``max_repetitions`` (default 30, at least
  ``min_repetitions``, at most :data:`MAX_REPETITIONS`);
* ``compare``: a factor of the study; each of its levels is compared with its first level at every
  combination of the other factors, and the comparison stops when its verdict is decided (group-sequential,
  :mod:`storagebench.stats.sequential`); ``alpha`` (two-sided, default 0.05), ``equivalence_margin``
  (a fraction: "within 5 %" decides too), ``detect_ratio`` (> 1: a difference this large ruled out decides);
* ``assumed_cv``: the run-to-run CV the plan's expected time assumes (``storagebench run --dry-run``).
"""

from __future__ import annotations

import difflib
import math
from typing import Any

from ._specvalues import whole
from .errors import shown
from .findings import CONFIDENCE
from .schema import names as schema_names

__all__ = ["KEYS", "check_precision", "check_precision_design"]

#: The keys of ``precision:`` and what each holds.
KEYS: dict[str, str] = {
    "metric": "the run-level metric the rule reads (default iops)",
    "ci_rel_half_width": "stop a point when its CI is at most this fraction wide on each side (0.03: +-3 %)",
    "confidence": f"confidence of that CI (default {CONFIDENCE:g})",
    "min_repetitions": "first look (default 3, at least 2)",
    "max_repetitions": "budget per point (default 30)",
    "compare": "a factor: stop when each level's comparison with the first level is decided",
    "alpha": "two-sided level of the comparison (default 0.05)",
    "equivalence_margin": "decide 'within this fraction' too (0.05: within 5 %)",
    "detect_ratio": "decide 'no difference this large' too (a ratio > 1, e.g. 1.2)",
    "assumed_cv": "run-to-run CV assumed for the expected time of the plan (e.g. 0.05)",
}
#: Most repetitions of a point under ``precision`` (the plan holds them all as run ids).
MAX_REPETITIONS = 1_000
_NOT_METRICS = ("error", "partial")  # flags, not positive quantities a log-scale CI can read


def _metrics() -> tuple[str, ...]:
    return tuple(m for m in schema_names("runs", role="metric") if m not in _NOT_METRICS)


def _fraction(value: Any, key: str, low: float = 0.0, high: float = 1.0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not low < value < high:
        raise ValueError(f"precision.{key}: must be a number in ({low:g}, {high:g}), got {shown(value)}")
    return float(value)


def _unknown(key: Any) -> ValueError:
    close = difflib.get_close_matches(str(key), list(KEYS), n=1) if isinstance(key, str) else []
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ValueError(f"precision: unknown key {shown(key)}{hint}; allowed keys: [{', '.join(KEYS)}]")


def check_precision(value: Any) -> dict[str, Any] | None:
    """``precision:`` checked, with its defaults filled in.

    Parameters
    ----------
    value : mapping or None
        The spec's value (already bounded by :func:`storagebench._specvalues.check_shape`).

    Returns
    -------
    dict or None
        Every key of :data:`KEYS` that applies, with defaults.

    Raises
    ------
    ValueError
        Naming the key, the value and what is allowed: an unknown key (with a did-you-mean), a number out of
        range, ``max_repetitions < min_repetitions``, a metric that is not a positive metric column, neither
        ``ci_rel_half_width`` nor ``compare``, a comparison key without ``compare``.
    """
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError(f"precision: must be a mapping such as {{metric: iops, ci_rel_half_width: 0.03}}, "
                         f"got {shown(value)}")
    for key in value:
        if key not in KEYS:
            raise _unknown(key)
    out: dict[str, Any] = {"metric": value.get("metric", "iops")}
    if out["metric"] not in _metrics():
        close = difflib.get_close_matches(str(out["metric"]), _metrics(), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"precision.metric: {shown(out['metric'])} is not a metric of the runs table{hint}; "
                         f"must be one of [{', '.join(_metrics())}]")
    for key, low, high, default in (("ci_rel_half_width", 0.0, 1.0, None), ("confidence", 0.5, 1.0, CONFIDENCE),
                                    ("alpha", 0.0, 0.5, 0.05), ("equivalence_margin", 0.0, 1.0, None),
                                    ("detect_ratio", 1.0, 100.0, None), ("assumed_cv", 0.0, 10.0, None)):
        if value.get(key) is not None or default is not None:
            out[key] = _fraction(value.get(key, default), key, low, high)
    out.update(_repetitions(value))
    if "compare" in value:
        if not isinstance(value["compare"], str):
            raise ValueError(f"precision.compare: must be a factor name, got {shown(value['compare'])}")
        out["compare"] = value["compare"]
    else:
        extra = [k for k in ("alpha", "equivalence_margin", "detect_ratio") if k in value]
        if extra:
            raise ValueError(f"precision: {extra} apply to a comparison; name its factor with compare: FACTOR")
        out.pop("alpha")
    if "ci_rel_half_width" not in out and "compare" not in out:
        raise ValueError("precision: needs a target: ci_rel_half_width (e.g. 0.03) and/or compare: FACTOR")
    return out


def _repetitions(value: dict[str, Any]) -> dict[str, int]:
    lo = value.get("min_repetitions", 3)
    hi = value.get("max_repetitions", 30)
    try:
        lo = whole(lo, "min_repetitions", 2, MAX_REPETITIONS, "first look: a CI needs 2 runs")
        hi = whole(hi, "max_repetitions", 2, MAX_REPETITIONS, "budget per point")
    except ValueError as exc:
        key = "min_repetitions" if "first look" in str(exc) else "max_repetitions"
        raise ValueError(f"precision.{key}: {exc}") from None
    if hi < lo:
        raise ValueError(f"precision.max_repetitions: must be >= min_repetitions ({lo}), got {hi}")
    return {"min_repetitions": lo, "max_repetitions": hi}


def check_precision_design(study: Any) -> None:
    """What ``precision`` asks of the rest of the study: ``compare`` a factor with >= 2 levels, and a design the
    rounds can run (no ``setups > 1``, no ``concurrent``, ``repetitions`` left out).

    Raises
    ------
    ValueError
        Naming the key and what is allowed.
    """
    p = study.precision
    if p is None:
        return
    if "compare" in p:
        factors = list(study.factors)
        if p["compare"] not in factors:
            close = difflib.get_close_matches(p["compare"], factors, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"precision.compare: {shown(p['compare'])} is not a factor of this study{hint}; "
                             f"must be one of {factors}")
        if len(study.factors[p["compare"]]) < 2:
            raise ValueError(f"precision.compare: factors.{p['compare']} has one level; a comparison needs two")
    if study.repetitions != 1:
        raise ValueError(f"repetitions: with precision the runs per point are min_repetitions to max_repetitions "
                         f"({p['min_repetitions']} to {p['max_repetitions']}); remove repetitions "
                         f"(got {study.repetitions})")
    if study.setups > 1 or study.concurrent:
        raise ValueError("precision: adaptive rounds run one point at a time on one build; they do not support "
                         "setups > 1 or concurrent yet (use a fixed repetitions: N)")
