"""One fio output → row tuples of ``runs`` and ``all_clients`` and the json+ histogram blocks.

:func:`emit_rows` appends a file's rows to a :class:`RowSink`: per job entry x direction the factor
columns (:mod:`storagebench.ingest._fiofactors`), the metrics in the schema's units (:func:`_metrics`:
fio 2.x units, values set to NaN with a note), and the json+ ``clat_ns.bins``, which the sink parses
from their raw JSON text many files at a time (:meth:`RowSink.parse_bins`, the fast path of ingest) and
turns into the ``histograms`` DataFrame (:func:`histogram_frame`). Internal to :mod:`storagebench.ingest`;
the public names are re-exported by :mod:`storagebench.ingest.fio`.
"""

from __future__ import annotations

import math
import operator
import re
from typing import Any

import msgspec
import numpy as np
from xxhash import xxh3_128_hexdigest

from ..errors import IngestError
from ..errors import display_path as _display_path
from ..fio.hosts import host_label
from ..schema import DIRECTIONS, RUNS
from ._fiobins import _parse_bins_text, block_sums, histogram_frame
from ._fiodoc import (
    ALL_CLIENTS,
    DECODER,
    MAX_VALUE,
    PCT_KEYS,
    RAW_DECODER,
    _check_duplicate_keys,
    decode_or_none,
    read_fio_json,
    resolve_options,
)
from ._fiofactors import FACTOR_FIELDS, UNKNOWN_FIELDS, global_options, job_factor_fields, main_direction
from ._runmeta import NO_POINT, NO_PROVENANCE, check_point, check_provenance, datetime_us, fio_times, iso_utc

_NAN = math.nan
_U = msgspec.UNSET  # a field fio did not print
_Raw = msgspec.Raw
_NO_EXTRA: dict = {}


# ---- the row tuple ----------------------------------------------------------------------------------

#: The ``runs`` columns: a study factor of that name is dropped (fio's own output wins).
_RUN_FIELD_SET = frozenset(c.name for c in RUNS)
#: Keys of a runner's ``point.json`` beside the factors that become columns of ``runs`` when present:
#: the set-up and block of the run in the study's design (``storagebench._study.DESIGN_COLUMNS``).
_DESIGN_KEYS = ("setup", "block")


def file_run_id(data: bytes) -> str:
    """Stable run id of a loose file: the first 12 hex digits of the XXH3-128 hash of its bytes.

    The id names a file's content (two copies of one output are one run); it is not a seal against a
    forger (48 bits of any hash can be matched by brute force). XXH3 (``xxhash``, Yann Collet's
    XXH3 of xxHash 0.8) hashes at memory speed: SHA-256, the id until 2026-11, took 0.25x bare orjson's
    CPU time on the ingest benchmark's corpora (``benchmarks/bench_ingest.py``), XXH3 under 0.01x."""
    return xxh3_128_hexdigest(data)[:12]


# ---- json+ bins: the raw-text fast path, the sink, the histograms table -----------------------------

#: bytes of json+ bins text parsed at a time by :meth:`RowSink.parse_bins` (its temporaries then stay in
#: the CPU cache and are reused: 47 -> 39 ms and no page faults on the multijob corpus, against one piece)
BINS_STEP = 512 << 10


