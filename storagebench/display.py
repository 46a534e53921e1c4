"""What a write-up shows: tables a reader can use, numbered figures with captions, collapsed detail.

Three helpers, used by the notebooks and by :class:`storagebench.stats.ComparisonTable`:

* :func:`table` -- a pandas ``Styler`` of a result table: units in the headers, tidy columns in their
  display unit (ns -> ms, bytes/s -> MB/s or MiB/s, bs in KiB), ``digits`` significant digits, p-values
  formatted (``< 1e-06``), an estimate and its CI bounds merged into one column, no index column.
* :func:`show_figure` -- shows a matplotlib figure as a numbered ``<figure>`` (SVG by default, or PNG at
  >= 200 dpi) with its caption and provenance in the HTML, not in the bitmap, and alt text that says what
  the figure shows.
* :func:`collapsed` -- long detail (a 36-row check table) behind a ``<details>`` line.

:func:`storagebench.publish.publish_report` numbers the figures of the whole page again in order and
recognises these outputs (``sb-figure``, ``sb-table``) when it builds the page.
"""

from __future__ import annotations

import base64
import html
import io
import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .errors import PublishError
from .findings import fmt_number, fmt_p

__all__ = [
    "P_COLUMNS",
    "column_display",
    "table",
    "Collapsed",
    "collapsed",
    "FigureHTML",
    "figure_html",
    "show_figure",
    "describe_figure",
    "reset_figure_numbers",
    "FIGURE_DPI",
]

#: Columns formatted as p-values.
P_COLUMNS = frozenset({"p", "p_adjusted", "p_equivalence", "p_rank", "p_value", "pvalue", "p_adj", "PR(>F)"})

#: Resolution of raster figures (PNG), dots per inch; SVG figures are vector.
FIGURE_DPI = 200

_NAMES = {
    "iops": "IOPS", "lat_mean": "mean latency, lat", "clat_mean": "mean completion latency, clat",
    "slat_mean": "mean submission latency, slat", "bw": "bandwidth", "bs": "I/O size, bs",
    "rwmixread": "reads, rwmixread", "random": "random I/O", "usr_cpu": "user CPU", "sys_cpu": "system CPU",
    "n_baseline": "n baseline", "n_other": "n other", "mean_baseline": "mean baseline", "mean_other": "mean other",
}


