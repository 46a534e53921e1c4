"""What a write-up shows: numbered figures with captions, collapsed detail, text through the HTML gate.

Notebooks import it as ``from storagebench import show`` (the module was ``storagebench.display``, which
clashed with IPython's ``display``; ``from storagebench import display`` still works, with a
DeprecationWarning). Tables a reader can use are :func:`storagebench.tables.table` (their one home).

* :func:`html` / :func:`markdown` -- text with outside values, escaped by the HTML gate (:mod:`storagebench._html`);
* :func:`show_figure` -- shows a matplotlib figure as a numbered ``<figure>`` (SVG by default, or PNG at
  >= 200 dpi) with its caption and provenance in the HTML, not in the bitmap, and alt text that says what
  the figure shows.
* :func:`precision_section` -- an adaptive sweep's rule, runs per point and precision reached;
* :func:`collapsed` -- long detail (a 36-row check table) behind a ``<details>`` line.

:func:`storagebench.publish.publish_report` numbers the figures of the whole page again in order and
recognises these outputs (``sb-figure``, ``sb-table``) when it builds the page.
"""

from __future__ import annotations

import base64
import io
import itertools
import re
from dataclasses import dataclass
from typing import Any

import pandas as pd
from PIL import Image

# matplotlib and IPython are imported inside the functions that draw or display: a table needs neither.
from ._html import Markup
from ._html import html as _gate_html
from ._html import markdown as _gate_markdown
from .errors import PublishError
from .tables import table as _table

__all__ = [
    "html",
    "markdown",
    "Collapsed",
    "collapsed",
    "FigureHTML",
    "show_figure",
    "precision_section",
]

#: Resolution of raster figures (PNG), dots per inch; SVG figures are vector.
FIGURE_DPI = 200


def _html_of(obj: Any) -> str:
    """HTML of a part of a write-up. A ``str`` is *text* (escaped, shown as it reads); HTML is
    :class:`markupsafe.Markup` made by :func:`html` (storagebench's own markup with escaped values), a Styler
    (:func:`storagebench.tables.table`), a DataFrame or an object with ``_repr_html_``."""
    if isinstance(obj, Markup):
        return str(obj)
    if isinstance(obj, str):
        return str(html('<p class="sb-table-note">{}</p>', obj))
    if hasattr(obj, "to_html") and hasattr(obj, "hide"):  # a Styler
        return obj.to_html()
    if isinstance(obj, pd.DataFrame):
        return _table(obj).to_html()
    if hasattr(obj, "_repr_html_"):
        return obj._repr_html_()
    return str(html("<pre>{}</pre>", obj))


class HTMLFragment(Markup):
    """HTML made by :func:`html`: shown as HTML by IPython, inserted as it is into another fragment."""

    __slots__ = ()

    def _repr_html_(self) -> str:
        return str(self)


def html(template: str, *values: Any, **named: Any) -> HTMLFragment:
    """HTML for a write-up: ``template`` (the notebook's own markup, a literal) with every value escaped.

    The one way a notebook writes HTML with data in it (``docs/SECURITY.md``, section 1): values are text,
    escaped by :func:`storagebench._html.escape` (markupsafe), unless they are fragments made by this
    function. ``show.html("<li><strong>{}</strong>: {}</li>", name, method)``.

    Returns
    -------
    HTMLFragment
        A :class:`markupsafe.Markup` that IPython displays as HTML.
    """
    return HTMLFragment(_gate_html(template, *values, **named))


@dataclass(frozen=True)
class MarkdownBlock:
    """Markdown made by :func:`markdown`; IPython displays it as ``text/markdown``."""

    source: str

    def _repr_markdown_(self) -> str:
        return self.source

    def __repr__(self) -> str:
        return self.source


def markdown(template: str, *values: Any, **named: Any) -> MarkdownBlock:
    """Markdown for a write-up: ``template`` (the notebook's own Markdown, a literal) with every value shown
    as plain text.

    The one way a notebook writes Markdown with data in it (``docs/SECURITY.md``, section 1): each value is
    made literal by :func:`storagebench._html.markdown_text` (punctuation backslash-escaped, line breaks
    removed), so a target path or a device model shows as it is and can open no tag, link or list. Markdown
    a library function made (``studies.describe_design``) is passed as the template itself:
    ``show.markdown(studies.describe_testbed(d))``. Do not put a value inside backticks (a code span shows
    backslashes). The published page renders every Markdown output with raw HTML escaped
    (:func:`storagebench._html.render_markdown`).
    """
    return MarkdownBlock(str(_gate_markdown(template, *values, **named)) if values or named else str(template))