class RowSink:
    """What :func:`emit_rows` appends to: row tuples (fields named by :data:`RUN_FIELDS`) of ``runs`` and
    ``all_clients``, each with its study factors (one dict per row, shared by the rows of one file),
    and the json+ histogram blocks in the compact form of :func:`histogram_frame`."""

    def __init__(self, raw_bins: bool = False) -> None:
        self.runs: list[tuple] = []
        self.runs_extra: list[dict] = []
        self.all_clients: list[tuple] = []
        self.all_extra: list[dict] = []
        self.hist_blocks: list[tuple] = []
        #: json+ bins of each block (checked when decoded), as int64 arrays: bin values (ns) and counts.
        #: Made right after the file is decoded, while its dict is in the CPU cache (~2x faster than
        #: walking every file's dict at the end, and the dicts are freed at once)
        self.hist_keys: list = []
        self.hist_counts: list = []
        #: per block: fio's clat_ns.N (-1: not printed, or not a fio block), and (row index in ``runs``,
        #: JSON path) for the note
        self.hist_n: list[int] = []
        self.hist_checks: list[tuple | None] = []
        self.hist_rows: list[int] = []  #: per block: its ``runs`` row (-1: not fio's), for :meth:`block_rows`
        #: per block: the raw JSON of its bins (:class:`msgspec.Raw`, the fast decoder's, ``raw_bins``) until
        #: a step of :meth:`parse_bins` has made them arrays, else None
        self.hist_raw: list = []
        #: decode json+ bins raw and parse them in steps (:meth:`parse_bins`); False: as dicts
        self.raw_bins = raw_bins
        self._parsed = 0  # blocks before this one are parsed (or not raw)
        self._pending = 0  # bytes of raw bins not parsed yet
        self._steps: list[tuple] = []  # (block indices, keys, counts, bins per block) of each step
        self._failed = False  # some raw bins are not the text parse_bins takes: read the batch again
        #: the flat bin values and counts of every block, when :meth:`parse_bins` made them in one piece
        self._flat: tuple | None = None
        self._n_bins: np.ndarray | None = None  # bins per block, once known (:meth:`n_bins`)

    def parse_step(self) -> None:
        """Parse the raw bins of the files added since the last step (:func:`_parse_bins_text`).

        Called between files (a file's rows are all there or all rolled back: never half a file), once
        ~``BINS_STEP`` bytes of bins are waiting, so that their text is parsed while it is still in the
        CPU cache and only a few files' bytes are kept alive; :meth:`parse_bins` parses the rest.
        """
        at = [k for k in range(self._parsed, len(self.hist_raw)) if self.hist_raw[k] is not None]
        if at and not self._failed:
            try:
                part = _parse_bins_text([self.hist_raw[k] for k in at])
            except Exception:  # noqa: BLE001 - never a file's fault: the batch is read again with the decoder
                part = None
            if part is None:
                self._failed = True
            else:
                self._steps.append((at, *part))
        for k in at:
            self.hist_raw[k] = None  # the file's bytes are freed
        self._parsed = len(self.hist_raw)
        self._pending = 0

    def parse_bins(self) -> bool:
        """Turn the raw json+ bins of every block into int64 arrays (bin values in ns, counts).

        The JSON text of the blocks is joined and parsed, a step of a few hundred KiB at a time
        (:meth:`parse_step`), by one ``numpy.fromstring`` once whitespace, quotes and ``{`` are deleted
        and ``:`` and ``}`` made separators. The values are taken only when the text is what
        :data:`~storagebench.ingest._fiodoc.DECODER` reads as ``dict[int, int]`` with these same numbers,
        which is checked on the text: each block one object (an object inside it leaves an empty
        number), every string a key (followed by ``:`` or `` :``) whose characters are decimal digits
        without a leading zero, every value a JSON integer (no sign, fraction or exponent), each number
        at most 2**63-2, one number per key and value, and the keys of a block increasing (a repeated
        key would collapse in a dict). fio writes exactly this; so does ``json.dump`` of fio's output.

        Returns
        -------
        bool
            False when some block is not such text: nothing is changed, and the batch must be read
            again with :data:`~storagebench.ingest._fiodoc.DECODER` (``raw_bins=False``), which gives the
            dict semantics or the file's error.
        """
        self.parse_step()
        if self._failed:
            return False
        steps, self._steps = self._steps, []
        if not steps:
            return True
        at = [k for step in steps for k in step[0]]
        keys, counts, n = (np.concatenate(x) if len(x) > 1 else np.ascontiguousarray(x[0])
                           for x in zip(*(step[1:] for step in steps), strict=True))
        if len(at) == len(self.hist_blocks):  # every block (fio's json+ only): the arrays in one piece
            self._flat = (keys, counts)
            self._n_bins = n  # the blocks' own lengths stay -1 (unknown when appended): n_bins() has them
            return True
        block_start = np.cumsum(n) - n
        for j, k in enumerate(at):
            b0, b1 = block_start[j], block_start[j] + n[j]
            self.hist_keys[k], self.hist_counts[k] = keys[b0:b1], counts[b0:b1]
            self.hist_blocks[k] = (*self.hist_blocks[k][:5], int(n[j]))
        self._n_bins = None
        return True

    def n_bins(self) -> np.ndarray:
        """The bins of each block (int64 array), once :meth:`parse_bins` has run: its lengths when it parsed
        every block in one piece (the blocks keep -1), else the blocks' own."""
        n = self._n_bins
        if n is None or len(n) != len(self.hist_blocks):
            n = np.fromiter((b[5] for b in self.hist_blocks), dtype=np.int64, count=len(self.hist_blocks))
            if len(n) and n.min() < 0:
                raise RuntimeError("json+ bins not parsed: call parse_bins first")
            self._n_bins = n
        return n

    def block_rows(self) -> np.ndarray:
        """The ``runs`` row of each block (int64 array; -1: a DiskSPD/Iometer block, found by its key)."""
        return np.array(self.hist_rows, dtype=np.int64)

    def check_bins(self, counts, n_bins=None) -> None:
        """Note the ``runs`` rows whose json+ bins do not add up to fio's ``clat_ns.N`` (one vector
        sum per batch: ``counts`` is the flat count array of :meth:`histograms`). fio's bins and N
        count the same completions; they differ in an interim ``--status-interval`` report (a
        completion landing between the two reads) or in an edited file."""
        if not self.hist_blocks:
            return
        sums, over = block_sums(counts, self.n_bins() if n_bins is None else n_bins)
        expected = np.array(self.hist_n, dtype=np.int64)
        for k in np.flatnonzero((expected >= 0) & ((sums != expected) | over)):
            n = self.hist_n[k]
            row, loc = self.hist_checks[k]
            total = f"more than {2**63 - 1}" if over[k] else str(int(sums[k]))
            note = f"{_at(loc)}.clat_ns.bins add up to {total} completions, clat_ns.N is {n}"
            self.runs[row] = with_note(self.runs[row], note)

    def histograms(self):
        """The ``histograms`` DataFrame of the blocks gathered (not yet validated)."""
        if self._failed or self._steps or any(r is not None for r in self.hist_raw[self._parsed:]):
            raise RuntimeError("json+ bins not parsed: call parse_bins first (and read the batch again if it "
                               "returns False)")
        keys, counts = self._flat or (np.concatenate(self.hist_keys), np.concatenate(self.hist_counts))
        n_bins = self.n_bins()
        frame = histogram_frame(self.hist_blocks, keys, counts, n_bins)
        self.check_bins(counts, n_bins)
        return frame


