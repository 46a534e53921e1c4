"""Findings: what a study found, in plain sentences generated from its results.

A :class:`Finding` is one sentence with the numbers behind it (estimate, CI, n, the unit of
replication and the method) kept as fields, so the same finding can be printed by the CLI, shown
first in a write-up and recorded in the write-up's ``report.json``. Sentences are built by library
functions from results (e.g. :func:`storagebench.stats.sweep_summary`), never typed into a notebook.
It is the one finding type: the statistics, the testbed studies and the notebooks all build it.

:data:`CONFIDENCE` is the one default confidence level of every CI and test in storagebench (stats,
plots, studies, notebooks and the CLI read it): changing it here changes it everywhere. The level is
always called ``confidence``; ``ci`` is an interval (:attr:`Finding.ci`, the ``*_ci_low`` columns).

:class:`Findings` is what a notebook displays. Its display bundle holds ``text/html`` (a short
*Findings* section), ``text/plain`` and the machine-readable :data:`MIME_TYPE` part, which
:func:`storagebench.publish.publish_report` reads to put the section first in the page and to write
the sidecar.
"""

from __future__ import annotations

import functools
import math
import numbers
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ._html import Markup, html
from .errors import PublishError

__all__ = ["CONFIDENCE", "confidence_level", "MIME_TYPE", "FORMAT_VERSION", "Finding", "Findings", "fmt_number",
           "fmt_ci", "fmt_p", "P_FLOOR", "METHOD_SHOWN", "short_method"]

#: The default confidence level of every CI and test (``alpha = 1 - CONFIDENCE``), for every function,
#: notebook and command that takes a ``confidence``: the one place to change it.
CONFIDENCE = 0.95


def confidence_level(confidence: Any = None, *, name: str = "confidence",
                     error: type[Exception] = ValueError) -> float:
    """A confidence level checked: a number in (0, 1), or :data:`CONFIDENCE` for ``None``.

    What a notebook whose ``confidence`` parameter defaults to ``None`` calls first, so that the default
    stays :data:`CONFIDENCE` (papermill parameters are literals, and a literal would be a second default).

    Parameters
    ----------
    confidence : float or None
        The level (0.9, 0.95, 0.99); ``None`` for :data:`CONFIDENCE`.
    name : str
        The input's name in the error (``confidence``, ``--confidence``, ``-p confidence``).
    error : type of Exception
        What to raise (default :class:`ValueError`; the studies raise :class:`~storagebench.errors.StudyError`).

    Returns
    -------
    float

    Raises
    ------
    ValueError
        (or ``error``) Not a number in (0, 1): a bool, text, a percentage such as 95, 0 or 1.
    """
    if confidence is None:
        return CONFIDENCE
    if isinstance(confidence, bool) or not isinstance(confidence, numbers.Real) or not 0 < confidence < 1:
        raise error(f"{name} must be a number in (0, 1), e.g. {CONFIDENCE:g}, got {confidence!r}")
    return float(confidence)


_F = TypeVar("_F", bound=Callable[..., Any])


def renamed_ci(func: _F) -> _F:
    """Let ``func`` take its old keyword ``ci=`` (the level) for one more release, as ``confidence=``.

    ``ci`` now names an interval everywhere; the old keyword still works but warns with a
    :class:`FutureWarning` naming ``confidence`` (seaborn's way when it renamed its own ``ci``).

    Raises
    ------
    TypeError
        Both ``ci`` and ``confidence`` passed.
    """
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if "ci" in kwargs:
            if "confidence" in kwargs:
                raise TypeError(f"{func.__name__}() got both `ci` and `confidence`: pass `confidence` only "
                                "(`ci` is its old name)")
            warnings.warn(f"{func.__name__}(ci=...) is now {func.__name__}(confidence=...): the level of a CI is "
                          "called `confidence` everywhere in storagebench; `ci` will be refused in a later release",
                          FutureWarning, stacklevel=2)
            kwargs["confidence"] = kwargs.pop("ci")
        return func(*args, **kwargs)
    return wrapper  # type: ignore[return-value]

#: MIME type of the machine-readable part of a :class:`Findings` display bundle.
MIME_TYPE = "application/vnd.storagebench.findings+json"

