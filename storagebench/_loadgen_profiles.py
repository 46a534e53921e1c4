"""DiskSPD command lines and Iometer access specifications (``.icf``) → a fio :class:`~storagebench._study.Study`.

The translation is shown, option by option, so that a user can check it: every DiskSPD switch or
Iometer setting becomes a :class:`Mapping` saying which fio option it set, whether the two are
**exactly** the same behaviour, and — where they are not — what differs. Nothing is approximated
silently; what fio cannot do is said, not dropped.

DiskSPD's switches are read one at a time by :mod:`storagebench._diskspd_switches` (a handler per switch
letter, :data:`~storagebench._diskspd_switches.SWITCHES`), which also owns :class:`Mapping`; this module
writes the study and reads Iometer's ``.icf``.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._diskspd_switches import Mapping, diskspd_options, diskspd_target
from ._inputs import read_input
from ._safeyaml import dump_yaml, load_yaml, one_line
from ._study import Study, load_study, safe_name
from .errors import StudyError, shown

__all__ = ["Mapping", "Translation", "study_from_diskspd", "study_from_icf"]

#: Largest Iometer ``.icf`` file read, bytes (a saved configuration is a few KiB).
MAX_ICF_BYTES = 4 * 2**20


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
    st = diskspd_options(cmdline, name=name, ioengine=ioengine)
    # the command line is foreign text: one printable line in the description (the spec refuses control characters)
    study = _validated(name=name, description=description or f"Translated from DiskSPD: {one_line(cmdline.strip())}",
                       fixed=st.fixed, runtime=st.runtime, ramp_time=st.ramp, size=st.size, repetitions=repetitions)
    return Translation("diskspd", cmdline.strip(), study, tuple(st.maps), tuple(diskspd_target(t) for t in st.targets))


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
