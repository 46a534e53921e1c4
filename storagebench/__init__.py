"""storagebench: fio sweeps -> tidy tables -> statistics -> reproducible write-ups.

The public API is listed once, here. Submodules load on first use (``storagebench.plots`` pulls in
matplotlib; the CLI should not pay for that), so ``import storagebench`` stays cheap::

    import storagebench as sb
    study = sb.load_study("data/studies/demo.yaml")
    result = sb.run_study(study, target="/var/tmp/sb.dat")
    tables = sb.ingest_study(result.raw_dir.parent)
    sb.stats.compare(tables.runs, "numjobs", 1, "iops", by=["iodepth"])

Modules (one concept each): ``schema``, ``study``, ``loadgen_profiles``, ``jobfile``, ``store``, ``hostinfo``, ``runner``,
``safety``, ``ingest``, ``histogram``, ``runlevel``, ``aggregate``, ``stats``, ``published``, ``findings``, ``tables``,
``plots``, ``display``, ``publish``,
``testbed``, ``hoststeps``, ``studies`` (the testbed studies: one module each), ``servers``, ``clientserver``,
``batch``, ``cli``.
"""

from __future__ import annotations

import importlib
from typing import Any

from ._version import __version__ as __version__
from .errors import (
    FioError,
    FioNotFoundError,
    HostError,
    IngestError,
    JobFileError,
    PublishError,
    SchemaError,
    StatsError,
    StorageBenchError,
    StudyError,
    TestbedError,
    UnsafeTargetError,
)

#: public name -> the module that defines it (loaded on first access).
_LAZY: dict[str, str] = {
    # spec -> plan -> runs
    "Study": "study", "RunPlan": "study", "RunPoint": "study", "load_study": "study",
    "study_from_diskspd": "loadgen_profiles", "study_from_icf": "loadgen_profiles",
    "render_jobfile": "jobfile", "parse_jobfile": "jobfile",
    "StudyStore": "store", "collect_provenance": "hostinfo",
    "run_study": "runner", "run_point": "runner", "run_fio": "runner", "SweepResult": "runner",
    "check_run": "safety", "lint_jobfile": "safety", "device_report": "safety",
    # raw output -> tidy tables
    "IngestResult": "ingest", "ingest_paths": "ingest", "ingest_study": "ingest",
    "ingest_to_parquet": "ingest", "parse_fio_output": "ingest", "parse_fio_log": "ingest",
    "percentiles_from_bins": "histogram", "merge_histograms": "histogram", "plat_idx_to_val": "histogram",
    "run_totals": "runlevel", "read_run_totals": "runlevel", "read_table": "schema",
    "combine_jobs": "aggregate", "per_host": "aggregate", "cluster_aggregate": "aggregate",
    "scaling_summary": "aggregate", "saturation_point": "aggregate", "fairness": "aggregate",
    "list_published": "published", "load_published": "published", "load_table": "published",
    # figures and write-ups
    "execute_notebook": "publish", "publish_report": "publish", "parameter_type_ok": "publish",
    "notebooks_to_html": "publish", "build_site": "publish", "show_figure": "display",
    "Finding": "findings", "Findings": "findings",
    # testbeds (root)
    "DropPageCache": "hoststeps", "DropFileCache": "hoststeps", "SetScheduler": "hoststeps",
    "SetUp": "runner",
    # scale-out
    "fio_servers": "servers", "run_clients": "clientserver", "run_batch": "batch",
    "scaling_study": "scaling", "run_scaling": "scaling", "measure_scaling": "scaling",
    "load_scaling": "scaling",
}
_MODULES = (
    "schema", "study", "loadgen_profiles", "jobfile", "store", "hostinfo", "runner", "safety", "ingest", "histogram",
    "runlevel", "aggregate", "stats", "published", "findings", "tables", "plots", "display", "publish", "testbed",
    "hoststeps", "studies", "servers", "clientserver", "scaling", "batch",
)

__all__ = [
    "StorageBenchError", "StudyError", "JobFileError", "FioError", "FioNotFoundError", "IngestError",
    "SchemaError", "UnsafeTargetError", "TestbedError", "StatsError", "PublishError", "HostError",
    *_LAZY, *_MODULES,
]


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return importlib.import_module(f".{name}", __name__)
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'storagebench' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
