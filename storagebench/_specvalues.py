"""The values a study spec may hold: its grammar below the :class:`~storagebench._study.Study` model.

One rule per spec value, each a function the model's validators call: fio option names and values
(:func:`check_options`: canonical names, values fio reads as written, sizes spelled so that fio
reads what their author meant, gated options only when the study allows them), targets, times in
seconds (whole microseconds, at most :data:`MAX_RUN_SECONDS`), bounded integers, level kinds and
labels, the bounds on the spec as data (:func:`check_shape`), free text made a name
(:func:`safe_name`) and the ``host_steps`` key (:func:`parse_host_steps`). The rules of fio's own
grammar (sizes, times, option names, directions, gates) are :mod:`storagebench.fio.options`'; this
module applies them to a spec and words the refusal. Each check raises ``ValueError`` (pydantic
turns it into the model's error) naming the value and what is allowed; :func:`parse_host_steps`
raises :class:`~storagebench.errors.StudyError`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ._safeyaml import MAX_YAML_DEPTH, MAX_YAML_NODES, ShapeError, expanded_size
from .errors import JobFileError, StudyError, shown
from .fio import options as fo
from .fio.options import SAFE_NAME_RE, SAFE_NAME_RULE, canonical_name, parse_size

__all__ = [
    "RW_VALUES",
    "RUNNER_OPTIONS",
    "HOST_STEPS",
    "SCHEDULERS",
    "MAX_RUN_SECONDS",
    "MAX_NUMJOBS",
    "MAX_IODEPTH",
    "check_options",
    "check_shape",
    "gate_names",
    "key_text",
    "validation_message",
    "label_problem",
    "level_label",
    "one_type",
    "parse_host_steps",
    "safe_name",
    "seconds",
    "shorten_in",
    "steadystate_problem",
    "steadystate_request",
    "target_checked",
    "whole",
]

#: fio ``rw=`` values (fio HOWTO, ``readwrite=str, rw=str``; :data:`storagebench.fio.options.RW_VALUES`).
RW_VALUES: tuple[str, ...] = fo.RW_VALUES
#: fio options the runner always sets itself (canonical names); a study sets them through its own keys
#: (:func:`storagebench._jobfile.render_jobfile` writes them, the spec refuses them as options or factors).
RUNNER_OPTIONS: dict[str, str] = {
    "filename": "the study's `target` (or --target)",
    "runtime": "the study's `runtime` key (fio's `timeout` is another name for runtime)",
    "ramp_time": "the study's `ramp_time` key",
    "time_based": "nothing: every run is time based",
    "size": "the study's `size` key",
    "group_reporting": "nothing: the runner sets group_reporting=1 so numjobs merge",
    "name": "nothing: the runner names each job after its run id",
}
#: The steps a study's ``host_steps`` may name, each with what it does (applied by
#: :class:`storagebench.hoststeps.HostSteps`). A step is a name, or a
#: one-key mapping ``{name: value}``; each at most once, applied in the order listed.
HOST_STEPS: dict[str, str] = {
    "drop_page_cache": "sync, then drop the host's clean page cache, dentries and inodes "
                       "(/proc/sys/vm/drop_caches; {drop_page_cache: 1|2|3} picks the level, default 3); needs root",
    "drop_file_cache": "evict the run's target files from the page cache (fdatasync + POSIX_FADV_DONTNEED); "
                       "other files' cache stays",
    "scheduler": "{scheduler: NAME}: set the I/O scheduler of the block device behind the run's target (a loop "
                 "device, or a device allowed by allow_devices or allow: [ioscheduler]); put back after the run",
}
#: The I/O schedulers of Linux's multi-queue block layer (``queue/scheduler``; Linux
#: ``Documentation/block/``: ``none``, ``mq-deadline``, ``kyber``, ``bfq``). A device offers a
#: subset (the modules loaded); which is checked on the device when the sweep starts.
SCHEDULERS: tuple[str, ...] = ("none", "mq-deadline", "kyber", "bfq")

#: Longest ``runtime``, ``ramp_time`` or ``timeout`` of one run, s (30 days). fio itself counts up
#: to 2**63-1 µs, and Python cannot wait longer than ``threading.TIMEOUT_MAX`` (~292 years): a
#: single run longer than a month is a unit mistake (ms or µs written as s), not a benchmark.
MAX_RUN_SECONDS = 30 * 86_400
#: Integers anywhere in a spec: fio reads numbers as signed 64-bit (``strtoll``), JSON as 64-bit.
_MIN_INT, _MAX_INT = -(2**63), 2**64 - 1
#: Longest string anywhere in a spec (fio's ``OPT_LEN_MAX``).
_MAX_TEXT = fo.MAX_VALUE_LEN


# ---------------------------------------------------------------------------------------------
# value checks (one rule per fio option the study understands)


_SIZE_OPTIONS = {"size": True, "offset": True, "io_size": True, "filesize": False, "offset_increment": True,
                 "ba": False, "offset_align": False}  # name -> a percentage is allowed
_PERCENT_OPTIONS = ("rwmixread", "rwmixwrite", "percentage_random")
#: Upper bounds for counts fio would otherwise try to honour (a typo of 1e6 jobs forks a million processes).
MAX_NUMJOBS = 4096
MAX_IODEPTH = 65536


def _size_ok(name: str, value: Any, *, percent_ok: bool) -> None:
    problem = fo.size_spelling_problem(value, percent_ok=percent_ok)
    if problem:
        raise ValueError(problem)


def _check_value(name: str, value: Any) -> Any:
    """Check one fio option value (canonical ``name``); return it normalised. Raises ValueError with the rule.

    Every value must also be one fio reads as written (:func:`storagebench.fio.options.check_job_value`:
    no line breaks, ';', '#' or '$'), and sizes and times must be spelled so that fio reads what
    their author meant (:func:`~storagebench.fio.options.size_spelling_problem`).
    """
    if isinstance(value, (dict, list, tuple, set, frozenset)):
        raise ValueError(f"must be a single value, got {shown(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"must be finite, got {shown(value)}")
    if isinstance(value, float) and abs(value) >= 2**63:
        raise ValueError(f"must be within fio's signed 64-bit range, got {shown(value)}")
    if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
        raise ValueError(f"must be within fio's signed 64-bit range (-2**63..2**63-1), got {shown(value)}")
    if value is not None and not isinstance(value, (bool, int, float, str)):
        raise ValueError(f"must be a string, number or boolean, got {type(value).__name__} {shown(value)}")
    try:
        fo.check_job_value(name, value)
    except JobFileError as exc:
        raise ValueError(str(exc).removeprefix(f"option {name}: ")) from None
    if name == "rw":
        if not isinstance(value, str):
            raise ValueError(f"must be one of [{', '.join(RW_VALUES)}], got {shown(value)}")
        try:
            fo.rw_base(value)
        except JobFileError:
            raise ValueError(f"must be one of [{', '.join(RW_VALUES)}] (optionally ':N'), got {shown(value)}") from None
        return value.strip()
    if name == "bs":
        # fio: bs=int[,int][,int] for reads, writes, trims
        parts = str(value).split(",") if isinstance(value, str) else [value]
        if isinstance(value, str) and not any(p.strip() for p in parts):  # fio: "failed parsing bs="
            raise ValueError(f"must be a positive block size (fio bs=int[,int][,int]), got {shown(value)}")
        for part in parts:
            if part == "" and isinstance(value, str):
                continue
            _size_ok(name, part.strip() if isinstance(part, str) else part, percent_ok=False)
            if parse_size(part.strip() if isinstance(part, str) else part) == 0:
                raise ValueError(f"must be a positive block size, got {shown(value)}")
        return value
    if name in ("iodepth", "numjobs"):
        top = MAX_NUMJOBS if name == "numjobs" else MAX_IODEPTH
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
            raise ValueError(f"must be an integer from 1 to {top:,}, got {shown(value)}")
        return value
    if name in _PERCENT_OPTIONS:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 100:
            raise ValueError(f"must be a number from 0 to 100 (percent), got {shown(value)}")
        return value
    if name == "direct":
        if value in (0, 1) and not isinstance(value, float):
            return int(value)
        raise ValueError(f"must be 0 or 1, got {shown(value)}")
    if name in fo.BOOL_OPTIONS or name in fo.FLAG_OPTIONS:
        # fio 3.33 parse.c: a boolean takes 0 or 1 ("max value out of range: 2 (1 max)"), not true/yes;
        # only the "empty or boolean" ones may be a bare line
        if isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)) or value in ("0", "1"):
            return value
        if value is None and name in fo.FLAG_OPTIONS:
            return value
        raise ValueError(f"is an fio boolean: must be 0 or 1 (or true/false), got {shown(value)}")
    if value is None and name in fo.OPTIONS:
        raise ValueError(f"needs a value (fio: 'Option {name} requires an argument'), got an empty value")
    if name == "ioengine":
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"must be an fio ioengine name, got {shown(value)}")
        low = value.strip().lower()
        engines = fo.KNOWN_ENGINES
        if low not in engines and not low.startswith("external") and "/" not in low:
            raise ValueError(f"must be one of [{', '.join(sorted(engines))}], got {shown(value)}")
        return value.strip()
    if name in _SIZE_OPTIONS:
        _size_ok(name, value, percent_ok=_SIZE_OPTIONS[name])
        return value
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise ValueError(f"must be a string, number or boolean, got {shown(value)}")


def gate_names() -> list[str]:
    """The names of fio's opt-in gates (:data:`storagebench.fio.options.GATES`), sorted: for messages."""
    return sorted(fo.GATES)