# ---- the metrics of one direction block (units, impossible values) ----------------------------------

#: What the fio reader reads from a direction block beside its counts, for each ``runs`` column: the
#: latency block (``lat``, ``clat``, ``slat``: fio 3's ``*_ns`` in ns, fio 2's in µs) and the field of it
#: (``mean``, ``stddev``, ``min``, ``max``, or ``percentile.<fio's key>``: ``percentile.99.000000``).
#: The one table of the fio reader to extend for a new latency metric (with its column in
#: :data:`storagebench.schema.RUNS`): the row, the fast path and the notes follow from it. A column
#: whose :class:`~storagebench.schema.Valid` is ``optional`` (a statistic fio prints only when asked,
#: e.g. ``slat_percentiles=1``) is read apart: NaN without a note when fio did not print it, and it never
#: takes a row off the fast path.
SECONDARY: tuple[tuple[str, str, str], ...] = (
    ("lat_mean_ns", "lat", "mean"), ("lat_stdev_ns", "lat", "stddev"), ("lat_min_ns", "lat", "min"),
    ("lat_max_ns", "lat", "max"), ("clat_mean_ns", "clat", "mean"), ("clat_stdev_ns", "clat", "stddev"),
    ("slat_mean_ns", "slat", "mean"), *((col, "clat", f"percentile.{key}") for key, col in PCT_KEYS),
)
_PCT_ATTR = {f"percentile.{key}": f"percentile.p{i}" for i, (key, _) in enumerate(PCT_KEYS)}
_OPTIONAL_COLS = frozenset(c.name for c in RUNS if c.valid is not None and c.valid.optional)
#: the secondary metrics every fio row has (in :data:`SECONDARY` order), and the optional ones
_REQUIRED = tuple(e for e in SECONDARY if e[0] not in _OPTIONAL_COLS)
_OPTIONAL = tuple(e for e in SECONDARY if e[0] in _OPTIONAL_COLS)
#: JSON names of the required secondary metrics of a row, for notes: (block, field) in row order.
_SECONDARY = tuple((block, key) for _, block, key in _REQUIRED)
#: the ``runs`` column of each required secondary metric (notes name the column a NaN is in: the gate's rule)
_SECONDARY_COLS = tuple(col for col, _, _ in _REQUIRED)
_BLOCK_COLS = {"lat": "lat_*_ns", "clat": "clat_*_ns, clat_p*_ns", "slat": "slat_mean_ns"}
_STAT_COLS = {"lat": "lat_*_ns", "clat": "clat_*_ns", "slat": "slat_mean_ns"}
_CPU_COL = {"usr_cpu": "usr_cpu_pct", "sys_cpu": "sys_cpu_pct"}
_BLOCK_ARG = {"lat": 0, "clat": 1, "slat": 2}


def _getter(block: str, key: str):
    """The attribute getter of one field of a decoded latency block (:class:`~storagebench.ingest._fiodoc._Lat`)."""
    return operator.attrgetter(_PCT_ATTR.get(key, key))


