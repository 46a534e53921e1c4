"""The DiskSPD/Iometer ``timeseries`` columns made directly (``_collector._columns_frame``) give the table
``pandas.DataFrame(cols)`` gave, once validated: the same values and dtypes for the usual lists, and
for the lists left to pandas (ints beyond int64, None, bools, mixes) the same table or the same error."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from storagebench import schema
from storagebench.errors import SchemaError
from storagebench.ingest._collector import _columns_frame


def _cols(**over):
    n = 3
    cols = {"run_id": ["a1b2c3d4e5f6"] * n, "host": ["local"] * n, "job": ["timespan1"] * n,
            "direction": ["read"] * n, "t_s": [1.0, 2.0, 3.0], "metric": ["iops"] * n,
            "value": [332.0, math.nan, 0.5], "log_index": [1] * n}
    cols.update(over)
    return cols


CASES = {
    "usual": {},
    "int values": {"value": [1, 2, 3]},
    "int and float values": {"value": [1, 2.5, 3]},
    "None in values": {"value": [None, 2.0, 3.0]},
    "bool in values": {"value": [True, 2.0, 3.0]},
    "pd.NA in t_s": {"t_s": [1.0, 2.0, pd.NA]},
    "None in a string column": {"host": ["local", None, "local"]},
    "int in a string column": {"job": ["timespan1", 5, "timespan1"]},
    "log_index beyond int64": {"log_index": [2**63, 1, 1]},
    "log_index below int64": {"log_index": [-(2**63) - 1, 1, 1]},
    "bool log_index": {"log_index": [True, 1, 1]},
    "empty": {k: [] for k in _cols()},
}


def _table(make, cols):
    try:
        return schema.validate(make(cols), "timeseries")
    except (SchemaError, TypeError, ValueError) as exc:
        return type(exc)


@pytest.mark.parametrize("case", list(CASES))
def test_columns_frame_gives_the_table_pandas_gave(case):
    cols = _cols(**CASES[case])
    ours, theirs = _table(_columns_frame, cols), _table(pd.DataFrame, cols)
    if isinstance(theirs, type):
        assert ours is theirs
    else:
        pd.testing.assert_frame_equal(ours, theirs, check_exact=True)
