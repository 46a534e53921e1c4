"""Testbed studies: one module and one YAML spec each, found by themselves.

A testbed study builds Linux devices (loop devices, filesystems, btrfs raid0, zram;
:mod:`storagebench.testbed`), measures a spec on them with :func:`storagebench._runner.run_study`,
tears them down, and answers its question with :mod:`storagebench.stats`. Adding one is ONE module
plus ONE YAML, and no other edit: the registry, the CLI (``storagebench testbed NAME``) and the one
write-up notebook (``notebooks/studies/testbed.ipynb``) find it by its name.

The protocol: a study module defines

``name`` : str
    The study's name: the module's file name, its YAML's file name and the spec's ``name``.
``title``, ``question`` : str
    For the write-up.
``testbed(study, unit)``
    A context manager that builds the testbed of one set-up and yields a
    :class:`storagebench._runner.SetUp` (targets, devices it may write, what it made, notes); it tears
    everything down on exit (also on an error or Ctrl-C). ``study`` is the :class:`~storagebench._study.Study`
    being run, ``unit`` the :class:`~storagebench._plan.SetUpUnit` (set-up number, block, and the levels
    of the spec's ``setup_factors`` this build serves). Preconditioning (every target's region written
    twice, SNIA PTS) is done by the registry after the build, for every study alike.
``analyse(data, *, confidence=CONFIDENCE, **parameters)``
    Returns a :class:`TestbedResult` from a :class:`StudyData` (:func:`load_data`). Keyword-only
    parameters with defaults are the study's analysis parameters (``storagebench testbed NAME -p
    key=value``, the notebook's ``params``).
``throttle_roles`` (optional)
    The device roles the spec's ``throttle:`` may cap (:attr:`storagebench._study.Study.throttle`); the testbed
    caps those devices with :func:`storagebench.testbed.throttle` and yields its cgroup and caps in the
    :class:`SetUp` (``cgroup``, ``caps``), so every fio process runs inside the cgroup.
``known_answer(data, result, *, confidence)`` (optional)
    The :class:`KnownAnswerCheck` s of a known-answer run: the truth from the spec's caps by a stated rule, the
    estimate and CI of ``result``. A module that has it and a spec ``ka_<name>.yaml`` beside its own gets a second
    registry entry ``ka_<name>`` (:func:`known_answer_names`): the same testbed and analysis on capped devices, and
    its result carries the checks. A module named ``ka_...`` is a known-answer study of its own.
``check_parameters(**parameters)`` (optional)
    Raises :class:`~storagebench.errors.StatsError` for parameter values ``analyse`` would refuse, so that
    they are refused before anything is built or measured.

The kit: everything a study module needs from storagebench is imported from this package
(``from storagebench.studies import SetUp, StudyData, compare_arms, ...``: the first names of ``__all__``), never
from a private module, so a study found on ``STORAGEBENCH_STUDY_PATH`` or by an entry point is written
like the built-in ones: :class:`SetUp` (what ``testbed`` yields), :class:`SetUpUnit` and :class:`Study`
(its arguments), :class:`StudyData` (what ``analyse`` gets), :class:`TestbedResult` (what it returns,
holding :class:`storagebench.findings.Finding`, whose one home is :mod:`storagebench.findings`), and the shared analysis: :func:`compare_arms` (the set-up as the experimental unit),
:func:`compare_question` (several metrics answering one question, one multiplicity family),
:func:`unit_values`, :func:`tost_plans`, :func:`setup_variance`, :func:`finish` (the findings every
write-up carries), :func:`ratio_figure`, :func:`conf_text`, :func:`plain_log_axis`, :func:`loop_size` and
:func:`region_bytes`. The devices come from :mod:`storagebench.testbed`, the statistics from
:mod:`storagebench.stats`. Study modules import nothing of each other (an import-linter contract covers
every module of this package by wildcard).

The spec, ``<name>.yaml``, sits beside the module or in ``data/studies/`` of the source tree; its
``test_factors``/``test_settings`` give the quick variant (``--quick``).

Where modules are found (:func:`discover`), in this order; a name found twice is an error:

1. the modules of this package (``storagebench/studies/<name>.py``; names starting with ``_`` are not studies);
2. each directory listed in the environment variable ``STORAGEBENCH_STUDY_PATH``
   (``os.pathsep``-separated): every ``<name>.py`` there with a ``<name>.yaml`` beside it;
3. the entry points of the group ``storagebench.studies`` (each names a module) of installed packages.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.util
import inspect
import math
import os
import pkgutil
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import Any

import pandas as pd

from .. import testbed as tb
from .._caps import check_caps, check_roles
from .._runner import SetUp, SweepResult, run_study
from .._store import StudyStore
from .._study import SetUpUnit, Study, load_study
from ..errors import StatsError, StudyError
from ..findings import CONFIDENCE, confidence_level
from ..records import TestbedRecord
from ._base import (
    StudyData,
    TestbedResult,
    capped,
    caps_text,
    check_study_name,
    compare_arms,
    compare_question,
    conf_text,
    finish,
    load_data,
    loop_size,
    plain_log_axis,
    ratio_figure,
    region_bytes,
    setup_variance,
    tost_plans,
    unit_values,
)
from ._results import KnownAnswerCheck, bucket_shares, count_resolution

__all__ = [
    # the kit a study module imports (``from storagebench.studies import ...``; see "The kit" above)
    "SetUp", "SetUpUnit", "Study", "StudyData", "TestbedResult", "KnownAnswerCheck", "compare_arms",
    "compare_question", "unit_values",
    "tost_plans", "setup_variance", "finish", "ratio_figure", "conf_text", "plain_log_axis", "loop_size",
    "region_bytes", "bucket_shares", "capped", "caps_text", "count_resolution",
    # the registry
    "SPEC_DIR",
    "NOTEBOOK",
    "STUDY_PATH_ENV",
    "ENTRY_POINT_GROUP",
    "TestbedStudy",
    "TestbedOutcome",
    "names",
    "known_answer_names",
    "get",
    "run",
    "analyse",
    "load_data",
    "describe_design",
    "describe_testbed",
]

_ROOT = Path(__file__).resolve().parents[2]
#: Directory of the built-in specs (``data/studies`` of the source tree).
SPEC_DIR = _ROOT / "data" / "studies"
#: The one write-up notebook of every testbed study (parameters ``study``, ``study_dir``, ``confidence``, ``params``).
NOTEBOOK = _ROOT / "notebooks" / "studies" / "testbed.ipynb"
#: Environment variable listing more directories of study modules (``os.pathsep``-separated).
STUDY_PATH_ENV = "STORAGEBENCH_STUDY_PATH"
#: Entry-point group of study modules in installed packages.
ENTRY_POINT_GROUP = "storagebench.studies"
_PROTOCOL = ("name", "title", "question", "testbed", "analyse")
#: Name of a known-answer study: ``ka_<study>`` (the variant of a study whose module has ``known_answer``, spec
#: ``ka_<study>.yaml`` beside its own) or a module of its own so named.
KNOWN_ANSWER_PREFIX = "ka_"


@dataclass(frozen=True)
class TestbedStudy:
    """A registered testbed study: its module and its spec.

    Attributes
    ----------
    name : str
    module : module
        Defines ``name``, ``title``, ``question``, ``testbed`` and ``analyse`` (see the package docs).
    spec_path : Path
        ``<name>.yaml``.
    source : str
        Where it was found: ``"package"``, ``"path"`` (``STORAGEBENCH_STUDY_PATH``) or ``"entry point"``.
    known_answer : bool
        A known-answer study: its spec caps the testbed's devices (``throttle:``) and its module's
        ``known_answer`` gives the checks of :attr:`TestbedResult.checks`.
    """

    __test__ = False  # not a pytest test class

    name: str
    module: ModuleType
    spec_path: Path
    source: str
    known_answer: bool = False

    @property
    def title(self) -> str:
        """The study's title."""
        return str(self.module.title)

    @property
    def question(self) -> str:
        """The question the study answers."""
        return str(self.module.question)

    def spec(self, *, quick: bool = False) -> Study:
        """The spec (``<name>.yaml``), or its quick variant (:meth:`storagebench._study.Study.test_variant`).

        Raises
        ------
        StudyError
            Invalid spec, or a spec whose ``name`` is not the module's.
        """
        study = load_study(self.spec_path)
        if study.name != self.name:
            raise StudyError(f"{self.spec_path}: name must be {self.name!r} (the module's name), got {study.name!r}")
        roles = tuple(getattr(self.module, "throttle_roles", ()))
        try:
            check_roles(study.throttle, roles, f"{self.spec_path}: throttle")
        except ValueError as exc:
            raise StudyError(str(exc)) from None
        if self.known_answer and not study.throttle:
            raise StudyError(f"{self.spec_path}: a known-answer study needs a throttle: section (caps of {list(roles)})")
        return study.test_variant() if quick else study

    def parameters(self) -> dict[str, Any]:
        """The study's analysis parameters and their defaults (keyword-only arguments of ``analyse``)."""
        sig = inspect.signature(self.module.analyse)
        return {p.name: p.default for p in sig.parameters.values()
                if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name != "confidence"}

    def check_parameters(self, params: Mapping[str, Any], confidence: float | None = None) -> None:
        """Refuse, before anything is measured, parameters ``analyse`` does not take or of another type than
        their default (a number for a number), and a ``confidence`` outside (0, 1).

        Raises
        ------
        StudyError
            Naming the parameter, the value and what is allowed.
        """
        known = self.parameters()
        unknown = sorted(set(params) - set(known))
        if unknown:
            allowed = ", ".join(f"{k} (default {v!r})" for k, v in known.items()) or "none"
            raise StudyError(f"study {self.name}: unknown analysis parameter(s) {unknown}; allowed: {allowed}")
        for key, value in params.items():
            default = known[key]
            number = (int, float)
            if isinstance(default, bool) or default is None or isinstance(default, str):
                ok = default is None or isinstance(value, type(default))
            elif isinstance(default, number):
                ok = isinstance(value, number) and not isinstance(value, bool) and math.isfinite(value)
            else:
                ok = True
            if not ok:
                raise StudyError(f"study {self.name}: analysis parameter {key} must be like its default {default!r} "
                                 f"({type(default).__name__}), got {type(value).__name__} {value!r}")
        confidence_level(confidence, error=StudyError)
        rules = getattr(self.module, "check_parameters", None)
        if rules is not None:
            try:
                rules(**{**known, **params})
            except StatsError as exc:
                raise StudyError(f"study {self.name}: {exc}") from None