#: Version of the JSON form written by :meth:`Findings.to_dict` (and read by :meth:`Findings.from_dict`).
FORMAT_VERSION = 1


#: p-values below this are written ``< 1e-06``: smaller ones are beyond what a t or normal tail means here.
P_FLOOR = 1e-6


def fmt_number(x: Any, digits: int = 3) -> str:
    """A number for a reader: ``digits`` significant digits, thousands separators, no float noise.

    Parameters
    ----------
    x : float or None
        The value, already in its display unit (ms, MB/s ...).
    digits : int
        Significant digits (default 3). Integer parts are never cut: 105,178 stays 105,178.

    Returns
    -------
    str
        ``"105,178"``, ``"0.0556"``, ``"1.22"``, ``"4.2e-07"``, ``"76"`` for 76.0 (whole numbers keep no
        decimals); ``"n/a"`` for None/NaN/inf.
    """
    try:
        v = float(x)
    except (TypeError, ValueError):
        return "n/a" if x is None else str(x)
    if not math.isfinite(v):
        return "n/a"
    if v == 0:
        return "0"
    if v.is_integer() and abs(v) >= 1:  # a count or a printed whole number: 76, not 76.0
        return f"{v:,.0f}"
    mag = math.floor(math.log10(abs(v)))
    if -4 <= mag < digits - 1:  # rounding may carry into the next power of ten (99.95 -> 100)
        r = round(v, digits - 1 - mag)
        mag = math.floor(math.log10(abs(r))) if r else mag
    if mag >= digits - 1:
        return f"{v:,.0f}"
    if mag < -4:
        return f"{v:.{max(digits - 1, 0)}e}"
    return f"{v:,.{digits - 1 - mag}f}"


def fmt_ci(low: Any, high: Any, confidence: float | None = CONFIDENCE, digits: int = 3) -> str:
    """``"95% CI 102,830 to 107,527"``; ``"no CI: one run"`` when a bound is missing.

    Parameters
    ----------
    low, high : float
        CI bounds in the display unit.
    confidence : float or None
        CI level (0.95 is written 95%); None writes "CI".
    digits : int
        Significant digits of each bound (:func:`fmt_number`).
    """
    lo, hi = _num(low), _num(high)
    if lo is None or hi is None:
        return "no CI: one run"
    level = f"{confidence:.0%} CI" if confidence else "CI"
    return f"{level} {fmt_number(lo, digits)} to {fmt_number(hi, digits)}"


def fmt_p(p: Any) -> str:
    """A p-value for a reader: ``"0.387"``, ``"0.012"``, ``"3.9e-04"``, ``"< 1e-06"``; ``"n/a"`` for NaN.

    Below :data:`P_FLOOR` the exact value means nothing (the tail of a t distribution that far out is
    not what the data support), so it is written as a bound.
    """
    v = _num(p)
    if v is None:
        return "n/a"
    if v < P_FLOOR:
        return f"< {P_FLOOR:.0e}"
    if v < 1e-3:
        return f"{v:.1e}"
    return f"{v:.3f}"


#: Characters of a method shown beside a finding in the page; a longer one is cut after its last whole
#: clause that fits (the full text stays in the finding, the sidecar, a tooltip and the write-up's Methods).
METHOD_SHOWN = 220


def short_method(method: str, limit: int = METHOD_SHOWN) -> str:
    """``method`` cut after its last whole ``;``-clause (outside parentheses) within ``limit`` characters.

    The first clause is always kept whole; ``" …"`` marks a cut. A method of at most ``limit`` characters is
    returned as it is.
    """
    if len(method) <= limit:
        return method
    depth, cuts = 0, []
    for i, ch in enumerate(method):
        depth += ch == "("
        depth -= ch == ")"
        if ch == ";" and depth == 0:
            cuts.append(i)
    fitting = [i for i in cuts if i <= limit]
    end = fitting[-1] if fitting else (cuts[0] if cuts else len(method))
    return method[:end].rstrip() + (" …" if end < len(method) else "")