def check_options(options: Mapping[str, Any], where: str, *, allow: frozenset[str]) -> dict[str, Any]:
    """Canonical names known to fio, not set by the runner, valid values, and only opted-in host effects.

    An option in no gate of :data:`storagebench.fio.options.GATES` and not known to be harmless is
    refused unless the study's ``allow`` names it (or its gate).
    """
    out: dict[str, Any] = {}
    for name, value in options.items():
        if not isinstance(name, str):
            raise ValueError(f"{where}: option names must be strings, got {shown(name)}")
        if not SAFE_NAME_RE.fullmatch(name):
            raise ValueError(f"{where}: {shown(name)} is not an fio option name (fio's names are {SAFE_NAME_RULE})")
        try:
            canon = canonical_name(name)
        except JobFileError:
            try:
                canonical_name(name, where=where)
            except JobFileError as exc:
                raise ValueError(str(exc)) from None
        spelled_as = name if canon == name else f"{name} (fio's {canon})"
        if canon in RUNNER_OPTIONS:
            raise ValueError(f"{where}.{spelled_as}: set by the runner; use {RUNNER_OPTIONS[canon]}")
        if canon in out:
            raise ValueError(f"{where}.{name}: the same fio option as another key here ({canon}); set it once")
        try:
            out[canon] = _check_value(canon, value)
        except ValueError as exc:
            raise ValueError(f"{where}.{spelled_as}: {shorten_in(str(exc), value)}") from None
        gate = fo.gate_of(canon, out[canon])
        if gate is not None and gate not in allow and canon not in allow:
            why = fo.GATES[gate][0] if gate in fo.GATES else (
                "is not known to storagebench to be harmless for a measurement")
            raise ValueError(
                f"{where}.{spelled_as}={shown(value)}: it {why}; refused unless the study says 'allow: [{gate}]' "
                "(the write-up records what was allowed)"
            )
    return out