def _compile_reader(entries: tuple) -> Any:
    """``read(blocks) -> tuple`` of the fields ``entries`` names, in their order, from ``blocks`` = (lat, clat,
    slat): one attrgetter per run of consecutive fields of a block (AttributeError when a block or its
    percentiles were not printed: the caller's slow path)."""
    runs: list[tuple[int, list[str]]] = []
    for _, block, key in entries:
        arg = _BLOCK_ARG[block]
        if runs and runs[-1][0] == arg:
            runs[-1][1].append(_PCT_ATTR.get(key, key))
        else:
            runs.append((arg, [_PCT_ATTR.get(key, key)]))
    getters = [(arg, operator.attrgetter(*attrs) if len(attrs) > 1 else
                (lambda b, _g=operator.attrgetter(attrs[0]): (_g(b),))) for arg, attrs in runs]
    if len(getters) == 4:  # the usual table: unrolled (this is ingest's hot path)
        (a0, g0), (a1, g1), (a2, g2), (a3, g3) = getters
        return lambda b: (*g0(b[a0]), *g1(b[a1]), *g2(b[a2]), *g3(b[a3]))
    return lambda b: tuple(v for arg, g in getters for v in g(b[arg]))


_READ_REQUIRED = _compile_reader(_REQUIRED)
#: Names of the metric fields :func:`_metrics` returns, in its order.
METRIC_FIELDS: tuple[str, ...] = ("iops", "bw_bytes_per_s", "io_bytes", "total_ios", "runtime_s", *_SECONDARY_COLS,
                                  *(col for col, _, _ in _OPTIONAL))

#: The fields of a row tuple, by name: each part names its own fields where it fills them (the factors:
#: :data:`~storagebench.ingest._fiofactors.FACTOR_FIELDS`; the metrics: :data:`METRIC_FIELDS`), and
#: :func:`emit_rows` joins the parts in this order. Every reader of a row goes through these names
#: (:func:`storagebench.ingest.fio.runs_frame` builds each schema column by name, and fills a ``runs``
#: column no part fills with its unknown value), so no order has to match another by hand. Rows are
#: tuples rather than dicts because ingest makes one per job and direction: a dict per row cost ~5%
#: of ingest (``benchmarks/bench_ingest.py``).
RUN_FIELDS: tuple[str, ...] = (
    "study", "run_id", "repetition", "run_order", "host", "job", "job_index", "direction", "tool",
    *FACTOR_FIELDS, *METRIC_FIELDS, "usr_cpu_pct", "sys_cpu_pct", "error", "partial",
    "ss_rule", "ss_window_s", "ss_attained", "ss_criterion",
    "fio_version", "started_at", "reported_at", "hostname", "kernel", "source_file", "note",
)
#: position of ``note`` in a row tuple (:func:`with_note`)
_NOTE = RUN_FIELDS.index("note")


def with_note(row: tuple, note: str) -> tuple:
    """``row`` with ``note`` added to its ``note`` field (``"; "``-separated)."""
    old = row[_NOTE]
    return (*row[:_NOTE], f"{old}; {note}" if old else note, *row[_NOTE + 1:])


def _old_units(version: str) -> bool | None:
    """fio < 3 (µs latency blocks ``lat``/``clat``/``slat``): True; fio >= 3 (``*_ns``): False; unknown: None."""
    if version.startswith(("fio-1.", "fio-2.")):
        return True
    if version.startswith("fio-"):
        return False
    return None


_OLD_UNITS: dict[str, bool | None] = {}  # _old_units, memoised per version string
_VERSION = re.compile(r"fio-(\d+)\.(\d+)")


def _prints_bw_bytes(version: str) -> bool:
    """fio >= 3.4 always prints ``bw_bytes``; fio 2.x and 3.0-3.3 print only ``bw`` (KiB/s)."""
    m = _VERSION.match(version)
    return bool(m) and (int(m[1]), int(m[2])) >= (3, 4)


#: a float must be below 2**63 (float(2**63 - 1) == 2**63, so ``<=`` would let 2**63 through)
_LIMIT = 2.0**63


def _lat_problem(block: Any) -> str:
    """Why a latency block's statistics contradict each other ("" when they do not): fio's mean
    of the samples lies within [min, max], their standard deviation is at most max - min, and it
    is 0 only when every sample is the same (min == max)."""
    lo, hi, mean, sd = block.min, block.max, block.mean, block.stddev
    if lo == lo and hi == hi and lo > hi:
        return f"min {lo} > max {hi}"
    if mean == mean and lo == lo and hi == hi and not lo <= mean <= hi:
        return f"mean {mean!r} outside [min {lo}, max {hi}]"
    if sd == sd and lo == lo and hi == hi and sd > hi - lo:
        return f"stddev {sd!r} > max - min ({hi - lo})"
    if sd == 0 and lo == lo and hi == hi and lo < hi:
        return f"stddev 0 while min {lo} < max {hi}"
    return ""


