"""DiskSPD command lines and Iometer access specifications (``.icf``) → a fio :class:`~storagebench._study.Study`.

The translation is shown, option by option, so that a user can check it: every DiskSPD switch or
Iometer setting becomes a :class:`Mapping` saying which fio option it set, whether the two are
**exactly** the same behaviour, and — where they are not — what differs. Nothing is approximated
silently; what fio cannot do is said, not dropped.

Sources: DiskSPD's usage text (``microsoft/diskspd:CmdLineParser/CmdLineParser.cpp``,
``_DisplayUsageInfo``: defaults ``-b64K``, ``-d10``, ``-W5``, ``-C0``, ``-o2``, one thread per target,
``-w`` absent = reads, caching on); fio's HOWTO (option meanings) and ``engines/windowsaio.c``
(``direct`` → ``FILE_FLAG_NO_BUFFERING``, ``sync`` → ``FILE_FLAG_WRITE_THROUGH``); Iometer's
``src/AccessSpecList.cpp`` (``LoadConfigNew``: one line ``size,% of size,% reads,% random,delay,burst,
align,reply`` per component) and ``src/Worker.cpp`` (``SaveConfig``: ``'Number of outstanding IOs``).

Targets are never copied into the study: a DiskSPD ``#1`` is a whole physical disk and a path on
the machine that ran DiskSPD means nothing here. The study's ``target`` stays unset (the runner's
``--target`` and its safety checks decide); the original targets are listed in the translation.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from ._inputs import read_input
from ._safeyaml import dump_yaml, load_yaml, one_line
from ._study import Study, load_study, safe_name
from .errors import StudyError, shown

__all__ = ["Mapping", "Translation", "study_from_diskspd", "study_from_icf"]

#: Largest Iometer ``.icf`` file read, bytes (a saved configuration is a few KiB).
MAX_ICF_BYTES = 4 * 2**20


#: DiskSPD's defaults for the switches that shape a workload (``CmdLineParser.cpp`` usage text).
DISKSPD_DEFAULTS: dict[str, Any] = {"block_size": 65536, "duration_s": 10, "warmup_s": 5, "cooldown_s": 0,
                                    "outstanding": 2, "threads_per_target": 1, "write_pct": 0}


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


@dataclass(frozen=True)
class Translation:
    """A study written from another load generator's profile, with its translation.

    Attributes
    ----------
    tool : {"diskspd", "iometer"}
    source : str
        The command line, or the ``.icf`` path.
    study : Study
    mappings : tuple of Mapping
    targets : tuple of str
        The targets the source named (not copied into the study).
    """

    tool: str
    source: str
    study: Study
    mappings: tuple[Mapping, ...]
    targets: tuple[str, ...] = ()

    @property
    def inexact(self) -> tuple[Mapping, ...]:
        """The mappings where fio has no exact equivalent."""
        return tuple(m for m in self.mappings if not m.exact)

    def table(self) -> str:
        """The translation as a text table: source | fio | exact | note, one line per mapping.

        Every cell is made one printable line (:func:`storagebench._safeyaml.one_line`): a source that holds a
        newline, a carriage return or a terminal escape shows them escaped, and cannot add rows.
        """
        rows = [(one_line(m.source, limit=200), one_line(m.fio or "-", limit=200), "yes" if m.exact else "NO",
                 one_line(m.note)) for m in self.mappings]
        w0 = max([len("source")] + [len(r[0]) for r in rows])
        w1 = max([len("fio")] + [len(r[1]) for r in rows])
        out = [f"{'source':<{w0}}  {'fio':<{w1}}  exact  note", f"{'-' * w0}  {'-' * w1}  -----  ----"]
        out += [f"{a:<{w0}}  {b:<{w1}}  {c:<5}  {d}".rstrip() for a, b, c, d in rows]
        return "\n".join(out)

    def comments(self) -> list[str]:
        """The head comment of the written spec, one item per line: the source, the table, the targets."""
        head = [f"Translated from {self.tool}: {self.source}", ""]
        head += self.table().split("\n")
        if self.targets:
            head += ["", f"targets of the source (not copied; pass --target): {', '.join(self.targets)}"]
        return head

    def to_yaml(self) -> str:
        """The study spec (YAML), headed by the translation as comments, checked before it is returned.

        Written by :func:`storagebench._safeyaml.dump_yaml`: PyYAML's emitter fed with the spec as data, each
        comment one line whatever the source text holds (:func:`storagebench._safeyaml.yaml_comment`), and the
        text loaded back, with :func:`storagebench._safeyaml.load_yaml` and then :func:`load_study`, to the
        same data and the same study (:attr:`Study.spec_hash`).

        Raises
        ------
        StudyError
            The written text does not load back to this study (nothing should be written then).
        """
        where = f"the study translated from {self.tool}"
        text = dump_yaml(self.study.spec_dict(), comments=self.comments(), where=where, error=StudyError)
        again = load_study(load_yaml(text, where=where, error=StudyError))
        if again.spec_hash != self.study.spec_hash or again.spec_dict() != self.study.spec_dict():
            raise StudyError(f"{where}: the YAML written does not load back to the same study; nothing written")
        return text

    def report(self) -> str:
        """What ``storagebench translate`` prints: the table, the inexact count, the study YAML."""
        n = len(self.inexact)
        lines = [self.table(), "",
                 f"{n} setting(s) without an exact fio equivalent (marked NO above)." if n else
                 "Every setting has an exact fio equivalent.", ""]
        if self.targets:
            lines += [one_line(f"Targets of the source, not copied into the study: {', '.join(self.targets)}"), ""]
        return "\n".join(lines) + self.to_yaml()


# ---- DiskSPD --------------------------------------------------------------------------------------

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


def _validated(**spec: Any) -> Study:
    """The translated spec checked like a spec file: a bad value is a :class:`StudyError`, not a pydantic one."""
    return load_study(spec)


def study_from_diskspd(cmdline: str, *, name: str, ioengine: str = "libaio", repetitions: int = 1,
                       description: str = "") -> Translation:
    """A fio study (one run point) from a DiskSPD command line, with its translation.

    Parameters
    ----------
    cmdline : str
        e.g. ``"diskspd.exe -b4K -r -w30 -o64 -t1 -d3600 -W3600 -Sh #1"`` (the executable, a shell
        redirect and the targets are allowed).
    name : str
        Study name.
    ioengine : str
        fio engine to run with (DiskSPD uses overlapped I/O with completion ports: fio's
        ``windowsaio`` on Windows; ``libaio``/``io_uring`` are the asynchronous engines on Linux).
    repetitions : int
    description : str
        Default: the command line.

    Returns
    -------
    Translation

    Raises
    ------
    StudyError
        An unknown switch, a malformed value, ``-X`` (an XML profile), or a combination DiskSPD
        itself refuses (``-t`` with ``-F``, ``-O`` without ``-F``).
    """
    toks = _tokens(cmdline)
    opts: list[tuple[str, str]] = []
    targets: list[str] = []
    for t in toks:
        if t.startswith("-") and len(t) > 1:
            opts.append((t[1], t[2:]))
        elif t:
            targets.append(t)
    maps: list[Mapping] = []
    fixed: dict[str, Any] = {}
    d = dict(DISKSPD_DEFAULTS)
    block = d["block_size"]
    for sw, val in opts:  # -b first: sizes in blocks depend on it
        if sw == "b":
            block = _ds_size(val, 65536, "-b", minimum=1, maximum=DS_BLOCK_MAX)
    seen = {sw for sw, _ in opts}
    if "t" in seen and "F" in seen:
        raise StudyError("DiskSPD -t (threads per target) and -F (total threads) cannot be combined")
    if "O" in seen and "F" not in seen:
        raise StudyError("DiskSPD -O (outstanding I/Os per thread) is only valid with -F")
    random = None
    align = None
    stride = None
    interlocked = False
    write_pct = 0
    qd = d["outstanding"]
    per_thread_o = None
    threads = d["threads_per_target"]
    pool = None
    runtime, ramp = float(d["duration_s"]), float(d["warmup_s"])
    direct = False
    writethrough = False
    for sw, val in opts:
        src = f"-{sw}{val}"
        if sw == "b":
            fixed["bs"] = block
            maps.append(Mapping(src, f"bs={block}", True))
        elif sw == "r":
            if val.startswith("s"):
                # -rs<pct>: a share of random I/Os; diskspd.xsd: "RandomRatio should only ever be between 1 and 99"
                pct = float(_ds_int(val[1:], "-rs", minimum=1, maximum=99))
                random = pct
                maps.append(Mapping(src, f"percentage_random={pct:g}", False,
                                    "DiskSPD 2.1 mixes random and sequential I/Os by this share; fio's "
                                    "percentage_random does too, but where each sequential run resumes differs"))
                continue
            if val.startswith("d"):
                raise StudyError(f"DiskSPD {src}: random distributions (-rd) have no fio translation here; "
                                 "write fio's random_distribution=zoned by hand")
            random = 100.0 if random is None else random
            if val:
                align = _ds_size(val, block, "-r", minimum=1)  # "Invalid alignment passed to -r" for 0
        elif sw == "s":
            interlocked = val.startswith("i")
            v = val[1:] if interlocked else val
            stride = _ds_size(v, block, "-s") if v else None
        elif sw == "w":
            write_pct = _ds_int(val or "0", "-w")
            if write_pct > 100:
                raise StudyError(f"DiskSPD -w: a percentage 0..100, got {write_pct}")
        elif sw == "o":
            qd = _ds_int(val, "-o", minimum=1)
        elif sw == "O":
            per_thread_o = _ds_int(val, "-O", minimum=1)
        elif sw == "t":
            threads = _ds_int(val, "-t", minimum=1)
        elif sw == "F":
            pool = _ds_int(val, "-F", minimum=1)
        elif sw == "d":
            runtime = float(_ds_int(val, "-d", minimum=1))
            maps.append(Mapping(src, f"runtime={runtime:g} (time_based)", True))
        elif sw == "W":
            ramp = float(_ds_int(val, "-W"))
            maps.append(Mapping(src, f"ramp_time={ramp:g}", True,
                                "DiskSPD's warm-up issues I/O unmeasured, as fio's ramp_time does"))
        elif sw == "C":
            maps.append(Mapping(src, "", False, "cool-down (I/O continues unmeasured after the run): fio has no "
                                                "equivalent; the run simply ends"))
        elif sw in ("S", "h"):
            flags = val if sw == "S" else "h"
            flags = flags or "u"
            if "h" in flags:
                flags = flags.replace("h", "uw")
            if "b" in flags:
                maps.append(Mapping(src, "direct=0", True, "caching on (DiskSPD's default)"))
            if "r" in flags:
                maps.append(Mapping(src, "", False, "remote-only caching (SMB): no fio equivalent"))
            if "u" in flags:
                direct = True
            if "w" in flags:
                writethrough = True
            if "u" in flags or "w" in flags:
                set_ = ", ".join(x for x, on in (("direct=1", "u" in flags), ("sync=1", "w" in flags)) if on)
                note = ("FILE_FLAG_NO_BUFFERING = fio direct=1" if "u" in flags else "")
                if "w" in flags:
                    note += ("; " if note else "") + ("FILE_FLAG_WRITE_THROUGH = fio sync=1 with ioengine=windowsaio "
                                                      "(engines/windowsaio.c); with other engines sync=1 opens O_SYNC, "
                                                      "the nearest Linux behaviour")
                maps.append(Mapping(src, set_, "w" not in flags or ioengine == "windowsaio", note))
        elif sw == "L":
            maps.append(Mapping(src, "", True, "fio always measures latency (lat/clat/slat, percentiles)"))
        elif sw == "D":
            ms = _ds_int(val, "-D", minimum=1) if val else 1000
            fixed["write_iops_log"] = name
            fixed["log_avg_msec"] = ms
            maps.append(Mapping(src, f"write_iops_log={name}, log_avg_msec={ms}", True,
                                "per-interval IOPS, as DiskSPD's <Iops> buckets"))
        elif sw == "c":
            size = _ds_size(val, block, "-c", minimum=1)
            maps.append(Mapping(src, f"size={size}", True, "DiskSPD creates the file of this size; fio lays it out"))
            fixed.setdefault("_size", size)
        elif sw == "f":
            if val and set(val) <= set("rst"):
                maps.append(Mapping(src, "", False, "CreateFile access hints (FILE_FLAG_RANDOM_ACCESS/SEQUENTIAL_SCAN/"
                                                    "TEMPORARY): fio sets no such hint on Linux; windowsaio sets "
                                                    "SEQUENTIAL_SCAN or RANDOM_ACCESS by rw= on its own"))
            else:
                size = _ds_size(val, block, "-f", minimum=1)
                fixed["_size"] = size
                maps.append(Mapping(src, f"size={size}", True, "use only the first bytes of the target"))
        elif sw == "B":
            off = _ds_size(val, block, "-B")
            fixed["offset"] = off
            maps.append(Mapping(src, f"offset={off}", True))
        elif sw == "T":
            inc = _ds_size(val, block, "-T", minimum=1)  # "Invalid offset passed to -T" for 0
            fixed["offset_increment"] = inc
            maps.append(Mapping(src, f"offset_increment={inc}", True,
                                "thread n starts at base + n x stride, as fio job n with offset_increment"))
        elif sw == "g":
            if val.endswith("i"):
                v = _ds_int(val[:-1], "-g", minimum=1)
                fixed["rate_iops"] = v
                maps.append(Mapping(src, f"rate_iops={v}", True, "per thread per target; fio rate_iops is per job"))
            else:
                v = _ds_int(val, "-g", minimum=1)  # DiskSPD: -g<n> with n > 0
                fixed["rate"] = v * 1000
                maps.append(Mapping(src, f"rate={v * 1000}", True, "bytes per ms per thread -> bytes/s per job"))
        elif sw == "i" or sw == "j":
            _ds_int(val, f"-{sw}", minimum=1)  # DiskSPD: burst size / think time > 0
            maps.append(Mapping(src, "", False, "I/O bursts (-i/-j): fio's thinktime + thinktime_blocks is the "
                                                "nearest; not set (DiskSPD waits between bursts, fio after blocks)"))
        elif sw == "Z":
            if val == "":
                fixed["zero_buffers"] = 1
                maps.append(Mapping(src, "zero_buffers=1", True))
            elif val == "r":
                fixed["refill_buffers"] = 1
                maps.append(Mapping(src, "refill_buffers=1", True, "new random data for every write"))
            else:
                maps.append(Mapping(src, "", False, "write buffers from a random/file source of a given size: fio's "
                                                    "buffer_compress_percentage or a pattern file differ; not set"))
        elif sw == "z":
            if val:
                fixed["randseed"] = _ds_int(val, "-z")
                maps.append(Mapping(src, f"randseed={val}", False, "a seed, but fio's generator differs: the same "
                                                                    "seed does not give the same offsets"))
            else:
                fixed["randrepeat"] = 0
                maps.append(Mapping(src, "randrepeat=0", True, "a seed from the clock"))
        elif sw in ("a", "n"):
            maps.append(Mapping(src, "", False, "thread affinity: fio's cpus_allowed / numa_cpu_nodes is the "
                                                "equivalent; not set (host specific)"))
        elif sw == "x":
            maps.append(Mapping(src, "", False, "completion routines instead of I/O completion ports: no fio engine "
                                                "uses them"))
        elif sw == "p":
            maps.append(Mapping(src, "", False, "parallel sequential I/Os from the same offset: no fio equivalent"))
        elif sw == "I":
            _ds_int(val, "-I", minimum=1, maximum=3)  # DiskSPD: 1 very low, 2 low, 3 normal
            maps.append(Mapping(src, "", False, "Windows I/O priority hint: fio's prioclass/prio are Linux "
                                                "ioprio classes, not the same; not set"))
        elif sw in ("R", "P", "v", "l", "y", "e", "?"):
            maps.append(Mapping(src, "", True, "output, progress, events or buffers: no effect on the workload"))
        elif sw == "X":
            raise StudyError("DiskSPD -X: an XML profile; translate its command-line equivalent instead")
        else:
            raise StudyError(f"DiskSPD switch -{sw} is unknown; known: -a -b -B -c -C -d -D -f -F -g -h -i -I -j -l "
                             "-L -n -o -O -p -P -r -R -s -S -t -T -v -w -W -x -X -y -z -Z")
    if "d" not in seen:
        maps.append(Mapping("(no -d)", f"runtime={runtime:g} (time_based)", True, "DiskSPD's default duration is 10 s"))
    if "W" not in seen:
        maps.append(Mapping("(no -W)", f"ramp_time={ramp:g}", True, "DiskSPD's default warm-up is 5 s"))
    # rw, mix, random
    family = "read" if write_pct == 0 else ("write" if write_pct == 100 else "rw")
    rw = ("rand" + family) if random is not None else family
    fixed["rw"] = rw
    if family == "rw":
        fixed["rwmixread"] = 100 - write_pct
    if "w" in seen:
        w_src = next(f"-w{v}" for s, v in opts if s == "w")
        maps.append(Mapping(w_src, f"rw={rw}" + (f", rwmixread={100 - write_pct}" if family == "rw" else ""), True,
                            "DiskSPD picks each I/O's direction by this ratio, as fio's rwmix does"))
    else:
        maps.append(Mapping("(no -w)", f"rw={rw}", True, "DiskSPD's default: reads only"))
    if random is not None:
        if random < 100:
            fixed["percentage_random"] = random
        r_src = next(f"-r{v}" for s, v in opts if s == "r")
        set_ = f"rw={rw}" + (f", blockalign={align}" if align and align != fixed.get("bs", block) else "")
        if align and align != fixed.get("bs", block):
            fixed["blockalign"] = align
        maps.append(Mapping(r_src, set_, True, "random offsets aligned to the alignment (default: block size), "
                                               "as fio's blockalign (default bs)"))
    elif stride is not None or interlocked:
        s_src = next(f"-s{v}" for s, v in opts if s == "s")
        hole = (stride - block) if stride is not None else 0
        if hole < 0:
            raise StudyError(f"DiskSPD {s_src}: a stride smaller than the block size ({block}) has no fio equivalent")
        if hole:
            fixed["rw"] = f"{rw}:{hole}"
        if interlocked:
            maps.append(Mapping(s_src, f"rw={fixed['rw']}", False,
                                "interlocked sequential: DiskSPD's threads share one offset; fio's jobs each keep "
                                "their own, so with numjobs > 1 the target sees interleaved sequential streams"))
        else:
            maps.append(Mapping(s_src, f"rw={fixed['rw']}", True, "stride = block size + the hole fio skips"))
    else:
        maps.append(Mapping("(no -r/-s)", f"rw={rw}", True, "DiskSPD's default: sequential"))
    if "b" not in seen:
        fixed["bs"] = block
        maps.append(Mapping("(no -b)", f"bs={block}", True, "DiskSPD's default block size is 64 KiB (fio's is 4 KiB)"))
    # threads and queue depth
    n_targets = max(len(targets), 1)
    if pool is not None:
        iodepth = per_thread_o if per_thread_o is not None else qd * n_targets
        fixed["numjobs"] = pool
        fixed["iodepth"] = iodepth
        src = f"-F{pool}" + (f" -O{per_thread_o}" if per_thread_o else f" -o{qd}")
        maps.append(Mapping(src, f"numjobs={pool}, iodepth={iodepth}", n_targets == 1,
                            "a thread pool over all targets = fio jobs over all files (filename=a:b), "
                            "iodepth per job" + ("" if n_targets == 1 else
                                                 "; fio shares a job's iodepth across its files instead of "
                                                 "keeping -o per file")))
    else:
        fixed["numjobs"] = threads * n_targets if n_targets > 1 else threads
        fixed["iodepth"] = qd
        src = ("-t" + str(threads) if "t" in seen else "(no -t)") + (f" -o{qd}" if "o" in seen else " (no -o)")
        note = ("threads per target and outstanding I/Os per thread = fio numjobs and iodepth"
                + ("" if "o" in seen else "; DiskSPD's default -o is 2"))
        if n_targets > 1:
            note += (f"; {n_targets} targets: DiskSPD gives each its own {threads} thread(s), a fio study runs one "
                     "job definition over all files: numjobs = threads x targets, each job spreading its I/O over "
                     "every file (file_service_type) -- not the same")
        maps.append(Mapping(src, f"numjobs={fixed['numjobs']}, iodepth={qd}", n_targets <= 1, note))
    fixed["direct"] = 1 if direct else 0
    if not direct and not any(s in ("S", "h") for s in seen):
        maps.append(Mapping("(no -S)", "direct=0", True, "DiskSPD's default: OS caching on"))
    if writethrough:
        fixed["sync"] = 1
    fixed["ioengine"] = ioengine
    maps.append(Mapping("(engine)", f"ioengine={ioengine}", ioengine == "windowsaio",
                        "DiskSPD: overlapped I/O + I/O completion ports = fio windowsaio" +
                        ("" if ioengine == "windowsaio" else f"; {ioengine} is the asynchronous engine here")))
    size = fixed.pop("_size", None)
    # the command line is foreign text: one printable line in the description (the spec refuses control characters)
    study = _validated(name=name, description=description or f"Translated from DiskSPD: {one_line(cmdline.strip())}",
                       fixed=fixed, runtime=runtime, ramp_time=ramp, size=size, repetitions=repetitions)
    return Translation("diskspd", cmdline.strip(), study, tuple(maps), tuple(_ds_target(t) for t in targets))


def _ds_target(t: str) -> str:
    if t.startswith("#") and t[1:].isdigit():
        return f"{t} (physical drive {t[1:]}: fio filename=\\\\.\\PhysicalDrive{t[1:]})"
    if re.fullmatch(r"[A-Za-z]:", t):
        return f"{t} (volume: fio filename=\\\\.\\{t})"
    return t


# ---- Iometer --------------------------------------------------------------------------------------


@dataclass
class _Icf:
    description: str = ""
    run_time_s: float = math.nan
    ramp_s: float = 0.0
    test_type: str = "NORMAL"
    qd_cycling: tuple[int, int, int, str] | None = None
    specs: dict[str, list[tuple[int, ...]]] = field(default_factory=dict)
    workers: list[dict] = field(default_factory=list)


#: Most levels a queue-depth cycling may give (Iometer cycles 1..32 exponentially in 6 steps; 64 is generous).
ICF_MAX_CYCLE_STEPS = 64
#: Largest count or time taken from an .icf: Iometer keeps them in ``int`` (``ICF_ifstream::GetNextNumber``).
ICF_INT_MAX = 2**31 - 1


def _icf_int(text: str, path: str, what: str, *, minimum: int = 0, maximum: int = ICF_INT_MAX) -> int:
    """A whole number of an .icf field, in the bounds Iometer and fio take; never a default for a bad one."""
    t = text.strip()
    if not (t.isascii() and t.isdigit()) or len(t) > 12 or not minimum <= int(t) <= maximum:
        raise StudyError(f"{path}: {what} must be a whole number {minimum}..{maximum:,}, got {shown(t)}")
    return int(t)


def _read_icf(text: str, path: str) -> _Icf:
    lines = [ln.rstrip("\r") for ln in text.split("\n")]
    icf = _Icf()
    i = 0

    def vals(k: int) -> list[str]:
        return lines[k].split() if k < len(lines) else []

    worker: dict | None = None
    while i < len(lines):
        s = lines[i].strip()
        if s == "'Test Description":
            icf.description = lines[i + 1].strip() if i + 1 < len(lines) else ""
        elif s == "'Run Time":
            v = vals(i + 2)
            if len(v) != 3:
                raise StudyError(f"{path}: 'Run Time must be followed by hours minutes seconds, got "
                                 f"{shown(' '.join(v))}")
            h, m, sec = (_icf_int(x, path, f"'Run Time {w}") for x, w in zip(v, ("hours", "minutes", "seconds"), strict=True))
            icf.run_time_s = h * 3600 + m * 60 + sec
            if icf.run_time_s > ICF_INT_MAX:
                raise StudyError(f"{path}: 'Run Time of {icf.run_time_s:,} s: more than {ICF_INT_MAX:,} s")
        elif s == "'Ramp Up Time (s)":
            v = vals(i + 1)
            icf.ramp_s = float(_icf_int(v[0] if v else "", path, "'Ramp Up Time (s)"))
        elif s == "'Test Type":
            icf.test_type = lines[i + 1].strip() if i + 1 < len(lines) else "NORMAL"
        elif s == "'Queue Depth Cycling":
            v = vals(i + 2)
            if len(v) != 4 or v[3].upper() not in ("LINEAR", "EXPONENTIAL"):
                raise StudyError(f"{path}: 'Queue Depth Cycling must be start end step LINEAR|EXPONENTIAL, got "
                                 f"{shown(' '.join(v))}")
            start = _icf_int(v[0], path, "'Queue Depth Cycling start", minimum=1)
            end = _icf_int(v[1], path, "'Queue Depth Cycling end", minimum=start)
            step = _icf_int(v[2], path, "'Queue Depth Cycling step", minimum=2 if v[3].upper() == "EXPONENTIAL" else 1)
            icf.qd_cycling = (start, end, step, v[3])
        elif s.startswith("'Access specification name"):
            name = lines[i + 1].strip().rsplit(",", 1)[0] if i + 1 < len(lines) else ""
            comps = []
            j = i + 3  # after the name and the "'size,% of size,..." comment line
            while j < len(lines) and lines[j].strip() and not lines[j].strip().startswith("'"):
                comps.append(_icf_component(lines[j], name, path))
                j += 1
            if sum(c[1] for c in comps) != 100:
                raise StudyError(f"{path}: access specification {shown(name)}: '% of size' adds to "
                                 f"{sum(c[1] for c in comps)}, Iometer requires 100")
            icf.specs[name] = comps
            i = j
            continue
        elif s == "'Worker":
            worker = {"name": lines[i + 1].strip() if i + 1 < len(lines) else "", "qd": 1, "specs": [],
                      "targets": [], "type": "DISK"}
            icf.workers.append(worker)
        elif s == "'Worker type" and worker is not None:
            worker["type"] = lines[i + 1].strip() if i + 1 < len(lines) else ""
        elif s.startswith("'Number of outstanding IOs") and worker is not None:
            first = lines[i + 1].strip().split(",")[0] if i + 1 < len(lines) else ""
            worker["qd"] = _icf_int(first, path, f"'Number of outstanding IOs of worker {shown(worker['name'])}",
                                    minimum=1)
        elif s == "'Assigned access specs" and worker is not None:
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith("'"):
                if lines[j].strip():
                    worker["specs"].append(lines[j].strip())
                j += 1
            i = j
            continue
        elif s == "'Target" and worker is not None:
            worker["targets"].append(lines[i + 1].strip() if i + 1 < len(lines) else "")
        i += 1
    return icf


#: The fields of an access specification line (``AccessSpecList.cpp`` ``LoadConfigNew``) and their bounds:
#: a transfer size of at least one byte, percentages 0..100, a delay (ms) and alignment/reply sizes >= 0,
#: bursts of at least one I/O.
_ICF_FIELDS = (("size", 1, ICF_INT_MAX), ("% of size", 0, 100), ("% reads", 0, 100), ("% random", 0, 100),
               ("delay", 0, ICF_INT_MAX), ("burst", 1, ICF_INT_MAX), ("align", 0, ICF_INT_MAX),
               ("reply", 0, ICF_INT_MAX))


def _icf_component(line: str, name: str, path: str) -> tuple[int, ...]:
    parts = [p.strip() for p in line.strip().rstrip(",").split(",")]
    if len(parts) != len(_ICF_FIELDS):
        raise StudyError(f"{path}: access specification {shown(name)}: line {shown(line.strip())} must be "
                         "size,% of size,% reads,% random,delay,burst,align,reply numbers")
    return tuple(_icf_int(p, path, f"access specification {shown(name)}: {what}", minimum=lo, maximum=hi)
                 for p, (what, lo, hi) in zip(parts, _ICF_FIELDS, strict=True))


def study_from_icf(path: str | Path, *, name: str | None = None, ioengine: str = "libaio",
                   repetitions: int = 1) -> Translation:
    """A fio study from an Iometer configuration file (``.icf``), with its translation.

    Each access specification assigned to the disk workers is one level of a study factor
    ``access_spec`` (Iometer runs them one after the other); Iometer's queue-depth cycling becomes an
    ``iodepth`` factor. ``'Run Time`` → ``runtime``, ``'Ramp Up Time (s)`` → ``ramp_time``, outstanding
    I/Os per target x targets per worker → ``iodepth``, disk workers → ``numjobs``.

    Parameters
    ----------
    path : path
        The ``.icf`` file.
    name : str, optional
        Study name (default: the file's stem).
    ioengine : str
        fio engine (Iometer's Dynamo uses asynchronous I/O: ``windowsaio`` on Windows, ``libaio`` on Linux).
    repetitions : int

    Returns
    -------
    Translation

    Raises
    ------
    StudyError
        No access specification assigned to a disk worker, a malformed specification line, a
        '% of size' total other than 100, no ``'Run Time``, or workers with different queue depths or specs.
    """
    p = Path(path)
    try:
        text = read_input(p, max_bytes=MAX_ICF_BYTES, what="Iometer .icf file", error=StudyError).decode(
            "utf-8", "replace")
    except OSError as exc:
        raise StudyError(f"{p}: cannot read: {exc.strerror or exc}") from None
    icf = _read_icf(text, one_line(str(p), limit=200))
    disk_workers = [w for w in icf.workers if w["type"].upper().startswith("DISK")]
    if not disk_workers:
        raise StudyError(f"{p}: no disk worker in the manager list")
    assigned = disk_workers[0]["specs"]
    if not assigned:
        raise StudyError(f"{p}: no access specification assigned to worker {disk_workers[0]['name']!r}")
    if any(w["specs"] != assigned for w in disk_workers) or len({w["qd"] for w in disk_workers}) > 1:
        raise StudyError(f"{p}: the disk workers have different access specifications or queue depths; a study "
                         "gives every job the same options (split the test into one study per worker setting)")
    missing = [s for s in assigned if s not in icf.specs]
    if missing:
        raise StudyError(f"{p}: assigned access specification(s) {missing} are not defined in the file")
    if math.isnan(icf.run_time_s) or icf.run_time_s <= 0:
        raise StudyError(f"{p}: no 'Run Time (hours minutes seconds) > 0: Iometer would run until stopped")
    maps: list[Mapping] = []
    fixed: dict[str, Any] = {"ioengine": ioengine}
    factors: dict[str, list] = {}
    levels = []
    for spec_name in dict.fromkeys(assigned):
        opts, spec_maps = _spec_options(spec_name, icf.specs[spec_name])
        maps += spec_maps
        levels.append({"name": safe_name(spec_name), **opts})
    if len(levels) == 1:
        fixed.update({k: v for k, v in levels[0].items() if k != "name"})
    else:
        factors["access_spec"] = levels
        maps.append(Mapping(f"{len(levels)} assigned access specs", "factor access_spec", True,
                            "Iometer runs each assigned specification as its own test, in order; a study runs them "
                            "as factor levels in a seeded random order"))
    n_workers = len(disk_workers)
    n_targets = len(disk_workers[0]["targets"]) or 1
    qd = disk_workers[0]["qd"]
    fixed["numjobs"] = n_workers
    if icf.test_type.upper() in ("CYCLE_OUTSTANDING_IOS", "CYCLINGQUEUE") and icf.qd_cycling:
        start, end, step, kind = icf.qd_cycling
        qds, q = [], start
        while q <= end:  # start >= 1 and step >= 1 (linear) or >= 2 (exponential): q grows every turn
            if len(qds) >= ICF_MAX_CYCLE_STEPS:
                raise StudyError(f"{p}: 'Queue Depth Cycling {start}..{end} {kind} x{step} gives more than "
                                 f"{ICF_MAX_CYCLE_STEPS} queue depths")
            qds.append(q * n_targets)
            q = q * step if kind.upper().startswith("EXP") else q + step
        factors["iodepth"] = qds
        maps.append(Mapping(f"queue depth cycling {start}..{end} {kind.lower()} x{step}", f"factor iodepth={qds}",
                            True, "one run per queue depth"))
    else:
        fixed["iodepth"] = qd * n_targets
        maps.append(Mapping(f"'Number of outstanding IOs {qd}" + (f" x {n_targets} targets" if n_targets > 1 else ""),
                            f"iodepth={qd * n_targets}", n_targets == 1,
                            "outstanding I/Os per target = fio iodepth" + ("" if n_targets == 1 else
                                                                            "; fio shares a job's iodepth across its "
                                                                            "files instead of per file")))
        if icf.test_type.upper() not in ("NORMAL", ""):
            maps.append(Mapping(f"'Test Type {icf.test_type}", "", False,
                                "cycling targets or workers: not translated (write one study per step)"))
    maps.append(Mapping(f"{n_workers} disk worker(s)", f"numjobs={n_workers}", True,
                        "one Iometer worker = one thread = one fio job"))
    maps.append(Mapping(f"'Run Time {icf.run_time_s:g} s", f"runtime={icf.run_time_s:g} (time_based)", True))
    maps.append(Mapping(f"'Ramp Up Time (s) {icf.ramp_s:g}", f"ramp_time={icf.ramp_s:g}", True,
                        "I/O runs but is not recorded, as fio's ramp_time"))
    maps.append(Mapping("(Dynamo disk access)", "direct=1", True,
                        "Dynamo opens disks unbuffered (FILE_FLAG_NO_BUFFERING / O_DIRECT)"))
    fixed["direct"] = 1
    maps.append(Mapping("(engine)", f"ioengine={ioengine}", True, "Dynamo issues asynchronous I/O"))
    targets = tuple(dict.fromkeys(t for w in disk_workers for t in w["targets"]))
    study = _validated(name=name or safe_name(p.stem),
                       description=one_line(icf.description or f"Translated from Iometer {p.name}"),
                       factors=factors, fixed=fixed, runtime=icf.run_time_s, ramp_time=icf.ramp_s, repetitions=repetitions)
    return Translation("iometer", str(p), study, tuple(maps), targets)


def _spec_options(name: str, comps: list[tuple[int, ...]]) -> tuple[dict, list[Mapping]]:
    """fio options of one access specification, and the mappings that say so."""
    maps = []
    sizes = {c[0] for c in comps}
    reads = {c[2] for c in comps}
    rnd = {c[3] for c in comps}
    opts: dict[str, Any] = {}
    if len(comps) == 1 or len(sizes) == 1:
        opts["bs"] = comps[0][0]
    else:
        split = ":".join(f"{c[0]}/{c[1]}" for c in comps)
        opts["bssplit"] = split
    if len(reads) > 1 or len(rnd) > 1:
        r = sum(c[1] * c[2] for c in comps) / 100.0
        x = sum(c[1] * c[3] for c in comps) / 100.0
        maps.append(Mapping(f"{name}: {len(comps)} lines", "", False,
                            "lines with different % reads / % random: fio cannot tie a read share to a block size; "
                            f"the size-weighted means ({r:g}% reads, {x:g}% random) are used"))
        reads, rnd = {round(r)}, {round(x)}
    rd, rn = reads.pop(), rnd.pop()
    family = "read" if rd == 100 else ("write" if rd == 0 else "rw")
    opts["rw"] = ("rand" + family) if rn > 0 else family
    if family == "rw":
        opts["rwmixread"] = rd
    if 0 < rn < 100:
        opts["percentage_random"] = rn
    size_txt = f"size={comps[0][0]}" if "bs" in opts else f"sizes {sorted(sizes)}"
    maps.append(Mapping(f"{name}: {size_txt}", f"bs={opts['bs']}" if "bs" in opts else f"bssplit={opts['bssplit']}",
                        True))
    maps.append(Mapping(f"{name}: {rd}% reads, {rn}% random",
                        f"rw={opts['rw']}" + (f", rwmixread={rd}" if family == "rw" else "")
                        + (f", percentage_random={rn}" if 0 < rn < 100 else ""), True))
    delay, burst = comps[0][4], comps[0][5]
    if any(c[4] for c in comps):
        maps.append(Mapping(f"{name}: delay {delay} ms, burst {burst}", "", False,
                            "Iometer waits `delay` ms after each burst of `burst` I/Os; fio's thinktime (us) with "
                            "thinktime_blocks is the nearest, not set"))
    align = comps[0][6]
    if align == 0:
        maps.append(Mapping(f"{name}: align 0 (sector boundaries)", "", False,
                            "Iometer aligns offsets to the target's sector size; fio aligns random offsets to bs "
                            "(blockalign's default), coarser unless blockalign is set to the sector size (512 or "
                            "4096 bytes, not in the .icf): not set"))
    elif align != comps[0][0]:
        opts["blockalign"] = align
        maps.append(Mapping(f"{name}: align {align}", f"blockalign={align}", True))
    else:
        maps.append(Mapping(f"{name}: align {align}", "", True, "= bs, fio's default blockalign"))
    if any(c[7] for c in comps):
        maps.append(Mapping(f"{name}: reply {comps[0][7]}", "", False, "network reply size: no fio equivalent"))
    return opts, maps
