"""Published seed tables (``data/published/*.csv``) as tidy ``runs`` tables.

The CSV files are transcribed from the seed documents by ``runners/transcribe_seeds.py`` with the
units *as printed* (``bw_mb_per_s``, ``bw_kb_per_s``, ``lat_ms``, ``resp_ms``); each has a sidecar
``<name>.yaml`` giving the source document, the table caption, the units and the typos kept.
This module converts them once into the schema of :mod:`storagebench.schema` so that the same stats,
plots and notebooks run on published numbers and on our own fio runs.

Units of the sources, checked against the tables themselves (``data/published/README.md``):

* seed 002 (StarWind vSAN) "MB/s" is MiB/s, 2**20 bytes: 4 KiB x IOPS / 2**20 reproduces the printed
  value within rounding (67054 IOPS x 4096 B = 261.9 -> printed 262; 10**6 would give 274.6).
  So ``bw_bytes_per_s = bw_mb_per_s * 2**20``, not ``* 10**6``.
* seed 001 (StorageIO HDD) "KB Sec" is KiB/s, 1024 bytes: the text defines 4KB = 4,096 bytes and
  IOPS x 4 = KB/s exactly (29,736 x 4 = 118,944). So ``bw_bytes_per_s = bw_kb_per_s * 1024``.
* "Latency (ms)" / "Avg. Resp (R+W) ms" is a mean response time: ``lat_mean_ns = ms * 1e6``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from . import schema
from ._inputs import open_input, read_input
from .errors import IngestError, StatsError
from .ingest import ingest_paths, ingest_study
from .ingest.loadgen import detect_format

__all__ = ["PUBLISHED_DIR", "ResultSets", "SourceName", "file_sources", "list_published", "load_published",
           "load_result_sets", "load_table", "match_level", "name_source", "published_metadata", "select_rows"]

#: Directory of the published tables in a source checkout (``<repo>/data/published``).
PUBLISHED_DIR: Path = Path(__file__).resolve().parents[1] / "data" / "published"

_MIB = 2**20
_KIB = 1024
_NS_PER_MS = 1e6

# seed 002 patterns as printed -> fio options (bs, rw, rwmixread, percentage_random, direction)
_PATTERNS_002: dict[str, tuple[int, str, float, float, str]] = {
    "4k random write": (4096, "randwrite", 0.0, 100.0, "write"),
    "4k random read": (4096, "randread", 100.0, 100.0, "read"),
    "64k random write": (65536, "randwrite", 0.0, 100.0, "write"),
    "64k random read": (65536, "randread", 100.0, 100.0, "read"),
    "8k random 70%read/30%write": (8192, "randrw", 70.0, 100.0, "mixed"),
    "1M seq read": (1048576, "read", 100.0, 0.0, "read"),
}
_TARGET_002 = "VMware Virtual Disk 264GB (RAW) over vsanDatastore"
_TARGET_001 = "Dell/Western Digital (WD) 1TB 7200 RPM SATA HDD (Raw IO)"


def _dir(data_dir: str | Path | None) -> Path:
    return PUBLISHED_DIR if data_dir is None else Path(data_dir)


def _names(data_dir: Path) -> list[str]:
    return sorted(p.stem for p in data_dir.glob("*.csv") if p.with_suffix(".yaml").exists())


def published_metadata(name: str, *, data_dir: str | Path | None = None) -> dict:
    """The sidecar metadata of a published table (source, tables, units, typos, claims).

    Parameters
    ----------
    name : str
        Table name, one of ``list_published().name``.
    data_dir : path, optional
        Directory of the tables (default :data:`PUBLISHED_DIR`).

    Returns
    -------
    dict
        The parsed ``<name>.yaml``: ``name``, ``kind`` (``"runs"`` or ``"inventory"``), ``rows``,
        ``source`` (``seed_file``, ``title``, ``url`` ...), ``tables``, ``columns``, ``claims`` ...

    Raises
    ------
    IngestError
        ``name`` is not a published table (the message lists the ones there are).
    """
    d = _dir(data_dir)
    names = _names(d)
    if name not in names:
        raise IngestError(f"published table must be one of {names}, got {name!r}", path=str(d))
    return yaml.safe_load((d / f"{name}.yaml").read_text(encoding="utf-8"))


@dataclass(frozen=True)
class SourceName:
    """How a write-up names a result set (:func:`name_source`).

    Attributes
    ----------
    name : str
        Short name: the table name of ``published:<name>``, else the last component of the path.
    citation : str
        For a published table ``"<title> (<publisher>, seed <seed file>)"`` from its sidecar; else the source
        as given.
    metadata : dict
        The published table's sidecar (:func:`published_metadata`); empty for any other source.
    """

    name: str
    citation: str
    metadata: dict


def name_source(source: str | Path, *, data_dir: str | Path | None = None) -> SourceName:
    """The one way write-ups name a result set: its short name, its citation and its published metadata.

    Parameters
    ----------
    source : str or path
        A result set as :func:`load_result_sets` takes it: ``published:<name>``, a table file, a study
        directory, result files.
    data_dir : path, optional
        Directory of the published tables (default :data:`PUBLISHED_DIR`).

    Returns
    -------
    SourceName

    Raises
    ------
    IngestError
        ``published:<name>`` names no published table (the message lists the ones there are).
    """
    text = str(source)
    if text.startswith("published:"):
        name = text.split(":", 1)[1]
        meta = published_metadata(name, data_dir=data_dir)
        src = meta["source"]
        return SourceName(name, f"{src['title']} ({src['publisher']}, seed {src['seed_file']})", meta)
    return SourceName(Path(text).name or text, text, {})


def list_published(*, data_dir: str | Path | None = None) -> pd.DataFrame:
    """The published tables there are.

    Returns
    -------
    pandas.DataFrame
        One row per table, columns ``name``, ``kind`` (``"runs"``: loadable with
        :func:`load_published`; ``"inventory"``: only with :func:`read_published`), ``rows``,
        ``seed_file``, ``title``, ``tables`` (captions joined with ``" / "``).
    """
    d = _dir(data_dir)
    out = []
    for name in _names(d):
        meta = published_metadata(name, data_dir=d)
        out.append({"name": name, "kind": meta["kind"], "rows": int(meta["rows"]),
                    "seed_file": meta["source"]["seed_file"], "title": meta["source"]["title"],
                    "tables": " / ".join(meta.get("tables", []))})
    return pd.DataFrame(out, columns=["name", "kind", "rows", "seed_file", "title", "tables"])


def read_published(name: str, *, data_dir: str | Path | None = None) -> pd.DataFrame:
    """A published table exactly as transcribed (units as printed, e.g. ``bw_mb_per_s``, ``lat_ms``).

    Raises
    ------
    IngestError
        Unknown ``name``, or the CSV row count differs from its sidecar's ``rows``.
    """
    d = _dir(data_dir)
    meta = published_metadata(name, data_dir=d)
    path = d / f"{name}.csv"
    df = pd.read_csv(path, dtype_backend="numpy_nullable")
    if len(df) != int(meta["rows"]):
        raise IngestError(f"has {len(df)} rows, its sidecar {name}.yaml says {meta['rows']}", path=str(path))
    return df


def _unknown(column: schema.Column, n: int) -> pd.Series:
    """A column the source does not give: NA where the schema dtype can hold it.

    The schema's ``int64`` and ``bool`` columns are not nullable, so an unknown integer is -1
    (the schema's own convention, cf. ``run_order``) and an unknown flag is ``False``.
    """
    if column.dtype == "int64":
        return pd.Series([-1] * n, dtype="int64")
    if column.dtype == "bool":
        return pd.Series([False] * n, dtype="bool")
    if column.dtype.startswith("datetime64"):
        return pd.Series([pd.NaT] * n, dtype=column.dtype)
    if column.dtype == "float64":
        return pd.Series([float("nan")] * n, dtype="float64")
    return pd.Series([pd.NA] * n, dtype=column.dtype)


def _to_runs(name: str, known: pd.DataFrame, extra: pd.DataFrame) -> pd.DataFrame:
    n = len(known)
    known = known.reset_index(drop=True)
    cols = {}
    for c in schema.RUNS:
        cols[c.name] = known[c.name] if c.name in known else _unknown(c, n)
    out = pd.DataFrame(cols)
    for c in extra.columns:
        out[c] = extra[c].reset_index(drop=True)
    return schema.validate(out, "runs")


def _common(name: str, n: int) -> dict:
    return {"study": [f"published:{name}"] * n, "tool": ["published"] * n, "repetition": [0] * n,
            "host": ["published"] * n, "job_index": [0] * n, "error": [0] * n, "partial": [False] * n,
            "source_file": [f"data/published/{name}.csv"] * n}


def _load_vsan_qd_threads(df: pd.DataFrame, name: str) -> pd.DataFrame:
    n = len(df)
    fio = df["source_tool"].eq("FIO")
    known = pd.DataFrame({
        **_common(name, n),
        "run_id": [f"{name}/{t}/t{th}/qd{q}" for t, th, q in zip(df.source_tool, df.threads, df.qd, strict=True)],
        "job": [f"4k-rnd-read-o{q}" for q in df.qd],
        "direction": ["read"] * n, "rw": ["randread"] * n,
        "bs_bytes": (df["bs_kib"] * _KIB).astype("int64"),
        "rwmixread_pct": [100.0] * n, "random_pct": [100.0] * n,
        "iodepth": df["qd"].astype("int64"), "numjobs": df["threads"].astype("int64"),
        # the article prints the fio job file (ioengine=windowsaio, direct=1) and the diskspd line (-Sh)
        "ioengine": fio.map({True: "windowsaio", False: pd.NA}).astype("string"),
        "direct": [True] * n, "target": [_TARGET_002] * n, "runtime_s": [60.0] * n,
        "iops": df["iops"].astype("float64"),
        "bw_bytes_per_s": df["bw_mb_per_s"].astype("float64") * _MIB,
        "lat_mean_ns": df["lat_ms"].astype("float64") * _NS_PER_MS,
    })
    extra = pd.DataFrame({"source_tool": df["source_tool"].astype("string"),
                          "pattern": df["pattern"].astype("string")})
    return _to_runs(name, known, extra)


def _load_vsan_stripe(df: pd.DataFrame, name: str) -> pd.DataFrame:
    n = len(df)
    unknown = sorted(set(df["pattern"]) - set(_PATTERNS_002))
    if unknown:
        raise IngestError(f"unknown pattern(s) {unknown}, expected {sorted(_PATTERNS_002)}", path=name)
    spec = df["pattern"].map(_PATTERNS_002)
    known = pd.DataFrame({
        **_common(name, n),
        "run_id": [f"{name}/sw{w}/{v}vm/{p}/{t}" for w, v, p, t in
                   zip(df.stripe_width, df.vms, df.pattern, df.source_tool, strict=True)],
        "job": df["pattern"].astype("string"),
        "direction": [s[4] for s in spec], "rw": [s[1] for s in spec],
        "bs_bytes": [s[0] for s in spec], "rwmixread_pct": [s[2] for s in spec],
        "random_pct": [s[3] for s in spec],
        "iodepth": df["qd"].astype("int64"), "numjobs": df["threads"].astype("int64"),
        "direct": [True] * n, "target": [_TARGET_002] * n,
        "iops": df["iops"].astype("float64"),
        "bw_bytes_per_s": df["bw_mb_per_s"].astype("float64") * _MIB,
        "lat_mean_ns": df["lat_ms"].astype("float64") * _NS_PER_MS,
    })
    extra = pd.DataFrame({"source_tool": df["source_tool"].astype("string"),
                          "pattern": df["pattern"].astype("string"),
                          "stripe_width": df["stripe_width"].astype("int64"),
                          "vms": df["vms"].astype("int64")})
    return _to_runs(name, known, extra)


def _load_hdd_iops(df: pd.DataFrame, name: str) -> pd.DataFrame:
    n = len(df)
    read = df["read_pct"].astype("float64")
    seq = df["seq_pct"].astype("float64")
    family = read.map(lambda r: "read" if r == 100 else ("write" if r == 0 else "rw"))
    rw = [f if s == 100 else f"rand{f}" for f, s in zip(family, seq, strict=True)]
    direction = family.map({"read": "read", "write": "write", "rw": "mixed"})
    known = pd.DataFrame({
        **_common(name, n),
        "run_id": [f"{name}/{b}k/seq{s}/read{r}" for b, s, r in
                   zip(df.io_size_kb, df.seq_pct, df.read_pct, strict=True)],
        "job": [f"{b}KB {s}% Seq {r}% Read" for b, s, r in zip(df.io_size_kb, df.seq_pct, df.read_pct, strict=True)],
        "direction": direction, "rw": rw,
        "bs_bytes": (df["io_size_kb"] * _KIB).astype("int64"),
        "rwmixread_pct": read, "random_pct": 100.0 - seq,
        "numjobs": df["workers"].astype("int64"),
        "target": [_TARGET_001] * n, "runtime_s": [240.0] * n,  # "each test step (4 minutes each)"
        "iops": df["iops"].astype("float64"),
        "bw_bytes_per_s": df["bw_kb_per_s"].astype("float64") * _KIB,
        "lat_mean_ns": df["resp_ms"].astype("float64") * _NS_PER_MS,
    })
    extra = pd.DataFrame({"source_tool": pd.Series([pd.NA] * n, dtype="string"),
                          "seq_pct": seq, "io_size_kb": df["io_size_kb"].astype("int64")})
    return _to_runs(name, known, extra)


_LOADERS = {
    "vsan_qd_threads": _load_vsan_qd_threads,
    "vsan_stripe": _load_vsan_stripe,
    "hdd_iops": _load_hdd_iops,
}


def load_published(name: str, *, data_dir: str | Path | None = None) -> pd.DataFrame:
    """A published measurement table mapped onto the tidy ``runs`` schema.

    Parameters
    ----------
    name : {"vsan_qd_threads", "vsan_stripe", "hdd_iops"}
        ``vsan_qd_threads`` — seed 002, 4 KiB random read, DiskSPD and FIO, threads 1..8 x QD 1..128
        on one VM (64 rows); ``vsan_stripe`` — seed 002, 6 patterns x 1..12 VMs x DiskSPD/FIO x
        stripe width 1 and 4, whole-cluster totals (288 rows); ``hdd_iops`` — seed 001, 1 TB 7200 RPM
        SATA HDD, 4 KiB and 16 KiB x %sequential x %read, 1 worker (32 rows).
    data_dir : path, optional
        Directory of the tables (default :data:`PUBLISHED_DIR`).

    Returns
    -------
    pandas.DataFrame
        The ``runs`` columns (:data:`storagebench.schema.RUNS`) with ``tool == "published"`` and
        ``study == "published:<name>"``; ``iops``; ``bw_bytes_per_s`` (printed MB/s x 2**20, or KB/s x
        1024 — see the module docstring for why binary); ``lat_mean_ns`` (printed ms x 1e6);
        ``bs_bytes``, ``rw``, ``rwmixread_pct``, ``random_pct`` (100 - %sequential), ``iodepth``
        (QD per thread), ``numjobs`` (threads / workers). ``direction`` is ``read``/``write`` for pure
        workloads and ``mixed`` (fio's name for unified read+write reporting) for the read/write mixes,
        whose printed numbers are read+write totals.
        Study columns: ``source_tool`` (``"DiskSPD"``/``"FIO"`` as printed; NA for seed 001, which does
        not name its tool), ``pattern`` (seed 002, as printed), ``stripe_width``, ``vms`` (vsan_stripe),
        ``seq_pct``, ``io_size_kb`` (hdd_iops).
        What the source does not give is NA (floats, strings, times); in the schema's non-nullable
        columns it is -1 (``int64``: ``io_bytes``, ``total_ios``, ``run_order``, seed 001's ``iodepth``)
        or ``False`` (``bool``: seed 001's ``direct``, which the text does not state).

    Raises
    ------
    IngestError
        ``name`` is unknown or is not a measurement table (``hdd_devices`` is an inventory: use
        :func:`read_published`), or the CSV does not match its sidecar.
    SchemaError
        The mapped table does not validate against ``runs``.
    """
    meta = published_metadata(name, data_dir=data_dir)
    if meta["kind"] != "runs" or name not in _LOADERS:
        raise IngestError(f"published table {name!r} is a {meta['kind']} table, not measurements; "
                          f"load_published takes one of {sorted(_LOADERS)} (use read_published for {name!r})")
    return _LOADERS[name](read_published(name, data_dir=data_dir), name)


def load_table(source: str | Path, *, data_dir: str | Path | None = None) -> pd.DataFrame:
    """A results table by name: ``published:<name>``, a ``.parquet`` or a ``.csv`` file, or a study directory.

    The one way the ``compare`` command and notebooks open "a table" given as text.

    Parameters
    ----------
    source : str or path
        ``"published:vsan_stripe"`` (any :func:`load_published` name), the path of a parquet file
        (e.g. ``results/<study>/tidy/runs.parquet``) or of a CSV file, or a study directory
        ``results/<study>/``: its ``tidy/runs.parquet``, or its ``raw/`` runs ingested in memory
        (:func:`storagebench.ingest.ingest_study`) when it has no tidy tables yet.
    data_dir : path, optional
        Directory of the published tables (default :data:`PUBLISHED_DIR`).

    Returns
    -------
    pandas.DataFrame
        The table as stored (published tables mapped onto ``runs``; a parquet table storagebench wrote
        is read with :func:`storagebench.schema.read_table`: its format version checked, an older one
        migrated; other files read as they are, CSV with nullable dtypes).

    Raises
    ------
    IngestError
        Unknown published name, missing file, a suffix other than ``.parquet``/``.csv``, or a directory
        that is not a study directory.
    SchemaError
        A parquet table written by a newer storagebench (the message names its format version).
    """
    text = str(source)
    if text.startswith("published:"):
        return load_published(text.split(":", 1)[1], data_dir=data_dir)
    path = Path(source)
    if path.is_dir():
        if (path / "tidy" / "runs.parquet").is_file():
            return schema.read_table(path / "tidy" / "runs.parquet", "runs")
        if (path / "raw").is_dir():
            return ingest_study(path).runs
        raise IngestError("a directory must be a study directory (with tidy/runs.parquet or raw/)", path=text)
    if not path.exists():
        raise IngestError("no such file; a table must be a .parquet or .csv file or published:<name>", path=text)
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return schema.read_table(path)  # through the one reader of inputs: a regular file of bounded size
    if suffix == ".csv":
        with open_input(path, max_bytes=schema.MAX_TABLE_BYTES, what="CSV table", error=IngestError) as fh:
            return pd.read_csv(fh, dtype_backend="numpy_nullable")
    raise IngestError(f"table suffix must be one of ['.csv', '.parquet'], got {suffix!r}", path=text)


# --------------------------------------------------------------------------- result sets of any format

#: What a result set was read as (the ``kind`` column of :attr:`ResultSets.sources`).
RESULT_KINDS = ("published table", "tidy table", "study directory", "raw results")


@dataclass(frozen=True)
class ResultSets:
    """Several result sets read into one ``runs`` table (see :func:`load_result_sets`).

    Attributes
    ----------
    runs : pandas.DataFrame
        The ``runs`` rows of every set, concatenated, with a ``result_set`` column (the source as
        given) and, when labels were given, the label in the tool column.
    errors : list of IngestError
        Files of raw result sets that could not be ingested (their good neighbours were kept).
    sources : pandas.DataFrame
        One row per set: ``result_set``, ``label`` ("" when none was given), ``kind`` (one of
        :data:`RESULT_KINDS`), ``files`` (files ingested, or 1 for a table), ``runs`` (distinct
        ``run_id``), ``rows``, ``errors``, ``hosts`` (the machines the runs name, ``hostname``: two tools
        measured on different machines differ by more than the tools).
    """

    runs: pd.DataFrame
    errors: list
    sources: pd.DataFrame


def match_level(values: pd.Series, text: str, what: str):
    """The value of ``values`` that ``text`` names: a level given as text (a CLI argument, a parameter).

    ``text`` matches a value whose ``str()`` is ``text``, else a number equal to ``float(text)`` (``"4"``
    names 4.0, ``"0.5"`` names 0.50).

    Parameters
    ----------
    values : pandas.Series
        A column of a table (its distinct non-missing values are the levels).
    text : str
        The level as text.
    what : str
        What the text is, for the error (``"--baseline (a level of 'iodepth')"``).

    Returns
    -------
    object
        The one matching value, of the column's own type.

    Raises
    ------
    StatsError
        No value, or more than one, matches; the message lists the levels.
    """
    levels = sorted(values.dropna().unique().tolist(), key=str)
    hits = [v for v in levels if str(v) == text]
    if not hits:
        try:
            hits = [v for v in levels if isinstance(v, (int, float)) and float(v) == float(text)]
        except ValueError:
            hits = []
    if len(hits) != 1:
        raise StatsError(f"{what} must be one of {[str(v) for v in levels]}, got {text!r}")
    return hits[0]


def select_rows(df: pd.DataFrame, where: list[str] | tuple[str, ...]) -> pd.DataFrame:
    """The rows of ``df`` with ``COLUMN=VALUE`` for every item of ``where`` (each value by :func:`match_level`).

    Parameters
    ----------
    df : pandas.DataFrame
        Any table (``runs``, a published table ...).
    where : sequence of str
        ``"COLUMN=VALUE"`` items; all must hold.

    Returns
    -------
    pandas.DataFrame
        The selected rows (``df`` itself when ``where`` is empty).

    Raises
    ------
    StatsError
        An item that is not ``COLUMN=VALUE``, a column the table does not have, a value that is not
        one of the column's levels.
    """
    for item in where:
        col, sep, text = item.partition("=")
        if not sep or not col:
            raise StatsError(f"--where must be COLUMN=VALUE, got {item!r}")
        if col not in df.columns:
            raise StatsError(f"--where column must be one of {list(df.columns)}, got {col!r}")
        df = df[df[col] == match_level(df[col], text, f"--where {col}= value")]
    return df


def _is_table_file(path: Path) -> bool:
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return True
    if suffix != ".csv":
        return False
    # an Iometer results file is a .csv too: decided by content (its head, read through the one reader of inputs)
    return detect_format(read_input(path, max_bytes=schema.MAX_TABLE_BYTES, what="CSV table", error=IngestError,
                                    head=65536)) is None


def load_result_sets(sources: str | Path | list, *, labels: list | None = None, tool_col: str = "tool",
                     data_dir: str | Path | None = None) -> ResultSets:
    """Read result sets of any supported kind into one ``runs`` table, keeping what each set was.

    A result set is anything :func:`load_table` opens (``published:<name>``, a tidy ``.parquet`` or
    ``.csv`` table, a study directory) or raw results: a file or a directory of fio JSON/JSON+ output,
    DiskSPD XML or text, or Iometer results CSV, ingested in memory by
    :func:`storagebench.ingest.ingest_paths` (format detected from the content, so an Iometer ``.csv``
    is ingested, not read as a table).

    Parameters
    ----------
    sources : str or path, or list of them
        The result sets.
    labels : list of str, optional
        One label per set, written into ``tool_col`` (e.g. ``["DiskSPD", "FIO"]`` for a DiskSPD
        directory and a fio directory, or two fio versions). Without labels ``tool_col`` must already
        be a column (``tool`` of ingested runs: ``fio``, ``diskspd``, ``iometer``; ``source_tool`` of the
        seed 002 tables).
    tool_col : str
        The column naming the tool.
    data_dir : path, optional
        Directory of the published tables (default :data:`PUBLISHED_DIR`).

    Returns
    -------
    ResultSets

    Raises
    ------
    IngestError
        No source; labels not one per source; a source that does not exist or a table
        :func:`load_table` refuses; a raw result set of which no file could be ingested (the
        message names the first few files and reasons); ``tool_col`` missing without labels.
    """
    items = [sources] if isinstance(sources, (str, Path)) else list(sources)
    if not items:
        raise IngestError("no result set given: name at least one table, directory or file", path="")
    if labels is not None and len(labels) not in (0, len(items)):
        raise IngestError(f"labels must give one label per result set ({len(items)}), got {list(labels)}",
                          path=", ".join(map(str, items)))
    labels = list(labels) if labels else None
    frames, errors, rows = [], [], []
    for k, source in enumerate(items):
        text = str(source)
        path = Path(text)
        if text.startswith("published:"):
            kind, runs, files, errs = "published table", load_table(text, data_dir=data_dir), 1, []
        elif path.is_dir() and ((path / "tidy" / "runs.parquet").is_file() or (path / "raw").is_dir()):
            kind, runs, files, errs = "study directory", load_table(path), 1, []
        elif path.is_file() and _is_table_file(path):
            kind, runs, files, errs = "tidy table", load_table(path), 1, []
        elif path.exists():
            res = ingest_paths(path)
            if res.runs.empty:
                why = "; ".join(f"{e.path}: {e.reason}" for e in res.errors[:3]) or "no result file found"
                raise IngestError(f"no runs could be read from this result set ({why})", path=text)
            kind, runs, files, errs = "raw results", res.runs, res.files, list(res.errors)
        else:
            raise IngestError("no such file or directory; a result set is published:<name>, a tidy table, a "
                              "study directory, or fio / DiskSPD / Iometer result files or a directory of them",
                              path=text)
        runs = runs.copy()
        runs["result_set"] = text
        if labels is not None:
            runs[tool_col] = str(labels[k])
        elif tool_col not in runs.columns:
            raise IngestError(f"has no {tool_col!r} column to tell the tools apart; give labels (one per result "
                              "set) or the column that names the tool", path=text)
        frames.append(runs)
        errors += errs
        hosts = sorted({str(h) for h in runs.get("hostname", pd.Series(dtype=object)).dropna() if str(h)})
        rows.append({"result_set": text, "label": str(labels[k]) if labels else "", "kind": kind, "files": files,
                     "runs": int(runs["run_id"].nunique()) if "run_id" in runs else len(runs), "rows": len(runs),
                     "errors": len(errs),
                     "hosts": ", ".join(hosts[:4]) + (f" (+{len(hosts) - 4} more)" if len(hosts) > 4 else "")})
    return ResultSets(pd.concat(frames, ignore_index=True), errors, pd.DataFrame(rows))


def file_sources(paths) -> pd.DataFrame:
    """Where each result file comes from: its ``SOURCES.tsv`` entry (captured or constructed), if any.

    A directory of fixtures or shared results can carry a ``SOURCES.tsv`` (tab-separated, one row per
    file: ``file``, ``tool_version``, ``repo``, ``path``, ``commit``, ``licence``,
    ``captured_or_constructed``), as ``tests/fixtures/diskspd`` and ``tests/fixtures/iometer`` do.
    Published tables (``data/published/<name>.csv``) are described by their sidecar.

    Parameters
    ----------
    paths : iterable of str or path
        Result files (e.g. the ``source_file`` column of ``runs``).

    Returns
    -------
    pandas.DataFrame
        One row per distinct file: ``file`` (its name), ``directory``, ``status`` (``"captured"``,
        ``"constructed"``, ``"published"`` or ``"not listed"``), ``detail`` (the entry's own words after the
        status, or the published source), ``tool_version``, ``licence``, ``origin`` (repository @ commit, or
        the seed file; the path in the repository is in ``SOURCES.tsv``).
    """
    cache: dict[Path, dict[str, dict]] = {}
    out = []
    for text in dict.fromkeys(str(p) for p in paths if p is not None and str(p)):
        path = Path(text)
        rec = {"file": path.name, "directory": str(path.parent), "status": "not listed", "detail": "",
               "tool_version": "", "licence": "", "origin": ""}
        sidecar = next((y for y in (path.with_suffix(".yaml"), PUBLISHED_DIR / f"{path.stem}.yaml")
                        if path.suffix == ".csv" and path.parent.name == "published" and y.is_file()), None)
        if sidecar is not None:  # data/published/<name>.csv, as the runs' source_file names it
            meta = yaml.safe_load(sidecar.read_text(encoding="utf-8"))
            src = meta.get("source", {})
            rec.update(status="published", detail=f"transcribed from {src.get('title', '')} "
                                                  f"({src.get('publisher', '')})",
                       origin=f"seed {src.get('seed_file', '')}")
        else:
            d = path.parent.resolve()
            if d not in cache:
                table = d / "SOURCES.tsv"
                entries = {}
                if table.is_file():
                    df = pd.read_csv(table, sep="\t", dtype=str, keep_default_na=False)
                    entries = {r["file"]: r for r in df.to_dict("records") if "file" in r}
                cache[d] = entries
            entry = cache[d].get(path.name)
            if entry is not None:
                words = entry.get("captured_or_constructed", "")
                status = next((s for s in ("captured", "constructed") if words.lower().startswith(s)), "not listed")
                if status != "not listed":  # "captured (real run; ...)": the words after the status
                    words = words[len(status):].strip().removeprefix("(").removesuffix(")").strip() or words
                rec.update(status=status, detail=words, tool_version=entry.get("tool_version", ""),
                           licence=entry.get("licence", ""),
                           origin=" @ ".join(x for x in (entry.get("repo", ""), entry.get("commit", "")[:12]) if x))
        out.append(rec)
    return pd.DataFrame(out, columns=["file", "directory", "status", "detail", "tool_version", "licence", "origin"])