def _metrics(d: Any, loc: tuple, old: bool | None, version: str, path: str) -> tuple[tuple, list[str]]:
    """The metric fields of a row (:data:`METRIC_FIELDS`, by name) from one direction block, in the schema's units, and the notes on values set to NaN (module docstring).

    ``loc`` is ``(where, index, direction)``: the JSON path ``jobs[0].read`` of the block, made into
    text only when a note or an error needs it (the usual block needs none)."""
    notes: list[str] = []
    if old is None:  # no version: the blocks say which units
        old = d.clat_ns is _U and d.lat_ns is _U and d.slat_ns is _U and not (
            d.clat is _U and d.lat is _U and d.slat is _U)
    if old:
        lat, clat, slat, suffix, f = d.lat, d.clat, d.slat, "", 1000.0
    else:
        lat, clat, slat, suffix, f = d.lat_ns, d.clat_ns, d.slat_ns, "_ns", 1.0
    if d.bw_bytes is not _U:
        bw = float(d.bw_bytes)
    elif d.bw is not _U and not _prints_bw_bytes(version):
        bw = d.bw * 1024.0
        notes.append(f"{_at(loc)}.bw_bytes: not printed by this fio; bw_bytes_per_s = bw (KiB/s) x 1024")
    else:
        raise IngestError(f"{_at(loc)}.bw_bytes: missing ({version or 'fio'} always prints it)", path=path)
    io = d.io_bytes
    if old and d.io_kbytes is _U:  # fio 2.x: "io_bytes" holds KiB
        io *= 1024
        if io > MAX_VALUE:
            raise IngestError(f"{_at(loc)}.io_bytes = {d.io_bytes} KiB: more than 2**63-1 bytes", path=path)
    total = d.total_ios
    if total is _U:
        if not old:
            raise IngestError(f"{_at(loc)}.total_ios: missing (fio 3 always prints it)", path=path)
        total = -1  # fio 2.1 does not count I/Os
    blocks3 = (lat, clat, slat)
    opt = _read_optional(blocks3, f, loc, suffix, notes) if _OPTIONAL else ()
    try:
        sec = _READ_REQUIRED(blocks3)  # the usual block: every latency block and percentile printed
        if f != 1.0:
            sec = tuple(v * f for v in sec)
    except AttributeError:  # a block (or clat's percentiles) not printed: UNSET has no fields
        where = _at(loc)
        pct = clat.percentile if clat is not _U else _U
        sec = tuple(_NAN if (b := blocks3[_BLOCK_ARG[block]]) is _U
                    or (key.startswith("percentile.") and b.percentile is _U)
                    else _getter(block, key)(b) * f for _, block, key in _REQUIRED)
        for name, block in (("lat", lat), ("clat", clat), ("slat", slat)):
            if block is _U:
                notes.append(f"{where}.{name}{suffix}: missing ({_BLOCK_COLS[name]} NaN)")
        if clat is not _U and pct is _U:
            did = clat.N if clat.N is not _U else max(total, 0) + d.io_bytes
            if did:  # fio leaves the percentiles out when the direction completed no I/O
                notes.append(f"{where}.clat{suffix}.percentile: missing (clat_p*_ns are NaN)")
            else:
                notes.append(f"{where}.clat{suffix}.percentile: not printed, no I/O completed (clat_p*_ns NaN)")
    total_sec = sum(sec)  # NaN if a value is missing
    if total_sec == total_sec and min(sec) >= 0.0 and max(sec) < _LIMIT:  # the usual case: all in range ...
        # ... and the statistics consistent (every block is there: no value above is NaN)
        if lat.min <= lat.mean <= lat.max and lat.stddev <= lat.max - lat.min \
                and clat.min <= clat.mean <= clat.max and clat.stddev <= clat.max - clat.min \
                and slat.min <= slat.mean <= slat.max and slat.stddev <= slat.max - slat.min \
                and (lat.stddev or lat.min == lat.max) and (clat.stddev or clat.min == clat.max) \
                and (slat.stddev or slat.min == slat.max):
            return (d.iops, bw, io, total, d.runtime / 1000.0, *sec, *opt), notes
    out = _out_of_range(sec, blocks3, f, loc, suffix, notes)
    return (d.iops, bw, io, total, d.runtime / 1000.0, *out, *opt), notes


