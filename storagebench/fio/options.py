"""fio's job options: names and aliases, value grammar, directions, and what an option does to the host.

Everything storagebench knows about fio's job-file options lives here, once:

* **Names.** :data:`OPTIONS` is fio 3.33's own table (``fio --cmdhelp``/``--enghelp``, generated
  into :mod:`storagebench.fio._fio333` by ``runners/fio_option_table.py``). :func:`canonical_name`
  resolves an alias to the name fio stores it under (``readwrite`` -> ``rw``, ``timeout`` ->
  ``runtime``, ``fill_fs`` -> ``fill_device``...): every check looks at canonical names, because fio
  obeys the last spelling it reads whatever the spelling.
* **Values.** :func:`parse_size` and :func:`parse_time_us` read a value exactly as fio 3.33 does
  (``parse.c``: ``str_to_decimal``, ``get_mult_bytes``, ``get_mult_time``), quirks included:
  with the default ``kb_base=1024``, ``1MiB`` is 1,000,000 bytes and ``1mi`` 1,048,576; ``1.5k``
  is 1 byte (``strtoll`` stops at the dot and ``.5k`` is no suffix); ``10sec`` is 10 µs.
  :func:`size_spelling_problem` / :func:`time_spelling_problem` say when a spelling would
  surprise its author, so that a study spec can refuse it instead of measuring something else.
  :func:`check_job_value` refuses what would change a job file's structure or meaning: line
  breaks and control characters, ``;`` and ``#`` (fio cuts a value there: ``strip_blank_end``),
  ``$`` (fio substitutes ``${VAR}`` and ``$ncpus``-style keywords).
* **Directions.** :data:`RW_VALUES`, :data:`WRITE_RW`, :func:`rw_base`.
* **Host effects.** :func:`gate_of` gives the opt-in a job option needs: storagebench runs
  only options it knows to be harmless for a measurement (:data:`SAFE_OPTIONS` on a safe
  engine, :data:`SAFE_ENGINES`); everything that runs programs, touches other paths, the host's
  configuration or the network needs a named opt-in (:data:`GATES`). :func:`modifying_reason`
  says whether a workload changes the data of its target.

Nothing here imports the rest of storagebench except :mod:`storagebench.errors`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any

from ..errors import JobFileError, shown
from ._fio333 import ENGINE_OPTIONS, FIO_VERSION, OPTIONS
from ._units import (  # noqa: F401  # noqa: F401  # noqa: F401
    _HEX_SIZE,
    _IEC,
    _IEC_SIZE,
    _PLAIN_SIZE,
    _PLAIN_TIME,
    _SI,
    _TIME_EXACT_US,
    _TIME_MULT_US,
    MAX_BYTES,
    _mult_bytes,
    _strtoll,
    parse_size,
    parse_size_or_percent,
    parse_time_us,
    render_time,
    size_spelling_problem,
    time_spelling_problem,
)

__all__ = [
    "FIO_VERSION",
    "OPTIONS",
    "ENGINE_OPTIONS",
    "KNOWN_OPTIONS",
    "ALIASES",
    "RW_VALUES",
    "WRITE_RW",
    "READ_RW",
    "KNOWN_ENGINES",
    "GATES",
    "canonical_name",
    "close_options",
    "canonical_options",
    "check_job_name",
    "check_job_value",
    "gate_of",
    "required_gates",
    "modifying_reason",
    "rw_base",
    "parse_size",
    "parse_size_or_percent",
    "size_spelling_problem",
    "parse_time_us",
    "render_time",
    "split_filenames",
    "join_filenames",
    "MAX_BYTES",
    "MAX_NAME_LEN",
    "FLAG_OPTIONS",
    "BOOL_OPTIONS",
    "SAFE_NAME_RE",
    "SAFE_NAME_RULE",
    "OPTION_UNITS",
    "option_unit",
]

#: alias -> canonical name (fio ``parse.c`` ``o_match``: an option answers to its name and its alias).
ALIASES: dict[str, str] = {a: name for name, info in OPTIONS.items() for a in info["aliases"]}
_ENGINE_ONLY = frozenset(o for opts in ENGINE_OPTIONS.values() for o in opts) - frozenset(OPTIONS)
#: Every name fio 3.33 accepts in a job file: options, their aliases, and engine options.
KNOWN_OPTIONS: frozenset[str] = frozenset(OPTIONS) | frozenset(ALIASES) | _ENGINE_ONLY

#: fio ``rw=`` values (``fio --cmdhelp=rw``).
RW_VALUES: tuple[str, ...] = tuple(OPTIONS["rw"]["values"])
#: ``rw`` values that write or trim.
WRITE_RW: frozenset[str] = frozenset(
    {"write", "randwrite", "rw", "readwrite", "randrw", "trim", "randtrim", "trimwrite", "randtrimwrite"}
)
#: ``rw`` values that only read.
READ_RW: frozenset[str] = frozenset({"read", "randread"})


# ---------------------------------------------------------------------------------------------
# names


def close_options(name: str, n: int = 3) -> list[str]:
    """The fio option names closest to ``name`` (:func:`difflib.get_close_matches`, at most ``n``): a did-you-mean.

    Parameters
    ----------
    name : str
        A name that is not an option (``iodpeth``).
    n : int
        Most names returned.

    Returns
    -------
    list of str
        Closest first; empty when nothing is close (ratio below 0.6).
    """
    return difflib.get_close_matches(name, sorted(KNOWN_OPTIONS), n=n)


def canonical_name(name: str, *, where: str = "") -> str:
    """The name fio stores option ``name`` under (``readwrite`` -> ``rw``).

    Parameters
    ----------
    name : str
        An option name or alias as written in a job file (case-sensitive, as in fio).
    where : str
        Prefix for the message (``"fixed"``).

    Returns
    -------
    str
        The canonical name (an engine option is its own canonical name).

    Raises
    ------
    JobFileError
        Not an option fio 3.33 knows, with the closest names.
    """
    if not isinstance(name, str):
        raise JobFileError(f"{where + ': ' if where else ''}option names must be strings, got {name!r}")
    if name in OPTIONS or name in _ENGINE_ONLY:
        return name
    if name in ALIASES:
        return ALIASES[name]
    close = close_options(name)
    hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
    prefix = f"{where}.{name}" if where else repr(name)
    raise JobFileError(f"{prefix}: not an option {FIO_VERSION} knows{hint}")


def canonical_options(options: Mapping[str, Any], *, where: str = "") -> dict[str, Any]:
    """``options`` with every name canonical; two spellings of one option are refused.

    Raises
    ------
    JobFileError
        An unknown name, or an option given twice (``rw`` and ``readwrite``): fio would obey the
        later one, a check could read the other.
    """
    out: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for name, value in options.items():
        canon = canonical_name(name, where=where)
        if canon in out:
            raise JobFileError(
                f"{where + ': ' if where else ''}{spelled[canon]!r} and {name!r} are the same fio option "
                f"({canon}); set it once"
            )
        out[canon] = value
        spelled[canon] = name
    return out


#: Longest name (job section, study, factor, level label).
MAX_NAME_LEN = 64
#: A name that cannot change a job file's structure, a directory or a table: matched in full.
SAFE_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,%d}" % (MAX_NAME_LEN - 1))
#: :data:`SAFE_NAME_RE` in words, for messages.
SAFE_NAME_RULE = f"1-{MAX_NAME_LEN} letters, digits and _.+- starting with a letter or digit"
_NAME_RE = SAFE_NAME_RE


def check_job_name(name: str, *, what: str = "job name") -> str:
    """A job section name that cannot change a job file's structure (``[name]``).

    Raises
    ------
    JobFileError
        Not 1-64 letters, digits and ``_.+-`` (starting with a letter or digit), or ``global``.
    """
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name) or name == "global":
        raise JobFileError(f"{what} must be {SAFE_NAME_RULE} (not 'global'), got {shown(name)}")
    return name


#: Options fio reads as a bare line (``time_based``): type "empty or boolean value" in ``fio --cmdhelp``.
FLAG_OPTIONS: frozenset[str] = frozenset(n for n, i in OPTIONS.items() if i["type"].startswith("empty or"))
#: Options that take 0 or 1 and nothing else (``direct``, ``randrepeat``): a bare line is "Option requires an
#: argument" to fio 3.33, and 2 is "max value out of range: 2 (1 max)".
BOOL_OPTIONS: frozenset[str] = frozenset(n for n, i in OPTIONS.items() if i["type"].startswith("boolean value"))

#: Control characters (C0, DEL, C1) and Unicode line/paragraph separators: a line break to some
#: reader (Python's ``str.splitlines`` splits at ``\x85``, U+2028 and U+2029), never text for fio.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
#: Longest value fio's parser copies whole (``OPT_LEN_MAX`` in fio's parse.h).
MAX_VALUE_LEN = 4096


def check_job_value(name: str, value: Any) -> str | None:
    """The text of ``name=value`` in a job file, refusing anything that would change its meaning.

    Parameters
    ----------
    name : str
        Canonical option name (for the message).
    value : scalar
        ``None`` or ``True`` is a bare flag (``time_based``), except that ``True`` is ``1`` for the
        options of :data:`BOOL_OPTIONS`; ``False`` is ``0``; a whole float is written as an int.

    Returns
    -------
    str or None
        The value text, or ``None`` for a bare flag.

    Raises
    ------
    JobFileError
        A line break or other control character (it would start a new line or section),
        ``;`` or ``#`` (fio's ``strip_blank_end`` cuts the value there), ``$`` (fio substitutes
        ``${VAR}`` from the environment and keywords such as ``$ncpus``), leading or trailing
        blanks, a container value, or more than 4096 characters.
    """
    if value is True and name in BOOL_OPTIONS:
        return "1"  # fio: a boolean value option "requires an argument"
    if value is None or value is True:
        return None
    if value is False:
        return "0"
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise JobFileError(f"option {name}: value must be finite, got {value!r}")
        text = str(int(value)) if value.is_integer() else repr(value)
    elif isinstance(value, (int, str)):
        text = str(value)
    else:
        raise JobFileError(f"option {name}: value must be a string, number or boolean, got {shown(value)}")
    if len(text) > MAX_VALUE_LEN:
        raise JobFileError(f"option {name}: value longer than {MAX_VALUE_LEN} characters ({len(text):,}), got "
                           f"{shown(text)}")
    bad = _CONTROL.search(text)
    if bad:
        raise JobFileError(
            f"option {name}: value may not hold control characters such as line breaks "
            f"({bad.group()!r} at {bad.start()}), got {shown(text)}"
        )
    for ch, why in ((";", "fio cuts a value at ';' (a comment)"), ("#", "fio cuts a value at '#' (a comment)"),
                    ("$", "fio substitutes '${VAR}' and '$ncpus'-style keywords")):
        if ch in text:
            raise JobFileError(f"option {name}: value may not hold {ch!r}: {why}; got {shown(text)}")
    if text != text.strip():
        raise JobFileError(f"option {name}: value may not start or end with blanks, got {shown(text)}")
    return text


# ---------------------------------------------------------------------------------------------
# what options do to the host

#: Job options harmless for a measurement: they shape the workload or its statistics and touch
#: nothing but the run's own target and working directory. (Log options with a path, ``mem``
#: with a file, and the engine are checked by value in :func:`gate_of`.)
SAFE_OPTIONS: frozenset[str] = frozenset(
    """