def _words(stem: str) -> str:
    if stem in _NAMES:
        return _NAMES[stem]
    m = re.fullmatch(r"clat_p([\d.]+)", stem)
    if m:
        return f"p{m[1]} completion latency, clat"
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
        (ms)", 1e-6)`` for ``lat_mean_ns``; ``(name, 1.0)`` for a column without a unit suffix.
    """
    if bandwidth not in ("MB/s", "MiB/s"):
        raise PublishError(f"bandwidth must be one of ['MB/s', 'MiB/s'], got {bandwidth!r}")
    if name == "iops":
        return "IOPS (1/s)", 1.0
    if name == "bs_bytes":
        return "I/O size, bs (KiB)", 1 / 1024
    for suffix, unit, scale in (("_bytes_per_s", bandwidth, 1e-6 if bandwidth == "MB/s" else 1 / 2**20),
                                ("_ns", "ms", 1e-6), ("_bytes", "MiB", 1 / 2**20), ("_pct", "%", 1.0),
                                ("_ms", "ms", 1.0), ("_s", "s", 1.0)):
        if name.endswith(suffix) and len(name) > len(suffix):
            return f"{_words(name[: -len(suffix)])} ({unit})", scale
    return name, 1.0


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
        Level of merged CIs, for their header; default: the table's ``confidence`` column, else 0.95.
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
    from pandas.io.formats.style import Styler

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
        confidence = float(conf[0]) if len(conf) == 1 else 0.95
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
            out[ci_head] = pd.Series([
                "n/a" if not (np.isfinite(a) and np.isfinite(b)) else f"{fmt_number(a, digits)}\u00a0–\u00a0{fmt_number(b, digits)}"
                for a, b in zip(lo_s, hi_s, strict=True)], index=data.index)
            fmts[ci_head] = str
    frame = pd.DataFrame(out)
    styler = Styler(frame, cell_ids=False, na_rep=na_rep)
    styler = styler.format(fmts).hide(axis="index").set_table_attributes('class="sb-table"')
    text_cols = [i for i, c in enumerate(frame.columns)
                 if not pd.api.types.is_numeric_dtype(frame[c]) and " CI" not in c]
    styles = [{"selector": f"td.col{i}", "props": "text-align: left;"} for i in text_cols]
    styles += [{"selector": f"td.col{i}", "props": "white-space: nowrap;"} for i in range(len(frame.columns))
               if i not in text_cols]
    styles += [{"selector": f"th.col_heading.col{i}", "props": "text-align: left;"} for i in text_cols]
    styler = styler.set_table_styles(styles)
    if caption:
        styler = styler.set_caption(caption)
    return styler


def _html_of(obj: Any) -> str:
    if isinstance(obj, str):
        return obj
    if hasattr(obj, "to_html") and hasattr(obj, "hide"):  # a Styler
        return obj.to_html()
    if isinstance(obj, pd.DataFrame):
        return table(obj).to_html()
    if hasattr(obj, "_repr_html_"):
        return obj._repr_html_()
    return f"<pre>{html.escape(str(obj))}</pre>"


@dataclass(frozen=True)
class Collapsed:
    """Detail behind a one-line summary (``<details>``); see :func:`collapsed`."""

    summary: str
    parts: tuple[Any, ...]

    def _repr_html_(self) -> str:
        inner = "".join(_html_of(p) for p in self.parts)
        return (f'<details class="sb-details"><summary>{html.escape(self.summary)}</summary>'
                f"{inner}</details>")

    def __repr__(self) -> str:
        return f"{self.summary} [{len(self.parts)} collapsed part(s)]"


def collapsed(summary: str, *parts: Any) -> Collapsed:
    """Long detail a reader opens when wanted: ``summary`` is shown, ``parts`` (tables, text) are folded.

    Parameters
    ----------
    summary : str
        The one line shown (e.g. "All 36 runs of the Little's-law check (none flagged)").
    *parts
        DataFrames (formatted with :func:`table`), Stylers, HTML strings or objects with ``_repr_html_``.
    """
    if not summary:
        raise PublishError("collapsed() needs a summary line")
    return Collapsed(summary, tuple(parts))


# --------------------------------------------------------------------------- figures

_COUNTER = itertools.count(1)


def reset_figure_numbers() -> None:
    """Number the next figure 1 (figures are numbered in the order they are shown in a kernel)."""
    global _COUNTER
    _COUNTER = itertools.count(1)


def describe_figure(fig) -> str:
    """Alt text from a figure's own labels: what each panel plots against what, and its series.

    Parameters
    ----------
    fig : matplotlib.figure.Figure or Axes

    Returns
    -------
    str
        e.g. ``"IOPS vs iodepth: IOPS (I/Os per s) against iodepth (outstanding I/Os per job); lines for
        numjobs 1, 2, 4."``
    """
    from matplotlib.axes import Axes

    fig = fig.figure if isinstance(fig, Axes) else fig
    parts = []
    sup = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) is not None else ""
    if sup:
        parts.append(sup + ".")
    for ax in fig.axes:
        if ax.get_label() == "<colorbar>" or ax.get_gid() == "storagebench-shared-colorbar":
            if ax.get_ylabel():
                parts.append(f"Colour: {ax.get_ylabel()}.")
            continue
        title, xl, yl = ax.get_title(), ax.get_xlabel(), ax.get_ylabel()
        text = (f"{title}: " if title else "") + (f"{yl} against {xl}" if xl and yl else (yl or xl or "chart"))
        leg = ax.get_legend()
        if leg is not None:
            entries = [t.get_text() for t in leg.get_texts() if t.get_text()]
            head = leg.get_title().get_text().split(";")[0].strip()
            if entries:
                text += f"; series{(' by ' + head) if head else ''}: {', '.join(entries[:12])}"
        parts.append(text + ".")
    return " ".join(parts) or "A figure."


@dataclass(frozen=True)
class FigureHTML:
    """A rendered figure with its number, caption, alt text and provenance (see :func:`figure_html`)."""

    number: int
    caption: str
    alt: str
    provenance: str
    mime: str
    data: bytes
    width_px: int
    height_px: int

    def _repr_html_(self) -> str:
        b64 = base64.b64encode(self.data).decode("ascii")
        prov = f' <span class="sb-provenance">Data: {html.escape(self.provenance)}</span>' if self.provenance else ""
        return (f'<figure class="sb-figure" id="figure-{self.number}">'
                f'<img src="data:{self.mime};base64,{b64}" alt="{html.escape(self.alt, quote=True)}" '
                f'width="{self.width_px}" height="{self.height_px}">'
                f'<figcaption><span class="sb-fignum">Figure {self.number}.</span> {html.escape(self.caption)}'
                f"{prov}</figcaption></figure>")

    def __repr__(self) -> str:
        return f"Figure {self.number}. {self.caption}"


def figure_html(fig, caption: str, *, alt: str | None = None, provenance: str | None = None,
                fmt: str = "svg", dpi: int = FIGURE_DPI, number: int | None = None) -> FigureHTML:
    """Render a figure for a write-up: vector SVG (or PNG at ``dpi``), numbered, captioned in HTML.

    Parameters
    ----------
    fig : matplotlib.figure.Figure or Axes
    caption : str
        What the figure shows and how to read it (one or two sentences).
    alt : str, optional
        Alt text; default :func:`describe_figure` (the figure's titles, axis labels and series).
    provenance : str, optional
        Where the data come from (:func:`storagebench.plots.provenance_caption`), shown after the caption.
    fmt : {"svg", "png"}
        SVG (default: sharp at any zoom and in print) or PNG (for figures with very many points).
    dpi : int
        PNG resolution, >= 200.
    number : int, optional
        Figure number; default the next in this kernel (:func:`reset_figure_numbers`).

    Returns
    -------
    FigureHTML

    Raises
    ------
    PublishError
        Empty caption, unknown ``fmt``, ``dpi`` < 200, not a figure.
    """
    import matplotlib
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    fig = fig.figure if isinstance(fig, Axes) else fig
    if not isinstance(fig, Figure):
        raise PublishError(f"figure_html() takes a matplotlib Figure or Axes, got {type(fig).__name__}")
    if not isinstance(caption, str) or not caption.strip():
        raise PublishError("a figure needs a caption: what it shows and how to read it")
    if fmt not in ("svg", "png"):
        raise PublishError(f"fmt must be one of ['svg', 'png'], got {fmt!r}")
    if not isinstance(dpi, int) or dpi < 200:
        raise PublishError(f"dpi must be an int >= 200 (print quality), got {dpi!r}")
    alt_text = alt or describe_figure(fig)
    buf = io.BytesIO()
    with matplotlib.rc_context({"svg.fonttype": "path", "svg.hashsalt": "storagebench"}):
        fig.savefig(buf, format=fmt, dpi=dpi, bbox_inches="tight", metadata={"Date": None} if fmt == "svg" else None)
    data = buf.getvalue()
    if fmt == "svg":
        m = re.search(rb'<svg[^>]*width="([\d.]+)pt"[^>]*height="([\d.]+)pt"', data[:2000])
        w_pt, h_pt = (float(m[1]), float(m[2])) if m else (fig.get_figwidth() * 72, fig.get_figheight() * 72)
        w, h = round(w_pt * 96 / 72), round(h_pt * 96 / 72)
        mime = "image/svg+xml"
    else:
        from PIL import Image

        with Image.open(io.BytesIO(data)) as im:
            w, h = round(im.width * 96 / dpi), round(im.height * 96 / dpi)
        mime = "image/png"
    return FigureHTML(number if number is not None else next(_COUNTER), caption.strip(), alt_text,
                      provenance or "", mime, data, w, h)


def show_figure(fig, caption: str, *, alt: str | None = None, provenance: str | None = None, fmt: str = "svg",
                dpi: int = FIGURE_DPI) -> None:
    """Show a figure in the notebook as a numbered ``<figure>`` and close it (see :func:`figure_html`).

    The figure is closed after rendering, so Jupyter's inline backend does not show it a second time, and
    nothing is returned, so a cell ending with the call shows no stray repr. Outside IPython it does
    nothing but close the figure; use :func:`figure_html` to get the rendered figure.
    """
    import matplotlib.pyplot as plt

    out = figure_html(fig, caption, alt=alt, provenance=provenance, fmt=fmt, dpi=dpi)
    plt.close(fig.figure if hasattr(fig, "figure") and not hasattr(fig, "savefig") else fig)
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:  # pragma: no cover - IPython is a dependency through ipykernel
        return
    if get_ipython() is not None:
        display(out)
