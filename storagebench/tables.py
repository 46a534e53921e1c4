"""Tables a reader can use: one formatter (a pandas ``Styler``) for every result table of a write-up.

:func:`table` puts units in the headers, shows tidy columns in their display unit (ns -> ms, bytes/s ->
MB/s or MiB/s, bs in KiB), gives ``digits`` significant digits, formats p-values (``< 1e-06``), merges an
estimate and its CI bounds into one column and hides the index. It depends on pandas only, so every
layer can format its results with it (:class:`storagebench.stats.comparison.ComparisonTable` does).

It is the one owner of a column's words and unit: :func:`column_display` (header and scale of a tidy
column), :func:`metric_words` (the words for a sentence) and :data:`METRICS` (the display metrics the
figures and the point tables take by name: ``"iops"``, ``"lat_mean_ms"``, ``"bw_MB_per_s"`` ...).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pandas.io.formats.style import Styler

from ._checks import one_of
from ._html import escape
from .errors import PublishError
from .findings import CONFIDENCE, fmt_number, fmt_p
from .fio.options import option_unit
from .schema import TABLES, columns

__all__ = ["P_COLUMNS", "column_display", "metric_words", "value_text", "table", "METRICS", "display_metric",
           "write_csv"]

#: Columns formatted as p-values.
P_COLUMNS = frozenset({"p", "p_adjusted", "p_equivalence", "p_rank", "p_value", "pvalue", "p_adj", "PR(>F)"})

_NAMES = {
    "iops": "IOPS", "lat_mean": "mean latency, lat", "clat_mean": "mean completion latency, clat",
    "slat_mean": "mean submission latency, slat", "bw": "bandwidth", "bs": "I/O size, bs",
    "rwmixread": "reads, rwmixread", "random": "random I/O, percentage_random", "usr_cpu": "user CPU", "sys_cpu": "system CPU",
    "n_baseline": "n baseline", "n_other": "n other", "mean_baseline": "arithmetic mean baseline",
    "mean_other": "arithmetic mean other", "gmean_baseline": "geometric mean baseline",
    "gmean_other": "geometric mean other",
}
_SCHEMA_NAMES = frozenset(c.name for cols in TABLES.values() for c in cols)
_LATENCY = {"lat": "latency, lat", "clat": "completion latency, clat", "slat": "submission latency, slat"}
#: Headers of columns without a unit suffix that read badly as their names (Bland-Altman limits of agreement; the
#: QoS bound of stats.qos_max_load, the upper end of a two-sided CI: a one-sided bound, its level in the method).
_PLAIN = {"loa_low": "lower LoA", "loa_high": "upper LoA",
          "meets_confident": "meets by the one-sided upper bound",
          "max_load_confident": "max load by the one-sided upper bound",
          "max_outstanding_ios_confident": "max outstanding I/Os by the one-sided upper bound",
          # within-run stability (studies: the PTS criteria on one-second samples, not PTS steady state)
          "steady": "stable within the run", "runs_not_steady": "runs not stable within the run",
          "steady_rounds": "one-second samples", "steady_note": "stability note"}


def _words(stem: str) -> str:
    if stem in _NAMES:
        return _NAMES[stem]
    m = re.fullmatch(r"(lat|clat|slat)_p(\d+(?:[._]\d+)?)", stem)  # clat_p99_9 (schema.percentile_column), clat_p99.9
    if m:
        return f"p{m[2].replace('_', '.')} {_LATENCY[m[1]]}"
    return stem


def column_display(name: str, bandwidth: str = "MB/s") -> tuple[str, float]:
    """Display header (with its unit) and scale of a tidy column, from the unit in its name.

    Parameters
    ----------
    name : str
        A column name (``lat_mean_ns``, ``bw_bytes_per_s``, ``bs_bytes``, ``iops``, ``rwmixread_pct`` ...).
    bandwidth : {"MB/s", "MiB/s"}
        Display unit of ``*_bytes_per_s`` columns: 10^6 or 2^20 bytes per second.

    Returns
    -------
    (str, float)
        The header and the factor from the column's unit to the display unit: ``("mean latency, lat
        (ms)", 1e-6)`` for ``lat_mean_ns``; ``("DiskSPD mean latency, lat (ms)", 1e-6)`` for ``"DiskSPD
        lat_mean_ns"`` (a label, a space and a tidy column); ``("rate_iops (I/Os per s)", 1.0)`` for a study
        factor that is a fio option with a unit (:func:`storagebench.fio.options.option_unit`); ``(name, 1.0)``
        for any other column without a unit suffix.
    """
    if bandwidth not in ("MB/s", "MiB/s"):
        raise PublishError(f"bandwidth must be one of ['MB/s', 'MiB/s'], got {bandwidth!r}")
    if " " in name:  # "<label> <tidy column>", e.g. "DiskSPD lat_mean_ns" (one tool's mean of a metric)
        label, stem = name.rsplit(" ", 1)
        header, scale = column_display(stem, bandwidth)
        if header != stem:
            return f"{label} {header}", scale
        return name, 1.0
    if name == "iops":
        return "IOPS (1/s)", 1.0
    if name == "bs_bytes":
        return "I/O size, bs (KiB)", 1 / 1024
    for suffix, unit, scale in (("_bytes_per_s", bandwidth, 1e-6 if bandwidth == "MB/s" else 1 / 2**20),
                                ("_ns", "ms", 1e-6), ("_bytes", "MiB", 1 / 2**20), ("_pct", "%", 1.0),
                                ("_ms", "ms", 1.0), ("_s", "s", 1.0)):
        if name.endswith(suffix) and len(name) > len(suffix):
            return f"{_words(name[: -len(suffix)])} ({unit})", scale
    unit = option_unit(name) if name not in _SCHEMA_NAMES else None  # a study factor that is a fio option
    if unit:
        return f"{name} ({unit})", 1.0
    return _PLAIN.get(name, name), 1.0


def metric_words(name: str) -> str:
    """A tidy column's name in words, without its unit, for a sentence: ``"IOPS"`` for ``iops``, ``"p90
    completion latency (clat)"`` for ``clat_p90_ns``, ``"mean latency (lat)"`` for ``lat_mean_ns``; any other
    name as it is. fio's own name of the latency follows in parentheses (the header's ``", clat"`` would read
    as a list in mid-sentence: "FIO's mean latency (lat) is 3.89 times DiskSPD's")."""
    header, _ = column_display(str(name))
    m = re.fullmatch(r"(.+) \(([^()]+)\)", header)
    words = m[1] if m else header
    m = re.fullmatch(r"(.+), ([a-z]+)", words)
    return f"{m[1]} ({m[2]})" if m else words


@dataclass(frozen=True)
class DisplayMetric:
    """A display metric: the tidy column it is computed from, its scale to the display unit, its label.

    Attributes
    ----------
    column : str
        Tidy column (``iops``, ``lat_mean_ns``, ``clat_p99_ns`` ...).
    scale : float
        Display value = column value x ``scale`` (1e-6 from ns to ms).
    label : str
        Axis label with the display unit.
    fmt : str
        Format of an annotated value (``",.0f"``, ``".3g"``).
    """

    column: str
    scale: float
    label: str
    fmt: str


def _from_column(column: str, fmt: str) -> DisplayMetric:
    """The display metric of a tidy column in its :func:`column_display` words, unit and scale."""
    label, scale = column_display(column)
    return DisplayMetric(column, scale, label, fmt)


#: Display metrics: name -> tidy column, scale to the display unit, axis label. Latencies are named and
#: scaled by :func:`column_display`; IOPS, bandwidth and CPU say more on an axis than in a table header.
METRICS: dict[str, DisplayMetric] = {
    "iops": DisplayMetric("iops", 1.0, "IOPS (I/Os per s)", ",.0f"),
    "kiops": DisplayMetric("iops", 1e-3, "IOPS (thousand I/Os per s)", ".3g"),
    "bw_MB_per_s": DisplayMetric("bw_bytes_per_s", 1e-6, "bandwidth (MB/s, 10^6 B/s)", ".4g"),
    "bw_MiB_per_s": DisplayMetric("bw_bytes_per_s", 1.0 / 2**20, "bandwidth (MiB/s, 2^20 B/s)", ".4g"),
    # every latency statistic of a run's distribution in runs (means, percentiles: the schema's metric columns
    # in ns that are not spreads or extremes), in ms
    **{c.name[: -len("_ns")] + "_ms": _from_column(c.name, ".3g") for c in columns("runs", role="metric")
       if c.name.endswith("_ns") and c.combine in ("mean", "mean_sampled", "bins", "own")},
    "usr_cpu_pct": DisplayMetric("usr_cpu_pct", 1.0, "user CPU (% of one CPU, mean over jobs)", ".3g"),
    "sys_cpu_pct": DisplayMetric("sys_cpu_pct", 1.0, "system CPU (% of one CPU, mean over jobs)", ".3g"),
}


def display_metric(name: str) -> DisplayMetric:
    """The :data:`METRICS` entry of ``name``.

    Parameters
    ----------
    name : str
        A display metric name (``"iops"``, ``"lat_mean_ms"``, ``"clat_p99_ms"`` ...).

    Returns
    -------
    DisplayMetric

    Raises
    ------
    ValueError
        ``name`` is not in :data:`METRICS` (the message lists them).
    """
    one_of("metric", name, list(METRICS))
    return METRICS[name]


#: Suffixes of tidy column names that give a value's unit, longest first (as :func:`column_display` reads them).
_SUFFIXES = ("_bytes_per_s", "_bytes", "_pct", "_ns", "_ms", "_s")


def value_text(column: str, value: Any, digits: int = 3) -> str:
    """``column value`` for a sentence, the value in its display unit under the column's short name.

    ``value_text("bs_bytes", 4096)`` is ``"bs 4 KiB"``, ``value_text("rwmixread_pct", 70)`` is
    ``"rwmixread 70%"``, ``value_text("pattern", "4k_randread")`` is ``"pattern 4k_randread"``: the short name
    is the fio option (the column without its unit suffix), so a list of such items stays readable.
    """
    name = str(column)
    header, scale = column_display(name)
    m = re.fullmatch(r"(.+) \(([^()]+)\)", header)
    suffix = next((x for x in _SUFFIXES if name.endswith(x) and len(name) > len(x)), None)
    if m is None or suffix is None or isinstance(value, (bool, np.bool_)):
        return f"{name} {value}"
    try:
        number = float(value) * scale
    except (TypeError, ValueError):
        return f"{name} {value}"
    unit = m[2]
    return f"{name[: -len(suffix)]} {fmt_number(number, digits)}{'' if unit == '%' else ' '}{unit}"


def _ci_triples(cols: Sequence[str]) -> list[tuple[str, str, str]]:
    out = []
    for c in cols:
        if f"{c}_ci_low" in cols and f"{c}_ci_high" in cols:
            out.append((c, f"{c}_ci_low", f"{c}_ci_high"))
    if "ci_low" in cols and "ci_high" in cols:
        est = "ratio" if "ratio" in cols else None
        if est is None:  # the column just before ci_low is the estimate (ratio_bias, estimate ...)
            i = list(cols).index("ci_low")
            est = cols[i - 1] if i > 0 else None
        if est is not None:
            out.append((est, "ci_low", "ci_high"))
    return out


def table(df: pd.DataFrame, *, digits: int = 3, bandwidth: str = "MB/s", confidence: float | None = None,
          labels: Mapping[str, str] | None = None, units: bool = True, merge_ci: bool = True,
          caption: str | None = None, na_rep: str = "", index: bool | None = None,
          formats: Mapping[str, Callable[[Any], str]] | None = None):
    """A result table formatted for a reader (pandas ``Styler``): units in headers, no index column.

    Parameters
    ----------
    df : pandas.DataFrame
        Any result table; tidy columns (``lat_mean_ns``, ``bw_bytes_per_s`` ...) are shown in display
        units (:func:`column_display`). A non-default index (e.g. ``numjobs, iodepth``) becomes columns.
    digits : int
        Significant digits of float columns (:func:`storagebench.findings.fmt_number`); integers and
        integer parts are never cut.
    bandwidth : {"MB/s", "MiB/s"}
        Display unit of bandwidth columns.
    confidence : float, optional
        Level of merged CIs, for their header; default: the table's ``confidence`` column, else :data:`~storagebench.findings.CONFIDENCE`.
    labels : mapping, optional
        Header per column, replacing the generated one (e.g. ``{"level": "stripe width"}``).
    units : bool
        Convert tidy columns to display units and put the unit in the header (default True).
    merge_ci : bool
        Show ``x``, ``x_ci_low``, ``x_ci_high`` (and ``ratio``/``estimate``, ``ci_low``, ``ci_high``) as the
        estimate and one ``95% CI`` column ``"low – high"``.
    caption : str, optional
        Table caption (shown above it).
    na_rep : str
        Text of a missing value (default: empty, e.g. an ANOVA's residual row).
    index : bool, optional
        Keep the index as columns; default: when it is not a plain 0..n-1 range.
    formats : mapping, optional
        A formatter per column (after renaming by ``labels`` is not applied: use the source column name).

    Returns
    -------
    pandas.io.formats.style.Styler
        With the ``sb-table`` class, no index, p-value columns (:data:`P_COLUMNS`) as ``0.012``,
        ``3.9e-04``, ``< 1e-06``, booleans as yes/no. ``.data`` holds the display frame.

    Raises
    ------
    PublishError
        ``df`` is not a DataFrame, bad ``bandwidth`` or ``digits``.
    """
    if not isinstance(df, pd.DataFrame):
        raise PublishError(f"table() takes a pandas DataFrame, got {type(df).__name__}")
    if not isinstance(digits, int) or isinstance(digits, bool) or not 1 <= digits <= 15:
        raise PublishError(f"digits must be an int in [1, 15], got {digits!r}")
    keep_index = index if index is not None else not (isinstance(df.index, pd.RangeIndex) and df.index.start == 0
                                                      and df.index.step == 1 and df.index.name is None)
    data = df.reset_index() if keep_index else df.reset_index(drop=True)
    data.columns = [str(c) for c in data.columns]
    formats = dict(formats or {})
    if confidence is None:
        conf = data["confidence"].dropna().unique() if "confidence" in data.columns else []
        confidence = float(conf[0]) if len(conf) == 1 else CONFIDENCE
    out: dict[str, pd.Series] = {}
    fmts: dict[str, Callable[[Any], str]] = {}
    merged = {}
    if merge_ci:
        for est, lo, hi in _ci_triples(list(data.columns)):
            merged[est] = (lo, hi)
    skip = {c for pair in merged.values() for c in pair}

    def numeric_fmt(v: Any) -> str:
        if v is None or (isinstance(v, float) and np.isnan(v)):
            return na_rep
        if isinstance(v, (bool, np.bool_)):
            return "yes" if v else "no"
        if isinstance(v, (int, np.integer)):
            return f"{int(v):,}"
        if isinstance(v, (float, np.floating)):
            return fmt_number(v, digits)
        return str(v)

    for col in data.columns:
        if col in skip:
            continue
        header, scale = column_display(col, bandwidth) if units else (col, 1.0)
        if col not in P_COLUMNS:  # "share_of_best" -> "share of best": a header that can wrap, and reads as words
            header = header.replace("_", " ")
        header = (labels or {}).get(col, header)
        s = data[col]
        if scale != 1.0 and pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s):
            s = s.astype(float) * scale
        if col in formats:
            fmts[header] = formats[col]
        elif col in P_COLUMNS:
            fmts[header] = lambda v: na_rep if pd.isna(v) else fmt_p(v)
        elif pd.api.types.is_bool_dtype(s):
            fmts[header] = lambda v: na_rep if pd.isna(v) else ("yes" if v else "no")
        else:
            fmts[header] = numeric_fmt
        out[header] = s
        if col in merged:
            lo, hi = merged[col]
            lo_s, hi_s = data[lo].astype(float) * scale, data[hi].astype(float) * scale
            unit = header[header.rfind("("):] if header.endswith(")") and "(" in header else ""
            ci_head = f"{confidence:.0%} CI" + (f" {unit}" if unit else "")
            if len(merged) > 1:  # several estimates with a CI each: say whose CI it is
                ci_head = f"{header.removesuffix(' ' + unit) if unit else header}: {ci_head}"
            out[ci_head] = pd.Series([
                "n/a" if not (np.isfinite(a) and np.isfinite(b)) else f"{fmt_number(a, digits)}\u00a0–\u00a0{fmt_number(b, digits)}"
                for a, b in zip(lo_s, hi_s, strict=True)], index=data.index)
            fmts[ci_head] = str
    return _styled(pd.DataFrame(out), fmts, na_rep, caption)


def _styled(frame: pd.DataFrame, fmts: dict[str, Callable[[Any], str]], na_rep: str, caption: str | None) -> Styler:
    """:func:`table`'s display frame as a Styler: every cell, header and the caption escaped by the HTML gate,
    text columns left-aligned, numbers unbroken."""
    # pandas escapes neither a formatter's output nor (by default) headers and captions: every cell ("< 1e-06",
    # a target path, a factor level), header and the caption go through the HTML gate (storagebench._html.escape)
    safe = {h: (lambda v, f=f: str(escape(f(v)))) for h, f in fmts.items()}
    styler = Styler(frame, cell_ids=False, na_rep=str(escape(na_rep)))
    styler = styler.format(safe).format_index(lambda h: str(escape(h)), axis=1).hide(axis="index")
    styler = styler.set_table_attributes('class="sb-table"')
    text_cols = [i for i, c in enumerate(frame.columns)
                 if not pd.api.types.is_numeric_dtype(frame[c]) and " CI" not in c]
    styles = [{"selector": f"td.col{i}", "props": "text-align: left;"} for i in text_cols]
    styles += [{"selector": f"td.col{i}", "props": "white-space: nowrap;"} for i in range(len(frame.columns))
               if i not in text_cols]
    styles += [{"selector": f"th.col_heading.col{i}", "props": "text-align: left;"} for i in text_cols]
    styler = styler.set_table_styles(styles)
    if caption:
        styler = styler.set_caption(str(escape(caption)))
    return styler


def _csv_stem(name: str) -> str:
    """A file name stem from a table's name (which may come from a parameter): letters, digits, ``.``, ``_``
    and ``-`` only, every other run of characters one ``_``, no leading dot, at most 120 characters."""
    stem = re.sub(r"[^\w.-]+", "_", str(name), flags=re.ASCII).lstrip(".")[:120]
    return stem or "table"


def write_csv(out_dir: str | os.PathLike | None, tables: Mapping[str, Any]) -> list[Path]:
    """Write result tables as CSV files, ``<out_dir>/<name>.csv`` each: a write-up's export of its numbers.

    Parameters
    ----------
    out_dir : path, or None / ``""``
        The directory (created if needed); ``None`` or ``""`` writes nothing (a notebook's ``out_dir = ""``).
    tables : mapping
        ``{name: table}``; a table is a DataFrame or has ``to_frame()`` (a ``ComparisonTable``). Written
        without the index, in the tidy units of its columns. The name becomes the file name with every
        character other than letters, digits, ``.``, ``_`` and ``-`` replaced (``"a vs b/iops"`` ->
        ``a_vs_b_iops.csv``), so a name from a parameter cannot leave ``out_dir``.

    Returns
    -------
    list of pathlib.Path
        The files written, in the order of ``tables``.

    Raises
    ------
    PublishError
        Two names that give the same file name.
    OSError
        ``out_dir`` or a file cannot be written.
    """
    if not out_dir:
        return []
    out = Path(out_dir)
    paths = [out / f"{_csv_stem(name)}.csv" for name in tables]
    if len(set(paths)) < len(paths):
        raise PublishError(f"table names {list(tables)} give the same CSV file name twice; name each table apart")
    out.mkdir(parents=True, exist_ok=True)
    for path, frame in zip(paths, tables.values(), strict=True):
        (frame.to_frame() if hasattr(frame, "to_frame") and not isinstance(frame, pd.DataFrame) else frame).to_csv(
            path, index=False)
    return paths
