"""storagebench: fio sweeps -> tidy tables -> statistics -> reproducible write-ups.

The names a user needs, imported here (the list is ``__all__``; docs/ARCHITECTURE.md, "The public
API", documents it and a test keeps the two equal)::

    import storagebench as sb
    study = sb.load_study("data/studies/demo.yaml")
    result = sb.run_study(study, target="/var/tmp/sb.dat")
    tables = sb.ingest_study(result.root)
    sb.stats.compare(tables.runs, "numjobs", 1, "iops", by=["iodepth"])

The sub-APIs ``stats``, ``plots``, ``display``, ``tables``, ``aggregate``, ``testbed``, ``servers``,
``studies`` and ``hoststeps`` load on first use (``sb.stats``, ``from storagebench import plots``):
they bring scipy, statsmodels and matplotlib, which ``import storagebench`` and every
``storagebench`` command would otherwise pay for.
"""

from __future__ import annotations

import importlib
from typing import Any

from ._batch import run_batch
from ._loadgen_profiles import study_from_diskspd, study_from_icf
from ._runner import SweepResult, run_study
from ._store import StudyStore
from ._study import RunPlan, Study, load_study
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
from .findings import Finding, Findings
from .ingest import IngestResult, ingest_paths, ingest_study, ingest_to_parquet
from .publish import build_site, execute_notebook, publish_report
from .published import load_published, load_result_sets, load_table
from .runlevel import read_run_totals
from .scaling import load_scaling, measure_scaling
from .schema import read_table

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
SUBMODULES = ("stats", "plots", "display", "tables", "aggregate", "testbed", "servers", "studies", "hoststeps")


def __getattr__(name: str) -> Any:
    if name in SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'storagebench' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(SUBMODULES))