def _out_of_range(sec: tuple, blocks3: tuple, f: float, loc: tuple, suffix: str, notes: list[str]) -> list:
    """The latency fields ``sec`` (:data:`_REQUIRED`'s, in ns) of a block that is not the usual one: each value
    out of range or missing set to NaN, each block whose statistics contradict each other set to NaN, and a
    note on each in ``notes`` (a block or percentile list not printed at all is noted by the caller)."""
    where = _at(loc)
    out = list(sec)
    blocks = dict(zip(("lat", "clat", "slat"), blocks3, strict=True))
    missing_pct = []
    for i, v in enumerate(sec):
        if 0.0 <= v < _LIMIT:
            continue
        out[i] = _NAN
        name, key = _SECONDARY[i]
        if blocks[name] is _U or (key.startswith("percentile") and blocks[name].percentile is _U):
            continue  # noted above
        if v != v:
            if key.startswith("percentile."):
                missing_pct.append(key.split(".", 1)[1])
            else:
                notes.append(f"{where}.{name}{suffix}.{key}: missing ({_SECONDARY_COLS[i]} NaN)")
        else:
            raw = v / f
            notes.append(f"{where}.{name}{suffix}.{key} = {raw!r}: impossible (allowed 0 to 2**63-1); "
                         f"{_SECONDARY_COLS[i]} stored NaN")
    if missing_pct:
        notes.append(f"{where}.clat{suffix}.percentile: no {', '.join(missing_pct)} (clat_p*_ns NaN)")
    for name, block in blocks.items():  # contradicting statistics: the block's mean/stddev/min/max are NaN
        problem = _lat_problem(block) if block is not _U else ""
        if problem:
            for i, (n, key) in enumerate(_SECONDARY):
                if n == name and not key.startswith("percentile"):
                    out[i] = _NAN
            notes.append(f"{where}.{name}{suffix}: {problem} (impossible; {_STAT_COLS[name]} stored NaN)")
    return out


def _read_optional(blocks3: tuple, f: float, loc: tuple, suffix: str, notes: list[str]) -> tuple:
    """The optional secondary metrics (:data:`SECONDARY`) of a block: NaN without a note when fio did not
    print them, NaN with a note when it printed a value it cannot have."""
    out = []
    for col, block, key in _OPTIONAL:
        b = blocks3[_BLOCK_ARG[block]]
        if b is _U or (key.startswith("percentile.") and b.percentile is _U):
            out.append(_NAN)
            continue
        v = _getter(block, key)(b) * f
        if not 0.0 <= v < _LIMIT:
            if v == v:
                notes.append(f"{_at(loc)}.{block}{suffix}.{key} = {v / f!r}: impossible (allowed 0 to 2**63-1); "
                             f"{col} stored NaN")
            v = _NAN
        out.append(v)
    return tuple(out)


def _at(loc: tuple) -> str:
    """``(where, index, direction)`` as the JSON path ``jobs[0].read`` (direction ``""``: ``jobs[0]``)."""
    where, idx, name = loc
    return f"{where}[{idx}].{name}" if name else f"{where}[{idx}]"


def _cpu(value: float, where: str, notes: list[str]) -> float:
    """A job's ``usr_cpu``/``sys_cpu`` (%), or NaN with a note; called only when it is not in range."""
    if 0.0 <= value < _LIMIT:
        return value
    if value != value:
        notes.append(f"{where}: missing ({_CPU_COL[where.rsplit('.', 1)[-1]]} NaN)")
    else:
        notes.append(f"{where} = {value!r}: impossible (allowed 0 to 2**63-1); "
                     f"{_CPU_COL[where.rsplit('.', 1)[-1]]} stored NaN")
    return _NAN


# ---- one file's rows --------------------------------------------------------------------------------