def shorten_in(message: str, value: Any) -> str:
    """``message`` with a long ``repr(value)`` in it shortened (fio-grammar messages quote the whole value)."""
    if isinstance(value, str) and len(value) > 60:
        return message.replace(repr(value), shown(value))
    return message


def target_checked(value: Any, where: str) -> str:
    """``value`` if it can be a target (a path or a target name fio reads as written); else ValueError."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{where}must be a path or a target name, got {shown(value)}")
    try:
        fo.check_job_value("filename", value)
    except JobFileError as exc:
        raise ValueError(where + str(exc).removeprefix("option filename: ")) from None
    return value


def key_text(key: Any) -> str:
    """A key as a message shows it: as written when it is a safe name, else quoted and shortened."""
    return key if isinstance(key, str) and SAFE_NAME_RE.fullmatch(key) else shown(key, 40)


def check_shape(data: Any) -> None:
    """Bounds on the spec as data, before any other check reads it.

    At most :data:`~storagebench._safeyaml.MAX_YAML_NODES` values with shared references counted
    each time (a billion-laughs mapping built in Python), no container that contains itself, at
    most :data:`~storagebench._safeyaml.MAX_YAML_DEPTH` levels, every string at most 4096
    characters and every integer within 64 bits, so that no later check or message can recurse,
    allocate or convert without bound.

    Raises
    ------
    ValueError
        Naming the key path of the first value out of bounds.
    """
    try:
        expanded_size(data, max_nodes=MAX_YAML_NODES, max_depth=MAX_YAML_DEPTH)
    except ShapeError as whole:  # out of bounds: each top-level value alone, to name the key
        for key, value in data.items() if isinstance(data, dict) else ():
            try:
                expanded_size(value, max_nodes=MAX_YAML_NODES, max_depth=MAX_YAML_DEPTH)
            except ShapeError as exc:
                raise ValueError(f"{key_text(key)}: {exc}; a study spec is a few hundred values") from None
        raise ValueError(f"the spec: {whole}; a study spec is a few hundred values") from None
    stack: list[tuple[Any, str]] = [(data, "")]
    seen: set[int] = set()
    while stack:
        obj, path = stack.pop()
        if isinstance(obj, (dict, list, tuple, set, frozenset)):
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if isinstance(obj, dict):
                for k, v in obj.items():
                    key = key_text(k)
                    stack.append((k, f"{path}.<key {shown(k, 40)}>" if path else f"<key {shown(k, 40)}>"))
                    stack.append((v, f"{path}.{key}" if path else key))
            else:
                stack.extend((v, f"{path}[{i}]") for i, v in enumerate(obj))
        elif isinstance(obj, int) and not isinstance(obj, bool) and not _MIN_INT <= obj <= _MAX_INT:
            raise ValueError(f"{path or 'the spec'}: {shown(obj)} is beyond 64 bits; numbers here are fio's "
                             f"(signed 64-bit) or the seed (0..2**64-1)")
        elif isinstance(obj, str) and len(obj) > _MAX_TEXT:
            raise ValueError(f"{path or 'the spec'}: a string of {len(obj):,} characters, got {shown(obj)}; "
                             f"the limit is {_MAX_TEXT:,} (fio's longest option value)")


def seconds(value: Any, key: str, *, zero_ok: bool) -> Any:
    """A time in seconds as the spec's ``runtime``/``ramp_time``/``timeout`` take it: a real number,
    finite, > 0 (or >= 0 with ``zero_ok``), at most :data:`MAX_RUN_SECONDS`, in whole µs."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        hint = "fio suffixes such as 2m or 500ms are not read here: write 120 or 0.5"
        if isinstance(value, str) and re.fullmatch(r"[-+]?[0-9._]+(e[-+]?[0-9]+)?", value.strip(), re.I):
            hint = "YAML reads 1e3 and quoted numbers as text: write 1000 or 1.0e+3"
        raise ValueError(f"must be a number of seconds ({hint}), got {shown(value)}")
    if not math.isfinite(value):
        raise ValueError(f"must be a finite number of seconds, got {shown(value)}")
    if value < 0 or (value == 0 and not zero_ok):
        raise ValueError(f"must be {'>= 0' if zero_ok else '> 0'} s, got {shown(value)}")
    if value > MAX_RUN_SECONDS:
        raise ValueError(f"must be at most {MAX_RUN_SECONDS:,} s (30 days; a longer run is a unit mistake), "
                         f"got {shown(value)}")
    try:
        fo.render_time(float(value))
    except ValueError:
        raise ValueError(f"fio counts time in whole microseconds, got {shown(value)} s") from None
    return value


