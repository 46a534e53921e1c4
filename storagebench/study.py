"""Study spec (YAML) -> typed :class:`Study` -> :class:`RunPlan` of fio runs.

A study is a full factorial grid over *factors* (fio options such as ``rw``, ``bs``,
``iodepth``, ``numjobs``, or the study's own factors such as ``stripe_width``), repeated
``repetitions`` times and run in a seeded random order so that drift over time (thermal,
garbage collection, a neighbour's load) is not confounded with a factor.

A factor level is a scalar (``iodepth: [1, 2, 4]``) or a mapping with a ``name`` that sets
several fio options at once, e.g. the six patterns of seed 002::

    factors:
      pattern:
        - {name: 4k_randread, rw: randread, bs: 4k}
        - {name: 8k_7030, rw: randrw, rwmixread: 70, bs: 8k}

Every key, value and option is checked when the spec is loaded; a bad one raises
:class:`~storagebench.errors.StudyError` naming the key, the value and what is allowed.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

import orjson
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .errors import JobFileError, StudyError
from .fio import options as fo
from .fio.options import KNOWN_OPTIONS, canonical_name, parse_size
from .jobfile import RUNNER_OPTIONS

__all__ = [
    "RW_VALUES",
    "FIO_FACTORS",
    "CLIENTS_FACTOR",
    "Study",
    "RunPoint",
    "RunPlan",
    "load_study",
]

#: fio ``rw=`` values (fio HOWTO, ``readwrite=str, rw=str``; :data:`storagebench.fio.options.RW_VALUES`).
RW_VALUES: tuple[str, ...] = fo.RW_VALUES
#: The factor that sets how many of the study's ``hosts`` run each point (``hosts[:clients]``).
CLIENTS_FACTOR = "clients"
#: Factor names with a meaning to fio (``target`` picks the file/device).
FIO_FACTORS: tuple[str, ...] = (
    "rw", "bs", "rwmixread", "percentage_random", "iodepth", "numjobs", "ioengine", "direct", "target",
)
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_Scalar = Union[bool, int, float, str]


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
    if isinstance(value, (dict, list, tuple, set)):
        raise ValueError(f"must be a single value, got {value!r}")
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        raise ValueError(f"must be finite, got {value!r}")
    try:
        fo.check_job_value(name, value)
    except JobFileError as exc:
        raise ValueError(str(exc).removeprefix(f"option {name}: ")) from None
    if name == "rw":
        if not isinstance(value, str):
            raise ValueError(f"must be one of [{', '.join(RW_VALUES)}], got {value!r}")
        try:
            fo.rw_base(value)
        except JobFileError:
            raise ValueError(f"must be one of [{', '.join(RW_VALUES)}] (optionally ':N'), got {value!r}") from None
        return value.strip()
    if name == "bs":
        # fio: bs=int[,int][,int] for reads, writes, trims
        parts = str(value).split(",") if isinstance(value, str) else [value]
        for part in parts:
            if part == "" and isinstance(value, str):
                continue
            _size_ok(name, part.strip() if isinstance(part, str) else part, percent_ok=False)
            if parse_size(part.strip() if isinstance(part, str) else part) == 0:
                raise ValueError(f"must be a positive block size, got {value!r}")
        return value
    if name in ("iodepth", "numjobs"):
        top = MAX_NUMJOBS if name == "numjobs" else MAX_IODEPTH
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
            raise ValueError(f"must be an integer from 1 to {top:,}, got {value!r}")
        return value
    if name in _PERCENT_OPTIONS:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 100:
            raise ValueError(f"must be a number from 0 to 100 (percent), got {value!r}")
        return value
    if name == "direct":
        if value in (0, 1) and not isinstance(value, float):
            return int(value)
        raise ValueError(f"must be 0 or 1, got {value!r}")
    if name == "ioengine":
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"must be an fio ioengine name, got {value!r}")
        low = value.strip().lower()
        engines = fo.KNOWN_ENGINES
        if low not in engines and not low.startswith("external") and "/" not in low:
            raise ValueError(f"must be one of [{', '.join(sorted(engines))}], got {value!r}")
        return value.strip()
    if name in _SIZE_OPTIONS:
        _size_ok(name, value, percent_ok=_SIZE_OPTIONS[name])
        return value
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise ValueError(f"must be a string, number or boolean, got {value!r}")


def _gate_names() -> list[str]:
    return sorted(fo.GATES)


def _check_options(options: Mapping[str, Any], where: str, *, allow: frozenset[str]) -> dict[str, Any]:
    """Canonical names known to fio, not set by the runner, valid values, and only opted-in host effects.

    An option in no gate of :data:`storagebench.fio.options.GATES` and not known to be harmless is
    refused unless the study's ``allow`` names it (or its gate).
    """
    out: dict[str, Any] = {}
    for name, value in options.items():
        if not isinstance(name, str):
            raise ValueError(f"{where}: option names must be strings, got {name!r}")
        try:
            canon = canonical_name(name)
        except JobFileError:
            try:
                canonical_name(name, where=where)
            except JobFileError as exc:
                raise ValueError(str(exc)) from None
        shown = name if canon == name else f"{name} (fio's {canon})"
        if canon in RUNNER_OPTIONS:
            raise ValueError(f"{where}.{shown}: set by the runner; use {RUNNER_OPTIONS[canon]}")
        if canon in out:
            raise ValueError(f"{where}.{name}: the same fio option as another key here ({canon}); set it once")
        try:
            out[canon] = _check_value(canon, value)
        except ValueError as exc:
            raise ValueError(f"{where}.{shown}: {exc}") from None
        gate = fo.gate_of(canon, out[canon])
        if gate is not None and gate not in allow and canon not in allow:
            why = fo.GATES[gate][0] if gate in fo.GATES else (
                "is not known to storagebench to be harmless for a measurement")
            raise ValueError(
                f"{where}.{shown}={value!r}: it {why}; refused unless the study says 'allow: [{gate}]' "
                "(the write-up records what was allowed)"
            )
    return out


def _canonical(obj: Any) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)


# ---------------------------------------------------------------------------------------------
# the spec


class Study(BaseModel):
    """A storage performance study: a factor grid over fio options, repeated, in random order.

    Attributes
    ----------
    name : str
        Study name; also its directory under the results root (letters, digits, ``._-``).
    description : str
        What the study asks, in a sentence or two.
    factors : dict of str to list
        Factor name -> levels. A factor named after a fio option (``rw``, ``bs``,
        ``rwmixread``, ``percentage_random``, ``iodepth``, ``numjobs``, ``ioengine``,
        ``direct`` or any other fio option) sets that option; ``target`` picks the target
        (a path, or a name the runner's ``targets`` maps to a path); any other name is a study
        factor recorded with the run (``stripe_width``). A level may be a mapping with a
        ``name`` and fio options, which sets several options at once.
    fixed : dict of str to scalar
        fio options every run gets (``ioengine: libaio``); names checked against fio's.
    runtime : float
        Measured time per run, s (fio ``runtime``, with ``time_based``).
    ramp_time : float
        Warm-up per run before measurement starts, s (fio ``ramp_time``).
    size : str or int, optional
        fio ``size`` (``256m``): the region of the file/device each job touches.
    repetitions : int
        Runs per grid point.
    seed : int
        Seed of the randomised run order.
    timeout : float, optional
        Wall-clock limit per run, s; default :attr:`timeout_s`.
    target : str, optional
        Default fio ``filename`` when the runner is not given one.
    hosts : list of str or str, optional
        fio servers (``host[,port]`` as ``fio --client`` takes them) or a path to a fio host
        file, for client/server studies.
    clients (factor)
        The one factor the runner itself interprets: level ``n`` (a positive int, at most
        ``len(hosts)``) runs the point on the first ``n`` hosts (``hosts[:n]``) at the same
        time. It is valid only with ``hosts``; like any factor it enters the run id and the
        seeded run order, so a 1..4-client sweep is one study, randomised across client
        counts (load is not confounded with drift over time), resumed as one.
    allow : list of str
        Named opt-ins for fio options that touch more than the run's own target: a gate of
        :data:`storagebench.fio.options.GATES` (``exec``, ``other_files``, ``iolog``, ``log_paths``,
        ``cgroup``, ``ioscheduler``, ``unlink``, ``net``, ``create``, ``allow_mounted_write``,
        ``zones``, ``user``, ``lockmem``, ``profile``), an option's own name, or ``ioengine=NAME``.
        Everything else that is not known to be harmless for a measurement is refused; the
        write-up records what was allowed.
    allow_exec : bool
        Deprecated spelling of ``allow: [exec]``.
    allow_remote : dict of str to list of str
        For client/server studies: server (as written in ``hosts``, or ``"*"``) -> target paths on
        that server the user vouches for. A remote server's files cannot be inspected from here, so
        a block-device target (``/dev/...``) or a writing workload on a remote server is refused
        unless named here; the write-up records it. Servers on this machine get the local checks.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str = ""
    factors: dict[str, list[Any]] = Field(default_factory=dict)
    fixed: dict[str, Optional[_Scalar]] = Field(default_factory=dict)
    runtime: float = Field(60.0, gt=0)
    ramp_time: float = Field(0.0, ge=0)
    size: Optional[Union[int, str]] = None
    repetitions: int = Field(1, ge=1)
    seed: int = 0
    timeout: Optional[float] = Field(None, gt=0)
    target: Optional[str] = None
    hosts: Optional[Union[list[str], str]] = None
    allow: list[str] = Field(default_factory=list)
    allow_exec: bool = False
    allow_remote: dict[str, list[str]] = Field(default_factory=dict)

    # -- validation -----------------------------------------------------------------------

    @model_validator(mode="before")
    @classmethod
    def _canonical_option_names(cls, data: Any) -> Any:
        """fio option aliases in ``fixed``, factor names and mapping levels become fio's canonical names.

        fio obeys the last spelling of an option whatever the spelling (``readwrite`` after ``rw``),
        so every later check must see one name per option.
        """
        if not isinstance(data, dict):
            return data
        data = dict(data)

        def canon(mapping: Any, where: str, keep: tuple[str, ...] = ()) -> Any:
            if not isinstance(mapping, dict):
                return mapping
            out: dict[Any, Any] = {}
            spelled: dict[Any, Any] = {}
            for key, value in mapping.items():
                new = fo.ALIASES.get(key, key) if isinstance(key, str) and key not in keep else key
                if new in out:
                    raise ValueError(f"{where}: {spelled[new]!r} and {key!r} are the same fio option ({new}); "
                                     "set it once")
                out[new] = value
                spelled[new] = key
            return out

        if "fixed" in data:
            data["fixed"] = canon(data["fixed"], "fixed")
        factors = data.get("factors")
        if isinstance(factors, dict):
            factors = canon(factors, "factors", keep=(CLIENTS_FACTOR, "target"))
            data["factors"] = {
                name: [canon(level, f"factors.{name}[{i}]", keep=("name", "target")) for i, level in enumerate(levels)]
                if isinstance(levels, list) else levels
                for name, levels in factors.items()
            }
        return data

    @field_validator("allow")
    @classmethod
    def _allow_ok(cls, v: list[str]) -> list[str]:
        out = []
        for entry in v:
            if not isinstance(entry, str):
                raise ValueError(f"each entry must be a string, got {entry!r}")
            if entry in fo.GATES or re.fullmatch(r"ioengine=[A-Za-z0-9_-]+", entry):
                out.append(entry)
            elif entry in KNOWN_OPTIONS:
                out.append(canonical_name(entry))
            else:
                raise ValueError(
                    f"each entry must be one of [{', '.join(_gate_names())}], an fio option name or "
                    f"'ioengine=NAME', got {entry!r}"
                )
        return out

    @field_validator("allow_remote")
    @classmethod
    def _allow_remote_ok(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
        for host, paths in v.items():
            for p in paths:
                if not isinstance(p, str) or not p or re.search(r"[\x00-\x1f\x7f]", p):
                    raise ValueError(f"{host}: each path must be a non-empty string without control characters, "
                                     f"got {p!r}")
        return v

    @property
    def allowed(self) -> frozenset[str]:
        """The opt-ins in force: ``allow`` plus ``exec`` when ``allow_exec`` is set."""
        return frozenset(self.allow) | (frozenset({"exec"}) if self.allow_exec else frozenset())

    @field_validator("name")
    @classmethod
    def _name_ok(cls, v: str) -> str:
        if not _NAME_RE.match(v):
            raise ValueError(f"must be letters, digits, '.', '_' or '-' (a directory name), got {v!r}")
        return v

    @field_validator("size")
    @classmethod
    def _size_ok(cls, v: Any) -> Any:
        if v is None:
            return v
        problem = fo.size_spelling_problem(v, percent_ok=True)
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("hosts")
    @classmethod
    def _hosts_ok(cls, v: Any) -> Any:
        if isinstance(v, list):
            if not v:
                raise ValueError("must list at least one fio server (host[,port]), got []")
            for h in v:
                if not h.strip() or " " in h.strip():
                    raise ValueError(f"each entry must be host[,port] as fio --client takes it, got {h!r}")
        return v

    @model_validator(mode="after")
    def _grid_ok(self) -> Study:
        fixed = _check_options(self.fixed, "fixed", allow=self.allowed)
        set_by: dict[str, str] = {k: "fixed" for k in fixed}
        for factor, levels in self.factors.items():
            where = f"factors.{factor}"
            if not isinstance(levels, list) or not levels:
                raise ValueError(f"{where}: must be a non-empty list of levels, got {levels!r}")
            if factor in RUNNER_OPTIONS:
                raise ValueError(f"{where}: set by the runner; use {RUNNER_OPTIONS[factor]}")
            is_option = factor in KNOWN_OPTIONS
            labels = []
            for i, level in enumerate(levels):
                if isinstance(level, dict):
                    if "name" not in level or not isinstance(level["name"], (str, int)):
                        raise ValueError(
                            f"{where}[{i}]: a mapping level needs a 'name' (string) plus fio options, got {level!r}"
                        )
                    opts = {k: v for k, v in level.items() if k not in ("name", "target")}
                    checked = _check_options(opts, f"{where}[{i}]", allow=self.allowed)
                    if is_option:
                        raise ValueError(
                            f"{where}[{i}]: {factor!r} is a fio option, so its levels must be values; "
                            "put mapping levels under a study factor name such as 'pattern'"
                        )
                    for opt in checked:
                        owner = set_by.get(opt)
                        if owner is not None and owner != factor:
                            raise ValueError(f"{where}[{i}].{opt}: also set by {owner}; set each option once")
                        set_by[opt] = factor
                    labels.append(level["name"])
                    continue
                if factor == "target":
                    if not isinstance(level, str) or not level:
                        raise ValueError(f"{where}[{i}]: must be a path or a target name, got {level!r}")
                elif is_option:
                    _check_options({factor: level}, "factors", allow=self.allowed)
                    owner = set_by.get(factor)
                    if owner is not None and owner != factor:
                        raise ValueError(f"{where}: also set by {owner}; set each option once")
                    set_by[factor] = factor
                elif not isinstance(level, (str, int, float, bool)):
                    raise ValueError(f"{where}[{i}]: must be a string, number or mapping, got {level!r}")
                labels.append(level)
            dupes = sorted({str(x) for x in labels if labels.count(x) > 1})
            if dupes:
                raise ValueError(f"{where}: levels must be distinct, got {dupes} more than once")
        self._clients_ok()
        return self

    def _clients_ok(self) -> None:
        """The ``clients`` factor: positive int levels, only with ``hosts``, at most len(hosts)."""
        levels = self.factors.get(CLIENTS_FACTOR)
        if levels is None:
            return
        where = f"factors.{CLIENTS_FACTOR}"
        if self.hosts is None:
            raise ValueError(
                f"{where}: runs level n on the first n of the study's hosts, so it needs 'hosts' "
                f"(fio servers host[,port] or a fio host file); got clients={levels!r} and no hosts"
            )
        bad = [n for n in levels if isinstance(n, bool) or not isinstance(n, int) or n < 1]
        if bad:
            raise ValueError(f"{where}: levels must be positive integers (client counts), got {bad}")
        if isinstance(self.hosts, list) and max(levels) > len(self.hosts):
            raise ValueError(
                f"{where}: level {max(levels)} needs {max(levels)} hosts, but hosts lists "
                f"{len(self.hosts)} ({self.hosts}); levels must be <= {len(self.hosts)}"
            )

    def hosts_for(self, point: RunPoint, hosts: Optional[list[str]] = None) -> Optional[list[str]]:
        """The fio servers that run ``point``: ``hosts[:clients]``, or all hosts without a ``clients`` factor.

        Parameters
        ----------
        point : RunPoint
        hosts : list of str, optional
            The study's hosts already read (a fio host file's lines); default ``self.hosts``
            when it is a list.

        Returns
        -------
        list of str or None
            ``None`` for a local (not client/server) study.

        Raises
        ------
        StudyError
            The point asks for more clients than there are hosts (possible when ``hosts`` is a
            host file, which is read only at run time).
        """
        if hosts is None:
            hosts = self.hosts if isinstance(self.hosts, list) else None
        if not hosts:
            return hosts
        n = point.factors.get(CLIENTS_FACTOR)
        if n is None:
            return list(hosts)
        if n > len(hosts):
            raise StudyError(
                f"study {self.name}: factors.{CLIENTS_FACTOR}: level {n} needs {n} hosts, but hosts has "
                f"{len(hosts)} ({hosts}); levels must be <= {len(hosts)}"
            )
        return list(hosts[:n])

    # -- derived --------------------------------------------------------------------------

    @property
    def timeout_s(self) -> float:
        """Per-run wall-clock limit, s: ``timeout`` or runtime + ramp_time + max(120, 50 %)."""
        if self.timeout is not None:
            return float(self.timeout)
        nominal = self.runtime + self.ramp_time
        return nominal + max(120.0, 0.5 * nominal)

    @property
    def run_duration_s(self) -> float:
        """Nominal duration of one run, s (runtime + ramp_time): the ETA's unit."""
        return float(self.runtime + self.ramp_time)

    def spec_dict(self) -> dict[str, Any]:
        """The spec as plain data (what ``study.yaml`` holds)."""
        return self.model_dump(mode="json", exclude_none=True)

    @property
    def spec_hash(self) -> str:
        """16-hex SHA-256 of the spec, ignoring ``description`` and ``timeout``.

        Two specs with the same hash produce the same runs; a reworded description or a
        longer timeout does not make a different study.
        """
        data = self.model_dump(mode="json", exclude={"description", "timeout"})
        return hashlib.sha256(_canonical(data)).hexdigest()[:16]

    def to_yaml(self) -> str:
        """The spec as YAML (keys in declaration order)."""
        return yaml.safe_dump(self.spec_dict(), sort_keys=False, default_flow_style=None)

    # -- expansion ------------------------------------------------------------------------

    def _base_options(self) -> dict[str, Any]:
        opts: dict[str, Any] = {"time_based": True, "runtime": _num(self.runtime)}
        if self.ramp_time:
            opts["ramp_time"] = _num(self.ramp_time)
        if self.size is not None:
            opts["size"] = self.size
        opts["group_reporting"] = 1
        opts.update(self.fixed)
        return opts

    def expand(self) -> RunPlan:
        """The full factorial grid × repetitions, in a seeded random run order.

        ``run_id`` is the first 12 hex digits of the SHA-256 of the canonical JSON of
        (study name, every fio option the run gets except ``filename``, the factor levels,
        the repetition): the same on every machine and in every process, so a rerun finds
        the runs already done. The run order sorts runs by SHA-256 of (seed, run_id): a
        shuffle that depends on nothing but the seed and the runs.

        Returns
        -------
        RunPlan
            Points in run order.
        """
        names = list(self.factors)
        grids = [self.factors[n] for n in names]
        points = []
        for combo in itertools.product(*grids):
            factors: dict[str, Any] = {}
            options = self._base_options()
            for name, level in zip(names, combo, strict=True):
                if isinstance(level, dict):
                    factors[name] = level["name"]
                    for k, v in level.items():
                        if k == "name":
                            continue
                        if k == "target":
                            factors.setdefault("target", v)
                        else:
                            options[k] = v
                else:
                    factors[name] = level
                    if name in KNOWN_OPTIONS:
                        options[name] = level
            for rep in range(1, self.repetitions + 1):
                key = {"study": self.name, "options": options, "factors": factors, "repetition": rep}
                run_id = hashlib.sha256(_canonical(key)).hexdigest()[:12]
                points.append((run_id, rep, dict(factors), dict(options)))
        order = sorted(points, key=lambda p: hashlib.sha256(f"{self.seed}:{p[0]}".encode()).hexdigest())
        run_points = tuple(
            RunPoint(run_id=rid, repetition=rep, run_order=i, factors=f, options=o)
            for i, (rid, rep, f, o) in enumerate(order)
        )
        ids = [p.run_id for p in run_points]
        if len(set(ids)) != len(ids):  # pragma: no cover - distinct levels make distinct ids
            raise StudyError(f"study {self.name}: two runs got the same run_id; make factor levels distinct")
        return RunPlan(study=self.name, spec_hash=self.spec_hash, points=run_points)


def _num(x: float) -> int | float:
    return int(x) if float(x).is_integer() else float(x)


@dataclass(frozen=True)
class RunPoint:
    """One fio run of a plan.

    Attributes
    ----------
    run_id : str
        12-hex stable hash (see :meth:`Study.expand`).
    repetition : int
        1-based repetition of this grid point.
    run_order : int
        0-based position in the randomised run order.
    factors : dict
        Factor name -> level (mapping levels by their ``name``).
    options : dict
        Every fio option of the run except ``filename`` (fixed, factor, and runner options).
    """

    run_id: str
    repetition: int
    run_order: int
    factors: dict[str, Any]
    options: dict[str, Any]

    def to_dict(self, study: str) -> dict[str, Any]:
        """What ``point.json`` holds."""
        return {
            "study": study, "run_id": self.run_id, "repetition": self.repetition,
            "run_order": self.run_order, "factors": self.factors, "options": self.options,
        }


@dataclass(frozen=True)
class RunPlan:
    """The runs of a study in run order.

    Attributes
    ----------
    study : str
    spec_hash : str
    points : tuple of RunPoint
    """

    study: str
    spec_hash: str
    points: tuple[RunPoint, ...]

    def __len__(self) -> int:
        return len(self.points)

    def __iter__(self) -> Iterator[RunPoint]:
        return iter(self.points)

    @property
    def run_ids(self) -> tuple[str, ...]:
        """Run ids in run order."""
        return tuple(p.run_id for p in self.points)

    def to_frame(self):
        """One row per run: ``run_id``, ``repetition``, ``run_order`` and a column per factor.

        Returns
        -------
        pandas.DataFrame
        """
        import pandas as pd

        rows = [{"run_id": p.run_id, "repetition": p.repetition, "run_order": p.run_order, **p.factors}
                for p in self.points]
        return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# loading


def _format_errors(exc: ValidationError) -> str:
    msgs = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"])
        kind = err.get("type", "")
        if kind == "extra_forbidden":
            allowed = ", ".join(Study.model_fields)
            msgs.append(f"{loc}: unknown key (allowed keys: [{allowed}]), got {err.get('input')!r}")
            continue
        if kind == "missing":
            msgs.append(f"{loc}: required key is missing")
            continue
        msg = str(err.get("msg", ""))
        msg = msg.removeprefix("Value error, ")
        if kind == "value_error" and msg.startswith(("fixed", "factors")):
            msgs.append(msg)  # our own messages carry their full key path
        elif kind == "value_error":
            msgs.append(f"{loc}: {msg}" if loc else msg)
        else:
            msgs.append(f"{loc}: {msg}, got {err.get('input')!r}")
    return "; ".join(msgs)


def load_study(source: str | os.PathLike[str] | Mapping[str, Any]) -> Study:
    """Load and validate a study spec.

    Parameters
    ----------
    source : str, path-like or mapping
        A YAML file path, or the spec as a dict.

    Returns
    -------
    Study

    Raises
    ------
    StudyError
        The file cannot be read or parsed, a key is unknown, a value is invalid; the message
        names the file, the key, the value and what is allowed, e.g.
        ``"factors.rw: must be one of [read, write, ...], got 'randwite'"``.
    """
    where = ""
    if isinstance(source, Mapping):
        data: Any = dict(source)
    else:
        path = Path(source)
        where = f"{path}: "
        try:
            text = path.read_text()
        except OSError as exc:
            raise StudyError(f"{path}: cannot read study spec ({exc.strerror})") from exc
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise StudyError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise StudyError(f"{where}a study spec must be a mapping of keys (name, factors, ...), got {data!r}")
    try:
        return Study.model_validate(data)
    except ValidationError as exc:
        raise StudyError(where + _format_errors(exc)) from None
