"""``calibration.json``: the calibration of a host (``storagebench calibrate``), its format, its one reader, and
where a write-up finds the latest one of its host.

A calibration is written by :mod:`storagebench.calibrate` into ``<results>/calibration/<host>-<UTC stamp>/``. It is
read back as outside input (a results tree is shared and copied): through :func:`storagebench._inputs.read_text`
(a regular file, bounded), then every field the write-ups use is checked by type and range here
(:func:`read_calibration`); a file that fails is refused naming the file and the field, and the write-up of a
study then cites no calibration rather than a wrong one. Text from it reaches a page only through
:mod:`storagebench._html` (``docs/SECURITY.md``, "Inputs").

Nothing here imports more of storagebench than the errors and the input gate (ground floor).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from ._inputs import read_text
from .errors import SchemaError

__all__ = [
    "CALIBRATION_DIR",
    "CALIBRATION_FILE",
    "FORMAT_VERSION",
    "MAX_CALIBRATION_BYTES",
    "AAComparison",
    "AAResult",
    "Calibration",
    "KnownCheck",
    "citation",
    "find_calibrations",
    "latest_calibration",
    "read_calibration",
]

#: Version of the ``calibration.json`` format written by this storagebench.
FORMAT_VERSION = 1
#: File name of a calibration.
CALIBRATION_FILE = "calibration.json"
#: Directory of a results root that holds the calibrations (one sub-directory each).
CALIBRATION_DIR = "calibration"
#: Largest ``calibration.json`` read, bytes (one is a few KiB).
MAX_CALIBRATION_BYTES = 4 * 2**20
#: At most this many calibration directories are looked at when a write-up looks for its host's.
MAX_CALIBRATIONS = 1000
#: Longest text field (a check's name, a host name, a version) accepted, characters.
MAX_TEXT = 256
#: Longest rule of a known-answer check (how its truth follows from the caps), characters.
MAX_RULE = 4000
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


@dataclass(frozen=True)
class KnownCheck:
    """One known-answer check: the truth the caps give, what the chain estimated, and whether its CI covers it.

    Attributes
    ----------
    name : str
    truth : float
        Ratio (no unit).
    estimate, ci_low, ci_high : float or None
        Ratios (no unit); None when not estimable (``null`` in the file: e.g. no spread between set-ups gives no CI).
    covered : bool
        ``ci_low <= truth <= ci_high``.
    rule : str
        How the truth follows from the caps.
    """

    name: str
    truth: float
    estimate: float | None
    ci_low: float | None
    ci_high: float | None
    covered: bool
    rule: str = ""


@dataclass(frozen=True)
class AAComparison:
    """One A/A comparison: the ratio B/A of the set-up geometric means, its CI and p, and whether it showed a
    difference."""

    index: int
    ratio: float
    ci_low: float
    ci_high: float
    p: float
    shown: bool


@dataclass(frozen=True)
class AAResult:
    """The A/A part of a calibration (see :func:`storagebench.calibrate.analyse_aa`).

    Attributes
    ----------
    n : int
        Independent A/A comparisons (disjoint set-ups).
    false_positives : int
    false_positive_rate : float or None
        ``false_positives / n`` (None when ``n`` is 0).
    cv_run, cv_setup : float or None
        Run-to-run and set-up-to-set-up coefficient of variation (fractions, 0.01 = 1 %).
    mde : float or None
        Smallest ratio detectable with the stated budget (> 1).
    comparisons : tuple of AAComparison
    mde_table : tuple of (int, int, float)
        ``(set-ups per arm, runs per set-up, mde)`` for other budgets.
    """

    n: int
    false_positives: int
    false_positive_rate: float | None
    cv_run: float | None
    cv_setup: float | None
    mde: float | None
    comparisons: tuple[AAComparison, ...] = ()
    mde_table: tuple[tuple[int, int, float], ...] = ()


@dataclass(frozen=True)
class Calibration:
    """A ``calibration.json`` as read (:func:`read_calibration`); only checked fields.

    Attributes
    ----------
    path : Path
    date : str
        ISO 8601 UTC of the calibration.
    hostname : str
    machine_id : str or None
    storagebench_version : str
    quick : bool
        The quick variant (few set-ups, short runs).
    aa : AAResult
    checks : tuple of KnownCheck
    budget : dict
        ``mde_setups_per_arm``, ``mde_runs_per_setup``, ``power``, ``alpha`` (the others are not read).
    """

    path: Path
    date: str
    hostname: str
    machine_id: str | None
    storagebench_version: str
    quick: bool
    aa: AAResult
    checks: tuple[KnownCheck, ...]
    budget: dict[str, float] = field(default_factory=dict)

    @property
    def when(self) -> datetime:
        """:attr:`date` as an aware datetime."""
        return datetime.fromisoformat(self.date.replace("Z", "+00:00"))


def _bad(path: Path, where: str, why: str) -> SchemaError:
    return SchemaError(f"{path}: not a valid calibration: {where} {why}")


def _text(value: Any, path: Path, where: str, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_TEXT or any(ord(c) < 32 for c in value):
        raise _bad(path, where, f"must be one line of 1 to {MAX_TEXT} characters, got {str(value)[:60]!r}")
    return value


def _number(value: Any, path: Path, where: str, *, low: float = -math.inf, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < low:
        raise _bad(path, where, f"must be a finite number >= {low:g}, got {str(value)[:60]!r}")
    return float(value)


def _mapping(value: Any, path: Path, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _bad(path, where, f"must be an object, got {type(value).__name__}")
    return value


def _rule(value: Any, path: Path, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > MAX_RULE or any(ord(c) < 32 and c not in "\t\n" for c in value):
        raise _bad(path, where, f"must be text of at most {MAX_RULE} characters, got {str(value)[:60]!r}")
    return value


def _check(item: Any, path: Path, i: int) -> KnownCheck:
    m = _mapping(item, path, f"checks[{i}]")
    where = f"checks[{i}]."
    out = KnownCheck(name=_text(m.get("name"), path, where + "name"),
                     truth=_number(m.get("truth"), path, where + "truth", low=0.0),
                     estimate=_number(m.get("estimate"), path, where + "estimate", low=0.0, optional=True),
                     ci_low=_number(m.get("ci_low"), path, where + "ci_low", low=0.0, optional=True),
                     ci_high=_number(m.get("ci_high"), path, where + "ci_high", low=0.0, optional=True),
                     covered=m.get("covered"), rule=_rule(m.get("rule"), path, where + "rule"))
    if not isinstance(out.covered, bool):
        raise _bad(path, where + "covered", f"must be true or false, got {str(out.covered)[:60]!r}")
    if out.ci_low is None or out.ci_high is None:
        if out.covered:
            raise _bad(path, where + "covered", "must be false when the CI is not estimable (ci_low or ci_high null)")
    elif out.ci_low > out.ci_high:
        raise _bad(path, where + "ci_low", f"must not exceed ci_high ({out.ci_low:g} > {out.ci_high:g})")
    return out


def _whole(value: Any, path: Path, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 10**6:
        raise _bad(path, where, f"must be a whole number from 0 to 1000000, got {str(value)[:60]!r}")
    return value


def _comparison(item: Any, path: Path, i: int) -> AAComparison:
    m = _mapping(item, path, f"aa.comparisons[{i}]")
    where = f"aa.comparisons[{i}]."
    shown = m.get("shown")
    if not isinstance(shown, bool):
        raise _bad(path, where + "shown", f"must be true or false, got {str(shown)[:60]!r}")
    return AAComparison(index=_whole(m.get("index"), path, where + "index"),
                        ratio=_number(m.get("ratio"), path, where + "ratio", low=0.0),
                        ci_low=_number(m.get("ci_low"), path, where + "ci_low", low=0.0),
                        ci_high=_number(m.get("ci_high"), path, where + "ci_high", low=0.0),
                        p=_number(m.get("p"), path, where + "p", low=0.0), shown=shown)


def _mde_row(item: Any, path: Path, i: int) -> tuple[int, int, float]:
    m = _mapping(item, path, f"aa.mde_table[{i}]")
    where = f"aa.mde_table[{i}]."
    return (_whole(m.get("setups_per_arm"), path, where + "setups_per_arm"),
            _whole(m.get("runs_per_setup"), path, where + "runs_per_setup"),
            _number(m.get("mde"), path, where + "mde", low=1.0))


def _list(value: Any, path: Path, where: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > 1000:
        raise _bad(path, where, "must be a list of at most 1000 items")
    return value


def _aa(value: Any, path: Path) -> AAResult:
    m = _mapping(value, path, "aa")
    n = m.get("n")
    k = m.get("false_positives", 0)
    for key, v in (("n", n), ("false_positives", k)):
        _whole(v, path, f"aa.{key}")
    if k > n:
        raise _bad(path, "aa.false_positives", f"must not exceed aa.n ({k} > {n})")
    rate = _number(m.get("false_positive_rate"), path, "aa.false_positive_rate", low=0.0, optional=True)
    if rate is not None and rate > 1:
        raise _bad(path, "aa.false_positive_rate", f"must lie in [0, 1], got {rate:g}")
    return AAResult(n=n, false_positives=k, false_positive_rate=rate,
                    cv_run=_number(m.get("cv_run"), path, "aa.cv_run", low=0.0, optional=True),
                    cv_setup=_number(m.get("cv_setup"), path, "aa.cv_setup", low=0.0, optional=True),
                    mde=_number(m.get("mde"), path, "aa.mde", low=1.0, optional=True),
                    comparisons=tuple(_comparison(c, path, i)
                                      for i, c in enumerate(_list(m.get("comparisons"), path, "aa.comparisons"))),
                    mde_table=tuple(_mde_row(r, path, i)
                                    for i, r in enumerate(_list(m.get("mde_table"), path, "aa.mde_table"))))


def read_calibration(path: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None) -> Calibration:
    """Read a ``calibration.json`` through the input gate and check every field a write-up uses.

    Parameters
    ----------
    path : path
        The file.
    root : path, optional
        With it, the file's real path must lie inside ``root`` (:func:`storagebench._inputs.open_input`).

    Returns
    -------
    Calibration

    Raises
    ------
    SchemaError
        Not a regular file, over :data:`MAX_CALIBRATION_BYTES`, not UTF-8 JSON, a newer ``format_version``, or a
        field of the wrong type or range (the message names the file and the field).
    """
    p = Path(path)
    text = read_text(p, max_bytes=MAX_CALIBRATION_BYTES, what="calibration.json", error=SchemaError, root=root)
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise _bad(p, "the file", f"is not JSON ({exc})") from None
    data = _mapping(data, p, "the document")
    version = data.get("format_version")
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= FORMAT_VERSION:
        raise _bad(p, "format_version", f"must be 1 to {FORMAT_VERSION} (a newer one needs a newer storagebench), "
                                        f"got {str(version)[:60]!r}")
    date = _text(data.get("date"), p, "date")
    if not _DATE.match(date):
        raise _bad(p, "date", f"must be ISO 8601 UTC (2026-11-28T03:00:00Z), got {date[:60]!r}")
    host = _mapping(data.get("host"), p, "host")
    checks = data.get("checks")
    if checks is None:
        raise _bad(p, "checks", "is missing (a list, empty when there are no known-answer checks)")
    checks = _list(checks, p, "checks")
    budget = _mapping(data.get("budget", {}), p, "budget")
    quick = data.get("quick", False)
    if not isinstance(quick, bool):
        raise _bad(p, "quick", f"must be true or false, got {str(quick)[:60]!r}")
    return Calibration(
        path=p, date=date, hostname=_text(host.get("hostname"), p, "host.hostname"),
        machine_id=_text(host.get("machine_id"), p, "host.machine_id", optional=True),
        storagebench_version=_text(data.get("storagebench_version"), p, "storagebench_version"),
        quick=quick, aa=_aa(data.get("aa"), p), checks=tuple(_check(c, p, i) for i, c in enumerate(checks)),
        budget={k: _number(budget.get(k), p, f"budget.{k}", low=0.0)
                for k in ("mde_setups_per_arm", "mde_runs_per_setup", "power", "alpha") if budget.get(k) is not None})


def find_calibrations(results_root: str | os.PathLike[str], hostname: str) -> tuple[list[Calibration], list[str]]:
    """The calibrations of ``hostname`` under ``<results_root>/calibration/*/calibration.json``, newest first.

    Parameters
    ----------
    results_root : path
        The results root (the directory that holds the studies, e.g. ``results``).
    hostname : str
        The host's name as its runs' provenance records it.

    Returns
    -------
    (list of Calibration, list of str)
        The readable calibrations of that host, newest first, and one line per file refused (file and why:
        never read further, never cited). At most :data:`MAX_CALIBRATIONS` directories are looked at.
    """
    base = Path(results_root) / CALIBRATION_DIR
    found: list[Calibration] = []
    refused: list[str] = []
    try:
        entries = sorted(os.scandir(base), key=lambda e: e.name)[:MAX_CALIBRATIONS]
    except OSError:
        return [], []
    for entry in entries:
        if not entry.is_dir(follow_symlinks=False):
            continue
        path = Path(entry.path) / CALIBRATION_FILE
        if not os.path.lexists(path):
            continue
        try:
            cal = read_calibration(path, root=base)
        except SchemaError as exc:
            refused.append(str(exc))
            continue
        if cal.hostname == hostname:
            found.append(cal)
    found.sort(key=lambda c: c.when, reverse=True)
    return found, refused


def latest_calibration(results_root: str | os.PathLike[str], hostname: str) -> Calibration | None:
    """The newest calibration of ``hostname`` (:func:`find_calibrations`), or None."""
    found, _ = find_calibrations(results_root, hostname)
    return found[0] if found else None


def _pct(x: float | None) -> str:
    return "not estimated" if x is None else f"{100 * x:.1f}%"


def citation(cal: Calibration, *, relative_to: str | os.PathLike[str] | None = None) -> str:
    """Plain text citing a calibration in a write-up: where, when, the A/A false-positive rate, the noise floor, the
    smallest detectable ratio with its budget, and how many known-answer checks covered their truth.

    The text holds values from the file: put it on a page only through :mod:`storagebench._html`.
    """
    where = str(cal.path)
    if relative_to is not None:
        try:
            where = os.path.relpath(cal.path, relative_to)
        except ValueError:
            pass
    aa = cal.aa
    fpr = ("no A/A comparison" if aa.n == 0 or aa.false_positive_rate is None else
           f"A/A false-positive rate {aa.false_positives}/{aa.n} ({aa.false_positive_rate:.0%})")
    b = cal.budget
    mde = "not estimated" if aa.mde is None else f"{aa.mde:.3g}"
    if aa.mde is not None and {"mde_setups_per_arm", "mde_runs_per_setup"} <= set(b):
        mde += (f" with {b['mde_setups_per_arm']:g} set-ups per arm x {b['mde_runs_per_setup']:g} runs per set-up "
                f"(power {b.get('power', 0.8):g}, alpha {b.get('alpha', 0.05):g})")
    covered = sum(c.covered for c in cal.checks)
    checks = (f"{covered} of {len(cal.checks)} known-answer checks covered their truth" if cal.checks
              else "no known-answer checks")
    return (f"Calibration of this host ({cal.hostname}) on {cal.date[:10]} with storagebench "
            f"{cal.storagebench_version}{' (quick)' if cal.quick else ''}, {where}: {fpr}; noise floor: run-to-run "
            f"CV {_pct(aa.cv_run)}, set-up-to-set-up CV {_pct(aa.cv_setup)}; smallest ratio detectable {mde}; "
            f"{checks}.")