@dataclass(frozen=True)
class Collapsed:
    """Detail behind a one-line summary (``<details>``); see :func:`collapsed`."""

    summary: str
    parts: tuple[Any, ...]

    def _repr_html_(self) -> str:
        # each part scrolls sideways on its own: a 60-column per-run table opened on screen must not widen the page
        inner = Markup("").join(html('<div class="sb-scroll">{}</div>', Markup(_html_of(p))) for p in self.parts)
        return str(html('<details class="sb-details"><summary>{}</summary>{}</details>', self.summary, inner))

    def __repr__(self) -> str:
        return f"{self.summary} [{len(self.parts)} collapsed part(s)]"


def collapsed(summary: str, *parts: Any) -> Collapsed:
    """Long detail a reader opens when wanted: ``summary`` is shown, ``parts`` (tables, text) are folded.

    Parameters
    ----------
    summary : str
        The one line shown (e.g. "All 36 runs of the Little's-law check (none flagged)").
    *parts
        DataFrames (formatted with :func:`storagebench.tables.table`), Stylers, HTML strings or objects with ``_repr_html_``.
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
        if self.mime not in ("image/svg+xml", "image/png"):  # figure_html makes only these
            raise PublishError(f"a figure is SVG or PNG, got {self.mime!r}")
        prov = html(' <span class="sb-provenance">Data: {}</span>', self.provenance) if self.provenance else ""
        return str(html('<figure class="sb-figure" id="figure-{num}"><img src="data:{mime};base64,{b64}" alt="{alt}" '
                        'width="{w}" height="{h}"><figcaption><span class="sb-fignum">Figure {num}.</span> {caption}'
                        "{prov}</figcaption></figure>", num=int(self.number), mime=self.mime, b64=b64, alt=self.alt,
                        w=int(self.width_px), h=int(self.height_px), caption=self.caption, prov=prov))

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


def precision_section(study_dir: Any) -> list[Any] | None:
    """The write-up's part on adaptive precision (a study with ``precision:``): the rule, the repetitions each
    point used and why it stopped, the CI half-width it reached, and each comparison's verdict.

    Parameters
    ----------
    study_dir : path-like
        ``results/<study>/``: its ``precision.json`` (read typed by :func:`storagebench._precision.read_precision`).

    Returns
    -------
    list or None
        Parts to ``display`` (text through the HTML gate, tables through :func:`storagebench.tables.table`), or
        None when the study is not adaptive.

    Raises
    ------
    SchemaError
        ``precision.json`` is not what the runner writes.
    """
    from ._precision import UNITS, read_precision, rule_words

    rec = read_precision(study_dir)
    if rec is None:
        return None
    points = pd.DataFrame(rec["points"])
    rule = rec["rule"]
    runs = points["runs"]
    counts = points["stopped"].value_counts()
    word = UNITS[rec["unit"]]  # runs, or set-ups when the set-up was the unit
    parts: list[Any] = [markdown("## Adaptive precision\n\n{}", rule_words(rule, rec["unit"], rec["blocks"], rec["concurrent"])),
                        markdown("{} points used {} {} in all (at most {}): {} {} per point{}; {}.",
                                 len(points), int(runs.sum()), word, len(points) * rule["max_repetitions"],
                                 int(runs.min()) if runs.min() == runs.max() else f"{int(runs.min())} to "
                                 f"{int(runs.max())}", word,
                                 "" if runs.min() == runs.max() else f" (median {runs.median():g})",
                                 "; ".join(f"{n} {why}" for why, n in counts.items()))]
    if "ci_rel_half_width" in rule:
        hw = points["ci_rel_half_width"].dropna()
        if len(hw):
            parts.append(markdown("Precision reached: the CI half-width of the points runs from ±{} to ±{} (target "
                                  "±{}).", f"{hw.min():.1%}", f"{hw.max():.1%}", f"{rule['ci_rel_half_width']:.1%}"))
    labels = {"runs": f"{word} used", "stopped": "why it stopped",
              "ci_rel_half_width": "CI half-width reached (fraction)"}
    parts.append(_table(points, labels=labels, units=False, caption=f"{word.capitalize()} used and precision reached per point"))
    if rec["comparisons"]:
        comps = pd.DataFrame(rec["comparisons"])
        parts.append(_table(comps.drop(columns="ci_level"), units=False, merge_ci=False,
                            caption="Verdicts of the stopping rule, with the ratio other/baseline of geometric means "
                            "and its repeated confidence interval at the decision (at the look's nominal level, so "
                            "that it keeps its coverage at whatever look the rule stopped; the analysis above "
                            "reports its own tests)",
                            labels={"runs_per_arm": f"{word} per arm at the decision", "ci_low": "repeated CI low",
                                    "ci_high": "repeated CI high"}))
    return parts
