"""Argument checks shared by the analysis layers: a table's columns, one of the allowed values.

The figures (:mod:`storagebench.plots`) and the point tables of :mod:`storagebench.stats` check their
inputs with the same words, so a missing column or a bad option reads the same wherever it is found.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from .errors import SchemaError

__all__ = ["one_of", "need_columns"]


def one_of(name: str, value: Any, allowed: Sequence[Any]) -> None:
    """Refuse ``value`` unless it is one of ``allowed``.

    Parameters
    ----------
    name : str
        The argument's name, for the message.
    value : object
    allowed : sequence

    Raises
    ------
    ValueError
        ``value`` is not in ``allowed``; the message names the argument and lists the allowed values.
    """
    if value not in allowed:
        raise ValueError(f"The value for `{name}` must be one of {list(allowed)}, but {value!r} was passed.")


def need_columns(df: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    """Refuse a table that is not a DataFrame, lacks one of ``columns`` or has no rows.

    Parameters
    ----------
    df : pandas.DataFrame
    columns : sequence of str
        Columns that must be present.
    what : str
        The argument's name, for the message (``"runs"``).

    Raises
    ------
    TypeError
        ``df`` is not a DataFrame.
    SchemaError
        A column is missing (the message lists the columns it has), or ``df`` is empty.
    """
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"`{what}` must be a pandas DataFrame, but {type(df).__name__} was passed.")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise SchemaError(
            f"`{what}` has no column(s) {missing}; it has {sorted(map(str, df.columns))}."
        )
    if df.empty:
        raise SchemaError(f"`{what}` has no rows.")