allrandrepeat atomic ba block_error_percentiles bs bs_unaligned bsrange bssplit buffer_compress_chunk
buffer_compress_percentage buffer_pattern buffered bwavgtime clat_percentiles clocksource continue_on_error
cpumask cpus_allowed cpus_allowed_policy dedupe_global dedupe_mode dedupe_percentage
dedupe_working_set_percentage description direct disable_bw_measurement disable_clat disable_lat
disable_slat disk_util do_verify end_fsync error_dump exit_what exitall exitall_on_error experimental_verify
fadvise_hint fallocate fdatasync file_append file_service_type filename filesize fill_device flow flow_id
flow_sleep fsync fsync_on_close group_reporting gtod_cpu gtod_reduce hugepage-size ignore_error invalidate
io_size io_submit_mode iodepth iodepth_batch iodepth_batch_complete_max iodepth_batch_complete_min iodepth_low
ioengine iopsavgtime kb_base lat_percentiles latency_percentile latency_run latency_target latency_window
lockfile log_alternate_epoch log_alternate_epoch_clock_id log_avg_msec log_compression log_compression_cpus
log_entries log_hist_coarseness log_hist_msec log_max_value log_offset log_prio log_store_compressed
log_unix_epoch loops max_latency mem name new_group nice norandommap nrfiles numa_cpu_nodes numa_mem_policy
number_ios numjobs offset offset_align offset_increment openfiles overwrite per_job_logs percentage_random
percentile_list pre_read prio prioclass ramp_time random_distribution random_generator randrepeat randseed
rate rate_cycle rate_ignore_thinktime rate_iops rate_iops_min rate_min rate_process refill_buffers runtime rw
rw_sequencer rwmixread rwmixwrite scramble_buffers serialize_overlap significant_figures size slat_percentiles
startdelay stats steadystate steadystate_duration steadystate_ramp_time stonewall sync sync_file_range
thinktime thinktime_blocks thinktime_blocks_type thinktime_iotime thinktime_spin thread time_based
trim_backlog trim_backlog_batch trim_percentage trim_verify_zero unified_rw_reporting unit_base verify
verify_async verify_backlog verify_backlog_batch verify_dump verify_fatal verify_interval verify_offset
verify_only verify_pattern verify_state_load verify_state_save wait_for write_barrier write_bw_log write_hint
write_hist_log write_iops_log write_lat_log zero_buffers
cmdprio cmdprio_bssplit cmdprio_class cmdprio_percentage fixedbufs force_async hipri hipri_percentage
nonvectored nowait registerfiles sqthread_poll sqthread_poll_cpu uncached userspace_reap thp cmd_type
readfua writefua sg_write_mode stream_id cpuload cpumode cpuchunks exit_on_io_done
""".split()
)

#: Engines of fio builds for other systems (fio HOWTO ``ioengine``), not in Linux's ``fio --enghelp``:
#: a study may be written here to run elsewhere.
OTHER_PLATFORM_ENGINES: frozenset[str] = frozenset({"windowsaio", "solarisaio"})
#: Every engine name storagebench accepts: fio 3.33's (``fio --cmdhelp=ioengine``, ``--enghelp``) and
#: :data:`OTHER_PLATFORM_ENGINES`; ``external:`` engines are gated, not listed.
KNOWN_ENGINES: frozenset[str] = (frozenset(OPTIONS["ioengine"]["values"]) | frozenset(ENGINE_OPTIONS)
                                 | OTHER_PLATFORM_ENGINES)
#: Engines that do local block/file I/O through the kernel (or none at all).
SAFE_ENGINES: frozenset[str] = frozenset(
    "sync psync vsync pvsync pvsync2 libaio io_uring io_uring_cmd posixaio mmap splice null cpuio sg "
    "falloc ftruncate e4defrag filecreate filestat windowsaio solarisaio".split()
)
_NET_ENGINES = frozenset(
    "net netsplice rdma rados rbd gfapi gfapi_async nbd http nfs libiscsi dfs libhdfs".split()
)
#: Engines that change data whatever ``rw`` says (``engines/falloc.c``, ``ftruncate.c``,
#: ``e4defrag.c``, ``filecreate.c``, ``filedelete.c``).
_MODIFYING_ENGINES = frozenset({"falloc", "ftruncate", "e4defrag", "filecreate", "filedelete"})

#: Opt-in name -> (what it allows, the options it covers). A study lists the names it needs
#: under ``allow:``; the write-up records them.
GATES: dict[str, tuple[str, frozenset[str]]] = {
    "exec": ("runs a program or loads code (fio system()s exec_prerun/exec_postrun; ioengine=exec runs "
             "'program'; ioengine=external:/x.so and engine names with '/' are dlopen()ed)",
             frozenset({"exec_prerun", "exec_postrun", "program", "arguments", "grace_time", "std_redirect"})),
    "other_files": ("reads or writes files other than the run's target (directory, opendir walks a whole tree, "
                    "filename_format, mem=mmap:FILE, e4defrag's donor file)",
                    frozenset({"directory", "opendir", "filename_format", "unique_filename", "donorname"})),
    "iolog": ("replays or records I/O logs (read_iolog may name any file or device; replay_redirect sends "
              "every I/O to another device; write_iolog and merge_blktrace_file write files)",
              frozenset({"read_iolog", "read_iolog_chunked", "replay_align", "replay_no_stall", "replay_redirect",
                         "replay_scale", "replay_skip", "replay_time_scale", "write_iolog", "merge_blktrace_file",
                         "merge_blktrace_iters", "merge_blktrace_scalars"})),
    "log_paths": ("writes fio logs outside the run's directory (an absolute path or one with '/')", frozenset()),
    "cgroup": ("creates and joins cgroups (fio cgroup.c)", frozenset({"cgroup", "cgroup_nodelete", "cgroup_weight"})),
    "ioscheduler": ("changes a device's I/O scheduler for the whole host", frozenset({"ioscheduler"})),
    "unlink": ("deletes files (unlink, unlink_each_loop, ioengine=filedelete)",
               frozenset({"unlink", "unlink_each_loop"})),
    "net": ("talks to the network (ioengine=net/rdma/rbd/nbd/..., and their options)",
            frozenset({"hostname", "interface", "listen", "mss", "nodelay", "pingpong", "port", "protocol", "ttl",
                       "window_size", "bindname", "verb", "busy_poll", "clientname", "clustername", "conf", "pool",
                       "rbdname", "touch_objects", "uri", "brick", "volume", "single-instance"})),
    "create": ("changes how fio creates files (create_on_open, create_only, ...)",
               frozenset({"create_fsync", "create_on_open", "create_only", "create_serialize", "allow_file_create"})),
    "allow_mounted_write": ("lets fio write to a mounted device", frozenset({"allow_mounted_write"})),
    "zones": ("drives a zoned device: zone resets discard data",
              frozenset({"zonemode", "zonerange", "zonesize", "zoneskip", "zonecapacity", "zone_reset_frequency",
                         "zone_reset_threshold", "max_open_zones", "job_max_open_zones", "ignore_zone_limits",
                         "read_beyond_wp"})),
    "user": ("switches the job's user or group (uid, gid)", frozenset({"uid", "gid"})),
    "lockmem": ("pins host memory (lockmem)", frozenset({"lockmem"})),
    "profile": ("runs a built-in fio profile, whose jobs are not checked here", frozenset({"profile"})),
    "skip_bad": ("drives an MTD flash device", frozenset({"skip_bad"})),
}
_GATE_OF_OPTION = {opt: gate for gate, (_, opts) in GATES.items() for opt in opts}


def _engine_gate(engine: str) -> str | None:
    low = engine.strip().lower()
    if low == "exec" or low.startswith("external") or "/" in low:
        return "exec"
    if low in _NET_ENGINES:
        return "net"
    if low == "filedelete":
        return "unlink"
    if low in SAFE_ENGINES:
        return None
    return f"ioengine={low}"


def _is_plain_relative(path: str) -> bool:
    return bool(path) and not path.startswith("/") and "/" not in path and path not in (".", "..")


def gate_of(name: str, value: Any = None) -> str | None:
    """The opt-in option ``name=value`` needs, or ``None`` when it is harmless for a measurement.

    Parameters
    ----------
    name : str
        Canonical option name (:func:`canonical_name`).
    value : scalar, optional

    Returns
    -------
    str or None
        A key of :data:`GATES`, ``"ioengine=<name>"`` for an engine storagebench does not know to
        be local and harmless, or the option's own name for an option in no category.
    """
    if name == "ioengine":
        return _engine_gate(str(value or ""))
    if name in ("write_bw_log", "write_iops_log", "write_lat_log", "write_hist_log"):
        text = "" if value is None or value is True else str(value)
        return None if not text or text in ("0", "1") or _is_plain_relative(text) else "log_paths"
    if name == "mem":
        return "other_files" if ":" in str(value or "") else None
    if name in _GATE_OF_OPTION:
        return _GATE_OF_OPTION[name]
    if name in SAFE_OPTIONS:
        return None
    return name


def required_gates(options: Mapping[str, Any]) -> dict[str, list[str]]:
    """Gate -> the ``name=value`` entries of ``options`` (canonical names) that need it."""
    out: dict[str, list[str]] = {}
    for name, value in options.items():
        gate = gate_of(name, value)
        if gate is not None:
            out.setdefault(gate, []).append(name if value is None else f"{name}={value}")
    return out


def rw_base(value: Any) -> str:
    """The direction of an ``rw`` value without its ``:N`` modifier (``"randrw:8"`` -> ``"randrw"``).

    Raises
    ------
    JobFileError
        Not one of :data:`RW_VALUES` (fio itself matches by prefix, so ``randwritex`` would run as
        ``randwrite``; storagebench accepts only the exact words).
    """
    text = str(value).strip()
    base = text.split(":", 1)[0].strip().lower() if text else "read"
    if base not in RW_VALUES:
        raise JobFileError(f"rw must be one of [{', '.join(RW_VALUES)}] (optionally ':N'), got {value!r}")
    return base


def truthy(value: Any) -> bool:
    """Whether a flag option is set: a bare line (``None``), ``True``, or any text but ``0``, ``false``,
    ``no``, ``off`` and the empty string (``unlink``, ``fill_device``)."""
    if value is None or value is True:
        return True
    if value is False:
        return False
    return str(value).strip().lower() not in ("", "0", "false", "no", "off")


def modifying_reason(options: Mapping[str, Any]) -> str | None:
    """Why a workload changes the data of its target, or ``None`` when it only reads.

    Parameters
    ----------
    options : mapping
        One job's options with canonical names (:func:`canonical_options`).

    Returns
    -------
    str or None
        ``"randwrite"``, ``"ioengine=falloc"``, ``"read_iolog replay (the log may hold writes)"``,
        ``"zonemode=zbd (zone resets)"``, ``"unlink"`` ...

    Raises
    ------
    JobFileError
        ``rw`` is not a value fio knows.
    """
    rw = rw_base(options.get("rw", "read"))
    if rw in WRITE_RW:
        return rw
    engine = str(options.get("ioengine") or "").strip().lower()
    if engine in _MODIFYING_ENGINES:
        return f"ioengine={engine}"
    if options.get("read_iolog") not in (None, "") or options.get("read_iolog_chunked") not in (None, ""):
        return "read_iolog replay (the log may hold writes)"
    if options.get("merge_blktrace_file") not in (None, ""):
        return "merge_blktrace_file"
    if str(options.get("zonemode") or "none").strip().lower() not in ("none", ""):
        return f"zonemode={options['zonemode']} (zone resets discard data)"
    for name in ("unlink", "unlink_each_loop"):
        if name in options and truthy(options[name]):
            return name
    return None


# ---------------------------------------------------------------------------------------------
# sizes (fio parse.c: str_to_decimal with kilo=1, get_mult_bytes, __get_mult_bytes)


# ---------------------------------------------------------------------------------------------
# times (fio parse.c: str_to_decimal with kilo=0, get_mult_time)


# ---- filename=: several files ---------------------------------------------------------------------------


def split_filenames(text: str) -> list[str]:
    """The files of a ``filename=`` value: fio separates them with ``:``, and ``\\:`` is a colon in a name.

    Parameters
    ----------
    text : str
        The option's value (``/a:/b``, ``/dev/disk/by-path/pci-0000\\:00``).

    Returns
    -------
    list of str
        The file names, escapes removed, empty parts dropped.

    Notes
    -----
    fio HOWTO, ``filename=str``: several files are separated by ``:``, and a ``:`` that is part of a
    name is escaped with a backslash.
    """
    return [p.replace("\\:", ":") for p in re.split(r"(?<!\\):", text) if p]


def join_filenames(paths: list[str] | tuple[str, ...]) -> str:
    """The ``filename=`` value naming ``paths``: joined with ``:``, each colon in a name escaped as ``\\:``.

    Parameters
    ----------
    paths : sequence of str
        File or device paths.

    Returns
    -------
    str
        The inverse of :func:`split_filenames` (for names without an empty part).
    """
    return ":".join(p.replace(":", "\\:") for p in paths)


#: The unit of a fio option whose value is a plain number in that unit (fio's HOWTO; an option whose
#: value may carry its own multiplier -- ``bs=4k``, ``rate=10m`` -- is not here, since its level text
#: is not a number in one unit). A study factor of that name is labelled with it on an axis
#: (:func:`storagebench.plots.factor_label`) and in a table header
#: (:func:`storagebench.tables.column_display`).
OPTION_UNITS: dict[str, str] = {
    "rate_iops": "I/Os per s", "rate_iops_min": "I/Os per s",
    "iodepth": "outstanding I/Os per job", "iodepth_batch": "I/Os", "iodepth_batch_complete_min": "I/Os",
    "iodepth_batch_complete_max": "I/Os", "iodepth_low": "I/Os", "numjobs": "jobs", "nrfiles": "files",
    "thinktime": "µs", "thinktime_spin": "µs", "thinktime_blocks": "I/Os", "latency_target": "µs",
    "rwmixread": "%", "rwmixwrite": "%", "percentage_random": "%",
}


def option_unit(name: str) -> str | None:
    """The unit of fio option ``name`` (or an alias of it) from :data:`OPTION_UNITS`, or None."""
    if not isinstance(name, str):
        return None
    return OPTION_UNITS.get(ALIASES.get(name, name))
