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
  ``min_repetitions``, at most :data:`MAX_REPETITIONS`); with ``setups > 1`` they count **set-ups per arm**
  (the experimental unit: a fresh build of the testbed), not runs, and ``repetitions`` stays the runs per set-up
  (:func:`check_precision_design`);
* ``compare``: a factor of the study; each of its levels is compared with its first level at every
  combination of the other factors, and the comparison stops when its verdict is decided (group-sequential,
  :mod:`storagebench.stats.sequential`); ``alpha`` (two-sided, default 0.05), ``equivalence_margin``
  (a fraction: "within 5 %" decides too), ``detect_ratio`` (> 1: a difference this large ruled out decides);
* ``assumed_cv``: the run-to-run CV the plan's expected time assumes (``storagebench run --dry-run``).
"""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Sequence
from typing import Any

from ._specvalues import whole
from .errors import shown
from .findings import CONFIDENCE
from .schema import names as schema_names

__all__ = ["KEYS", "PRECISION_FILE", "check_precision", "check_precision_design", "read_precision", "rule_words"]

#: The keys of ``precision:`` and what each holds.
KEYS: dict[str, str] = {
    "metric": "the run-level metric the rule reads (default iops)",
    "ci_rel_half_width": "stop a point when its CI is at most this fraction wide on each side (0.03: +-3 %)",
    "confidence": f"confidence of that CI (default {CONFIDENCE:g})",
    "min_repetitions": "first look (default 3, at least 2; set-ups per arm with setups > 1)",
    "max_repetitions": "budget per point (default 30; set-ups per arm with setups > 1)",
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
    """What ``precision`` asks of the rest of the study: ``compare`` a factor with >= 2 levels that is not in
    ``concurrent``, and a design the rounds can run (without ``setups > 1``, ``repetitions`` left out).

    With ``concurrent`` the rounds measure whole concurrency groups (:mod:`storagebench._runrounds`): a group is
    run, as in a fixed sweep, all its runs at once, whenever any of its points is unfinished, so a point is never
    measured without the load the others put beside it. The unit stays the run (or the set-up, with ``setups >
    1``); a comparison across the levels of a concurrent factor is refused (they share the host, so they are not
    independent arms).

    With ``setups > 1`` the experimental unit is the set-up (a fresh build of the testbed), so the rule counts
    set-ups: ``min_repetitions`` and ``max_repetitions`` are set-ups per arm, a round builds one more set-up of
    every arm with an unfinished point (with ``blocks``: one block), and ``repetitions`` stays the runs per
    set-up. The spec's ``setups`` number then only says that the set-up is the unit; the plan holds
    ``max_repetitions`` set-ups per arm.

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
        if p["compare"] in study.concurrent:
            others = [f for f in factors if f not in study.concurrent and len(study.factors[f]) > 1]
            raise ValueError(f"precision.compare: {shown(p['compare'])} is in concurrent: its levels run at the same "
                             "time, on one host and testbed, so they are not independent arms and a stopping test "
                             "between them has no honest error rate; compare a factor that is not in concurrent"
                             + (f" (one of {others})" if others else "") + ", or use ci_rel_half_width alone")
    if study.setups > 1:  # the set-up is the unit: the rule counts set-ups, repetitions stay the runs per set-up
        return
    if study.repetitions != 1:
        raise ValueError(f"repetitions: with precision the runs per point are min_repetitions to max_repetitions "
                         f"({p['min_repetitions']} to {p['max_repetitions']}); remove repetitions "
                         f"(got {study.repetitions})")


# ---------------------------------------------------------------------------------------------
# the record of an adaptive sweep, read back for the write-up

#: The record an adaptive sweep writes in its study directory (:mod:`storagebench._runrounds`).
PRECISION_FILE = "precision.json"
#: Largest ``precision.json`` read, bytes (a few hundred bytes a point).
MAX_PRECISION_BYTES = 16 * 2**20
#: Most ``concurrent`` factors a record may name (a study has a handful).
MAX_CONCURRENT = 64
#: Why a point stopped, as the record says and as the write-up words it.
STOPPED = {"target": "target reached", "decided": "comparison decided", "budget": "budget spent (max_repetitions)",
           "not finished": "not finished (the sweep stopped)"}
