"""DiskSPD's command-line switches → fio options, one switch at a time, each one a :class:`Mapping`.

Part of :mod:`storagebench._loadgen_profiles` (``study_from_diskspd`` turns what this module gathers into a
:class:`~storagebench._study.Study`): :func:`diskspd_options` reads a command line into a
:class:`DiskspdState`, switch by switch through :data:`SWITCHES` (one handler per switch letter), then
writes what the switches set together (the direction and mix, threads and queue depth, caching, the
engine). :class:`Mapping` (one source setting and what it became) is shared with the Iometer translation.

Sources: DiskSPD's usage text (``microsoft/diskspd:CmdLineParser/CmdLineParser.cpp``, ``_DisplayUsageInfo``:
defaults ``-b64K``, ``-d10``, ``-W5``, ``-C0``, ``-o2``, one thread per target, ``-w`` absent = reads, caching
on); fio's HOWTO (option meanings) and ``engines/windowsaio.c`` (``direct`` → ``FILE_FLAG_NO_BUFFERING``,
``sync`` → ``FILE_FLAG_WRITE_THROUGH``).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from .errors import StudyError, shown


@dataclass(frozen=True)
class Mapping:
    """One source setting and what it became.

    Attributes
    ----------
    source : str
        The DiskSPD switch (``-o64``) or Iometer setting (``size=4096``), or ``(default)`` entries.
    fio : str
        The fio options / study keys it set (``iodepth=64``), ``""`` when nothing was set.
    exact : bool
        True when fio does the same thing; False when fio has no exact equivalent (``note`` says what
        differs and what, if anything, was set instead).
    note : str
    """

    source: str
    fio: str
    exact: bool
    note: str = ""


#: DiskSPD's defaults for the switches that shape a workload (``CmdLineParser.cpp`` usage text).
DISKSPD_DEFAULTS: dict[str, Any] = {"block_size": 65536, "duration_s": 10, "warmup_s": 5, "cooldown_s": 0,
                                    "outstanding": 2, "threads_per_target": 1, "write_pct": 0}

_DS_SIZE = re.compile(r"^(\d{1,20}(?:\.\d{1,20})?)([KMGTb]?)$", re.I)

#: Largest integer DiskSPD reads with ``atoi`` into an ``int`` (``-o``, ``-t``, ``-F``, ``-d``, ``-W`` ...).
DS_INT_MAX = 2**31 - 1
#: Largest size in bytes: DiskSPD reads sizes into ``UINT64`` (``_GetSizeInBytes``), fio into a signed 64-bit
#: offset; the block size is a ``DWORD`` (``Target::SetBlockSizeInBytes``).
DS_SIZE_MAX = 2**63 - 1
DS_BLOCK_MAX = 2**32 - 1


def _ds_size(text: str, block: int, switch: str, *, minimum: int = 0, maximum: int = DS_SIZE_MAX) -> int:
    """DiskSPD size: bytes, or K/M/G/T (binary) or b (blocks of -b); a whole number of bytes in the bounds."""
    m = _DS_SIZE.match(text.strip())
    if not m:
        raise StudyError(f"DiskSPD {switch}: must be a size such as 4K, 1M, 64 or 8b (blocks), got {shown(text)}")
    num, unit = Fraction(m.group(1)), m.group(2)
    mult = block if unit == "b" else {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[unit.lower()]
    value = num * mult
    if value.denominator != 1:
        raise StudyError(f"DiskSPD {switch}: {shown(text)} is not a whole number of bytes")
    if not minimum <= value <= maximum:
        raise StudyError(f"DiskSPD {switch}: a size of {minimum:,}..{maximum:,} bytes, got {shown(text)} "
                         f"({int(value):,} bytes)")
    return int(value)


def _ds_int(text: str, switch: str, *, minimum: int = 0, maximum: int = DS_INT_MAX) -> int:
    """A DiskSPD integer switch value (``atoi`` into an ``int`` in ``CmdLineParser.cpp``), in the bounds DiskSPD checks."""
    if not (text.isascii() and text.isdigit()) or len(text) > 12 or not minimum <= int(text) <= maximum:
        raise StudyError(f"DiskSPD {switch}: must be an integer {minimum}..{maximum}, got {shown(text)}")
    return int(text)


def _tokens(cmdline: str) -> list[str]:
    line = cmdline.strip()
    line = re.split(r"\s[12]?>>?\s", " " + line + " ", maxsplit=1)[0].strip()  # drop a shell redirect
    toks = [t.strip('"').strip("'") for t in shlex.split(line, posix=False)]
    if toks and re.search(r"(^|[\\/])diskspd(\.exe)?$", toks[0], re.I):
        toks = toks[1:]
    return toks


def diskspd_target(t: str) -> str:
    """A target of a DiskSPD command line as the translation lists it (``#1``: a physical drive, ``C:`` a volume)."""
    if t.startswith("#") and t[1:].isdigit():
        return f"{t} (physical drive {t[1:]}: fio filename=\\\\.\\PhysicalDrive{t[1:]})"
    if re.fullmatch(r"[A-Za-z]:", t):
        return f"{t} (volume: fio filename=\\\\.\\{t})"
    return t


@dataclass
class DiskspdState:
    """What the switches of one command line set, filled in switch by switch by :data:`SWITCHES`.

    Attributes
    ----------
    name, ioengine : str
        The study's name (``-D`` names its IOPS log after it) and fio engine.
    block : int
        ``-b``, bytes (read before the other switches: sizes in blocks depend on it).
    opts : list of (str, str)
        The switches in order: (letter, value).
    targets : list of str
        The targets the command line names.
    fixed : dict
        The fio options set (``_size`` until :func:`diskspd_options` moves it to ``size``).
    maps : list of Mapping
        The translation, in the order the switches came.
    size : int or None
        ``-c`` / ``-f``: the study's ``size``, bytes.
    runtime, ramp : float
        ``-d`` and ``-W``, s.
    """

    name: str
    ioengine: str
    block: int
    opts: list[tuple[str, str]]
    targets: list[str]
    fixed: dict[str, Any] = field(default_factory=dict)
    maps: list[Mapping] = field(default_factory=list)
    size: int | None = None
    random: float | None = None
    align: int | None = None
    stride: int | None = None
    interlocked: bool = False
    write_pct: int = 0
    qd: int = DISKSPD_DEFAULTS["outstanding"]
    per_thread_o: int | None = None
    threads: int = DISKSPD_DEFAULTS["threads_per_target"]
    pool: int | None = None
    runtime: float = float(DISKSPD_DEFAULTS["duration_s"])
    ramp: float = float(DISKSPD_DEFAULTS["warmup_s"])
    direct: bool = False
    writethrough: bool = False

    @property
    def seen(self) -> set[str]:
        """The switch letters given."""
        return {sw for sw, _ in self.opts}

    def source_of(self, switch: str) -> str:
        """The first ``-<switch><value>`` of the command line."""
        return next(f"-{s}{v}" for s, v in self.opts if s == switch)

    def add(self, *mapping: Any) -> None:
        """Append ``Mapping(*mapping)`` to the translation."""
        self.maps.append(Mapping(*mapping))


# ---- one handler per switch: (state, value, "-<switch><value>") -------------------------------------


def _block(st: DiskspdState, val: str, src: str) -> None:
    st.fixed["bs"] = st.block
    st.add(src, f"bs={st.block}", True)


def _random(st: DiskspdState, val: str, src: str) -> None:
    if val.startswith("s"):
        # -rs<pct>: a share of random I/Os; diskspd.xsd: "RandomRatio should only ever be between 1 and 99"
        pct = float(_ds_int(val[1:], "-rs", minimum=1, maximum=99))
        st.random = pct
        st.add(src, f"percentage_random={pct:g}", False,
               "DiskSPD 2.1 mixes random and sequential I/Os by this share; fio's "
               "percentage_random does too, but where each sequential run resumes differs")
        return
    if val.startswith("d"):
        raise StudyError(f"DiskSPD {src}: random distributions (-rd) have no fio translation here; "
                         "write fio's random_distribution=zoned by hand")
    st.random = 100.0 if st.random is None else st.random
    if val:
        st.align = _ds_size(val, st.block, "-r", minimum=1)  # "Invalid alignment passed to -r" for 0


def _sequential(st: DiskspdState, val: str, src: str) -> None:
    st.interlocked = val.startswith("i")
    v = val[1:] if st.interlocked else val
    st.stride = _ds_size(v, st.block, "-s") if v else None


def _writes(st: DiskspdState, val: str, src: str) -> None:
    st.write_pct = _ds_int(val or "0", "-w")
    if st.write_pct > 100:
        raise StudyError(f"DiskSPD -w: a percentage 0..100, got {st.write_pct}")


def _outstanding(st: DiskspdState, val: str, src: str) -> None:
    st.qd = _ds_int(val, "-o", minimum=1)


def _outstanding_per_thread(st: DiskspdState, val: str, src: str) -> None:
    st.per_thread_o = _ds_int(val, "-O", minimum=1)


def _threads_per_target(st: DiskspdState, val: str, src: str) -> None:
    st.threads = _ds_int(val, "-t", minimum=1)


def _thread_pool(st: DiskspdState, val: str, src: str) -> None:
    st.pool = _ds_int(val, "-F", minimum=1)


def _duration(st: DiskspdState, val: str, src: str) -> None:
    st.runtime = float(_ds_int(val, "-d", minimum=1))
    st.add(src, f"runtime={st.runtime:g} (time_based)", True)


def _warmup(st: DiskspdState, val: str, src: str) -> None:
    st.ramp = float(_ds_int(val, "-W"))
    st.add(src, f"ramp_time={st.ramp:g}", True, "DiskSPD's warm-up issues I/O unmeasured, as fio's ramp_time does")


def _cooldown(st: DiskspdState, val: str, src: str) -> None:
    st.add(src, "", False, "cool-down (I/O continues unmeasured after the run): fio has no equivalent; the run "
                           "simply ends")


def _caching(st: DiskspdState, flags: str, src: str) -> None:
    """``-S<flags>`` (``-h`` is ``-Sh``): ``b`` cached, ``r`` remote only, ``u`` unbuffered, ``w`` write-through."""
    flags = flags or "u"
    if "h" in flags:
        flags = flags.replace("h", "uw")
    if "b" in flags:
        st.add(src, "direct=0", True, "caching on (DiskSPD's default)")
    if "r" in flags:
        st.add(src, "", False, "remote-only caching (SMB): no fio equivalent")
    if "u" in flags:
        st.direct = True
    if "w" in flags:
        st.writethrough = True
    if "u" in flags or "w" in flags:
        set_ = ", ".join(x for x, on in (("direct=1", "u" in flags), ("sync=1", "w" in flags)) if on)
        note = ("FILE_FLAG_NO_BUFFERING = fio direct=1" if "u" in flags else "")
        if "w" in flags:
            note += ("; " if note else "") + ("FILE_FLAG_WRITE_THROUGH = fio sync=1 with ioengine=windowsaio "
                                              "(engines/windowsaio.c); with other engines sync=1 opens O_SYNC, "
                                              "the nearest Linux behaviour")
        st.add(src, set_, "w" not in flags or st.ioengine == "windowsaio", note)


def _no_buffering_write_through(st: DiskspdState, val: str, src: str) -> None:
    _caching(st, "h", src)


def _latency(st: DiskspdState, val: str, src: str) -> None:
    st.add(src, "", True, "fio always measures latency (lat/clat/slat, percentiles)")


def _iops_log(st: DiskspdState, val: str, src: str) -> None:
    ms = _ds_int(val, "-D", minimum=1) if val else 1000
    st.fixed["write_iops_log"] = st.name
    st.fixed["log_avg_msec"] = ms
    st.add(src, f"write_iops_log={st.name}, log_avg_msec={ms}", True, "per-interval IOPS, as DiskSPD's <Iops> buckets")


def _create_size(st: DiskspdState, val: str, src: str) -> None:
    size = _ds_size(val, st.block, "-c", minimum=1)
    st.add(src, f"size={size}", True, "DiskSPD creates the file of this size; fio lays it out")
    st.fixed.setdefault("_size", size)


def _first_bytes_or_hints(st: DiskspdState, val: str, src: str) -> None:
    if val and set(val) <= set("rst"):
        st.add(src, "", False, "CreateFile access hints (FILE_FLAG_RANDOM_ACCESS/SEQUENTIAL_SCAN/TEMPORARY): fio "
                               "sets no such hint on Linux; windowsaio sets SEQUENTIAL_SCAN or RANDOM_ACCESS by rw= "
                               "on its own")
    else:
        size = _ds_size(val, st.block, "-f", minimum=1)
        st.fixed["_size"] = size
        st.add(src, f"size={size}", True, "use only the first bytes of the target")


def _base_offset(st: DiskspdState, val: str, src: str) -> None:
    off = _ds_size(val, st.block, "-B")
    st.fixed["offset"] = off
    st.add(src, f"offset={off}", True)


def _thread_stride(st: DiskspdState, val: str, src: str) -> None:
    inc = _ds_size(val, st.block, "-T", minimum=1)  # "Invalid offset passed to -T" for 0
    st.fixed["offset_increment"] = inc
    st.add(src, f"offset_increment={inc}", True,
           "thread n starts at base + n x stride, as fio job n with offset_increment")


def _throughput(st: DiskspdState, val: str, src: str) -> None:
    if val.endswith("i"):
        v = _ds_int(val[:-1], "-g", minimum=1)
        st.fixed["rate_iops"] = v
        st.add(src, f"rate_iops={v}", True, "per thread per target; fio rate_iops is per job")
    else:
        v = _ds_int(val, "-g", minimum=1)  # DiskSPD: -g<n> with n > 0
        st.fixed["rate"] = v * 1000
        st.add(src, f"rate={v * 1000}", True, "bytes per ms per thread -> bytes/s per job")


def _bursts(st: DiskspdState, val: str, src: str) -> None:
    _ds_int(val, src[:2], minimum=1)  # DiskSPD: burst size / think time > 0
    st.add(src, "", False, "I/O bursts (-i/-j): fio's thinktime + thinktime_blocks is the nearest; not set "
                           "(DiskSPD waits between bursts, fio after blocks)")


def _write_buffers(st: DiskspdState, val: str, src: str) -> None:
    if val == "":
        st.fixed["zero_buffers"] = 1
        st.add(src, "zero_buffers=1", True)
    elif val == "r":
        st.fixed["refill_buffers"] = 1
        st.add(src, "refill_buffers=1", True, "new random data for every write")
    else:
        st.add(src, "", False, "write buffers from a random/file source of a given size: fio's "
                               "buffer_compress_percentage or a pattern file differ; not set")


def _seed(st: DiskspdState, val: str, src: str) -> None:
    if val:
        st.fixed["randseed"] = _ds_int(val, "-z")
        st.add(src, f"randseed={val}", False, "a seed, but fio's generator differs: the same seed does not give "
                                              "the same offsets")
    else:
        st.fixed["randrepeat"] = 0
        st.add(src, "randrepeat=0", True, "a seed from the clock")


def _affinity(st: DiskspdState, val: str, src: str) -> None:
    st.add(src, "", False, "thread affinity: fio's cpus_allowed / numa_cpu_nodes is the equivalent; not set "
                           "(host specific)")


def _completion_routines(st: DiskspdState, val: str, src: str) -> None:
    st.add(src, "", False, "completion routines instead of I/O completion ports: no fio engine uses them")


def _parallel_sequential(st: DiskspdState, val: str, src: str) -> None:
    st.add(src, "", False, "parallel sequential I/Os from the same offset: no fio equivalent")


def _priority(st: DiskspdState, val: str, src: str) -> None:
    _ds_int(val, "-I", minimum=1, maximum=3)  # DiskSPD: 1 very low, 2 low, 3 normal
    st.add(src, "", False, "Windows I/O priority hint: fio's prioclass/prio are Linux ioprio classes, not the "
                           "same; not set")


def _no_effect(st: DiskspdState, val: str, src: str) -> None:
    st.add(src, "", True, "output, progress, events or buffers: no effect on the workload")


def _xml_profile(st: DiskspdState, val: str, src: str) -> None:
    raise StudyError("DiskSPD -X: an XML profile; translate its command-line equivalent instead")


#: DiskSPD switch letter -> its handler, which records what the switch sets in a :class:`DiskspdState` (and its
#: :class:`Mapping`). A letter missing here is an unknown switch.
SWITCHES: dict[str, Callable[[DiskspdState, str, str], None]] = {
    "b": _block, "r": _random, "s": _sequential, "w": _writes, "o": _outstanding, "O": _outstanding_per_thread,
    "t": _threads_per_target, "F": _thread_pool, "d": _duration, "W": _warmup, "C": _cooldown, "S": _caching,
    "h": _no_buffering_write_through, "L": _latency, "D": _iops_log, "c": _create_size, "f": _first_bytes_or_hints,
    "B": _base_offset, "T": _thread_stride, "g": _throughput, "i": _bursts, "j": _bursts, "Z": _write_buffers,
    "z": _seed, "a": _affinity, "n": _affinity, "x": _completion_routines, "p": _parallel_sequential,
    "I": _priority, **dict.fromkeys(("R", "P", "v", "l", "y", "e", "?"), _no_effect), "X": _xml_profile,
}


# ---- what the switches set together ---------------------------------------------------------------


def _direction(st: DiskspdState) -> None:
    """``rw``, ``rwmixread``, ``percentage_random``, ``blockalign`` and the stride from ``-w``, ``-r``, ``-s``."""
    block, fixed, seen = st.block, st.fixed, st.seen
    family = "read" if st.write_pct == 0 else ("write" if st.write_pct == 100 else "rw")
    rw = ("rand" + family) if st.random is not None else family
    fixed["rw"] = rw
    if family == "rw":
        fixed["rwmixread"] = 100 - st.write_pct
    if "w" in seen:
        st.add(st.source_of("w"), f"rw={rw}" + (f", rwmixread={100 - st.write_pct}" if family == "rw" else ""), True,
               "DiskSPD picks each I/O's direction by this ratio, as fio's rwmix does")
    else:
        st.add("(no -w)", f"rw={rw}", True, "DiskSPD's default: reads only")
    if st.random is not None:
        if st.random < 100:
            fixed["percentage_random"] = st.random
        align = st.align
        set_ = f"rw={rw}" + (f", blockalign={align}" if align and align != fixed.get("bs", block) else "")
        if align and align != fixed.get("bs", block):
            fixed["blockalign"] = align
        st.add(st.source_of("r"), set_, True, "random offsets aligned to the alignment (default: block size), "
                                              "as fio's blockalign (default bs)")
    elif st.stride is not None or st.interlocked:
        s_src = st.source_of("s")
        hole = (st.stride - block) if st.stride is not None else 0
        if hole < 0:
            raise StudyError(f"DiskSPD {s_src}: a stride smaller than the block size ({block}) has no fio equivalent")
        if hole:
            fixed["rw"] = f"{rw}:{hole}"
        if st.interlocked:
            st.add(s_src, f"rw={fixed['rw']}", False,
                   "interlocked sequential: DiskSPD's threads share one offset; fio's jobs each keep "
                   "their own, so with numjobs > 1 the target sees interleaved sequential streams")
        else:
            st.add(s_src, f"rw={fixed['rw']}", True, "stride = block size + the hole fio skips")
    else:
        st.add("(no -r/-s)", f"rw={rw}", True, "DiskSPD's default: sequential")


def _threads(st: DiskspdState) -> None:
    """``numjobs`` and ``iodepth`` from ``-t``/``-o`` or ``-F``/``-O`` and the number of targets."""
    fixed, seen, qd = st.fixed, st.seen, st.qd
    n_targets = max(len(st.targets), 1)
    if st.pool is not None:
        iodepth = st.per_thread_o if st.per_thread_o is not None else qd * n_targets
        fixed["numjobs"] = st.pool
        fixed["iodepth"] = iodepth
        src = f"-F{st.pool}" + (f" -O{st.per_thread_o}" if st.per_thread_o else f" -o{qd}")
        st.add(src, f"numjobs={st.pool}, iodepth={iodepth}", n_targets == 1,
               "a thread pool over all targets = fio jobs over all files (filename=a:b), "
               "iodepth per job" + ("" if n_targets == 1 else
                                    "; fio shares a job's iodepth across its files instead of "
                                    "keeping -o per file"))
    else:
        threads = st.threads
        fixed["numjobs"] = threads * n_targets if n_targets > 1 else threads
        fixed["iodepth"] = qd
        src = ("-t" + str(threads) if "t" in seen else "(no -t)") + (f" -o{qd}" if "o" in seen else " (no -o)")
        note = ("threads per target and outstanding I/Os per thread = fio numjobs and iodepth"
                + ("" if "o" in seen else "; DiskSPD's default -o is 2"))
        if n_targets > 1:
            note += (f"; {n_targets} targets: DiskSPD gives each its own {threads} thread(s), a fio study runs one "
                     "job definition over all files: numjobs = threads x targets, each job spreading its I/O over "
                     "every file (file_service_type) -- not the same")
        st.add(src, f"numjobs={fixed['numjobs']}, iodepth={qd}", n_targets <= 1, note)


def _engine(st: DiskspdState) -> None:
    """``direct``, ``sync`` and ``ioengine``."""
    ioengine = st.ioengine
    st.fixed["direct"] = 1 if st.direct else 0
    if not st.direct and not any(s in ("S", "h") for s in st.seen):
        st.add("(no -S)", "direct=0", True, "DiskSPD's default: OS caching on")
    if st.writethrough:
        st.fixed["sync"] = 1
    st.fixed["ioengine"] = ioengine
    st.add("(engine)", f"ioengine={ioengine}", ioengine == "windowsaio",
           "DiskSPD: overlapped I/O + I/O completion ports = fio windowsaio" +
           ("" if ioengine == "windowsaio" else f"; {ioengine} is the asynchronous engine here"))


def diskspd_options(cmdline: str, *, name: str, ioengine: str) -> DiskspdState:
    """What a DiskSPD command line sets in fio, switch by switch (see :data:`SWITCHES`).

    Parameters
    ----------
    cmdline : str
        The command line (the executable, a shell redirect and the targets are allowed).
    name : str
        The study's name.
    ioengine : str
        fio's engine.

    Returns
    -------
    DiskspdState
        ``fixed`` (fio options), ``maps`` (the translation), ``runtime``, ``ramp``, ``size``, ``targets``.

    Raises
    ------
    StudyError
        An unknown switch, a malformed value, ``-X`` (an XML profile), or a combination DiskSPD
        itself refuses (``-t`` with ``-F``, ``-O`` without ``-F``).
    """
    opts: list[tuple[str, str]] = []
    targets: list[str] = []
    for t in _tokens(cmdline):
        if t.startswith("-") and len(t) > 1:
            opts.append((t[1], t[2:]))
        elif t:
            targets.append(t)
    block = DISKSPD_DEFAULTS["block_size"]
    for sw, val in opts:  # -b first: sizes in blocks depend on it
        if sw == "b":
            block = _ds_size(val, 65536, "-b", minimum=1, maximum=DS_BLOCK_MAX)
    st = DiskspdState(name=name, ioengine=ioengine, block=block, opts=opts, targets=targets)
    seen = st.seen
    if "t" in seen and "F" in seen:
        raise StudyError("DiskSPD -t (threads per target) and -F (total threads) cannot be combined")
    if "O" in seen and "F" not in seen:
        raise StudyError("DiskSPD -O (outstanding I/Os per thread) is only valid with -F")
    for sw, val in opts:
        handler = SWITCHES.get(sw)
        if handler is None:
            raise StudyError(f"DiskSPD switch -{sw} is unknown; known: -a -b -B -c -C -d -D -f -F -g -h -i -I -j -l "
                             "-L -n -o -O -p -P -r -R -s -S -t -T -v -w -W -x -X -y -z -Z")
        handler(st, val, f"-{sw}{val}")
    if "d" not in seen:
        st.add("(no -d)", f"runtime={st.runtime:g} (time_based)", True, "DiskSPD's default duration is 10 s")
    if "W" not in seen:
        st.add("(no -W)", f"ramp_time={st.ramp:g}", True, "DiskSPD's default warm-up is 5 s")
    _direction(st)
    if "b" not in seen:
        st.fixed["bs"] = block
        st.add("(no -b)", f"bs={block}", True, "DiskSPD's default block size is 64 KiB (fio's is 4 KiB)")
    _threads(st)
    _engine(st)
    st.size = st.fixed.pop("_size", None)
    return st
