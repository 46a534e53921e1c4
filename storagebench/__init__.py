"""storagebench: fio sweeps -> tidy tables -> statistics -> reproducible write-ups.

The names a user needs, imported here (the list is ``__all__``; docs/ARCHITECTURE.md, "The public
API", documents it and a test keeps the two equal)::

    import storagebench as sb
    study = sb.load_study("data/studies/demo.yaml")
    result = sb.run_study(study, target="/var/tmp/sb.dat")
    tables = sb.ingest_study(result.root)
    sb.stats.compare(tables.runs, "numjobs", 1, "iops", by=["iodepth"])

The sub-APIs ``stats``, ``plots``, ``show``, ``tables``, ``aggregate``, ``testbed``, ``servers``,
``studies`` and ``hoststeps`` load on first use (``sb.stats``, ``from storagebench import plots``):
they bring scipy, statsmodels and matplotlib, which ``import storagebench`` and every
``storagebench`` command would otherwise pay for. The names of ``__all__`` load the same way, from the
module that owns each (``_LAZY``): ``import storagebench`` itself loads only the version and the errors,
not pandas or pyarrow. ``storagebench.display`` is the old name of ``show`` (it clashed with IPython's
``display``): ``from storagebench import display`` still gives ``show``, with a DeprecationWarning.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

from ._version import __version__ as __version__
from .errors import (
    FioError,
    FioNotFoundError,
    HostError,
    IngestError,
    JobFileError,
    NotWritableError,
    PublishError,
    ResultsBusyError,
    SchemaError,
    StatsError,
    StorageBenchError,
    StudyError,
    TestbedError,
    UnsafeTargetError,
)

if TYPE_CHECKING:  # the names below, for type checkers and IDEs; at run time they load on first use
    from ._batch import run_batch
    from ._loadgen_profiles import study_from_diskspd, study_from_icf
    from ._plan import RunPlan
    from ._runner import SweepResult, run_study
    from ._store import StudyStore
    from ._study import Study, load_study
    from .findings import Finding, Findings
    from .ingest import IngestResult, ingest_paths, ingest_study, ingest_to_parquet
    from .publish import build_site, execute_notebook, publish_report
    from .published import load_published, load_result_sets, load_table
    from .runlevel import read_run_totals
    from .scaling import load_scaling, measure_scaling
    from .schema import read_table

#: Where each lazily loaded name of ``__all__`` lives (its owner module, relative to the package).
_LAZY = {
    "run_batch": "._batch",
    "study_from_diskspd": "._loadgen_profiles",
    "study_from_icf": "._loadgen_profiles",
    "RunPlan": "._plan",
    "SweepResult": "._runner",
    "run_study": "._runner",
    "StudyStore": "._store",
    "Study": "._study",
    "load_study": "._study",
    "Finding": ".findings",
    "Findings": ".findings",
    "IngestResult": ".ingest",
    "ingest_paths": ".ingest",
    "ingest_study": ".ingest",
    "ingest_to_parquet": ".ingest",
    "build_site": ".publish",
    "execute_notebook": ".publish",
    "publish_report": ".publish",
    "load_published": ".published",
    "load_result_sets": ".published",
    "load_table": ".published",
    "read_run_totals": ".runlevel",
    "load_scaling": ".scaling",
    "measure_scaling": ".scaling",
    "read_table": ".schema",
}

__all__ = [
    # a study: spec -> plan -> runs
    "Study", "RunPlan", "load_study", "study_from_diskspd", "study_from_icf",
    "run_study", "SweepResult", "StudyStore",
    # raw output -> tidy tables
    "ingest_study", "ingest_paths", "ingest_to_parquet", "IngestResult",
    "read_table", "read_run_totals", "load_table", "load_published", "load_result_sets",
    # write-ups
    "Finding", "Findings", "execute_notebook", "publish_report", "build_site", "run_batch",
    # scale-out studies
    "measure_scaling", "load_scaling",
    # errors
    "StorageBenchError", "StudyError", "JobFileError", "FioError", "FioNotFoundError", "IngestError",
    "SchemaError", "UnsafeTargetError", "TestbedError", "StatsError", "PublishError", "HostError",
    "NotWritableError", "ResultsBusyError",
]

#: Sub-APIs imported on first access (see the module docstring).
SUBMODULES = ("stats", "plots", "show", "tables", "aggregate", "testbed", "servers", "studies", "hoststeps")

#: Old names of sub-APIs, still importable with a DeprecationWarning: {old: new}.
_RENAMED = {"display": "show"}


def __getattr__(name: str) -> Any:
    """PEP 562: load a sub-API or a name of ``__all__`` from its owner on first access, then keep it."""
    if name in SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    if name in _RENAMED:
        new = _RENAMED[name]
        warnings.warn(f"storagebench.{name} is now storagebench.{new}: `from storagebench import {new}`",
                      DeprecationWarning, stacklevel=2)
        return importlib.import_module(f".{new}", __name__)
    owner = _LAZY.get(name)
    if owner is not None:
        value = getattr(importlib.import_module(owner, __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'storagebench' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(SUBMODULES) | set(_LAZY))
