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

A spec is bounded before anything is expanded:

* the YAML file: at most :data:`storagebench._safeyaml.MAX_YAML_BYTES`, a regular file, aliases
  expanding to at most :data:`~storagebench._safeyaml.MAX_YAML_NODES` values, nesting at most
  :data:`~storagebench._safeyaml.MAX_YAML_DEPTH`, no duplicate keys (:mod:`storagebench._safeyaml`);
  a spec given as a mapping gets the same bounds;
* numbers: ``runtime``, ``ramp_time`` and ``timeout`` finite, in whole microseconds (fio's unit)
  and at most :data:`MAX_RUN_SECONDS`; ``repetitions`` an integer from 1 to
  :data:`MAX_REPETITIONS`; ``seed`` an integer from 0 to :data:`MAX_SEED`; ``size`` within fio's
  64-bit limit (:data:`storagebench.fio.options.MAX_BYTES`); any integer within 64 bits;
* names (the study's, factors', mapping levels' ``name`` and string levels of study factors):
  :data:`storagebench.fio.options.SAFE_NAME_RE` matched in full (1-64 letters, digits, ``_.+-``);
* the levels of one factor: all of one type (all strings, all integers, all floats, all booleans
  or all mappings), distinct;
* the plan: at most ``max_runs`` runs (default :data:`DEFAULT_MAX_RUNS`), counted as the product
  of the level counts times ``repetitions`` before a single run is made (:attr:`Study.n_runs`).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Optional, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ._caps import check_throttle
from ._plan import RunPlan, RunPoint, SetUpUnit
from ._precision import check_precision, check_precision_design
from ._safeyaml import dump_yaml, load_yaml, read_text_capped
from ._specvalues import (
    HOST_STEPS,
    MAX_RUN_SECONDS,
    RUNNER_OPTIONS,
    RW_VALUES,
    SCHEDULERS,
    check_options,
    check_shape,
    gate_names,
    key_text,
    label_problem,
    level_label,
    one_type,
    parse_host_steps,
    safe_name,
    seconds,
    shorten_in,
    steadystate_problem,
    target_checked,
    validation_message,
    whole,
)
from ._studyrules import (  # noqa: F401
    _DESIGN_DEFAULTS,
    _NOT_HASHED,
    CLIENTS_FACTOR,
    DEFAULT_MAX_RUNS,
    DESIGN_COLUMNS,
    StudyRules,
    _count_text,
)
from .errors import JobFileError, StudyError, shown
from .fio import options as fo
from .fio.options import KNOWN_OPTIONS, SAFE_NAME_RE, SAFE_NAME_RULE, canonical_name
from .schema import RUNS

__all__ = [
    "RW_VALUES",
    "FIO_FACTORS",
    "CLIENTS_FACTOR",
    "RUNNER_OPTIONS",
    "HOST_STEPS",
    "SCHEDULERS",
    "parse_host_steps",
    "Study",
    "RunPoint",
    "RunPlan",
    "load_study",
    "safe_name",
    "SetUpUnit",
    "DEFAULT_MAX_RUNS",
    "DESIGN_COLUMNS",
    "MAX_REPETITIONS",
    "MAX_SETUPS",
    "TEST_SETTINGS",
    "MAX_RUN_SECONDS",
    "MAX_SEED",
]

#: Factor names with a meaning to fio (``target`` picks the file/device): the study factor (``option``) of
#: each factor column of the runs schema.
FIO_FACTORS: tuple[str, ...] = tuple(c.option for c in RUNS if c.role == "factor" and c.option)
_Scalar = Union[bool, int, float, str]

#: Most repetitions of a grid point (a confidence interval needs a handful; 1e9 is a typo).
MAX_REPETITIONS = 1_000
#: Most set-ups of a study (each builds its testbed afresh: minutes each; 1000 is a typo).
MAX_SETUPS = 100
#: Keys of ``test_settings``: what the quick variant (``--quick``) may change besides the levels.
TEST_SETTINGS: tuple[str, ...] = ("runtime", "ramp_time", "size", "repetitions", "setups", "timeout")

#: Largest ``seed`` (the run order hashes ``f"{seed}:{run_id}"``; the spec is stored as JSON,
#: whose integers orjson writes up to 2**64-1).
MAX_SEED = 2**64 - 1


# ---------------------------------------------------------------------------------------------
# the spec


_HOST_RE = re.compile(r"[^\s\x00-\x1f\x7f;#$]{1,255}")
_HOSTS_BAD = re.compile(r"[\x00-\x1f\x7f]")


def _run_columns() -> frozenset[str]:
    return frozenset(c.name for c in RUNS)


class Study(StudyRules, BaseModel):
    """A storage performance study: a factor grid over fio options, repeated, in random order.

    Attributes
    ----------
    name : str
        Study name; also its directory under the results root (1-64 letters, digits, ``_.+-``,
        starting with a letter or digit).
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
        Measured time per run, s (fio ``runtime``, with ``time_based``); finite, > 0, whole µs,
        at most :data:`MAX_RUN_SECONDS`.
    ramp_time : float
        Warm-up per run before measurement starts, s (fio ``ramp_time``); >= 0, same bounds.
    size : str or int, optional
        fio ``size`` (``256m``): the region of the file/device each job touches; at most
        2**63-1 bytes (fio's limit), spelled so that fio reads what it says.
    repetitions : int
        Runs per grid point: an integer from 1 to :data:`MAX_REPETITIONS`.
    seed : int
        Seed of the randomised run order: an integer from 0 to :data:`MAX_SEED`.
    timeout : float, optional
        Wall-clock limit per run, s; default :attr:`timeout_s`; same bounds as ``runtime``.
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
    setups : int
        How many times each arm's testbed is built afresh (1 to :data:`MAX_SETUPS`): new loop files,
        mkfs, file placement and preconditioning each time. The set-up, not the run, is then the
        experimental unit: repetitions within one set-up sample the run-to-run noise of one build
        only. Needs a testbed that can build it (``storagebench testbed``); a plain
        :func:`~storagebench._runner.run_study` refuses ``setups > 1`` without one. With
        ``setups > 1`` the set-up number is part of each run id.
    setup_factors : list of str
        The factors whose levels each get a testbed build of their own (the arms, e.g.
        ``[datastore]``); every other factor is run on the arm's build. Empty (default): one build
        holds every level.
    labels : list of str
        The study's own factors with scalar levels (``[stripe_width]``): recorded with each run, never
        passed to fio. A factor that is not a fio option, ``target`` or ``clients`` must be declared:
        here, in ``setup_factors`` or ``concurrent``, or by mapping levels ``{name: ...}``; otherwise it
        is refused with the closest fio options (a misspelt ``iodpeth`` would run at fio's default).
        Not part of :attr:`spec_hash`: it changes no run.
    blocks : bool
        Randomised complete blocks: block ``b`` holds every arm once, in a seeded random order
        within the block, and the blocks run one after the other. With ``setups > 1`` the arms are
        set-ups (block ``b`` = the ``b``-th set-up of every arm); otherwise they are the grid
        points (block ``b`` = repetition ``b`` of every point). Runs record their ``block``.
    concurrent : list of str
        Factors whose levels run at the same time: the points that differ only in these factors
        form one group, started together (one fio process each) and measured as a whole (a
        half-measured group is measured again as a whole on resume).
    test_factors : dict of str to list
        The quick grid (``--quick``, tests): factor -> the level names to keep (a subset of
        ``factors``; a factor not named keeps all its levels). As benchopt keeps
        ``test_parameters`` beside ``parameters``. Not part of :attr:`spec_hash`: it does not
        change the study's own runs.
    test_settings : dict
        What else the quick variant changes: any of ``runtime``, ``ramp_time``, ``size``,
        ``repetitions``, ``setups``, ``timeout`` (:data:`TEST_SETTINGS`). Not hashed either.
    host_steps : list
        What to do to the host before each run (each concurrency group), in order
        (:data:`HOST_STEPS`): ``drop_page_cache`` (or ``{drop_page_cache: 1|2|3}``),
        ``drop_file_cache`` (the run's target files only), ``{scheduler: NAME}`` (NAME one of
        :data:`SCHEDULERS`; the device behind the target, put back after the
        run; only a loop device, a device in ``allow_devices`` or with ``allow: [ioscheduler]``). Each
        run's ``provenance.json`` records what was done (``host_steps``). Part of :attr:`spec_hash` when
        not empty: a cold cache or another scheduler is another measurement. Not with ``hosts``
        (the targets are on the servers).
    throttle : dict
        Block-I/O caps of the testbed's devices (a known-answer study, :func:`storagebench.studies.known_answer_names`):
        device role (the study module's ``throttle_roles``) -> ``{riops, wiops, rbps, wbps}``, each a positive integer
        in its range (:func:`storagebench._caps.check_caps`). Part of :attr:`spec_hash` when not empty: a cap is what
        is measured.
    precision : dict, optional
        Adaptive repetitions (:mod:`storagebench._precision`): ``{metric: iops, ci_rel_half_width: 0.03,
        min_repetitions: 3, max_repetitions: 30}`` stops each point when its CI is that narrow, ``{compare:
        FACTOR, equivalence_margin: 0.05}`` each comparison when its verdict is decided; the plan holds
        ``max_repetitions`` per point and the runner measures them in rounds (:mod:`storagebench._runrounds`).
        Replaces ``repetitions``. Part of :attr:`spec_hash` when set.
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
    setups: int = 1
    setup_factors: list[str] = Field(default_factory=list)
    labels: list[str] = Field(default_factory=list)
    blocks: bool = False
    concurrent: list[str] = Field(default_factory=list)
    test_factors: dict[str, list[Any]] = Field(default_factory=dict)
    test_settings: dict[str, Any] = Field(default_factory=dict)
    host_steps: list[Union[str, dict[str, Any]]] = Field(default_factory=list)
    throttle: dict[str, dict[str, int]] = Field(default_factory=dict)
    precision: Optional[dict[str, Any]] = None

    #: The run limit this spec was loaded with (``load_study(..., max_runs=N)``): what
    #: :meth:`expand` enforces by default. Not part of the spec or its hash: the person who runs
    #: a study sets it, not its author.
    _max_runs: int = PrivateAttr(default=DEFAULT_MAX_RUNS)

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
        check_shape(data)
        data = dict(data)

        def canon(mapping: Any, where: str, keep: tuple[str, ...] = ()) -> Any:
            if not isinstance(mapping, dict):
                return mapping
            out: dict[Any, Any] = {}
            spelled: dict[Any, Any] = {}
            for key, value in mapping.items():
                new = fo.ALIASES.get(key, key) if isinstance(key, str) and key not in keep else key
                if new in out:
                    raise ValueError(f"{where}: {shown(spelled[new])} and {shown(key)} are the same fio option ({new}); "
                                     "set it once")
                out[new] = value
                spelled[new] = key
            return out

        if "fixed" in data:
            data["fixed"] = canon(data["fixed"], "fixed")
        factors = data.get("factors")
        if isinstance(factors, dict):
            for name, levels in factors.items():
                if not isinstance(levels, list):  # pydantic would take a set (YAML !!set) in hash order
                    raise ValueError(f"factors.{key_text(name)}: must be a list of levels ([a, b, ...]), got "
                                     f"{type(levels).__name__} {shown(levels)}")
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
                raise ValueError(f"each entry must be a string, got {shown(entry)}")
            if entry in fo.GATES or re.fullmatch(r"ioengine=[A-Za-z0-9_-]+", entry):
                out.append(entry)
            elif entry in KNOWN_OPTIONS:
                out.append(canonical_name(entry))
            else:
                raise ValueError(
                    f"each entry must be one of [{', '.join(gate_names())}], an fio option name or "
                    f"'ioengine=NAME', got {shown(entry)}"
                )
        return out

    @field_validator("allow_remote")
    @classmethod
    def _allow_remote_ok(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
        for host, paths in v.items():
            if host != "*" and not _HOST_RE.fullmatch(host):
                raise ValueError(f"each key must be a server as written in hosts, or '*', got {shown(host)}")
            for p in paths:
                if not isinstance(p, str) or not p or re.search(r"[\x00-\x1f\x7f]", p):
                    raise ValueError(f"{host}: each path must be a non-empty string without control characters, "
                                     f"got {shown(p)}")
        return v

    @property
    def allowed(self) -> frozenset[str]:
        """The opt-ins in force: ``allow`` plus ``exec`` when ``allow_exec`` is set."""
        return frozenset(self.allow) | (frozenset({"exec"}) if self.allow_exec else frozenset())

    @field_validator("name", mode="before")
    @classmethod
    def _name_ok(cls, v: Any) -> str:
        if not isinstance(v, str) or not SAFE_NAME_RE.fullmatch(v):
            raise ValueError(f"must be {SAFE_NAME_RULE} (it names the results directory), got {shown(v)}")
        return v

    @field_validator("description", mode="before")
    @classmethod
    def _description_ok(cls, v: Any) -> Any:
        if isinstance(v, str):
            bad = re.search(r"[\x00-\x08\x0b-\x1f\x7f]", v)
            if bad:
                raise ValueError(f"may hold line breaks and tabs but no other control character "
                                 f"({bad.group()!r} at {bad.start()}), got {shown(v)}")
        return v

    @field_validator("runtime", mode="before")
    @classmethod
    def _runtime_ok(cls, v: Any) -> Any:
        return seconds(v, "runtime", zero_ok=False)

    @field_validator("ramp_time", mode="before")
    @classmethod
    def _ramp_ok(cls, v: Any) -> Any:
        return seconds(v, "ramp_time", zero_ok=True)

    @field_validator("timeout", mode="before")
    @classmethod
    def _timeout_ok(cls, v: Any) -> Any:
        return None if v is None else seconds(v, "timeout", zero_ok=False)

    @field_validator("repetitions", mode="before")
    @classmethod
    def _repetitions_ok(cls, v: Any) -> int:
        return whole(v, "repetitions", 1, MAX_REPETITIONS, "runs per grid point")

    @field_validator("seed", mode="before")
    @classmethod
    def _seed_ok(cls, v: Any) -> int:
        return whole(v, "seed", 0, MAX_SEED, "seed of the run order")

    @field_validator("size", mode="before")
    @classmethod
    def _size_ok(cls, v: Any) -> Any:
        if v is None:
            return v
        if isinstance(v, bool) or not isinstance(v, (int, float, str)):
            raise ValueError(f"must be a size such as 256m or a number of bytes, got {shown(v)}")
        problem = fo.size_spelling_problem(v, percent_ok=True)
        if problem:
            raise ValueError(shorten_in(problem, v))
        try:
            fo.check_job_value("size", v)
        except JobFileError as exc:
            raise ValueError(str(exc).removeprefix("option size: ")) from None
        return int(v) if isinstance(v, float) else v

    @field_validator("target", mode="before")
    @classmethod
    def _target_ok(cls, v: Any) -> Any:
        if v is None:
            return v
        return target_checked(v, "")

    @field_validator("hosts", mode="before")
    @classmethod
    def _hosts_ok(cls, v: Any) -> Any:
        if isinstance(v, str):
            if not v or _HOSTS_BAD.search(v):
                raise ValueError(f"a host file path must be non-empty, without control characters, got {shown(v)}")
        elif isinstance(v, list):
            if not v:
                raise ValueError("must list at least one fio server (host[,port]), got []")
            for h in v:
                if not isinstance(h, str) or not _HOST_RE.fullmatch(h):
                    raise ValueError(f"each entry must be host[,port] as fio --client takes it (no blanks, control "
                                     f"characters, ';', '#' or '$'; at most 255 characters), got {shown(h)}")
        return v

    @field_validator("setups", mode="before")
    @classmethod
    def _setups_ok(cls, v: Any) -> int:
        return whole(v, "setups", 1, MAX_SETUPS, "testbed builds per arm")

    @field_validator("blocks", mode="before")
    @classmethod
    def _blocks_ok(cls, v: Any) -> bool:
        if not isinstance(v, bool):
            raise ValueError(f"must be true or false, got {shown(v)}")
        return v

    @field_validator("setup_factors", "concurrent", "labels", mode="before")
    @classmethod
    def _factor_list_ok(cls, v: Any) -> Any:
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise ValueError(f"must be a list of factor names, got {shown(v)}")
        dupes = sorted({x for x in v if v.count(x) > 1})
        if dupes:
            raise ValueError(f"must name each factor once, got {dupes} more than once")
        return v

    @field_validator("test_settings", mode="before")
    @classmethod
    def _test_settings_keys_ok(cls, v: Any) -> Any:
        if not isinstance(v, dict):
            raise ValueError(f"must be a mapping of {list(TEST_SETTINGS)} to values, got {shown(v)}")
        unknown = [k for k in v if k not in TEST_SETTINGS]
        if unknown:
            raise ValueError(f"unknown key(s) {shown(unknown)}: the quick variant may change only "
                             f"[{', '.join(TEST_SETTINGS)}] (levels go under test_factors)")
        return v

    @field_validator("throttle", mode="before")
    @classmethod
    def _throttle_ok(cls, v: Any) -> Any:
        return check_throttle(v)

    @field_validator("host_steps", mode="before")
    @classmethod
    def _host_steps_ok(cls, v: Any) -> Any:
        try:
            return parse_host_steps(v)
        except StudyError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("precision", mode="before")
    @classmethod
    def _precision_ok(cls, v: Any) -> Any:
        return check_precision(v)

    @model_validator(mode="after")
    def _grid_ok(self, info: ValidationInfo) -> Study:
        self._clients_ok()
        fixed = check_options(self.fixed, "fixed", allow=self.allowed)
        set_by: dict[str, str] = {k: "fixed" for k in fixed}
        for factor, levels in self.factors.items():
            if not SAFE_NAME_RE.fullmatch(factor):
                raise ValueError(f"factors: a factor name must be {SAFE_NAME_RULE} (it names a table column), "
                                 f"got {shown(factor)}")
            where = f"factors.{factor}"
            if not isinstance(levels, list) or not levels:
                raise ValueError(f"{where}: must be a non-empty list of levels, got {shown(levels)}")
            if factor in RUNNER_OPTIONS:
                raise ValueError(f"{where}: set by the runner; use {RUNNER_OPTIONS[factor]}")
            is_option = factor in KNOWN_OPTIONS
            if not is_option and factor not in (CLIENTS_FACTOR, "target") and factor in _run_columns():
                raise ValueError(f"{where}: {factor!r} is a column of the tidy runs table (storagebench.schema.RUNS), "
                                 f"which a study factor of that name would shadow; name it otherwise "
                                 f"(e.g. '{factor}_level')")
            one_type(where, levels, "levels")
            labels = []
            for i, level in enumerate(levels):
                if isinstance(level, dict):
                    if "name" not in level:
                        raise ValueError(f"{where}[{i}]: a mapping level needs a 'name' plus fio options, "
                                         f"got {shown(level)}")
                    problem = label_problem(level["name"])
                    if problem:
                        raise ValueError(f"{where}[{i}].name: {problem}")
                    if "target" in level:
                        target_checked(level["target"], f"{where}[{i}].target: ")
                    opts = {k: v for k, v in level.items() if k not in ("name", "target")}
                    checked = check_options(opts, f"{where}[{i}]", allow=self.allowed)
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
                    target_checked(level, f"{where}[{i}]: ")
                elif is_option:
                    check_options({factor: level}, "factors", allow=self.allowed)
                    owner = set_by.get(factor)
                    if owner is not None and owner != factor:
                        raise ValueError(f"{where}: also set by {owner}; set each option once")
                    set_by[factor] = factor
                elif factor != CLIENTS_FACTOR:
                    problem = label_problem(level, bool_ok=True)
                    if problem:
                        raise ValueError(f"{where}[{i}]: {problem}")
                labels.append(level)
            one_type(where, labels, "level names")
            dupes = sorted(shown(x, 40) for x, n in Counter(labels).items() if n > 1)
            if dupes:
                raise ValueError(f"{where}: levels must be distinct, got {', '.join(dupes[:5])} more than once")
        self._design_ok()
        self._declared_ok(stored=bool(info.context and info.context.get("stored")))
        check_precision_design(self)
        self._steadystate_ok()
        if self.host_steps and self.hosts is not None:
            raise ValueError("host_steps: are applied on this machine, but a client/server study's targets are on "
                             "its fio servers (hosts); remove host_steps or hosts")
        return self

    def _steadystate_ok(self) -> None:
        """fio's steady-state options, wherever the spec sets them, against ``runtime`` (:func:`steadystate_problem`)."""
        values: dict[str, list[Any]] = {}
        sources = [self.fixed] + [lv if isinstance(lv, dict) else {f: lv}
                                  for f, levels in self.factors.items() for lv in levels]
        for opts in sources:
            for k, v in opts.items():
                if k in KNOWN_OPTIONS:
                    values.setdefault(canonical_name(k), []).append(v)
        problem = steadystate_problem(values, float(self.runtime))
        if problem:
            raise ValueError(problem)

    # -- derived --------------------------------------------------------------------------

    def test_variant(self) -> Study:
        """The quick variant of this study (``--quick``): ``test_factors`` and ``test_settings`` applied.

        Named :attr:`quick_name`; its factors keep only the levels ``test_factors`` names (in the
        order of ``factors``), ``test_settings`` replace the spec's values, and the variant has no
        ``test_*`` keys of its own. A study without ``test_*`` keys gives the same grid under the
        quick name.

        Returns
        -------
        Study

        Raises
        ------
        StudyError
            The variant is not a valid study (e.g. a ``test_settings`` value out of bounds, or a
            quick name longer than 64 characters).
        """
        data = self.model_dump(mode="json", exclude_none=True, exclude={"test_factors", "test_settings"})
        data["name"] = self.quick_name
        data["factors"] = {
            name: [lv for lv in levels if level_label(lv) in self.test_factors[name]]
            if name in self.test_factors else levels
            for name, levels in data["factors"].items()
        }
        data.update(self.test_settings)
        variant = load_study(data, stored=True)  # its factors passed this study's checks
        variant._max_runs = getattr(self, "_max_runs", DEFAULT_MAX_RUNS) or DEFAULT_MAX_RUNS
        return variant

    def to_yaml(self, comments: Iterable[Any] = ()) -> str:
        """The spec as YAML (keys in declaration order), from PyYAML's emitter, checked by loading it back.

        Parameters
        ----------
        comments : iterable, optional
            Head comment lines; each is made one line (:func:`storagebench._safeyaml.yaml_comment`), so no
            text in them can become a key.

        Returns
        -------
        str

        Raises
        ------
        StudyError
            The text does not load back (:func:`storagebench._safeyaml.load_yaml`) to :meth:`spec_dict`.
        """
        return dump_yaml(self.spec_dict(), comments=comments, where=f"study {self.name!r}", error=StudyError)


# ---------------------------------------------------------------------------------------------
# loading


def load_study(source: str | os.PathLike[str] | Mapping[str, Any], *, max_runs: int | None = None,
               stored: bool = False) -> Study:
    """Load and validate a study spec.

    Parameters
    ----------
    source : str, path-like or mapping
        A YAML file path (a regular file of at most :data:`storagebench._safeyaml.MAX_YAML_BYTES`
        bytes, read with :func:`storagebench._safeyaml.load_yaml`), or the spec as a dict.
    max_runs : int, optional
        Refuse a plan of more runs than this now, and make it the limit :meth:`Study.expand`
        enforces. Default: not checked at load (a stored spec must always load, e.g. to compare
        its hash on resume); :meth:`Study.expand` enforces :data:`DEFAULT_MAX_RUNS`.
    stored : bool
        The spec a results tree holds (``study.yaml``, written by an earlier sweep): factors that are
        neither fio options nor declared study factors (``labels``) are accepted, as specs written
        before that rule hold them and their runs are measured. Default: refused with a did-you-mean.

    Returns
    -------
    Study

    Raises
    ------
    StudyError
        The file cannot be read or parsed or is out of bounds (size, aliases, nesting,
        duplicate keys), a key is unknown, a value is invalid, or the plan has more than
        ``max_runs`` runs; the message names the file, the key, the value and what is allowed,
        e.g. ``"factors.rw: must be one of [read, write, ...], got 'randwite'"``.
    """
    if max_runs is not None and (isinstance(max_runs, bool) or not isinstance(max_runs, int) or max_runs < 1):
        raise StudyError(f"max_runs must be a positive integer, got {shown(max_runs)}")
    where = ""
    if isinstance(source, Mapping):
        data: Any = dict(source)
    else:
        path = Path(source)
        where = f"{path}: "
        text = read_text_capped(path, error=StudyError, what="study spec")
        data = load_yaml(text, where=str(path), error=StudyError)
    if not isinstance(data, dict):
        raise StudyError(f"{where}a study spec must be a mapping of keys (name, factors, ...), got {shown(data)}")
    try:
        study = Study.model_validate(data, context={"stored": stored})
    except ValidationError as exc:
        raise StudyError(where + validation_message(exc, Study.model_fields)) from None
    if max_runs is not None:
        study.check_max_runs(max_runs)
        study._max_runs = max_runs
    return study