def whole(value: Any, key: str, low: int, high: int, what: str) -> int:
    """An integer from ``low`` to ``high``; a float (YAML reads ``1e9`` as one) or a bool is refused."""
    if isinstance(value, bool) or not isinstance(value, int):
        hint = ""
        if isinstance(value, float):
            hint = " (YAML reads a number with '.' such as 1.0e+9 as a float: write the digits)"
        elif isinstance(value, str) and re.fullmatch(r"[-+]?[0-9._]+(e[-+]?[0-9]+)?", value.strip(), re.I):
            hint = " (YAML reads 1e9 and quoted numbers as text: write the digits)"
        raise ValueError(f"must be an integer from {low:,} to {high:,} ({what}), got "
                         f"{type(value).__name__} {shown(value)}{hint}")
    if not low <= value <= high:
        raise ValueError(f"must be an integer from {low:,} to {high:,} ({what}), got {shown(value)}")
    return value


def _level_kind(level: Any) -> str:
    if isinstance(level, dict):
        return "mapping"
    if isinstance(level, bool):
        return "boolean"
    if isinstance(level, int):
        return "integer"
    if isinstance(level, float):
        return "float"
    if isinstance(level, str):
        return "string"
    return "null" if level is None else type(level).__name__


def level_label(level: Any) -> Any:
    """A level's label: a mapping level's ``name``, else the level itself."""
    return level["name"] if isinstance(level, dict) else level