def emit_rows(
    sink: RowSink,
    data: bytes,
    path: str,
    identity: Any = None,
    provenance: Any = None,
    file_id: str | None = None,
) -> None:
    """Parse one fio output and append its rows to ``sink`` (see
    :func:`~storagebench.ingest.fio.parse_fio_output`).

    The rows are appended as the file is read: a file that raises part-way leaves rows behind,
    which the caller drops (:meth:`storagebench.ingest._Collector.rollback`;
    :func:`~storagebench.ingest.fio.parse_fio_output` uses a fresh sink). ``file_id`` is
    :func:`file_run_id` of ``data`` when the caller has it already.
    This is the hot path of ingest: strings for notes and errors are only made when needed.
    """
    doc, partial = _document(data, path, sink.raw_bins)
    point = NO_POINT if identity is None else check_point(identity, path)
    prov = NO_PROVENANCE if provenance is None else check_provenance(provenance, path)
    run_id = point.run_id or file_id or file_run_id(data)
    extra = _extra_columns(point)
    gopts = doc.global_options
    if type(gopts) is not dict:
        gopts = global_options(doc)
    if point.options:  # a runner run: point.json's options are what every host ran (see module doc)
        gopts = {**gopts, **{k: v for k, v in point.options.items() if v is not None}}
    gkey = tuple(gopts.items())  # unhashable (a list from point.json): job_factor_fields copes
    has_gopts = doc.global_options is not _U
    client_mode = doc.client_stats is not _U and doc.jobs is _U
    entries = doc.client_stats if client_mode else doc.jobs
    where = "client_stats" if client_mode else "jobs"
    doc_notes: list[str] = []
    started, reported = fio_times(doc, entries, doc_notes, bool(prov.started_at))
    started = datetime_us(iso_utc(prov.started_at, path)) if prov.started_at else started  # the runner's, at spawn
    head = (point.study, run_id, point.repetition, point.run_order)
    fio_version = doc.fio_version or prov.fio_version or ""
    old = _OLD_UNITS.get(fio_version)
    if old is None and fio_version not in _OLD_UNITS:
        old = _remember_units(fio_version)
    kernel = prov.kernel or ""
    source = path if path.isascii() else _display_path(path)
    local_hostname = prov.hostname or ""
    runs, runs_extra = sink.runs, sink.runs_extra
    seen: dict[tuple[str, str], int] = {}
    json_plus = False  # some block has json+ bins ...
    no_bins: list[tuple[int, tuple]] = []  # ... then these rows that did I/O without any get a note
    for idx, entry in enumerate(entries):
        name = entry.jobname
        if client_mode:
            hostname = entry.hostname or ""
            host = host_label(hostname, entry.port if entry.port is not _U else "")  # sock:/path for sockets
        else:
            host, hostname = "local", local_hostname
        is_all = client_mode and name == ALL_CLIENTS
        if is_all:
            host = ALL_CLIENTS
        key = (host, name)
        job_index = seen.get(key, 0)
        seen[key] = job_index + 1
        if has_gopts or entry.job_options is not _U:
            rw, fields, fnotes = job_factor_fields(gopts, gkey, entry.job_options or {})
        else:  # fio < 2.2 prints no options: the factors are unknown, not fio's defaults
            rw, fields, fnotes = UNKNOWN_FIELDS
        todo = _directions(entry, (where, idx, ""), old, rw, path)
        jnotes = [*doc_notes, *fnotes] if (doc_notes or fnotes) else []
        usr, sys_ = entry.usr_cpu, entry.sys_cpu
        if not (0.0 <= usr < _LIMIT and 0.0 <= sys_ < _LIMIT):
            usr = _cpu(usr, f"{where}[{idx}].usr_cpu", jnotes)
            sys_ = _cpu(sys_, f"{where}[{idx}].sys_cpu", jnotes)
        prefix = (*head, host, name, job_index)
        ss = _NO_SS if entry.steadystate is _U else _steadystate(entry.steadystate)
        tail = (usr, sys_, entry.error, partial, *ss, fio_version, started, reported, hostname, kernel, source)
        for i, dname, d in todo:
            metrics, mnotes = _metrics(d, (where, idx, dname), old, fio_version, path)
            note = "; ".join(jnotes + mnotes) if (jnotes or mnotes) else ""
            row = (*prefix, dname, "fio", *fields[i], *metrics, *tail, note)
            if is_all:
                sink.all_clients.append(row)
                sink.all_extra.append(extra)
                continue
            runs.append(row)
            runs_extra.append(extra)
            if _add_bins(sink, d, (run_id, host, name, job_index, dname), (where, idx, dname)):
                json_plus = True
            elif (d.total_ios or 0) > 0:
                no_bins.append((len(runs) - 1, (where, idx, dname)))
    if json_plus and no_bins:
        _note_no_bins(runs, no_bins, old)


def _document(data: bytes, path: str, raw_bins: bool) -> tuple[Any, bool]:
    """(the fio document of ``data``, whether it is the partial output of a killed fio), decoded the fast way
    when ``data`` is one document and nothing else, else by :func:`read_fio_json` (the same errors as before)."""
    doc = None
    if data[:1] == b"{":  # the usual file: one document and nothing else (read_fio_json's first case)
        try:
            # json+ bins raw when the sink parses them (many files at a time); DECODER's document and
            # errors otherwise: the fast decoder checks all but the bins, so any error it meets is
            # reported as DECODER reports it (the first in the file, which may be in the bins)
            doc = (RAW_DECODER if raw_bins else DECODER).decode(data)
            if raw_bins and not resolve_options(doc):
                doc = decode_or_none(data, path)  # an option DECODER refuses: its error
        except msgspec.DecodeError:
            doc = None  # several documents, or not JSON: read_fio_json (the same errors as before)
        except (msgspec.ValidationError, UnicodeDecodeError, RecursionError):
            doc = decode_or_none(data, path)
    if doc is not None and (doc.jobs or (doc.client_stats and doc.jobs is _U)):
        _check_duplicate_keys(data, doc, path)
        return doc, False
    fd = read_fio_json(data, path)
    return fd.doc, fd.partial


#: the steady-state fields of a job without a ``steadystate`` block (no rule)
_NO_SS = ("", math.nan, False, math.nan)


def _steadystate(block: Any) -> tuple[str, float, bool, float]:
    """(``ss_rule``, ``ss_window_s``, ``ss_attained``, ``ss_criterion``) of a job's ``steadystate`` block; a
    criterion that is not a finite number below 2**63 in size (fio's ``"-nan%"``) is NaN."""
    try:
        crit = float(block.criterion.strip().removesuffix("%"))
    except ValueError:
        crit = math.nan
    if not -_LIMIT < crit < _LIMIT:
        crit = math.nan
    window = math.nan if block.duration is _U else float(block.duration)
    return block.ss, window, block.attained is not _U and block.attained > 0, crit


