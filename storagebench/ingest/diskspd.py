"""DiskSPD results (``-Rxml`` XML and the default text report) → ``runs`` and ``timeseries`` rows.

Sources (format notes with citations in ``tests/fixtures/diskspd/README.md``):
``microsoft/diskspd:XmlResultParser/XmlResultParser.cpp`` (XML results), ``Common/Common.cpp``
(``<Profile>``), ``ResultParser/ResultParser.cpp`` (text report).

What one ``runs`` row is
    One timespan of one DiskSPD run x one direction (``read``/``write``) that did I/O: the run
    total over every ``Thread/Target``. ``job`` is ``timespan<N>``; ``host`` is ``"local"``,
    ``hostname`` DiskSPD's computer name. Per-thread x per-target rows are parts of that total and
    are *not* ingested (they are :attr:`DiskSpdResult.targets`), so nothing is counted twice.

Totals, the tool's way
    The XML has no totals: ``iops = sum(ReadCount) / TestTimeSeconds`` and ``bw_bytes_per_s =
    sum(ReadBytes) / TestTimeSeconds`` (what VMFleet and ``Process-DiskSpd.ps1`` do).
    ``TestTimeSeconds`` is printed with 2 decimals, so these can differ from the text report
    (which divides by the exact timer value) by up to ``0.005 / TestTimeSeconds`` relative.
    The text report prints ``total:`` rows: ``iops`` is the printed ``I/O per s``;
    ``bw_bytes_per_s`` is ``bytes x iops / I/Os`` (bytes over the tool's exact time, which keeps
    more digits than the printed MiB/s) and is checked against the printed MiB/s.

Units
    DiskSPD's "MiB/s" (and "MB/s" before 2.0.18, always 2**20 bytes) → bytes/s; latency ms → ns.
    DiskSPD measures latency from issue to completion, fio's ``lat`` (not ``clat``): means and
    standard deviations go to ``lat_mean_ns``/``lat_stdev_ns``, the 0th/100th percentiles to
    ``lat_min_ns``/``lat_max_ns``.

Percentiles
    ``<Latency><Bucket>`` (XML) and the ``%-ile`` table (text) are selected by their percentile
    value, never by position. The ones on fio's default list (:data:`storagebench.schema.PERCENTILES`)
    go to the ``clat_p*_ns`` columns — the only percentile columns of ``runs`` — and hold
    DiskSPD's issue-to-completion latency: DiskSPD prints no 99.5th, so ``clat_p99_5_ns`` is NaN.
    Every other one (2nd, 25th, 99.999th ...) is in :attr:`DiskSpdResult.percentiles`.

Time series
    ``<TimeSpan><Iops><Bucket>`` (``-D``) → ``timeseries`` rows ``metric = "iops"`` per direction
    (``t_s`` = ``SampleMillisecond`` / 1000, the end of the interval, as fio logs time samples)
    and ``metric = "lat_ns"`` (the bucket's mean latency) where the bucket had I/O.

Workload → fio factor columns
    ``bs_bytes`` = ``BlockSize``; ``rwmixread_pct`` = 100 - ``WriteRatio``; ``random_pct`` = 100
    with ``<Random>`` (``RandomRatio`` when given, 2.1+ ``-rs``), 0 with ``<StrideSize>``
    (``<RandomAccess>`` is the ``FILE_FLAG_RANDOM_ACCESS`` caching hint, not random I/O:
    microsoft/diskspd#202); ``rw`` from both; ``iodepth`` = outstanding I/Os per thread
    (``RequestCount`` of the thread's target with ``-t``; ``-O`` or the sum over targets with ``-F``);
    ``numjobs`` = threads; ``direct`` = ``DisableOSCache``; ``target`` = the paths joined by ``;``.
    Targets with different values give the unknown value (-1 / NaN / ``""``).

Provenance
    ``fio_version`` holds the producing tool and its version (``diskspd-2.0.21a``; ``diskspd``
    for text, which does not print it); ``started_at`` DiskSPD's ``RunTime`` / ``start time`` (UTC).

Real-world bytes
    Decoded by BOM sniffing (:func:`storagebench.ingest.loadgen.decode_text`); XML with a DTD goes
    to ``defusedxml``, which refuses it (entity expansion, the XML bomb, and external entities need
    a DTD; DiskSPD never writes one); XML without one cannot declare entities and is parsed by the
    standard library's C parser (1.5x faster than defusedxml's Python tree builder); text lines
    wrapped by a console are re-joined; several runs pasted into one text file are split; a run
    whose per-thread rows do not add up to its ``total:`` rows (a trimmed excerpt) is refused.
"""