def _num(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


@dataclass(frozen=True)
class Finding:
    """One finding: a sentence and the numbers it states.

    Attributes
    ----------
    sentence : str
        The finding in plain words, numbers included (generated from results).
    estimate : float or None
        The number the sentence is about, in ``unit``; ``None`` for a caveat without one.
    ci : (float, float) or None
        Its confidence interval, in ``unit``; ``None`` when there is none (one run per point, a
        published value).
    confidence : float or None
        Level of ``ci`` (e.g. :data:`CONFIDENCE`).
    n : int or None
        How many units of replication the estimate rests on.
    unit_of_replication : str
        What was independently repeated, in the plural so that it reads after ``n`` ("fio runs of the
        point", "matched (VM count, tool) pairs", "published cells").
    method : str
        How the estimate and its CI were computed, with the source.
    unit : str
        Unit of ``estimate`` and ``ci`` ("IOPS", "ms", "ratio").
    key : str
        Short stable identifier ("peak_iops", "recommended"), for tests and the sidecar; a study's
        findings are keyed ``<kind>:<position>`` (``verdict:0``, ``drift:5``), see :attr:`kind`.
    caveat : bool
        True for a caveat (e.g. the I/Os were served from a cache) rather than a result.
    """

    sentence: str
    estimate: float | None = None
    ci: tuple[float, float] | None = None
    confidence: float | None = None
    n: int | None = None
    unit_of_replication: str = ""
    method: str = ""
    unit: str = ""
    key: str = ""
    caveat: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.sentence, str) or not self.sentence.strip():
            raise PublishError(f"a Finding needs a non-empty sentence, got {self.sentence!r}")
        if self.ci is not None:
            lo, hi = (_num(v) for v in self.ci)
            object.__setattr__(self, "ci", None if lo is None or hi is None else (lo, hi))
        object.__setattr__(self, "estimate", _num(self.estimate))
        object.__setattr__(self, "confidence", _num(self.confidence))
        if self.n is not None:
            object.__setattr__(self, "n", int(self.n))

    @property
    def kind(self) -> str:
        """What sort of finding this is: :attr:`key` up to its first ``:`` (``verdict``, ``drift``, ``plan`` ...)."""
        return self.key.split(":", 1)[0]

    def detail(self, method: bool = True, *, limit: int | None = None) -> str:
        """``n = 2 fio runs per point; method: ...``: the numbers behind the sentence, in words.

        Parameters
        ----------
        method : bool
            Include the method (False when the finding before it had the same one).
        limit : int, optional
            Cut a longer method after its last whole clause (:func:`short_method`); default: never.
        """
        parts = []
        if self.n is not None:
            parts.append(f"n = {self.n}" + (f" {self.unit_of_replication}" if self.unit_of_replication else ""))
        elif self.unit_of_replication:
            parts.append(f"unit of replication: {self.unit_of_replication}")
        if self.method and method:
            parts.append(f"method: {short_method(self.method, limit) if limit else self.method}")
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of the fields (``ci`` as a two-element list or ``None``)."""
        return {"key": self.key, "sentence": self.sentence, "estimate": self.estimate,
                "ci": list(self.ci) if self.ci else None, "confidence": self.confidence, "n": self.n,
                "unit": self.unit, "unit_of_replication": self.unit_of_replication, "method": self.method,
                "caveat": self.caveat}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Finding:
        """Inverse of :meth:`to_dict`.

        Raises
        ------
        PublishError
            ``d`` is not a mapping with a ``sentence``.
        """
        if not isinstance(d, Mapping) or "sentence" not in d:
            raise PublishError(f"a finding must be a mapping with a 'sentence', got {d!r}")
        ci = d.get("ci")
        return cls(sentence=str(d["sentence"]), estimate=d.get("estimate"),
                   ci=tuple(ci) if ci else None, confidence=d.get("confidence"), n=d.get("n"),
                   unit_of_replication=str(d.get("unit_of_replication") or ""), method=str(d.get("method") or ""),
                   unit=str(d.get("unit") or ""), key=str(d.get("key") or ""), caveat=bool(d.get("caveat", False)))


@dataclass(frozen=True)
class Findings:
    """The findings of one write-up; display it in a notebook to open the published page with it.

    Attributes
    ----------
    findings : tuple of Finding
    title : str
        The question answered, optional ("How many IOPS does this disk do?").
    provenance : str
        One line saying where the data come from (device, fio version, host, dates, or the source
        article), recorded in the sidecar.
    """

    findings: tuple[Finding, ...] = field(default_factory=tuple)
    title: str = ""
    provenance: str = ""

    def __post_init__(self) -> None:
        items = tuple(self.findings)
        bad = [type(f).__name__ for f in items if not isinstance(f, Finding)]
        if bad:
            raise PublishError(f"Findings holds Finding objects only, got {bad}")
        object.__setattr__(self, "findings", items)

    def __iter__(self) -> Iterator[Finding]:
        return iter(self.findings)

    def __len__(self) -> int:
        return len(self.findings)

    def __getitem__(self, key: int | str) -> Finding:
        """A finding by position, or by its ``key``."""
        if isinstance(key, str):
            for f in self.findings:
                if f.key == key:
                    return f
            raise KeyError(f"no finding with key {key!r}; keys are {[f.key for f in self.findings]}")
        return self.findings[key]

    def __add__(self, other: Findings) -> Findings:
        if not isinstance(other, Findings):
            return NotImplemented
        parts = [q for p in (self.provenance, other.provenance) if p for q in p.split("; ") if q]
        return Findings(self.findings + other.findings, title=self.title or other.title,
                        provenance="; ".join(dict.fromkeys(parts)))  # one source named once

    def to_dict(self) -> dict[str, Any]:
        """JSON form: ``{"format_version", "title", "provenance", "findings": [...]}``."""
        return {"format_version": FORMAT_VERSION, "title": self.title, "provenance": self.provenance,
                "findings": [f.to_dict() for f in self.findings]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Findings:
        """Inverse of :meth:`to_dict`.

        Raises
        ------
        PublishError
            Not a findings mapping, or a ``format_version`` newer than this storagebench reads.
        """
        if not isinstance(d, Mapping) or not isinstance(d.get("findings"), list):
            raise PublishError(f"findings JSON must be a mapping with a 'findings' list, got {type(d).__name__}")
        version = d.get("format_version", FORMAT_VERSION)
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise PublishError(f"findings format_version {version!r} is newer than this storagebench reads "
                               f"({FORMAT_VERSION}); upgrade storagebench")
        return cls(tuple(Finding.from_dict(f) for f in d["findings"]), title=str(d.get("title") or ""),
                   provenance=str(d.get("provenance") or ""))

    @classmethod
    def concat(cls, parts: Iterable[Findings]) -> Findings:
        """One :class:`Findings` of several (in order); the first non-empty title is kept."""
        out = cls()
        for p in parts:
            out = out + p
        return out

    def __repr__(self) -> str:
        return f"Findings({len(self.findings)} finding(s){': ' + self.title if self.title else ''})"

    def _repr_pretty_(self, p, cycle) -> None:  # IPython's text/plain
        p.text(self.text())

    def text(self) -> str:
        """Plain text: one ``- sentence`` line per finding (caveats marked ``caveat:``)."""
        lines = [self.title] if self.title else []
        lines += [("caveat: " if f.caveat else "- ") + f.sentence for f in self.findings]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        # every sentence, method and title holds data (labels, factor levels, paths): through the HTML gate
        items = []
        previous = None
        for f in self.findings:
            shown = f.method != previous  # a method shared with the finding before: said once
            detail = f.detail(method=shown, limit=METHOD_SHOWN)
            previous = f.method
            full = (html(' title="method: {}"', f.method)
                    if shown and f.method and short_method(f.method) != f.method else "")
            items.append(html("<li{}>{}{}{}</li>", Markup(' class="sb-caveat"') if f.caveat else "",
                              Markup("<strong>Caveat:</strong> ") if f.caveat else "", f.sentence,
                              html(' <span class="sb-finding-detail"{}>({})</span>', full, detail) if detail else ""))
        title = html('<p class="sb-findings-question">{}</p>', self.title) if self.title else ""
        return str(html('<section class="sb-findings" id="findings" aria-labelledby="sb-findings-heading">'
                        '<h2 id="sb-findings-heading">Findings</h2>{}<ul>{}</ul></section>',
                        title, Markup("").join(items)))

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, Any]:
        return {"text/html": self._repr_html_(), "text/plain": self.text(), MIME_TYPE: self.to_dict()}