def _remember_units(fio_version: str) -> bool | None:
    """:func:`_old_units` of ``fio_version``, kept in :data:`_OLD_UNITS` (cleared past 256 versions)."""
    if len(_OLD_UNITS) > 256:
        _OLD_UNITS.clear()
    old = _OLD_UNITS[fio_version] = _old_units(fio_version)
    return old


def _directions(entry: Any, loc: tuple, old: bool | None, rw: str, path: str) -> tuple | list:
    """The direction blocks of one job entry to make rows of, as ``(index, direction, block)``: the ``mixed``
    block alone (``unified_rw_reporting``), else those that did I/O, else the job's main direction.
    ``loc`` is ``(where, index, "")`` of the entry; a block fio always prints and that is missing raises."""
    where, idx, _ = loc
    read, write, trim = entry.read, entry.write, entry.trim
    if entry.mixed is not _U and read is _U and write is _U and trim is _U:
        # unified_rw_reporting=1: fio reports one "mixed" block (with =both, "mixed" is the sum of
        # the read/write/trim blocks also printed, and is skipped so nothing counts twice)
        return ((0, "mixed", entry.mixed),)
    if read is _U or write is _U or (trim is _U and old is False):
        gone = [dn for dn, d in (("read", read), ("write", write), ("trim", trim))
                if d is _U and (dn != "trim" or old is False)]
        raise IngestError(f"{where}[{idx}] ({entry.jobname!r}): no {' or '.join(gone)} block (fio prints read, "
                          f"write{' and trim' if old is False else ''} for every job)", path=path)
    todo = [(i, dn, d) for i, dn, d in ((0, "read", read), (1, "write", write), (2, "trim", trim))
            if d is not _U and ((d.total_ios or 0) > 0 or d.io_bytes > 0)]
    if not todo:
        main = main_direction(rw)
        d = getattr(entry, main)
        if d is _U:
            raise IngestError(f"{where}[{idx}].{main}: missing (fio prints it for every job; rw={rw!r})", path=path)
        return ((DIRECTIONS.index(main), main, d),)
    return todo


def _add_bins(sink: RowSink, d: Any, block: tuple, loc: tuple) -> bool:
    """Add the json+ bins of the direction block ``d`` (the last row of ``sink.runs``) to ``sink``, keyed by
    ``block`` = ``(run_id, host, job, job_index, direction)``; False when it has none."""
    clat = d.clat_ns
    bins = _U if clat is _U else clat.bins
    raw = None
    if type(bins) is _Raw:  # the fast decoder's bins: parsed in steps (RowSink.parse_bins)
        raw = bins
        if len(raw) < 64:
            small = bytes(raw)
            if small[:1] == b"{" and b'"' not in small:  # {}: an object without a key
                raw = bins = None  # (a longer empty one is left to the decoder by parse_bins)
    if not bins:
        return False
    if raw is None:
        n = len(bins)
        sink.hist_keys.append(np.fromiter(bins, dtype=np.int64, count=n))
        sink.hist_counts.append(np.fromiter(bins.values(), dtype=np.int64, count=n))
    else:
        n = -1  # known once parsed
        sink.hist_keys.append(None)
        sink.hist_counts.append(None)
        sink._pending += len(raw)
    sink.hist_raw.append(raw)
    sink.hist_blocks.append((*block, n))
    sink.hist_n.append(-1 if clat.N is _U else clat.N)
    sink.hist_checks.append((len(sink.runs) - 1, loc))
    sink.hist_rows.append(len(sink.runs) - 1)
    return True


def _extra_columns(point: Any) -> dict:
    """The columns of a run's rows beyond ``runs``' own: its study factors, and the plan's design (``setup``,
    ``block``) like factors; one dict shared by the rows of one file."""
    factors = point.factors
    extra = {k: v for k, v in factors.items() if k not in _RUN_FIELD_SET} if factors else _NO_EXTRA
    if point.setup is not None or point.block is not None:  # the plan's design: columns like factors
        extra = {**extra, **{k: v for k in _DESIGN_KEYS if (v := getattr(point, k)) is not None}}
    return extra


def _note_no_bins(runs: list[tuple], no_bins: list[tuple[int, tuple]], old: bool | None) -> None:
    """In a json+ output, note on each row that did I/O without bins that they are missing."""
    for row, loc in no_bins:
        note = f"{_at(loc)}.clat{'_ns' if old is not True else ''}.bins: missing in json+ output (no histogram rows)"
        runs[row] = with_note(runs[row], note)
