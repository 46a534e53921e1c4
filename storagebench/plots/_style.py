"""The house style of the figures: seaborn ``whitegrid``, the colour-blind palette, one size and resolution,
and the axis labels (with units) of the factor columns."""

from __future__ import annotations

from contextlib import contextmanager

import matplotlib.pyplot as plt
import seaborn as sns
from matplotlib.axes import Axes

from ..fio.options import option_unit
from ..schema import columns
from ..tables import column_display

#: Axis labels of the factors testbed studies add (not fio options, not runs columns).
_STUDY_LABELS: dict[str, str] = {
    "clients": "clients (fio servers)",
    "stripe_width": "stripe width (components)",
    "repetition": "repetition",
    "run_order": "run order",
}


def _label(col: str) -> str:
    """A column's axis label with its unit: the words and display unit of
    :func:`storagebench.tables.column_display` (``bs_bytes``: KiB), else the schema column's unit
    (``iodepth``), else the unit of the fio option of that name (``rate_iops``), else the name."""
    header, _ = column_display(col)
    if header != col:
        return header
    c = _FACTORS.get(col)
    unit = c.unit if c is not None and c.unit != "1" else option_unit(col)
    return f"{col} ({unit})" if unit else col


_FACTORS = {c.name: c for c in columns("runs", role="factor")}
#: Axis labels (with units) of the numeric factor columns of ``runs`` (derived from the schema) and of
#: the testbed studies' factors; any other column is labelled by :func:`factor_label`.
FACTOR_LABELS: dict[str, str] = {
    **{n: _label(n) for n, c in _FACTORS.items() if c.dtype in ("int64", "float64")},
    **_STUDY_LABELS,
}


_CONTEXT_RC = {"axes.titlesize": 12.0, "legend.fontsize": 10.0, "legend.title_fontsize": 10.0}
FIGSIZE = (7.0, 4.3)  # inches
DPI = 110  # PNG resolution in notebooks (dots per inch)


def set_house_style() -> None:
    """Apply the storagebench figure style globally (seaborn ``whitegrid``, colour-blind palette).

    Notebooks call it once; the figure functions also draw new figures inside
    :func:`house_style`, so they look the same without it.
    """
    sns.set_theme(context="notebook", style="whitegrid", palette="colorblind",
                  rc={**_CONTEXT_RC, "figure.figsize": FIGSIZE, "figure.dpi": DPI})


@contextmanager
def house_style():
    """Context manager: the house style for the figures made inside it.

    Only seaborn's style and context keys are set and restored (not a full
    ``rc_context``, whose restore would also undo what a backend sets when it loads,
    e.g. Jupyter's inline backend turning interactive mode on).
    """
    with sns.axes_style("whitegrid"), sns.plotting_context("notebook", rc=_CONTEXT_RC):
        yield


def new_ax(ax: Axes | None, figsize: tuple[float, float] | None = None) -> Axes:
    """``ax``, or the Axes of a new figure in the house style (``figsize`` in inches, default :data:`FIGSIZE`)."""
    if ax is not None:
        return ax
    with house_style():
        _, new = plt.subplots(figsize=figsize or FIGSIZE, dpi=DPI, layout="constrained")
    return new


def factor_label(col: str) -> str:
    """The axis label of a factor column: :data:`FACTOR_LABELS`, else its unit from the fio option of that
    name (``rate_iops (I/Os per s)``), else the column's name."""
    return FACTOR_LABELS.get(col) or _label(col)