#: What the rule counted (``precision.json``'s ``unit``) and its word in the write-up.
UNITS = {"run": "runs", "setup": "set-ups"}
#: The verdicts of a comparison and their words.
VERDICTS = {"different": "different", "equivalent": "equivalent within the margin",
            "not_equivalent": "outside the margin", "smaller_than_detect": "no difference as large as detect_ratio",
            None: "not decided within max_repetitions"}
#: The verdict of an undecided comparison whose arms had no spread: a ratio but no interval (every value of each
#: arm the same, e.g. a rate cap that fio counts to the same I/O each run), so no test could decide.
NO_SPREAD = "not decided: no spread between the values of either arm (identical values), so no CI and no test"


def _member(value: Any, allowed: dict[Any, str]) -> bool:
    """``value`` is a key of ``allowed`` (a list or mapping from JSON is never one: it is unhashable)."""
    return (value is None or isinstance(value, str)) and value in allowed


def _bad(path: Any, what: str, value: Any) -> Exception:
    from .errors import SchemaError

    return SchemaError(f"{path}: {what}, got {shown(value)}")


def _point_row(p: Any, path: Any) -> dict[str, Any]:
    if not isinstance(p, dict) or not isinstance(p.get("factors"), dict):
        raise _bad(path, "each point must be a mapping with factors", p)
    factors = p["factors"]
    if any(not isinstance(v, (str, int, float, bool)) or not isinstance(k, str) for k, v in factors.items()):
        raise _bad(path, "factor levels must be scalars", factors)
    reps, stopped, hw = p.get("repetitions"), p.get("stopped"), p.get("ci_rel_half_width")
    if isinstance(reps, bool) or not isinstance(reps, int) or not 0 <= reps <= MAX_REPETITIONS:
        raise _bad(path, f"repetitions must be an integer from 0 to {MAX_REPETITIONS}", reps)
    if not _member(stopped, STOPPED):
        raise _bad(path, f"stopped must be one of {list(STOPPED)}", stopped)
    if hw is not None and (isinstance(hw, bool) or not isinstance(hw, (int, float)) or not math.isfinite(hw) or hw < 0):
        raise _bad(path, "ci_rel_half_width must be a finite number >= 0 or null", hw)
    return {**factors, "runs": reps, "stopped": STOPPED[stopped], "ci_rel_half_width": hw}


def _comparison_row(c: Any, path: Any) -> dict[str, Any]:
    if not isinstance(c, dict) or not isinstance(c.get("comparison"), str) or not _member(c.get("decision"), VERDICTS):
        raise _bad(path, f"each comparison must name itself and a decision of {list(VERDICTS)}", c)
    n = c.get("n")
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_REPETITIONS:
        raise _bad(path, "a comparison's n must be an integer", n)
    row = {"comparison": c["comparison"][:300], "verdict": VERDICTS[c["decision"]], "runs_per_arm": n}
    for key in ("ratio", "ci_low", "ci_high", "ci_level"):
        v = c.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
                              or v <= 0 or (key == "ci_level" and v >= 1)):
            raise _bad(path, f"a comparison's {key} must be a finite number > 0 (a level < 1) or null", v)
        row[key] = v
    if c["decision"] is None and row["ratio"] is not None and row["ci_low"] is None and row["ci_high"] is None:
        row["verdict"] = NO_SPREAD
    return row