def label_problem(label: Any, *, bool_ok: bool = False) -> str | None:
    """Why ``label`` cannot name a level (a mapping level's ``name``, a study factor's scalar level)."""
    if isinstance(label, bool):
        return None if bool_ok else f"must be a name ({SAFE_NAME_RULE}) or an integer, got {shown(label)}"
    if isinstance(label, int):
        return None if -(2**63) <= label < 2**63 else f"must fit in 64 bits, got {shown(label)}"
    if isinstance(label, float):
        return None if math.isfinite(label) else f"must be finite, got {shown(label)}"
    if not isinstance(label, str) or not SAFE_NAME_RE.fullmatch(label):
        return f"must be {SAFE_NAME_RULE} (it names a table value and a figure label), got {shown(label)}"
    return None


def one_type(where: str, values: list[Any], what: str) -> None:
    """Refuse ``values`` of more than one type: ``[1, '1']``, ``[1, True]`` and ``[1, 1.0]`` are two
    levels to Python, one to fio or a table column."""
    first: dict[str, tuple[int, Any]] = {}
    for i, v in enumerate(values):
        first.setdefault(_level_kind(v), (i, v))
    if len(first) > 1:
        found = ", ".join(f"{kind} {shown(v, 30)} at [{i}]" for kind, (i, v) in first.items())
        raise ValueError(f"{where}: {what} must all be of one type (all strings, all integers, all floats, all "
                         f"booleans or all mappings), got {found}; write them alike, e.g. all quoted")


def safe_name(text: str) -> str:
    """A name that :data:`~storagebench.fio.options.SAFE_NAME_RE` accepts, made from free text.

    For translators whose source names levels freely (Iometer's access specifications):
    ``"4K; 70% Read; 100% random"`` -> ``"4K_70pct_Read_100pct_random"``. Runs of other
    characters become one ``_``; at most 64 characters; ``"x"`` when nothing is left.
    """
    out = re.sub(r"[^A-Za-z0-9_.+-]+", "_", str(text).replace("%", "pct")).lstrip("_.+-")
    return out[: fo.MAX_NAME_LEN].rstrip("_") or "x"


# ---------------------------------------------------------------------------------------------
# host_steps


