"""The tidy schema: table definitions with a unit on every column.

Three tables come out of ingest and go into stats and plots:

``runs``
    one row per run x host x job x direction (``read``/``write``/``trim``).
``histograms``
    fio json+ completion-latency bins, one row per non-empty bin.
``timeseries``
    fio log samples (``write_iops_log`` / ``write_bw_log`` / ``write_lat_log``).

A fourth, ``all_clients``, has the ``runs`` columns and holds fio's own "All clients"
aggregate of a client/server run. It is kept *apart* from ``runs`` so that summing
``runs.iops`` over hosts never double counts.

A fifth, ``run_totals``, is the run-level table: the rows of ``runs`` combined with fio's own rule
for combining jobs (``stat.c`` ``sum_thread_stats``), per run x host x direction, per run x host for
all directions (``direction == "mixed"``) and for all hosts of a client/server run
(``host == ALL_HOSTS``). It is the one source of "one row per run" for stats, figures and
testbeds (:mod:`storagebench.runlevel` builds it; ingest writes it as ``tidy/run_totals.parquet``).

Every column declares what it is (:class:`Column`): its **role** (identity, factor, metric or
provenance: :data:`ROLES`), its unit, its valid range (:class:`Valid`, what the table gate
:func:`check_rows` checks) and, for ``run_totals``, its **combine rule** (:data:`COMBINE_RULES`, fio's
``sum_thread_stats``). Every list of columns elsewhere -- the factors a comparison pools, the fio reader's
factor fields, the axis labels, the run-level combination -- is :func:`columns` of a role or rule, so a
new column is one entry here and its reader (``docs/ARCHITECTURE.md``, "Adding a column").

Units are in the names (``_ns``, ``_bytes``, ``_bytes_per_s``, ``_s``, ``_pct``) and
fio's own units are converted once, in ingest. Display units (ms, MB/s = 10**6 B/s,
MiB/s) are chosen by plots and tables and always labelled.
Study factors that are not fio options (``stripe_width``, ``clients`` ...) are extra
columns of ``runs``; :func:`validate` allows them.

No number in ``runs`` is invented: a metric fio did not print, or printed as a value it cannot
have (negative, above 2**63-1), is NaN (``-1`` in an integer column) and the row's ``note`` says
which value and why; a file whose core metrics (IOPS, bandwidth, bytes, I/Os, runtime) are bad is
not ingested at all (:mod:`storagebench.ingest.fio` has the rule).
"""

from __future__ import annotations

from ._schemacols import (  # noqa: F401  (re-exported: the public names of this module)
    ALL_DIRECTIONS,
    ALL_HOSTS,
    COMBINE_RULES,
    DIRECTIONS,
    HISTOGRAMS,
    MAX_FLOAT,
    MAX_INT,
    PERCENTILES,
    ROLES,
    RUN_TOTALS,
    RUNS,
    TABLES,
    TIMESERIES,
    Column,
    Valid,
    columns,
    describe,
    empty,
    names,
    percentile_column,
    validate,
)
from ._tablefile import (  # noqa: F401  (re-exported: the public names of this module, and MAX_TABLE_BYTES)
    FORMAT_VERSION,
    MAX_TABLE_BYTES,
    METADATA_KEY,
    MIGRATIONS,
    read_metadata,
    read_table,
    table_metadata,
    write_table,
)
from ._tablegate import (  # noqa: F401  (re-exported: the public names of this module)
    RELATIONS,
    BinsWithin,
    NoteNames,
    Ordered,
    Rate,
    Violation,
    check_rows,
    note_pattern,
)

__all__ = [
    "Column",
    "Valid",
    "Ordered",
    "Rate",
    "BinsWithin",
    "RELATIONS",
    "Violation",
    "check_rows",
    "note_pattern",
    "NoteNames",
    "MAX_INT",
    "MAX_FLOAT",
    "RUNS",
    "HISTOGRAMS",
    "TIMESERIES",
    "RUN_TOTALS",
    "ALL_HOSTS",
    "ALL_DIRECTIONS",
    "TABLES",
    "ROLES",
    "COMBINE_RULES",
    "columns",
    "names",
    "FORMAT_VERSION",
    "MIGRATIONS",
    "METADATA_KEY",
    "table_metadata",
    "write_table",
    "read_table",
    "read_metadata",
    "PERCENTILES",
    "DIRECTIONS",
    "percentile_column",
    "empty",
    "validate",
    "describe",
]