def _check_module(module: ModuleType, where: str) -> str:
    missing = [a for a in _PROTOCOL if not hasattr(module, a)]
    if missing:
        raise StudyError(f"{where}: a testbed study module must define {list(_PROTOCOL)}; missing {missing}")
    for a in ("testbed", "analyse"):
        if not callable(getattr(module, a)):
            raise StudyError(f"{where}: {a} must be callable")
    name = module.name
    if not isinstance(name, str) or not name:
        raise StudyError(f"{where}: name must be a non-empty string, got {name!r}")
    return name


def _spec_beside(module: ModuleType, name: str) -> Path:
    here = Path(module.__file__).resolve().parent if getattr(module, "__file__", None) else None
    for d in ([here] if here else []) + [SPEC_DIR]:
        if (d / f"{name}.yaml").exists():
            return d / f"{name}.yaml"
    raise StudyError(f"testbed study {name!r}: no spec {name}.yaml beside its module ({here}) or in {SPEC_DIR}")


def _load_file(path: Path) -> ModuleType:
    mod_name = f"storagebench_study_{path.stem}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:  # pragma: no cover - a .py file always has a loader
        raise StudyError(f"{path}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(mod_name, None)
        raise StudyError(f"{path}: importing the study module failed: {type(exc).__name__}: {exc}") from exc
    return module


def _found() -> Iterator[tuple[ModuleType, str, str]]:
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_"):
            yield importlib.import_module(f"{__name__}.{info.name}"), "package", f"{__name__}.{info.name}"
    for d in filter(None, os.environ.get(STUDY_PATH_ENV, "").split(os.pathsep)):
        path = Path(d)
        if not path.is_dir():
            raise StudyError(f"{STUDY_PATH_ENV} lists {d!r}, which is not a directory")
        for f in sorted(path.glob("*.py")):
            if not f.name.startswith("_") and f.with_suffix(".yaml").exists():
                yield _load_file(f), "path", str(f)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            module = ep.load()
        except Exception as exc:
            raise StudyError(f"entry point {ep.name} = {ep.value} ({ENTRY_POINT_GROUP}) failed to load: "
                             f"{type(exc).__name__}: {exc}") from exc
        if not isinstance(module, ModuleType):
            raise StudyError(f"entry point {ep.name} = {ep.value} ({ENTRY_POINT_GROUP}) must name a module")
        yield module, "entry point", f"{ep.name} = {ep.value}"


def discover() -> dict[str, TestbedStudy]:
    """Every testbed study that can be found now (see the package docs), by name.

    Raises
    ------
    StudyError
        A module that does not follow the protocol, has no spec, or whose name another module has.
    """
    out: dict[str, TestbedStudy] = {}
    where: dict[str, str] = {}
    for module, source, origin in _found():
        name = _check_module(module, origin)
        if name in out:
            if out[name].module is module:
                continue
            raise StudyError(f"two testbed study modules are named {name!r}: {where[name]} and {origin}")
        spec = _spec_beside(module, name)
        ka = callable(getattr(module, "known_answer", None))
        out[name] = TestbedStudy(name=name, module=module, spec_path=spec, source=source,
                                 known_answer=ka and name.startswith(KNOWN_ANSWER_PREFIX))
        where[name] = origin
        variant = KNOWN_ANSWER_PREFIX + name
        if ka and not name.startswith(KNOWN_ANSWER_PREFIX) and (spec.parent / f"{variant}.yaml").exists():
            if variant in out:
                raise StudyError(f"two testbed studies are named {variant!r}: {where[variant]} and {origin}")
            out[variant] = TestbedStudy(name=variant, module=module, spec_path=spec.parent / f"{variant}.yaml",
                                        source=source, known_answer=True)
            where[variant] = f"{origin} (known-answer variant)"
    return dict(sorted(out.items()))


def names() -> tuple[str, ...]:
    """The names of the testbed studies found (:func:`discover`), sorted."""
    return tuple(discover())


def known_answer_names() -> list[str]:
    """The known-answer studies (:attr:`TestbedStudy.known_answer`), sorted: each caps its devices (``throttle:``),
    so the truth of its question follows from the caps by a stated rule, and its :class:`TestbedResult` carries
    :class:`KnownAnswerCheck` s (``checks``). Run and analyse them as any testbed study (:func:`run`, :func:`analyse`).
    """
    return [n for n, ts in discover().items() if ts.known_answer]


def get(name: str) -> TestbedStudy:
    """The testbed study called ``name``.

    Raises
    ------
    StudyError
        No such study (the message lists the ones there are).
    """
    found = discover()
    if name not in found:
        raise StudyError(f"testbed study must be one of {list(found)}, got {name!r}")
    return found[name]


# ---------------------------------------------------------------------------------------------
# run and analyse


@dataclass(frozen=True)
class TestbedOutcome:
    """What :func:`run` did.

    Attributes
    ----------
    name : str
        The study as run (``<name>`` or ``<name>-quick``).
    study : str
        The study module's name.
    study_dir : Path
    wall_s : float
        Wall time of the whole call (builds, sweep, tear-downs, ingest, analysis), s.
    sweep : SweepResult
        What the runner did (completed, skipped, failed, set aside, builds).
    result : TestbedResult
    phases_s : dict of str to float
        ``build``, ``precondition``, ``tear_down`` (summed over the set-ups built by this call),
        ``sweep`` (the runs and the runner's bookkeeping) and ``analysis``, s.
    set_ups : tuple of TestbedRecord
        The records of the builds made by this call.
    """

    __test__ = False

    name: str
    study: str
    study_dir: Path
    wall_s: float
    sweep: SweepResult
    result: TestbedResult
    phases_s: dict[str, float] = field(default_factory=dict)
    set_ups: tuple[TestbedRecord, ...] = ()

    @property
    def completed(self) -> int:
        """Runs measured by this call."""
        return len(self.sweep.completed)

    @property
    def skipped(self) -> int:
        """Runs found complete (resume)."""
        return len(self.sweep.skipped)

    @property
    def failed(self) -> int:
        """Runs that failed."""
        return len(self.sweep.failed)


def _build(ts: TestbedStudy, study: Study, phases: dict[str, float], fio_bin: str):
    """The ``testbed`` the runner calls per set-up: the module's build, then preconditioning, timed."""
    @contextlib.contextmanager
    def build(unit: SetUpUnit) -> Iterator[SetUp]:
        t0 = time.monotonic()
        t3 = None
        with ts.module.testbed(study, unit) as built:
            t1 = time.monotonic()
            if not isinstance(built, SetUp):
                raise StudyError(f"testbed of study {ts.name} must yield a storagebench._runner.SetUp, got "
                                 f"{type(built).__name__}")
            tb.precondition(list(dict.fromkeys(built.targets.values())), region_bytes(study),
                            allow_devices=built.allow_devices, fio_bin=fio_bin)
            t2 = time.monotonic()
            phases["build"] += t1 - t0
            phases["precondition"] += t2 - t1
            note = (f"every target's region ({study.size}) written sequentially {tb.PRECONDITION_LOOPS} times "
                    "before the runs (SNIA PTS preconditioning; reads never hit holes)")
            try:
                yield dataclasses.replace(built, notes=(*built.notes, note),
                                          phases_s={**built.phases_s, "build": round(t1 - t0, 3),
                                                    "precondition": round(t2 - t1, 3)})
            finally:
                t3 = time.monotonic()
        if t3 is not None:
            phases["tear_down"] += time.monotonic() - t3

    return build


def run(name: str, *, out_dir: str | os.PathLike[str] = "results", quick: bool = False, progress: bool = False,
        fio_bin: str = "fio", confidence: float = CONFIDENCE, params: Mapping[str, Any] | None = None,
        write: bool = True, precision: Mapping[str, Any] | None = None) -> TestbedOutcome:
    """Build, measure, tear down and analyse a testbed study.

    Each set-up unit of the plan (:meth:`storagebench._plan.RunPlan.units`) gets a build of its own
    (``setups`` per arm, in blocks when the spec says ``blocks``); the runner records each build in
    ``testbed.json`` and resumes exactly (see :func:`storagebench._runner.run_study`).

    Parameters
    ----------
    name : str
        A study of :func:`names`.
    out_dir : path
        Results root; the study goes to ``<out_dir>/<name>[-quick]/``.
    quick : bool
        The quick variant (``test_factors``/``test_settings`` of the spec).
    progress : bool
        Progress bar on stderr.
    fio_bin : str
        fio executable.
    confidence : float
        Level of every CI of the analysis; tests at ``alpha = 1 - confidence``.
    params : mapping, optional
        The study's analysis parameters (:meth:`TestbedStudy.parameters`).
    write : bool
        Write ``analysis/findings.csv``, ``analysis/verdicts.csv`` and the other tables.
    precision : mapping, optional
        Adaptive set-ups: a ``precision:`` (:mod:`storagebench._precision`, checked by the spec's own gate) that
        replaces the spec's; the set-up is the unit, so ``min_repetitions``/``max_repetitions`` count set-ups
        per arm and the spec's ``setups`` number is replaced by them (e.g. ``{compare: device,
        ci_rel_half_width: 0.02, min_repetitions: 3, max_repetitions: 10}``).

    Returns
    -------
    TestbedOutcome

    Raises
    ------
    StudyError
        Unknown study, unknown parameter or one of the wrong type, a confidence outside (0, 1), invalid
        spec: all before anything is built.
    TestbedError
        Not root, no loop devices, a tool missing (nothing is left behind).
    UnsafeTargetError, FioError
        From the safety check or fio (preconditioning).
    """
    ts = get(name)
    params = dict(params or {})
    ts.check_parameters(params, confidence)
    study = ts.spec(quick=quick)
    if precision is not None:
        study = load_study({**study.spec_dict(), "precision": dict(precision)})
    tb.require_testbed()
    t0 = time.monotonic()
    phases = {"build": 0.0, "precondition": 0.0, "tear_down": 0.0}
    before = len(StudyStore.for_study(out_dir, study).setup_records())
    sweep = run_study(study, out_dir=out_dir, fio_bin=fio_bin, progress=progress, testbed=_build(ts, study, phases,
                                                                                              fio_bin))
    t1 = time.monotonic()
    phases["sweep"] = t1 - t0 - sum(phases.values())
    study_dir = Path(out_dir) / study.name
    result = analyse(name, study_dir, confidence=confidence, **params)
    if write:
        _write_tables(study_dir, result)
    phases["analysis"] = time.monotonic() - t1
    records = StudyStore(study_dir).setup_records()
    return TestbedOutcome(name=study.name, study=name, study_dir=study_dir, wall_s=time.monotonic() - t0,
                          sweep=sweep, result=result, phases_s={k: round(v, 3) for k, v in phases.items()},
                          set_ups=tuple(records[before:]))


def _write_tables(study_dir: Path, result: TestbedResult) -> None:
    adir = study_dir / "analysis"
    adir.mkdir(parents=True, exist_ok=True)
    result.findings_frame().to_csv(adir / "findings.csv", index=False)
    result.verdicts.to_csv(adir / "verdicts.csv", index=False)
    for key, df in result.tables.items():
        if isinstance(df, pd.DataFrame):
            df.to_csv(adir / f"{key}.csv", index=False)


def analyse(name: str, study_dir: str | os.PathLike[str], *, confidence: float = CONFIDENCE, **params: Any) -> TestbedResult:
    """The findings, verdict table, tables and figures of a testbed study directory.

    Parameters
    ----------
    name : str
        A study of :func:`names`.
    study_dir : path
        ``<out>/<name>`` or ``<out>/<name>-quick``.
    confidence : float
        Level of every CI; tests at ``alpha = 1 - confidence``.
    **params
        The study's analysis parameters (:meth:`TestbedStudy.parameters`).

    Returns
    -------
    TestbedResult

    Raises
    ------
    StudyError
        Unknown study or parameter; not a study directory.
    StatsError
        From the statistics (e.g. a bad ``confidence``).
    """
    ts = get(name)
    ts.check_parameters(params, confidence)
    data = load_data(name, study_dir)
    result = ts.module.analyse(data, confidence=confidence, **params)
    if not ts.known_answer:
        return result
    checks = tuple(ts.module.known_answer(data, result, confidence=confidence))
    if not all(isinstance(c, KnownAnswerCheck) for c in checks):
        raise StudyError(f"known_answer of study {name} must give KnownAnswerCheck s")
    return dataclasses.replace(result, checks=checks)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def describe_design(name: str, study_dir: str | os.PathLike[str]) -> str:
    """Markdown: what the study is (its spec's description) and how it was run, in a few sentences.

    Says when the study directory holds the spec's quick variant (``storagebench testbed NAME --quick``):
    short runs and few set-ups that show the method, not results to quote.

    Raises
    ------
    StudyError
        Unknown study; no ``study.yaml`` in ``study_dir``, or one of another study.
    """
    ts = get(name)
    sdir = Path(study_dir)
    store = StudyStore(sdir)
    if not store.spec_path.exists():
        raise StudyError(f"{sdir} is not a study directory (no study.yaml): run `storagebench testbed {name}` first")
    ran = load_study(store.spec_path, stored=True)
    check_study_name(name, ran, sdir)
    runs = sum(1 for _ in (sdir / "raw").glob("*/output.json")) if (sdir / "raw").is_dir() else 0
    factors = "; ".join(f"{f} {', '.join(str(lv['name'] if isinstance(lv, dict) else lv) for lv in levels)}"
                        for f, levels in ran.factors.items())
    arms = "/".join(ran.setup_factors) or "testbed"
    per_arm = (f"{ran.precision['min_repetitions']} to {ran.precision['max_repetitions']} set-ups (adaptive: "
               "precision:, each arm as many as its rule asked)" if ran.adaptive_setups else _count(ran.setups, 'set-up'))
    text = (f"{ran.description.strip()}\n\nAs run: {factors}; {per_arm} per {arms} arm"
            + (" in blocks (each block builds every arm once, in random order)" if ran.blocks else "")
            + f"; {_count(ran.repetitions, 'run')} per set-up and point, each {ran.runtime:g} s"
            + (f" after {ran.ramp_time:g} s of ramp-up" if ran.ramp_time else "")
            + f" on a {region_bytes(ran) / 2**20:g} MiB region; {_count(runs, 'run')} in all.")
    if ran.name == ts.spec().quick_name:
        text += (f" **This is the quick variant of the study (`storagebench testbed {name} --quick`): it shows the "
                 "method on runs too short for the within-run stability check and too few set-ups for narrow intervals; its numbers "
                 "are not results to quote.**")
    return text


def _caps_words(record: Mapping[str, Any]) -> str:
    """The caps of a throttle record of ``testbed.json``, each read through the one rule of a cap."""
    caps = record.get("caps")
    if not isinstance(caps, Mapping):
        return "caps not recorded"
    out = []
    for device, c in list(caps.items())[:64]:
        try:
            out.append(f"`{device}` at {caps_text(check_caps(c))}")
        except ValueError:
            out.append(f"`{device}` at caps that are not valid caps")
    return ", ".join(out) or "no device capped"


def describe_testbed(study_dir: str | os.PathLike[str]) -> str:
    """Markdown: what each build of the testbed really was (``testbed.json``), in a few lines.

    Raises
    ------
    StudyError
        No ``testbed.json`` in ``study_dir``.
    """
    records = StudyStore(Path(study_dir)).setup_records()
    if not records:
        raise StudyError(f"{study_dir}: no testbed.json (set-up records); was it run with storagebench testbed?")
    arms: dict[str, list[TestbedRecord]] = {}
    for r in records:
        arms.setdefault(", ".join(f"{k}={v}" for k, v in r.arm.items()) or "whole testbed", []).append(r)
    lines = [f"- {_count(len(records), 'build')} of the testbed ({_count(len(arms), 'arm')}); each run records the "
             "build it ran on (provenance.json: set_up.build_id)."]
    # a note every arm's builds share is said once; the others go under their arm
    per_arm = {arm: list(dict.fromkeys(n for r in recs for n in r.notes)) for arm, recs in arms.items()}
    shared = [n for n in dict.fromkeys(n for ns in per_arm.values() for n in ns) if all(n in ns for ns in per_arm.values())]
    lines += [f"- {n}" for n in shared]
    for arm, recs in arms.items():
        last = recs[-1]
        setups = sorted({r.setup for r in recs})
        own = "".join(f" {n[0].upper()}{n[1:]}." for n in per_arm[arm] if n not in shared)
        lines.append(f"- **{arm}**: {_count(len(recs), 'build')} (set-up{'' if len(setups) == 1 else 's'} "
                     f"{', '.join(map(str, setups))}).{own} The last one made:")
        for d in last.devices:
            kind = d.get("kind")
            if kind == "loop":
                lines.append(f"  - `{d['path']}`: loop device, {d['size_bytes'] >> 20} MiB over `{d['backing_file']}` "
                             f"on {d.get('backing_fs') or '?'}, direct I/O "
                             f"{'on' if d.get('direct_io') else 'off (through the page cache)'}")
            elif kind == "zram":
                lines.append(f"  - `{d['path']}`: zram, {d['size_bytes'] >> 20} MiB, "
                             f"{d.get('comp_algorithm') or '?'} compression")
            elif kind == "filesystem":
                lines.append(f"  - {d['fstype']} ({d.get('profile')}) over {', '.join(d['devices'])}")
            elif kind == "throttle":
                lines.append(f"  - block-I/O throttle (cgroup v{d.get('cgroup_version') if d.get('cgroup_version') in (1, 2) else '?'}): {_caps_words(d)}")
        lines.append("  - targets: " + ", ".join(f"{k} = `{v}`" for k, v in last.targets.items()))
    return "\n".join(lines)