def parse_host_steps(value: Any) -> list[str | dict[str, Any]]:
    """A study's ``host_steps``, checked and in one spelling.

    Parameters
    ----------
    value : list
        Entries of :data:`HOST_STEPS`: ``drop_page_cache`` (or ``{drop_page_cache: LEVEL}``, LEVEL 1, 2
        or 3), ``drop_file_cache``, ``{scheduler: NAME}`` (NAME one of :data:`SCHEDULERS`).

    Returns
    -------
    list
        The steps in order; ``{drop_page_cache: 3}`` is written ``drop_page_cache`` (one spelling per
        step, so that the spec hash does not depend on it).

    Raises
    ------
    StudyError
        Not a list, an unknown step, a bad value, or a step named twice; the message names the entry
        (``host_steps[1]``) and what is allowed.
    """
    names = ", ".join(HOST_STEPS)
    if not isinstance(value, list):
        raise StudyError(f"host_steps: must be a list of steps ([{names}]), e.g. [drop_page_cache, {{scheduler: none}}], "
                         f"got {shown(value)}")
    out: list[str | dict[str, Any]] = []
    seen: set[str] = set()
    for i, entry in enumerate(value):
        where = f"host_steps[{i}]"
        if isinstance(entry, str):
            name, arg, has_arg = entry, None, False
        elif isinstance(entry, dict) and len(entry) == 1:
            ((name, arg),) = entry.items()
            has_arg = True
        else:
            raise StudyError(f"{where}: a step is a name or a one-key mapping {{name: value}} of [{names}], "
                             f"got {shown(entry)}")
        if name not in HOST_STEPS:
            raise StudyError(f"{where}: unknown step {shown(name)}; must be one of [{names}]")
        if name in seen:
            raise StudyError(f"{where}: {name} is named twice; each step once")
        seen.add(name)
        if name == "drop_page_cache":
            if has_arg and (isinstance(arg, bool) or arg not in (1, 2, 3)):
                raise StudyError(f"{where}.drop_page_cache: the level must be 1 (page cache), 2 (dentries and "
                                 f"inodes) or 3 (both), got {shown(arg)}")
            out.append(name if not has_arg or arg == 3 else {name: arg})
        elif name == "drop_file_cache":
            if has_arg:
                raise StudyError(f"{where}: drop_file_cache takes no value (it drops the run's target files), "
                                 f"got {shown(entry)}")
            out.append(name)
        else:
            if not has_arg:
                raise StudyError(f"{where}: scheduler needs the scheduler's name, {{scheduler: NAME}} with NAME "
                                 f"one of [{', '.join(SCHEDULERS)}]")
            if not isinstance(arg, str) or arg not in SCHEDULERS:
                raise StudyError(f"{where}.scheduler: must be one of [{', '.join(SCHEDULERS)}], got {shown(arg)}")
            out.append({name: arg})
    return out


#: fio's steady-state options (canonical names): the rule, its window and the wait before the window.
STEADYSTATE_OPTIONS: tuple[str, ...] = ("steadystate", "steadystate_duration", "steadystate_ramp_time")
#: fio 3.33's default rule when only ``steadystate_duration`` is set (``fio --cmdhelp=steadystate``).
FIO_DEFAULT_STEADYSTATE = "iops_slope:0.01%"


def steadystate_problem(values: Mapping[str, list[Any]], runtime_s: float) -> str | None:
    """Why a study's fio steady-state options cannot do what they say, or ``None``.

    fio stops a job when its IOPS or bandwidth has been steady (``steadystate=iops:10%``, ``bw_slope:1%`` ...)
    over a window of ``steadystate_duration`` seconds, sampled once a second after
    ``steadystate_ramp_time`` (fio HOWTO, *Steady state*; ``steadystate.c``). Refused: a rule without a
    window (fio's ``ss_dur`` defaults to 0, which switches detection off, so the rule would be recorded
    but never applied), a window plus its ramp longer than the study's ``runtime`` (fio could never stop
    early, and never reports steady), and a slope rule over a window of less than 2 s (one sample has no
    slope: fio 3.33 then prints ``-nan``, which is not JSON, and calls the job steady).

    Parameters
    ----------
    values : mapping of str to list
        Canonical option name -> every value the spec gives it (``fixed``, factor levels, mapping levels);
        only :data:`STEADYSTATE_OPTIONS` are read. Already checked against fio's grammar.
    runtime_s : float
        The study's ``runtime``, s.
    """
    rules = [str(v) for v in values.get("steadystate", [])]
    durs = [fo.parse_time_us(v) / 1e6 for v in values.get("steadystate_duration", [])]
    ramps = [fo.parse_time_us(v) / 1e6 for v in values.get("steadystate_ramp_time", [])]
    if not (rules or durs or ramps):
        return None
    if not durs or min(durs) <= 0:
        return ("steadystate: needs steadystate_duration (ss_dur) > 0, the window in s over which fio judges "
                "steadiness; fio's default 0 switches detection off, got "
                + (", ".join(shown(v) for v in values.get("steadystate_duration", [])) or "none"))
    longest = max(durs) + (max(ramps) if ramps else 0.0)
    if longest > runtime_s:
        return (f"steadystate_duration + steadystate_ramp_time is {longest:g} s, longer than runtime {runtime_s:g} s: "
                "fio could never judge the run steady; make runtime at least the window plus its ramp")
    slope = [r for r in (rules or [FIO_DEFAULT_STEADYSTATE]) if r.split(":", 1)[0].endswith("_slope")]
    if slope and min(durs) < 2:
        return (f"steadystate={shown(slope[0])}: a slope needs a window of at least 2 s (one sample a second), "
                f"got steadystate_duration {min(durs):g} s; fio 3.33 writes -nan for the slope of one sample")
    return None


