"""The bytes of each file a fio job touches, worked out as fio 3.33 works them out, and whether fio lays a file out.

One owner for fio's region rule: :func:`job_region`. :mod:`storagebench._safety` judges a run by it
(a region past the end of an existing regular file means fio would unlink that file and write it
again from the start, even for a read-only job); nothing else computes ``offset + size``.

The rule is fio 3.33's own, read from its source and checked against the installed fio in
``tests/test_safety_region.py`` (fio prints ``declare unneeded cache FILE: OFFSET/LENGTH`` with
``--debug=io`` when it opens a file for I/O: that is ``f->file_offset`` and ``f->io_size``):

* ``options.c`` ``str_size_cb``/``str_offset_cb``/``str_offset_increment_cb``: a value written
  ``N%`` is stored by ``parse.c`` as ``-1ULL - N``; the callback takes it as a percentage only when
  ``parse_is_percent`` (``N <= 100``). **Above 100 % it is a byte count**, ``2**64 - 1 - N``:
  ``size=101%`` asks for 18,446,744,073,709,551,514 bytes, so fio lays the file out again, fails
  to ``ftruncate`` it to that size, and leaves it empty. ``filesize`` has no percentage at all:
  ``filesize=50%`` is ``2**64 - 51`` bytes.
* ``init.c`` ``fixup_options``: ``fill_device`` without a byte ``size`` sets ``size = -1ULL``.
* ``filesetup.c`` ``get_file_sizes``: ``real_file_size`` is ``st_size`` for a file (0 when it does
  not exist), the device size for a block device, and ``size / nr_files`` for anything else.
* ``filesetup.c`` ``get_start_offset``: ``file_append`` starts at the file's end; else ``offset``
  (or ``offset%`` of the real size) plus ``subjob * offset_increment`` (or ``increment%`` of the
  real size); a percentage in either is rounded **up** to ``offset_align`` (default: the job's
  smallest block size, ``td_min_bs``).
* ``filesetup.c`` ``setup_files``: ``fs = size / nr_files``, the first ``(size - fs*nr_files) / bs``
  files get one block more; ``io_size`` is ``fs``, or the rest of the file from the offset when
  ``fs`` is 0; with ``filesize=lo[-hi]`` and a real size outside ``[lo, hi]``: ``lo - offset``, or a
  random size in ``[lo, hi)`` rounded down to the block size, minus the offset; inside: the rest of
  the file. ``size=N%`` (``N < 100``) then takes ``N %`` of ``offset + io_size``, capped at the
  rest, rounded down to the block size. All in unsigned 64-bit arithmetic (it wraps: an offset
  near ``2**64`` plus a size wraps to a small end, and fio lays the file out to that).
* ``filesetup.c`` ``setup_files``/``extend_file``: a regular file whose ``offset + io_size`` passes
  its ``real_file_size`` is laid out again (unless ``create_on_open`` or a diskless engine):
  ``extend_file`` unlinks it first for any job that reads, or writes without ``overwrite``, and
  ``allow_file_create=0`` does not stop the unlink.
* ``io_size``/``io_limit``, ``number_ios``, ``loops``, ``runtime`` bound how much I/O the job
  does inside the region, never the region itself.
* ``numjobs`` clones are ``subjob`` 0..N-1 on the same files when ``filename`` is given (each
  computes its own offset); without ``filename`` each clone gets its own files
  ``jobname.subjob.filenum`` (``filename_format``'s default). With ``filename``, ``nr_files`` is the
  number of names it holds (``nrfiles`` is then ignored).

Not modelled (the caller refuses what it cannot vouch for): ``directory``, ``filename_format``
and ``opendir`` (gated options), zoned sizes (``z`` suffixes are refused by the grammar), and
errors fio stops with after computing a region (those lay nothing out; the region is still
reported, which errs on the safe side).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import JobFileError
from .options import canonical_options, parse_size_or_percent, rw_base, split_filenames, truthy

__all__ = ["FileRegion", "job_region", "fio_u64", "min_block_size", "U64"]

#: fio keeps sizes and offsets in ``unsigned long long``.
U64 = 2**64
_MASK = U64 - 1
#: ``parse.h`` ``parse_is_percent``: ``-1ULL - N`` with ``N <= 100``.
_PERCENT_FLOOR = U64 - 1 - 100
#: Engines that touch no file (``FIO_DISKLESSIO``): fio lays nothing out for them.
_DISKLESS = frozenset({"null", "cpuio"})


@dataclass(frozen=True)
class FileRegion:
    """One file's byte region for one job clone, as fio computes it.

    Attributes
    ----------
    path : str
        The file name as fio opens it (relative names are relative to fio's working directory).
    subjob : int
        The ``numjobs`` clone (0-based).
    start, end : int
        ``[start, end)`` in bytes: ``f->file_offset`` and ``f->file_offset + f->io_size``, before
        the 64-bit wrap (so ``end`` may exceed ``2**64``; ``fio_end`` is what fio compares).
        With a random ``filesize`` range, ``end`` is the largest fio can draw.
    fio_end : int
        ``(start + io_size) mod 2**64``: what ``setup_files`` compares with the real size.
    real_size : int
        ``f->real_file_size`` in bytes (0 for a missing file).
    kind : str
        ``"file"``, ``"missing"``, ``"block"`` or ``"char"``.
    lays_out : bool
        fio would lay this file out again (unlink it and write it from the start, or truncate it):
        a regular or missing file whose region ends past its real size.
    exact : bool
        ``False`` when a random ``filesize`` range makes the end an upper bound.
    basis : str
        The option values that put the region there, for messages
        (``"size=101% (fio 3.33 reads a percentage above 100 as 18,446,744,073,709,551,514 bytes)"``).
    """

    path: str
    subjob: int
    start: int
    end: int
    fio_end: int
    real_size: int
    kind: str
    lays_out: bool
    exact: bool
    basis: str


def fio_u64(value: Any, kb_base: int = 1024) -> int:
    """The unsigned 64-bit number fio's parser stores for a size value: bytes, or ``2**64 - 1 - N`` for ``N%``.

    Parameters
    ----------
    value : int or str
        ``4096``, ``"4k"``, ``"50%"``, ``"101%"``.
    kb_base : {1024, 1000}

    Returns
    -------
    int

    Raises
    ------
    ValueError
        Not a size fio can read (:func:`storagebench.fio.options.parse_size_or_percent`).

    Notes
    -----
    fio 3.33 ``parse.c`` ``str_to_decimal``: a ``%`` suffix stores ``-1ULL - N``; the option's
    callback decides what that means (``parse_is_percent``: a percentage only for ``N <= 100``).
    """
    size, percent = parse_size_or_percent(value, kb_base)
    if size is not None:
        return size
    return (_MASK - percent) & _MASK


def _split_percent(raw: int) -> tuple[int, int]:
    """``str_size_cb`` & co.: ``(bytes, percent)``; the percentage is 0 when ``raw`` is a byte count."""
    if raw >= _PERCENT_FLOOR:
        return 0, _MASK - raw
    return raw, 0


def _kb_base(opts: Mapping[str, Any]) -> int:
    text = str(opts.get("kb_base", 1024)).strip()
    if text not in ("1000", "1024"):
        raise ValueError(f"kb_base={opts.get('kb_base')!r}: fio takes 1000 or 1024")
    return int(text)


def _ddir_values(text: str, parse) -> list:
    """fio ``bs=r[,w][,t]``: a value without a trailing comma applies to the later directions too;
    an empty part keeps fio's default (HOWTO, ``blocksize``)."""
    parts = text.split(",")
    out: list = [None, None, None]
    last = None
    for i in range(3):
        if i < len(parts):
            part = parts[i].strip()
            if part:
                last = parse(part)
                out[i] = last
            else:
                last = None  # an explicit empty part: fio's default here and for what follows it
        elif last is not None:
            out[i] = last
    return out


def min_block_size(options: Mapping[str, Any]) -> int:
    """fio's ``td_min_bs``: the smallest block size of reads, writes and trims, in bytes.

    From ``bs`` (``r,w,t`` with fio's comma rules), ``bsrange`` (its lower ends) and ``bssplit``
    (its smallest entries); fio's default is 4096.

    Raises
    ------
    ValueError
        A block size fio could not read.
    """
    opts = canonical_options(options)
    kb = _kb_base(opts)
    mins = [4096, 4096, 4096]

    def size(text: str) -> int:
        n, pct = parse_size_or_percent(text, kb)
        if n is None or n <= 0:
            raise ValueError(f"block size {text!r} is not a positive number of bytes")
        return n

    if opts.get("bs") not in (None, ""):
        for i, v in enumerate(_ddir_values(str(opts["bs"]), size)):
            if v is not None:
                mins[i] = v
    if opts.get("bsrange") not in (None, ""):
        for i, v in enumerate(_ddir_values(str(opts["bsrange"]),
                                           lambda p: size(re.split(r"[-:]", p, maxsplit=1)[0]))):
            if v is not None:
                mins[i] = v
    if opts.get("bssplit") not in (None, ""):
        def smallest(part: str) -> int:
            entries = [e.split("/", 1)[0].strip() for e in part.split(":") if e.strip()]
            return min(size(e) for e in entries)
        for i, v in enumerate(_ddir_values(str(opts["bssplit"]), smallest)):
            if v is not None:
                mins[i] = v
    return min(mins)


def _range(value: Any, kb: int) -> tuple[int, int]:
    """fio ``FIO_OPT_RANGE`` (``filesize=lo-hi`` or ``lo:hi``, one value for both); swapped if reversed."""
    text = str(value).strip()
    parts = re.split(r"[-:]", text, maxsplit=1) if not isinstance(value, int) else [value]
    lo = fio_u64(parts[0], kb)
    hi = fio_u64(parts[1], kb) if len(parts) > 1 and str(parts[1]).strip() else lo
    return (hi, lo) if lo > hi else (lo, hi)


def _fmt(n: int) -> str:
    return f"{n:,}"


def job_region(
    options: Mapping[str, Any],
    real_size: Mapping[str, int | None],
    *,
    kinds: Mapping[str, str] | None = None,
    jobname: str | None = None,
) -> list[FileRegion]:
    """Every file region of a fio job, per ``numjobs`` clone, as fio 3.33's ``setup_files`` computes it.

    Parameters
    ----------
    options : mapping
        The job's fio options, any spelling (read under canonical names). The files are its
        ``filename`` (``a:b`` is two); without one, ``jobname.subjob.filenum`` per clone.
    real_size : mapping of str to int or None
        Each file's real size in bytes (``st_size``, a block device's size), ``None`` when the file
        does not exist. A name not in the mapping is taken as missing.
    kinds : mapping of str to str, optional
        ``"file"`` (default), ``"block"`` or ``"char"`` per name.
    jobname : str, optional
        fio's job name, for the generated file names (default: ``options["name"]``).

    Returns
    -------
    list of FileRegion
        One per (clone, file), clones in order, files in fio's order. Empty when the job names no
        file and no job name is known, or replays an I/O log (fio's ``setup_files`` returns before
        sizing then).

    Raises
    ------
    ValueError
        A size, offset or block size fio could not read, or an ``rw`` fio does not know; the
        message names the option.

    Notes
    -----
    The rule and its sources in fio 3.33 are in this module's docstring (``options.c``
    ``str_size_cb``/``str_offset_cb``/``str_offset_increment_cb``; ``init.c`` ``fixup_options``;
    ``filesetup.c`` ``get_file_sizes``, ``get_start_offset``, ``setup_files``, ``extend_file``).
    """
    try:
        opts = canonical_options(options)
        rw_base(opts.get("rw", "read"))
    except JobFileError as exc:
        raise ValueError(str(exc)) from None
    kinds = kinds or {}
    job = _read_job(opts, jobname)
    if job is None:
        return []
    out: list[FileRegion] = []
    for k in range(job.numjobs):
        out += _clone_regions(job, k, real_size, kinds)
    return out


@dataclass(frozen=True)
class _Job:
    """What :func:`job_region` reads from a job's options (sizes in bytes; ``*_pct`` a percentage, 0 if none)."""

    bs: int  # td_min_bs
    size: int
    size_pct: int
    start_offset: int
    start_pct: int
    increment: int
    inc_pct: int
    fsl: int  # filesize range, 0 when not given
    fsh: int
    append: bool
    create_on_open: bool
    diskless: bool
    align: int
    numjobs: int
    names: list[str] | None  # filename= (every clone's files), None: jobname.subjob.filenum
    jobname: str | None
    nrfiles: int
    basis: str


def _raw_size(opts: Mapping[str, Any], name: str, kb: int, notes: list[str]) -> int:
    """fio's value of a size option (0 when not given; a percentage as fio keeps it), noted in ``notes``."""
    value = opts.get(name)
    if value is None or str(value).strip() == "":
        return 0
    try:
        n = fio_u64(value, kb)
    except ValueError as exc:
        raise ValueError(f"{name}={value!r}: {exc}") from None
    text = str(value).strip()
    if text.endswith("%") and n < _PERCENT_FLOOR:
        notes.append(f"{name}={text} (fio 3.33 reads a percentage above 100 as {_fmt(n)} bytes)")
    else:
        notes.append(f"{name}={text}")
    return n


def _filesize(opts: Mapping[str, Any], kb: int, notes: list[str]) -> tuple[int, int]:
    """``filesize`` as fio's range (``(0, 0)`` when not given), noted in ``notes``."""
    if opts.get("filesize") in (None, ""):
        return 0, 0
    try:
        fsl, fsh = _range(opts["filesize"], kb)
    except ValueError as exc:
        raise ValueError(f"filesize={opts['filesize']!r}: {exc}") from None
    text = str(opts["filesize"]).strip()
    extra = " (fio reads no percentage in filesize: these are byte counts)" if "%" in text else ""
    notes.append(f"filesize={text}{extra}" if fsl == fsh else f"filesize={text} (a random size in "
                 f"[{_fmt(fsl)}, {_fmt(fsh)}) bytes){extra}")
    return fsl, fsh


def _whole(opts: Mapping[str, Any], name: str) -> int:
    """A count option (``numjobs``, ``nrfiles``), at least 1."""
    try:
        return max(1, int(str(opts.get(name, 1)).strip()))
    except ValueError:
        raise ValueError(f"{name}={opts.get(name)!r}: fio takes a whole number") from None


def _read_job(opts: Mapping[str, Any], jobname: str | None) -> _Job | None:
    """The options :func:`job_region` needs, read and checked in fio's order; ``None`` when fio sizes no file
    (an I/O log replayed, or no file name and no job name)."""
    kb = _kb_base(opts)
    bs = min_block_size(opts)
    notes: list[str] = []
    size, size_pct = _split_percent(_raw_size(opts, "size", kb, notes))
    start_offset, start_pct = _split_percent(_raw_size(opts, "offset", kb, notes))
    increment, inc_pct = _split_percent(_raw_size(opts, "offset_increment", kb, notes))
    fsl, fsh = _filesize(opts, kb, notes)
    fill = "fill_device" in opts and truthy(opts["fill_device"])
    if fill:
        notes.append(f"fill_device={opts['fill_device']}")
        if size == 0:
            size = _MASK  # init.c fixup_options: fill_device without a size fills the whole device
    append = "file_append" in opts and truthy(opts["file_append"])
    if append:
        notes.append("file_append=1 (the region starts at the file's end)")
    align = 0
    if opts.get("offset_align") not in (None, ""):
        try:
            align = fio_u64(opts["offset_align"], kb)
        except ValueError as exc:
            raise ValueError(f"offset_align={opts['offset_align']!r}: {exc}") from None
    numjobs = _whole(opts, "numjobs")
    if numjobs > 1:
        notes.append(f"numjobs={numjobs}")
    if opts.get("read_iolog") not in (None, "") or opts.get("read_iolog_chunked") not in (None, ""):
        return None
    names, nrfiles = None, 1
    if opts.get("filename") not in (None, ""):
        names = split_filenames(str(opts["filename"]))
        if len(names) > 1:
            notes.append(f"{len(names)} files in filename (size is split among them)")
    else:
        jobname = jobname or (str(opts["name"]) if opts.get("name") not in (None, "") else None)
        if jobname is None:
            return None
        nrfiles = _whole(opts, "nrfiles")
        if nrfiles > 1:
            notes.append(f"nrfiles={nrfiles}")
    return _Job(bs=bs, size=size, size_pct=size_pct, start_offset=start_offset, start_pct=start_pct,
                increment=increment, inc_pct=inc_pct, fsl=fsl, fsh=fsh, append=append,
                create_on_open="create_on_open" in opts and truthy(opts["create_on_open"]),
                diskless=str(opts.get("ioengine") or "").strip().lower() in _DISKLESS, align=align or bs,
                numjobs=numjobs, names=names, jobname=jobname, nrfiles=nrfiles,
                basis=", ".join(notes) if notes else "no size or offset (the whole file)")


def _start_offset(job: _Job, k: int, real: int, kind: str) -> int:
    """fio's ``get_start_offset`` for clone ``k`` of a file of ``real`` bytes."""
    if job.append and kind in ("file", "missing"):
        return real
    inc = (job.inc_pct * real // 100) & _MASK if job.inc_pct else job.increment
    aligned = bool(job.inc_pct)
    if job.start_pct:
        start = ((real * job.start_pct // 100) + k * inc) & _MASK
        aligned = True
    else:
        start = (job.start_offset + k * inc) & _MASK
    if aligned:
        start = (-(-start // job.align) * job.align) & _MASK
    return start


def _io_sizes(job: _Job, start: int, real: int, io: int) -> tuple[list[int], bool] | None:
    """``setup_files``' ``io_size`` of a file (``io``: its share of ``size``, 0 if none): the sizes it may take
    (two ends of a random ``filesize``) and whether it is exact; ``None`` when fio lays nothing out (an offset
    past the file: "you need to specify valid offset=")."""
    if not job.fsl:
        if not io:
            if start > real:
                return None
            io = real - start
        return [io], True
    if real < job.fsl or real > job.fsh:
        if start > job.fsl:
            return None
        if job.fsl == job.fsh:
            return [(job.fsl - start) & _MASK], True
        lo = job.fsl - job.fsl % job.bs  # get_rand_file_size: lo + (hi - lo) * r, r in [0, 1), rounded down to bs
        return [(lo - start) & _MASK, (job.fsh - 1 - start) & _MASK], False
    return [real - start], True


def _end(job: _Job, start: int, io: int) -> tuple[int, int]:
    """``(start + io_size, (start + io_size) mod 2**64)`` after a percentage ``size``."""
    if job.size_pct and job.size_pct != 100:
        file_size = (io + start) & _MASK
        io = (file_size * job.size_pct // 100) & _MASK
        if io > ((file_size - start) & _MASK):
            io = (file_size - start) & _MASK
        io -= io % job.bs
    return start + io, (start + io) & _MASK


def _clone_regions(job: _Job, k: int, real_size: Mapping[str, int | None],
                   kinds: Mapping[str, str]) -> list[FileRegion]:
    """The regions of clone ``k`` (``numjobs``), one per file in fio's order."""
    files = job.names if job.names is not None else [f"{job.jobname}.{k}.{i}" for i in range(job.nrfiles)]
    n = len(files)
    fs, extra = 0, 0
    if not job.fsl and n:
        fs = job.size // n
        if fs * n < job.size:
            extra = (job.size - fs * n) // job.bs
    out: list[FileRegion] = []
    for path in files:
        got = real_size.get(path)
        kind = kinds.get(path, "file") if got is not None else "missing"
        if kind == "char" or (got is not None and got < 0):
            real = job.size // n if job.size else _MASK
        else:
            real = int(got or 0)
        start = _start_offset(job, k, real, kind)
        io = 0
        if not job.fsl:
            io = fs
            if extra:
                extra -= 1
                io += job.bs
        sizes = _io_sizes(job, start, real, io)
        if sizes is None:
            out.append(FileRegion(path, k, start, start, start, real, kind, False, True, job.basis))
            continue
        ends = [_end(job, start, io) for io in sizes[0]]
        end, fio_end = max(ends, key=lambda e: e[1])
        lays_out = (kind in ("file", "missing") and not job.diskless and not job.create_on_open
                    and any(fe > real for _, fe in ends))
        out.append(FileRegion(path, k, start, end, fio_end, real, kind, lays_out, sizes[1], job.basis))
    return out
