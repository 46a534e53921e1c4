"""Finding the files to ingest (private part of :mod:`storagebench.ingest`): the walk of files and directories,
regular files only, each read under a size cap, a run directory's ``point.json``/``provenance.json`` beside its output."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from .._inputs import (
    MAX_TOOL_OUTPUT_BYTES,
    STAGING_PREFIX,
    Refused,
    file_kind,
    read_input,
    scan,
    walk,
)
from ..errors import IngestError
from .fio import (
    check_point,
    check_provenance,
    file_run_id,
)
from .fiolog import is_fio_log

_SKIP_IN_RUN_DIR = {"point.json", "provenance.json", "error.json"}


# ---- discovery ---------------------------------------------------------------------------------

#: Default size cap of one input file (bytes): a file above it is reported, not read.
MAX_FILE_BYTES = MAX_TOOL_OUTPUT_BYTES


@dataclass
class _Item:
    kind: str  # "fio", "log" or "other" (a file found in a directory: read if its content is DiskSPD/Iometer)
    path: str
    identity: Any = None  # checked point.json (storagebench.ingest.fio.check_point)
    provenance: Any = None  # checked provenance.json
    run_id: str | None = None  # for logs
    host: str = "local"


def _not_regular(path: str, mode: int) -> IngestError:
    return IngestError(f"not a regular file ({file_kind(mode)}): not read (only regular files are ingested)", path=path)


_CAP_HINT = " (raise max_file_bytes / --max-file-size to ingest it)"


def _read_file(path: str, max_bytes: int, head: int | None = None) -> bytes:
    """The bytes of a regular file, at most ``max_bytes`` (``head``: only the first ``head`` bytes), through
    the one reader of inputs (:func:`storagebench._inputs.read_input`: ``O_NONBLOCK``, ``fstat`` of the open
    descriptor, the size cap, a file growing past it while read refused)."""
    return read_input(path, max_bytes=max_bytes, what="file", error=IngestError, head=head, hint=_CAP_HINT)


def _refused(bad: list[Refused]) -> list[IngestError]:
    return [IngestError(r.reason, path=r.path) for r in bad]


def _scan(d: str, root: str) -> tuple[list[str], list[str], list[IngestError]]:
    """:func:`storagebench._inputs.scan` with its refusals as per-file :class:`IngestError`."""
    dirs, files, bad = scan(d, root)
    return dirs, files, _refused(bad)


def _walk(top: str) -> Iterator[tuple[str, list[str], list[str], list[IngestError]]]:
    """:func:`storagebench._inputs.walk` (regular files only, never leaving the tree; staging directories of a
    run being measured, ``.tmp-*``, are not entered) with its refusals as per-file :class:`IngestError`."""
    for d, dirs, files, bad in walk(top):
        dirs[:] = [n for n in dirs if not n.startswith(STAGING_PREFIX)]
        yield d, dirs, files, _refused(bad)


def _read_meta(path: str, files: list[str] | None, max_bytes: int) -> bytes | None:
    """The bytes of ``point.json``/``provenance.json`` (None when not in ``files``), for
    :func:`~storagebench.ingest.fio.check_point` / ``check_provenance`` to decode typed."""
    name = os.path.basename(path)
    if files is not None and name not in files:
        return None
    return _read_file(path, max_bytes)


def _run_dir_items(d: str, files: list[str], max_bytes: int) -> Iterator[_Item | IngestError]:
    prefix = d if d.endswith(os.sep) else d + os.sep
    try:
        if "point.json" not in files:
            raise IngestError("missing file (or not a regular file)", path=prefix + "point.json")
        point = check_point(_read_meta(prefix + "point.json", files, max_bytes), prefix + "point.json")
        prov = check_provenance(_read_meta(prefix + "provenance.json", files, max_bytes), prefix + "provenance.json")
    except IngestError as exc:
        yield exc
        return
    except OSError as exc:
        yield IngestError(f"cannot read: {exc.strerror or exc}", path=prefix + "point.json")
        return
    if not point.run_id:
        yield IngestError("point.json is missing ['run_id']", path=prefix + "point.json")
        return
    if "output.json" not in files:
        yield IngestError("run directory has no output.json", path=d)
        return
    yield _Item("fio", prefix + "output.json", identity=point, provenance=prov)
    for f in sorted(files):
        if is_fio_log(f):
            yield _Item("log", prefix + f, run_id=point.run_id, provenance=prov)


def _plain_dir_items(d: str, files: list[str], max_bytes: int) -> Iterator[_Item]:
    jsons = sorted(f for f in files if f.endswith(".json") and f not in _SKIP_IN_RUN_DIR)
    logs = sorted(f for f in files if is_fio_log(f))
    prefix = d if d.endswith(os.sep) else d + os.sep  # = os.path.join(d, f) for a plain name, cheaper
    for f in jsons:
        yield _Item("fio", prefix + f)  # str, not Path: pathlib costs ~20 us a file
    log_run_id = None
    if logs and len(jsons) == 1:  # logs beside one fio output belong to that run
        try:
            log_run_id = file_run_id(_read_file(prefix + jsons[0], max_bytes))
        except (OSError, IngestError):
            log_run_id = None
    for f in logs:
        yield _Item("log", prefix + f, run_id=log_run_id)
    for f in sorted(files):  # DiskSPD / Iometer results are recognised by content, whatever their name
        if not f.endswith(".json") and not is_fio_log(f) and not f.startswith("."):
            yield _Item("other", prefix + f)


def _discover(paths: Iterable[str | os.PathLike], max_bytes: int) -> Iterator[_Item | IngestError]:
    if isinstance(paths, (str, bytes, os.PathLike)):
        paths = [paths]
    for p in paths:
        p = os.fsdecode(p)  # str; a non-UTF-8 name keeps its bytes as surrogate escapes
        try:
            st = os.stat(p)  # a path named explicitly may be a symlink: the user chose it
        except FileNotFoundError:
            yield IngestError("no such file or directory", path=p)
            continue
        except OSError as exc:
            yield IngestError(f"cannot read: {exc.strerror or exc}", path=p)
            continue
        if stat.S_ISDIR(st.st_mode):
            for root, dirs, files, bad in _walk(p):
                yield from bad
                if "raw" in dirs and ("failed" in dirs or "study.yaml" in files):
                    # a study directory: only raw/ holds runs (not failed/ attempts, aside/, tidy/, notebooks/,
                    # nor its records: created_targets.json, testbed.json, report.json ...)
                    dirs[:] = ["raw"]
                    continue
                if "point.json" in files:
                    yield from _run_dir_items(root, files, max_bytes)
                else:
                    yield from _plain_dir_items(root, files, max_bytes)
        elif not stat.S_ISREG(st.st_mode):
            yield _not_regular(p, st.st_mode)
        elif os.path.basename(p) == "point.json":
            parent = os.path.dirname(p) or "."
            _, files, bad = _scan(parent, os.path.realpath(parent))
            yield from bad
            yield from _run_dir_items(parent, files, max_bytes)
        elif is_fio_log(p):
            yield _Item("log", p)
        else:
            yield _Item("fio", p)