def steadystate_request(options: Mapping[str, Any], runtime_s: float) -> dict[str, Any] | None:
    """The steady-state rule a run's fio options ask for, as ``provenance.json`` records it, or ``None``.

    Parameters
    ----------
    options : mapping
        The run's fio options (any spelling fio accepts: ``ss``, ``ss_dur``, ``ss_ramp``).
    runtime_s : float
        The study's ``runtime``, s: the longest the run may take; fio stops it earlier once steady.

    Returns
    -------
    dict or None
        ``rule`` (fio's ``steadystate=``, or fio's default when only the window is set), ``duration_s``
        (the window), ``ramp_time_s`` (the wait before it), ``runtime_s``; ``None`` when the run has no
        ``steadystate_duration`` (fio does not detect steady state then).
    """
    canon: dict[str, Any] = {}
    for k, v in options.items():
        try:
            name = canonical_name(k)
        except JobFileError:
            continue
        if name in STEADYSTATE_OPTIONS:
            canon[name] = v
    dur = canon.get("steadystate_duration")
    if dur is None or fo.parse_time_us(dur) <= 0:
        return None
    return {"rule": str(canon.get("steadystate", FIO_DEFAULT_STEADYSTATE)),
            "duration_s": fo.parse_time_us(dur) / 1e6,
            "ramp_time_s": fo.parse_time_us(canon.get("steadystate_ramp_time", 0)) / 1e6,
            "runtime_s": float(runtime_s)}


# ---------------------------------------------------------------------------------------------
# the message of a spec's errors


def _loc_text(loc: tuple[Any, ...]) -> str:
    parts = []
    for x in loc:
        if isinstance(x, int):
            parts.append(f"[{x}]")
        else:
            parts.append(("." if parts else "") + key_text(x))
    return "".join(parts)


def validation_message(exc: Any, allowed: Iterable[str]) -> str:
    """One message for pydantic's errors of a spec: each error's key path, what is wrong and the value given.

    Parameters
    ----------
    exc : pydantic.ValidationError
    allowed : iterable of str
        The spec's keys (named when a key is unknown).
    """
    msgs = []
    for err in exc.errors():
        loc = _loc_text(err["loc"])
        kind = err.get("type", "")
        if kind == "extra_forbidden":
            allowed_keys = ", ".join(allowed)
            msgs.append(f"{loc}: unknown key (allowed keys: [{allowed_keys}]), got {shown(err.get('input'))}")
            continue
        if kind == "missing":
            msgs.append(f"{loc}: required key is missing")
            continue
        msg = str(err.get("msg", ""))
        msg = msg.removeprefix("Value error, ")
        if kind == "value_error" and msg.startswith(("fixed", "factors", "host_steps", "throttle", "precision")):
            msgs.append(msg)  # our own messages carry their full key path
        elif kind == "value_error":
            msgs.append(f"{loc}: {msg}" if loc else msg)
        else:
            msgs.append(f"{loc}: {msg}, got {shown(err.get('input'))}")
    return "; ".join(msgs)