def read_precision(study_dir: Any) -> dict[str, Any] | None:
    """An adaptive sweep's ``precision.json``, read typed and bounded; None when the study is not adaptive.

    Parameters
    ----------
    study_dir : path-like
        ``results/<study>/``.

    Returns
    -------
    dict or None
        ``rule`` (checked by :func:`check_precision`, the spec's own gate), ``unit`` (``"run"``, or ``"setup"``
        when the rule counted set-ups: ``runs`` and ``runs_per_arm`` are then set-ups), ``blocks`` (a round was a
        whole block), ``concurrent`` (the factors whose levels ran together: a round ran those groups whole),
        ``points`` and ``comparisons``
        (lists of row dicts for a table: factor levels, ``runs``, ``stopped`` in words, ``ci_rel_half_width``).

    Raises
    ------
    SchemaError
        The file is not a regular file of at most :data:`MAX_PRECISION_BYTES`, not JSON, or a field is not what
        the runner writes (named with its value).
    """
    import orjson

    from ._inputs import read_input
    from .errors import SchemaError

    path = os.path.join(os.fspath(study_dir), PRECISION_FILE)
    if not os.path.lexists(path):
        return None
    try:
        data = orjson.loads(read_input(path, max_bytes=MAX_PRECISION_BYTES, what="precision record",
                                       error=SchemaError))
    except orjson.JSONDecodeError as exc:
        raise SchemaError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("points"), list) \
            or not isinstance(data.get("comparisons", []), list):
        raise _bad(path, "must be a mapping with points and comparisons lists", data)
    try:
        rule = check_precision(data.get("rule"))
    except ValueError as exc:
        raise SchemaError(f"{path}: rule: {exc}") from None
    if rule is None:
        raise _bad(path, "rule is missing", data.get("rule"))
    unit, blocks = data.get("unit", "run"), data.get("blocks", False)  # older records: runs, no blocks
    if not _member(unit, UNITS) or unit is None:
        raise _bad(path, f"unit must be one of {list(UNITS)}", unit)
    if not isinstance(blocks, bool):
        raise _bad(path, "blocks must be true or false", blocks)
    concurrent = data.get("concurrent", [])  # older records: none
    if not isinstance(concurrent, list) or len(concurrent) > MAX_CONCURRENT \
            or any(not isinstance(f, str) or not 0 < len(f) <= 200 for f in concurrent):
        raise _bad(path, f"concurrent must be a list of at most {MAX_CONCURRENT} factor names", concurrent)
    return {"rule": rule, "unit": unit, "blocks": blocks, "concurrent": concurrent,
            "points": [_point_row(p, path) for p in data["points"]],
            "comparisons": [_comparison_row(c, path) for c in data.get("comparisons", [])]}


def rule_words(rule: dict[str, Any], unit: str = "run", blocks: bool = False, concurrent: Sequence[str] = ()) -> str:
    """The stopping rule in a sentence (the values formatted from the checked rule; ``unit="setup"``: the rule
    counted set-ups, one fresh build of the testbed each; ``blocks``: a round was a whole block, comparisons
    paired on it; ``concurrent``: the factors whose levels ran at the same time, a round running them whole)."""
    text = _rule_text(rule, unit, blocks)
    if concurrent:
        text += (f" The levels of {', '.join(concurrent)} ran at the same time (concurrent), so a round ran each such "
                 "group whole while any of its points was unfinished, and a finished point could get more runs "
                 "than its rule asked for.")
    return text


def _rule_text(rule: dict[str, Any], unit: str, blocks: bool) -> str:
    parts = []
    if "ci_rel_half_width" in rule:
        parts.append(f"until the {rule['confidence']:.0%} confidence interval of its geometric mean {rule['metric']} "
                     f"was within ±{rule['ci_rel_half_width']:.1%} (a fixed-width sequential interval, Chow & Robbins "
                     "1965, with the run-to-run SD taken at its upper 70% confidence bound so that it covers at small "
                     "n)")
    if "compare" in rule:
        extra = (f", or equivalence within ±{rule['equivalence_margin']:.1%}" if "equivalence_margin" in rule else "")
        extra += (f", or no difference of ×{rule['detect_ratio']:g}" if "detect_ratio" in rule else "")
        parts.append(f"until each comparison of {rule['compare']} with its first level was decided: a difference"
                     f"{extra}, each tested at the nominal level of a Lan-DeMets O'Brien-Fleming boundary "
                     f"(two-sided alpha {rule['alpha']:g})")
    if blocks:
        parts = [p.replace("each tested", "each tested by the paired t on the per-block log ratios") for p in parts]
    if unit == "setup":
        rounds = ("one block per round, a set-up of every arm in a seeded random order, while any point was "
                  "unfinished" if blocks else "one more set-up of every arm with an unfinished point per round, in a "
                  "seeded random order, measuring its unfinished points")
        return ("The experimental unit was the set-up (a fresh build of the testbed; a point's value on it the "
                f"geometric mean of its runs). Each point was measured in rounds ({rounds}), from "
                f"{rule['min_repetitions']} set-ups, " + " and ".join(parts).replace("run-to-run", "set-up-to-set-up")
                + f", or until it had {rule['max_repetitions']} set-ups (its budget).")
    rounds = ("one block per round, a run of every point in a seeded random order, while any point was unfinished"
              if blocks else "one run of every unfinished point per round, in a seeded random order")
    return (f"Each point was measured in rounds ({rounds}), from {rule['min_repetitions']} runs, " + " and ".join(parts)
            + f", or until it had {rule['max_repetitions']} runs (its budget).")
