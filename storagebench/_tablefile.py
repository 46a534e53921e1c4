"""The tables on disk (private part of :mod:`storagebench.schema`, which re-exports its public names): parquet
files with a format version, and the chain of migrations that loads every older format."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ._inputs import open_input
from ._schemacols import TABLES, Column, _columns, validate
from .errors import SchemaError

# ---- the tables on disk: parquet with a format version ------------------------------------------

#: Version of the tidy-table file format written now, stored in each parquet file's schema metadata
#: under :data:`METADATA_KEY`. Format 0 is every file written before the key existed: the tables
#: ``runs``, ``histograms``, ``all_clients``, ``timeseries`` (no ``run_totals``; the oldest ``runs``
#: lack ``note``). Format 1 adds the metadata and ``run_totals``.
#:
#: **When the version changes.** A new column does *not* change it: a file written before the column
#: existed lacks it, and :func:`read_table` fills it with the column's unknown value
#: (:attr:`Column.unknown`: NaN, -1, ``""`` ...; a metric's NaN gets a ``note`` naming it) and lists it
#: in ``attrs["storagebench"]["filled"]``. Adding a column is one entry of the schema and its reader,
#: and every ``tidy/`` directory already written still loads. The version goes up (and
#: :data:`MIGRATIONS` gets the step from the old version) only when stored values change meaning: a
#: column renamed or dropped, a unit or a rule changed, a key column added. Only key and core columns
#: can never be filled: an identity column, or a core metric (``Valid.on_bad == "error"``: IOPS,
#: bandwidth, bytes, I/Os, runtime, a histogram count) -- a file without one is refused.
#:
#: The tables have their own version rather than :data:`storagebench.records.FORMAT_VERSION`
#: (``provenance.json``, ``testbed.json``): the two change for different reasons and at different
#: times -- a new ``runs`` column changes the tables and not one record, a new provenance field
#: changes the records and not one table -- and a shared number would make every reader of one
#: "migrate" files of the other that did not change.
FORMAT_VERSION = 1
#: Key of the storagebench metadata in a parquet file's (Arrow) schema metadata.
METADATA_KEY = b"storagebench"


def table_metadata(table: str, *, spec_hash: str | None = None,
                   spec_hashes: list[str] | None = None) -> dict[bytes, bytes]:
    """The schema metadata storagebench writes into a parquet file of ``table``.

    Parameters
    ----------
    table : str
        One of :data:`TABLES`.
    spec_hash : str, optional
        :attr:`storagebench._study.Study.spec_hash` of the study the rows come from (``None`` for
        loose files).
    spec_hashes : list of str, optional
        Every spec hash met, when the rows come from several studies (``spec_hash`` is then ``None``).

    Returns
    -------
    dict
        ``{METADATA_KEY: JSON}``, the JSON an object ``{"format_version", "table", "spec_hash"[,
        "spec_hashes"]}``.
    """
    _columns(table)
    meta: dict[str, Any] = {"format_version": FORMAT_VERSION, "table": table, "spec_hash": spec_hash}
    if spec_hashes and len(spec_hashes) > 1:
        meta["spec_hashes"] = sorted(spec_hashes)
    return {METADATA_KEY: json.dumps(meta, sort_keys=True).encode()}


def with_metadata(arrow_schema: Any, table: str, *, spec_hash: str | None = None,
                  spec_hashes: list[str] | None = None) -> Any:
    """``arrow_schema`` (a :class:`pyarrow.Schema`) with :func:`table_metadata` added to its metadata."""
    return arrow_schema.with_metadata({**(arrow_schema.metadata or {}),
                                       **table_metadata(table, spec_hash=spec_hash, spec_hashes=spec_hashes)})


def write_table(df: pd.DataFrame, path: str | os.PathLike, table: str, *, spec_hash: str | None = None,
                spec_hashes: list[str] | None = None) -> Path:
    """Write ``df`` as the parquet file of ``table``, with its format version and spec hash.

    The file is written beside ``path`` and renamed over it (``os.replace``): a reader never sees a
    half-written table.

    Parameters
    ----------
    df : pandas.DataFrame
        Rows of ``table`` (checked by :func:`validate`; extra columns are kept).
    path : path
        Parquet file to write.
    table : str
        One of :data:`TABLES`.
    spec_hash, spec_hashes
        As in :func:`table_metadata`.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    SchemaError
        ``df`` does not follow the schema of ``table``.
    """
    out = Path(path)
    arrow = pa.Table.from_pandas(validate(df, table), preserve_index=False)
    arrow = arrow.replace_schema_metadata(dict(with_metadata(arrow.schema, table, spec_hash=spec_hash,
                                                             spec_hashes=spec_hashes).metadata))
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    try:
        pq.write_table(arrow, tmp)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            tmp.unlink()
    return out


#: Largest parquet table read, bytes (:func:`read_table`, :func:`read_metadata`; through the one reader of inputs,
#: :func:`storagebench._inputs.open_input`: a regular file, never a FIFO or a device).
MAX_TABLE_BYTES = 16 * 2**30


def read_metadata(path: str | os.PathLike) -> dict[str, Any]:
    """The storagebench metadata of a parquet file; ``{"format_version": 0}`` for a file without it.

    Raises
    ------
    SchemaError
        The file is not parquet, or its metadata is not a JSON object with an integer
        ``format_version`` >= 0.
    """
    with open_input(path, max_bytes=MAX_TABLE_BYTES, what="parquet table", error=SchemaError) as fh:
        return _metadata(fh, os.fspath(path))


def _metadata(fh: Any, where: str) -> dict[str, Any]:
    try:  # the footer's key-value metadata: the Arrow schema's, or added when a streamed file was closed
        meta = pq.read_metadata(fh).metadata or {}
    except (OSError, pa.ArrowInvalid) as exc:
        raise SchemaError(f"{where}: not a readable parquet file ({exc})") from None
    raw = meta.get(METADATA_KEY)
    if raw is None:
        return {"format_version": 0}
    try:
        data = json.loads(raw)
    except ValueError:
        data = None
    if not isinstance(data, Mapping):
        raise SchemaError(f"{where}: parquet metadata {METADATA_KEY.decode()!r} must be a JSON object, "
                          f"got {raw[:80]!r}")
    version = data.get("format_version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise SchemaError(f"{where}: format_version must be an integer >= 0, got {version!r}")
    return dict(data)


def _migrate_0(df: pd.DataFrame, table: str) -> pd.DataFrame:
    """Format 0 -> 1: the same tables; ``runs``/``all_clients`` written before ``note`` existed get ``note=''``
    (``run_totals``, which format 0 lacks, is built by :func:`storagebench.runlevel.read_run_totals`)."""
    if table in ("runs", "all_clients") and "note" not in df.columns:
        df = df.assign(note="")
    return df


#: The chain of format migrations: ``MIGRATIONS[n]`` takes a table of format ``n`` (a DataFrame, and the
#: table's name) to format ``n + 1``. :func:`read_table` applies ``MIGRATIONS[v], MIGRATIONS[v + 1] ...``
#: up to :data:`FORMAT_VERSION`; a format change is one function added here.
MIGRATIONS: dict[int, Any] = {0: _migrate_0}


def _required(c: Column) -> bool:
    """A column a stored table must have: a key (identity), or a core metric (out of range refuses a file)."""
    return c.role == "identity" or (c.role == "metric" and c.valid is not None and c.valid.on_bad == "error")


def _fill_added(df: pd.DataFrame, table: str) -> tuple[pd.DataFrame, list[str]]:
    """``df`` with every schema column it lacks that may be filled (not :func:`_required`) set to the
    column's unknown value, and their names; a metric filled with NaN is named in each row's ``note``."""
    missing = [c for c in _columns(table) if c.name not in df.columns and not _required(c)]
    if not missing:
        return df, []
    n = len(df)
    fill = {}
    for c in missing:
        if c.dtype.startswith("datetime64"):
            fill[c.name] = pd.Series(pd.NaT, index=df.index, dtype=c.dtype)
        elif c.dtype == "string":
            fill[c.name] = pd.Series([c.unknown] * n, index=df.index, dtype="string")
        else:
            fill[c.name] = pd.Series(np.full(n, c.unknown, dtype=c.dtype), index=df.index)
    df = df.assign(**fill)
    nan_metrics = [c.name for c in missing if c.role == "metric" and c.dtype == "float64"
                   and c.valid is not None and c.valid.metric and not c.valid.optional]  # a NaN that needs a note
    if nan_metrics and "note" in df.columns and n:
        text = f"{', '.join(nan_metrics)}: not in this table (written before the column existed), NaN"
        note = df["note"].fillna("").astype(str).to_numpy(dtype=object)
        df = df.assign(note=pd.array(np.where(note == "", text, note + "; " + text), dtype="string"))
    return df, [c.name for c in missing]


def read_table(path: str | os.PathLike, table: str | None = None) -> pd.DataFrame:
    """Read a parquet table storagebench wrote, checking (and if needed migrating) its format.

    Parameters
    ----------
    path : path
        A parquet file.
    table : str, optional
        The table it must hold (one of :data:`TABLES`). Default: the table its metadata names, or
        for a file without metadata the table its file name names (``runs.parquet`` ...); a parquet
        file that is none of them is returned as it is.

    Returns
    -------
    pandas.DataFrame
        The table in schema dtypes (:func:`validate`); ``df.attrs["storagebench"]`` holds the file's
        metadata (``format_version`` 0 for a file written before the metadata existed, migrated by the
        chain :data:`MIGRATIONS`; ``filled``: the columns the file was written without, filled with
        their unknown value -- see :data:`FORMAT_VERSION` for the rule).

    Raises
    ------
    SchemaError
        The file was written by a newer storagebench (its ``format_version`` names the version), it
        holds another table than ``table``, or misses a key or core column that nothing can supply
        (for a format-0 file the message says to ingest ``raw/`` again).
    """
    where = os.fspath(path)
    with open_input(path, max_bytes=MAX_TABLE_BYTES, what="parquet table", error=SchemaError) as fh:
        meta = _metadata(fh, where)
        fh.seek(0)
        return _read_checked(fh, where, meta, table)


def _read_checked(fh: Any, where: str, meta: dict[str, Any], table: str | None) -> pd.DataFrame:
    version = meta["format_version"]
    if version > FORMAT_VERSION:
        raise SchemaError(f"{where}: table format_version {version} was written by a newer storagebench; this one "
                          f"reads formats 0 to {FORMAT_VERSION}: upgrade storagebench to read it")
    stored = meta.get("table")
    if table is not None:
        _columns(table)
        if stored is not None and stored != table:
            raise SchemaError(f"{where}: holds the {stored!r} table, not {table!r}")
    name = table or stored or (Path(where).stem if Path(where).stem in TABLES else None)
    df = pd.read_parquet(fh)
    if name is None:
        df.attrs["storagebench"] = meta
        return df
    for v in range(version, FORMAT_VERSION):
        df = MIGRATIONS[v](df, name)
    df, filled = _fill_added(df, name)
    try:
        df = validate(df, name)
    except SchemaError as exc:
        if version == 0:
            raise SchemaError(f"{where}: format 0 (written before storagebench tables carried a format version) "
                              f"cannot be read as {name!r}: {exc}; ingest the study's raw/ again") from None
        raise SchemaError(f"{where}: {exc}") from None
    if filled:
        meta = {**meta, "filled": filled}
    df.attrs["storagebench"] = {**meta, "table": name}
    return df