from __future__ import annotations

from pathlib import Path

from .._inputs import MAX_TOOL_OUTPUT_BYTES, read_input
from ..errors import IngestError
from ._diskspdruns import DiskSpdResult, DiskSpdRun
from ._diskspdtext import parse_diskspd_text
from ._diskspdxml import parse_diskspd_xml
from .loadgen import (
    Format,
    decode_text,
    detect_format,
    never_crash,
    refuse_format,
    register,
)

__all__ = ["DiskSpdRun", "DiskSpdResult", "parse_diskspd", "read_diskspd"]


# ---- entry points ---------------------------------------------------------------------------------


def read_diskspd(path: str | Path, *, strict: bool = True) -> DiskSpdResult:
    """Read a DiskSPD XML or text result file (:func:`parse_diskspd` of its bytes)."""
    p = Path(path)
    data = read_input(p, max_bytes=MAX_TOOL_OUTPUT_BYTES, what="DiskSPD result", error=IngestError)
    return parse_diskspd(data, str(p), strict=strict)


@never_crash("DiskSPD output")
def parse_diskspd(data: bytes, path: str = "<bytes>", *, strict: bool = True) -> DiskSpdResult:
    """Parse DiskSPD output, XML or text, told apart by content.

    Parameters
    ----------
    data : bytes
        The file's bytes (any encoding :func:`~storagebench.ingest.loadgen.decode_text` reads).
    path : str
        Name for ``source_file`` and error messages.
    strict : bool
        With ``True`` (default) any run that does not add up raises; with ``False`` such runs are
        dropped and listed in :attr:`DiskSpdResult.problems` (the good runs of the file are kept).

    Returns
    -------
    DiskSpdResult

    Raises
    ------
    IngestError
        Not DiskSPD output; undecodable bytes; malformed or truncated XML; an XML DTD or entity
        declaration (refused by defusedxml: XML bombs); a run without results, without a ``total:``
        line, or whose rows do not add up (trimmed excerpt).
    """
    fmt = detect_format(data)
    if fmt == "diskspd-xml":
        return parse_diskspd_xml(data, path)
    if fmt == "diskspd-text":
        return parse_diskspd_text(data, path, strict=strict)
    if fmt == "diskspd-linux":
        refuse_format(fmt, path)
    text, _ = decode_text(data, path)  # raises for UTF-16 without BOM, binary ...
    head = text.strip().splitlines()[0][:80] if text.strip() else ""
    raise IngestError(f"not DiskSPD output (no <Results> XML, no 'Input parameters:'/'Results for timespan' "
                      f"text); it starts with {head!r}", path=path)


# The XML reader is ingest/_diskspdxml.py, the text reader ingest/_diskspdtext.py.


# ---- the formats of this module, registered for the ingest (storagebench.ingest.loadgen.FORMATS) ------------

_TEXT_MARKERS = ("Input parameters:", "Results for timespan", "actual test time:")


def _is_xml(text: str) -> bool:
    return text[0] == "<" and "<Results" in text[:4096]


def _is_linux_text(text: str) -> bool:
    return text[0] != "<" and "Results for job" in text and ("System info:" in text or "test time:" in text)


def _is_text(text: str) -> bool:
    return text[0] != "<" and any(m in text for m in _TEXT_MARKERS) and (
        "thread |" in text or "timespan:" in text or "actual test time:" in text)


register(Format("diskspd-xml", _is_xml, lambda data, path: parse_diskspd_xml(data, path).rows(),
                fixtures="diskspd", priority=10))
register(Format("diskspd-linux", _is_linux_text, refusal=(
    "DiskSPD for Linux text output (microsoft/diskspd-for-linux) is not ingested: it divides IOPS and MB/s by "
    "the configured duration, not a measured time, and its 'Total' latency column over-counts with more than "
    "one target (src/result_formatter.cc)"), priority=40))
register(Format("diskspd-text", _is_text, lambda data, path: parse_diskspd_text(data, path).rows(),
                fixtures="diskspd", priority=50))
