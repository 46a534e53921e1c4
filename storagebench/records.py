"""Typed, versioned records of where and how a run was measured.

Every run directory holds a ``provenance.json``; a testbed study holds a ``testbed.json``. They
were untyped dicts that several modules built, changed and read by guessing key names; these
frozen dataclasses are the one definition of their fields (units in the names: ``_bytes``,
``_s``; times are ISO 8601 UTC strings) and of their file format:

* :meth:`Provenance.to_json` writes ``format_version`` (:data:`FORMAT_VERSION`) beside the fields;
* :meth:`Provenance.from_json` reads the current version and migrates version 0 (files written
  before the field existed: the same keys, no version); a newer version is refused with a
  :class:`~storagebench.errors.SchemaError` naming it. Keys this version does not know are kept
  in ``extra`` and written back unchanged.

The runner builds one :class:`Provenance` per run, after the run, from parts collected before
and during it, and never changes it afterwards.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import orjson

from ._caps import check_caps
from ._inputs import read_input
from .errors import SchemaError

#: Most devices of one run's ``set_up.caps`` (a testbed build caps a handful).
MAX_CAPPED_DEVICES = 64
#: Largest ``provenance.json`` read, bytes (a record is a few KiB).
MAX_RECORD_BYTES = 4 * 2**20

__all__ = [
    "FORMAT_VERSION",
    "POINT_FORMAT_VERSION",
    "DeviceInfo",
    "FilesystemInfo",
    "ClientServerInfo",
    "SetUpInfo",
    "Provenance",
    "TestbedRecord",
    "provenance_records",
]

#: Version of the ``provenance.json`` / ``testbed.json`` format written now. (The parquet tables have
#: their own, :data:`storagebench.schema.FORMAT_VERSION`: they change for other reasons.)
FORMAT_VERSION = 1
#: Version of a run's ``point.json`` (study, run_id, repetition, run_order, factors, options) written
#: now, under the key ``format_version``. Version 0 is a ``point.json`` without the key (written before
#: it existed): the same keys, read as they are. Ingest refuses a newer version by name
#: (:func:`storagebench.ingest.fio.check_point`).
POINT_FORMAT_VERSION = 1


def _check_version(data: Mapping[str, Any], what: str) -> int:
    version = data.get("format_version", 0)
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise SchemaError(f"{what}: format_version must be a non-negative integer, got {version!r}")
    if version > FORMAT_VERSION:
        raise SchemaError(
            f"{what}: format_version {version} is newer than this storagebench reads (formats 0 to "
            f"{FORMAT_VERSION}); upgrade storagebench to read it"
        )
    return version


@functools.cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in fields(cls)) - {"extra", "format_version"}


def _split(cls: type, data: Mapping[str, Any], what: str) -> tuple[dict[str, Any], dict[str, Any]]:
    if not isinstance(data, Mapping):
        raise SchemaError(f"{what}: must be a JSON object, got {type(data).__name__}")
    names = _field_names(cls)
    known = {k: v for k, v in data.items() if k in names}
    extra = {k: v for k, v in data.items() if k not in names and k != "format_version"}
    return known, extra


def _typed(value: Any, kinds: tuple[type, ...], what: str) -> Any:
    if value is None or (isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)):
        return value
    names = "/".join(k.__name__ for k in kinds)
    raise SchemaError(f"{what}: must be {names} or null, got {value!r}")


_CONDITIONAL_DEVICE = ("backing_file", "model_note")
#: Provenance fields written only when they hold something (as in format 0).
_CONDITIONAL = ("device_note", "memory_note", "client_server", "safety", "quiet_host", "hosts", "host_steps", "set_up",
                "steadystate")


@dataclass(frozen=True)
class DeviceInfo:
    """The block device under a run's target, from sysfs (:func:`storagebench._hostinfo.block_device_info`).

    Attributes
    ----------
    name, path, devno : str
        ``vda``, ``/dev/vda``, ``"254:0"``.
    partition_of : str or None
        The whole disk when the device is a partition.
    model, vendor : str or None
        ``device/model``, ``device/vendor`` (``None`` for loop, dm, zram ...; ``model_note`` says why).
    rotational : bool or None
        ``queue/rotational``.
    scheduler : str or None
        The active I/O scheduler.
    size_bytes, logical_block_size_bytes : int or None
    backing_file : str or None
        A loop device's backing file.
    model_note : str or None
    """

    name: str | None = None
    path: str | None = None
    devno: str | None = None
    partition_of: str | None = None
    model: str | None = None
    vendor: str | None = None
    rotational: bool | None = None
    scheduler: str | None = None
    size_bytes: int | None = None
    logical_block_size_bytes: int | None = None
    backing_file: str | None = None
    model_note: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_json(self) -> dict[str, Any]:
        """The record as JSON-ready data (``extra`` keys merged back; ``backing_file``/``model_note`` only when set)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        for key in _CONDITIONAL_DEVICE:
            if out[key] is None:
                del out[key]
        return {**out, **self.extra}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DeviceInfo:
        """Read a device record; raises :class:`SchemaError` on a field of the wrong type."""
        known, extra = _split(cls, data, "device")
        for key in ("name", "path", "devno", "partition_of", "model", "vendor", "scheduler", "backing_file",
                    "model_note"):
            _typed(known.get(key), (str,), f"device.{key}")
        for key in ("size_bytes", "logical_block_size_bytes"):
            known[key] = _typed(known.get(key), (int,), f"device.{key}")
        known["rotational"] = _typed(known.get("rotational"), (bool,), "device.rotational")
        return cls(**known, extra=extra)

    @property
    def disk_path(self) -> str | None:
        """The whole disk's node (``/dev/vda`` for ``/dev/vda1``): where ``queue/`` (the scheduler) lives."""
        if self.partition_of:
            return f"/dev/{self.partition_of}"
        return self.path

    @property
    def is_loop(self) -> bool:
        """A loop device (or a partition of one): a file stands in for the disk."""
        disk = self.partition_of or self.name or ""
        return disk.startswith("loop") and disk[4:].isdigit()

    @property
    def label(self) -> str:
        """One phrase for captions: ``/dev/vda (virtio disk 0x1af4, rotational, mq-deadline, 256 GiB)``."""
        facts = []
        if self.model:
            facts.append(" ".join(x for x in (self.vendor, self.model) if x))
        elif self.vendor:
            facts.append(f"vendor {self.vendor}, no model")
        if self.rotational is not None:
            facts.append("rotational" if self.rotational else "non-rotational")
        if self.scheduler:
            facts.append(f"scheduler {self.scheduler}")
        if self.size_bytes:
            facts.append(f"{self.size_bytes / 2**30:,.0f} GiB")
        if self.backing_file:
            facts.append(f"backed by {self.backing_file}")
        return f"{self.path or self.name or '?'}" + (f" ({', '.join(facts)})" if facts else "")


@dataclass(frozen=True)
class FilesystemInfo:
    """The filesystem holding a run's target (``/proc/self/mountinfo``).

    Attributes
    ----------
    fstype, mountpoint, source : str or None
    """

    fstype: str | None = None
    mountpoint: str | None = None
    source: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {"fstype": self.fstype, "mountpoint": self.mountpoint, "source": self.source, **self.extra}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FilesystemInfo:
        """Read a filesystem record."""
        known, extra = _split(cls, data, "filesystem")
        for key, value in known.items():
            _typed(value, (str,), f"filesystem.{key}")
        return cls(**known, extra=extra)


@dataclass(frozen=True)
class ClientServerInfo:
    """What a client/server run ran: fio's client command and every server's fio version.

    Attributes
    ----------
    hosts : tuple of str
        ``host:port`` (or ``sock:/path``) labels, in command order.
    server_fio_versions : dict of str to str
        Label -> the version the server reported.
    client_fio_version : str or None
    command : tuple of str
        The fio client command line.
    started_at : str or None
        ISO 8601 UTC.
    elapsed_s : float or None
        Wall time of the client, s.
    returncode : int or None
    """

    hosts: tuple[str, ...] = ()
    server_fio_versions: dict[str, str] = field(default_factory=dict)
    client_fio_version: str | None = None
    command: tuple[str, ...] = ()
    started_at: str | None = None
    elapsed_s: float | None = None
    returncode: int | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {"hosts": list(self.hosts), "server_fio_versions": dict(self.server_fio_versions),
                "client_fio_version": self.client_fio_version, "command": list(self.command),
                "started_at": self.started_at, "elapsed_s": self.elapsed_s, "returncode": self.returncode,
                **self.extra}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ClientServerInfo:
        """Read a client/server record."""
        known, extra = _split(cls, data, "client_server")
        for key in ("hosts", "command"):
            value = known.get(key, ())
            if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
                raise SchemaError(f"client_server.{key}: must be a list of strings, got {value!r}")
            known[key] = tuple(value)
        versions = known.get("server_fio_versions", {})
        if not isinstance(versions, Mapping) or not all(isinstance(v, str) for v in versions.values()):
            raise SchemaError(f"client_server.server_fio_versions: must be an object of strings, got {versions!r}")
        known["server_fio_versions"] = dict(versions)
        for key in ("client_fio_version", "started_at"):
            _typed(known.get(key), (str,), f"client_server.{key}")
        known["elapsed_s"] = _typed(known.get("elapsed_s"), (int, float), "client_server.elapsed_s")
        known["returncode"] = _typed(known.get("returncode"), (int,), "client_server.returncode")
        return cls(**known, extra=extra)


@dataclass(frozen=True)
class SetUpInfo:
    """The testbed build a run was measured on (``provenance.json``: ``set_up``).

    Attributes
    ----------
    setup : int
        1-based set-up number of the design.
    block : int or None
        Block of the design (``blocks: true``).
    arm : dict
        Levels of the study's ``setup_factors`` the build serves.
    build_id : str or None
        The build's random id, as in ``testbed.json`` (:class:`TestbedRecord`).
    caps : dict
        The block-I/O caps the run's fio ran under (:func:`storagebench.testbed.throttle`): device path -> ``{riops,
        wiops, rbps, wbps}`` (those set; :func:`storagebench._caps.check_caps`). Empty: no throttle (and in files
        written before the field existed, which read as format 1 unchanged).
    """

    setup: int = 1
    block: int | None = None
    arm: dict[str, Any] = field(default_factory=dict)
    build_id: str | None = None
    caps: dict[str, dict[str, int]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready data (``caps`` only when there are some)."""
        caps = {"caps": {d: dict(c) for d, c in self.caps.items()}} if self.caps else {}
        return {"setup": self.setup, "block": self.block, "arm": dict(self.arm), "build_id": self.build_id,
                **caps, **self.extra}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SetUpInfo:
        """Read a set-up record; raises :class:`SchemaError` on a field of the wrong type."""
        known, extra = _split(cls, data, "set_up")
        known["setup"] = _typed(known.get("setup", 1), (int,), "set_up.setup")
        known["block"] = _typed(known.get("block"), (int,), "set_up.block")
        known["build_id"] = _typed(known.get("build_id"), (str,), "set_up.build_id")
        arm = known.get("arm") or {}
        if not isinstance(arm, Mapping):
            raise SchemaError(f"set_up.arm: must be an object, got {arm!r}")
        known["arm"] = dict(arm)
        known["caps"] = _caps_of(known.get("caps") or {})
        return cls(**known, extra=extra)


def _caps_of(caps: Any) -> dict[str, dict[str, int]]:
    """``set_up.caps`` read through the one rule of a cap (:func:`storagebench._caps.check_caps`)."""
    if not isinstance(caps, Mapping) or len(caps) > MAX_CAPPED_DEVICES:
        raise SchemaError(f"set_up.caps: must be an object of at most {MAX_CAPPED_DEVICES} devices, got {caps!r}"[:300])
    out = {}
    for device, c in caps.items():
        if not isinstance(device, str) or not device.startswith("/dev/") or len(device) > 256:
            raise SchemaError(f"set_up.caps: a key must be a /dev path, got {device!r}"[:300])
        try:
            out[device] = check_caps(c, f"set_up.caps[{device!r}]")
        except ValueError as exc:
            raise SchemaError(str(exc)[:300]) from None
    return out


@dataclass(frozen=True)
class Provenance:
    """Where and how one run was measured (``raw/<run_id>/provenance.json``).

    Attributes
    ----------
    fio_version, kernel, kernel_version, hostname, os, cpu_model, python, storagebench_version : str or None
    cpu_count : int or None
    target, target_realpath : str or None
        fio's ``filename`` as run, and its real path (``None`` for client/server runs).
    target_kind : str or None
        ``file``, ``block``, ``char``, ``directory``, ``missing`` or ``other``.
    device : DeviceInfo or None
    device_note : str or None
        Why there is no device record.
    memory_note : str or None
        Set when the target is a file on a file system in memory (tmpfs, devtmpfs, ramfs;
        :data:`storagebench._hostinfo.MEMORY_FSTYPES`): "this measured memory, ...". The write-up shows it.
    filesystem : FilesystemInfo or None
    spec_hash, git_rev : str or None
    git_dirty : bool or None
    started_at, finished_at : str or None
        ISO 8601 UTC.
    duration_s : float or None
        Wall time of the fio process, s.
    hosts : tuple of str
        The fio servers that ran the point (client/server runs).
    client_server : ClientServerInfo or None
        fio's client command and the servers' fio versions.
    safety : dict or None
        What :mod:`storagebench._safety` checked and what was allowed (``allow``, ``allow_devices``,
        the objects touched, overrides).
    quiet_host : dict or None
        The quiet-host check (other fio processes, the target device's activity) before the run and, in
        ``during_run``, the device's I/O beyond fio's own while it ran
        (:meth:`storagebench._hostinfo.QuietProbe.finish`, :func:`storagebench._hostinfo.run_io_record`).
    host_steps : tuple of dict
        The study's ``host_steps`` as applied before the run (:mod:`storagebench.hoststeps`), in
        order, each the step's own record: ``step`` (``drop_page_cache``, ``drop_file_cache``,
        ``set_scheduler``), ``applied_at`` (ISO 8601 UTC) and its before/after values
        (``cached_before_bytes``/``cached_after_bytes``, ``resident_before_bytes``/
        ``resident_after_bytes``, ``previous``/``current`` scheduler of ``device``).
    set_up : SetUpInfo or None
        The testbed build the run was measured on (testbed studies).
    steadystate : dict or None
        The steady-state rule the run's fio options asked for (``rule``, ``duration_s``, ``ramp_time_s``,
        ``runtime_s``; :func:`storagebench._specvalues.steadystate_request`): fio stops the run before
        ``runtime_s`` once steady. What fio made of it is in ``output.json`` (the runs table's ``ss_*``).
    format_version : int
        :data:`FORMAT_VERSION` when written by this version.
    extra : dict
        Keys this version does not know, kept and written back.
    """

    fio_version: str | None = None
    kernel: str | None = None
    kernel_version: str | None = None
    hostname: str | None = None
    os: str | None = None
    cpu_model: str | None = None
    cpu_count: int | None = None
    python: str | None = None
    storagebench_version: str | None = None
    target: str | None = None
    target_realpath: str | None = None
    target_kind: str | None = None
    device: DeviceInfo | None = None
    device_note: str | None = None
    memory_note: str | None = None
    filesystem: FilesystemInfo | None = None
    spec_hash: str | None = None
    git_rev: str | None = None
    git_dirty: bool | None = None
    started_at: str | None = None
    finished_at: str | None = None
    duration_s: float | None = None
    hosts: tuple[str, ...] = ()
    client_server: ClientServerInfo | None = None
    safety: dict[str, Any] | None = None
    quiet_host: dict[str, Any] | None = None
    host_steps: tuple[dict[str, Any], ...] = ()
    set_up: SetUpInfo | None = None
    steadystate: dict[str, Any] | None = None
    format_version: int = FORMAT_VERSION
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def replace(self, **changes: Any) -> Provenance:
        """A copy with ``changes`` (the record itself never changes)."""
        return dataclasses.replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready data with ``format_version`` first; ``extra`` keys merged back."""
        out: dict[str, Any] = {"format_version": FORMAT_VERSION}
        for f in fields(self):
            if f.name in ("extra", "format_version"):
                continue
            value = getattr(self, f.name)
            if isinstance(value, (DeviceInfo, FilesystemInfo, ClientServerInfo, SetUpInfo)):
                value = value.to_json()
            elif isinstance(value, tuple):
                value = [dict(v) if isinstance(v, Mapping) else v for v in value]
            if f.name in _CONDITIONAL and value in (None, []):
                continue
            out[f.name] = value
        return {**out, **self.extra}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, path: str = "provenance.json") -> Provenance:
        """Read ``provenance.json`` data of this format version or an older one.

        Version 0 (no ``format_version``: every file the runner wrote before it built this record,
        storagebench 0.1.0) is migrated: it has the same keys, untyped; ``hosts``, ``safety``,
        ``quiet_host``, ``set_up``, ``client_server`` and ``host_steps`` may be missing (they are
        then empty), and the testbed build under ``set_up`` is read into :class:`SetUpInfo`.

        Raises
        ------
        SchemaError
            A newer format version, or a field of the wrong type (named with ``path``).
        """
        _check_version(data, path)
        known, extra = _split(cls, data, path)
        for key in ("fio_version", "kernel", "kernel_version", "hostname", "os", "cpu_model", "python",
                    "storagebench_version", "target", "target_realpath", "target_kind", "device_note", "memory_note",
                    "spec_hash", "git_rev", "started_at", "finished_at"):
            if key in known:
                _typed(known[key], (str,), f"{path}: {key}")
        if "cpu_count" in known:
            known["cpu_count"] = _typed(known["cpu_count"], (int,), f"{path}: cpu_count")
        if "git_dirty" in known:
            known["git_dirty"] = _typed(known["git_dirty"], (bool,), f"{path}: git_dirty")
        if "duration_s" in known:
            known["duration_s"] = _typed(known["duration_s"], (int, float), f"{path}: duration_s")
        if isinstance(known.get("device"), Mapping):
            known["device"] = DeviceInfo.from_json(known["device"])
        elif known.get("device") is not None:
            raise SchemaError(f"{path}: device must be an object or null, got {known['device']!r}")
        if isinstance(known.get("filesystem"), Mapping):
            known["filesystem"] = FilesystemInfo.from_json(known["filesystem"])
        elif known.get("filesystem") is not None:
            raise SchemaError(f"{path}: filesystem must be an object or null, got {known['filesystem']!r}")
        for key, kind in (("client_server", ClientServerInfo), ("set_up", SetUpInfo)):
            if isinstance(known.get(key), Mapping):
                known[key] = kind.from_json(known[key])
            elif known.get(key) is not None:
                raise SchemaError(f"{path}: {key} must be an object or null, got {known[key]!r}")
        hosts = known.get("hosts") or ()
        if not isinstance(hosts, (list, tuple)) or not all(isinstance(h, str) for h in hosts):
            raise SchemaError(f"{path}: hosts must be a list of strings, got {hosts!r}")
        known["hosts"] = tuple(hosts)
        steps = known.get("host_steps") or ()
        if not isinstance(steps, (list, tuple)) or not all(
                isinstance(s, Mapping) and isinstance(s.get("step"), str) for s in steps):
            raise SchemaError(f"{path}: host_steps must be a list of objects, each with a 'step' name, "
                              f"got {steps!r}")
        known["host_steps"] = tuple(dict(s) for s in steps)
        for key in ("safety", "quiet_host", "steadystate"):
            if known.get(key) is not None and not isinstance(known[key], Mapping):
                raise SchemaError(f"{path}: {key} must be an object or null, got {known[key]!r}")
        return cls(**known, extra=extra)

    @classmethod
    def read(cls, path: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None) -> Provenance:
        """Read a ``provenance.json`` file (:meth:`from_json` on its JSON).

        Parameters
        ----------
        path : path
        root : path, optional
            The results tree the file must lie in (a symlink leaving it is refused).

        Raises
        ------
        SchemaError
            Not a regular file of at most :data:`MAX_RECORD_BYTES` (read by the one reader of inputs,
            :func:`storagebench._inputs.read_input`), not valid JSON, or as :meth:`from_json`; the message
            names ``path``.
        FileNotFoundError
            There is no such file.
        """
        if not os.path.lexists(path):
            raise FileNotFoundError(2, "no such file", os.fspath(path))
        raw = read_input(path, max_bytes=MAX_RECORD_BYTES, what="provenance record", error=SchemaError, root=root)
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise SchemaError(f"{os.fspath(path)}: not valid JSON: {exc}") from None
        return cls.from_json(data, path=os.fspath(path))


def provenance_records(provenance: Any, *, what: str = "provenance") -> list[Provenance]:
    """Provenance given in any of the forms a caller holds, as typed records.

    Parameters
    ----------
    provenance : Provenance, mapping, sequence of either, DataFrame, or None
        Records, their JSON form (as in ``provenance.json``), or a table of them (one row each;
        missing values are null).
    what : str
        Name of the argument in error messages.

    Returns
    -------
    list of Provenance
        Empty for ``None``.

    Raises
    ------
    SchemaError
        A record of the wrong shape (:meth:`Provenance.from_json`), or ``provenance`` of another type.
    """
    if provenance is None:
        return []
    if isinstance(provenance, Provenance):
        return [provenance]
    if isinstance(provenance, Mapping):
        return [Provenance.from_json(provenance, path=what)]
    if hasattr(provenance, "to_dict") and hasattr(provenance, "columns"):  # a pandas DataFrame, one record a row
        rows = [{k: None if isinstance(v, float) and v != v else v for k, v in r.items()}  # NaN: missing
                for r in provenance.to_dict("records")]
        return [Provenance.from_json(r, path=f"{what}[{i}]") for i, r in enumerate(rows)]
    if isinstance(provenance, (list, tuple)):
        out = []
        for i, rec in enumerate(provenance):
            if isinstance(rec, Provenance):
                out.append(rec)
            elif isinstance(rec, Mapping):
                out.append(Provenance.from_json(rec, path=f"{what}[{i}]"))
            else:
                raise SchemaError(f"{what}[{i}]: must be a Provenance record or its JSON object, "
                                  f"got {type(rec).__name__}")
        return out
    raise SchemaError(f"{what} must be a Provenance record, a mapping, a sequence of them or a DataFrame, "
                      f"got {type(provenance).__name__}")


@dataclass(frozen=True)
class TestbedRecord:
    """What one set-up of a testbed study really was (``testbed.json``).

    Attributes
    ----------
    study : str
    set_up_at : str
        ISO 8601 UTC.
    setup : int
        1-based index of the set-up (a study may build its testbed several times).
    targets : dict of str to str
        Target level -> path.
    devices : tuple of dict
        Each device or filesystem made (``kind``, path, size, role ...).
    notes : tuple of str
        What a reader must know about the testbed (shared disk, sparse files, fallbacks).
    block : int or None
        Block of the set-up (``blocks: true``).
    arm : dict
        Levels of the study's ``setup_factors`` this build serves (empty: every level).
    build_id : str or None
        Random id of this build; every run measured on it records it in ``provenance.json``
        (``set_up.build_id``), so the runs of one build can be told from a rebuild's.
    run_ids : tuple of str
        The runs planned on this build.
    phases_s : dict of str to float
        Wall time of the build's phases, s (``build``, ``precondition``).
    """

    __test__ = False  # not a pytest test class

    study: str
    set_up_at: str
    setup: int = 1
    targets: dict[str, str] = field(default_factory=dict)
    devices: tuple[dict[str, Any], ...] = ()
    notes: tuple[str, ...] = ()
    block: int | None = None
    arm: dict[str, Any] = field(default_factory=dict)
    build_id: str | None = None
    run_ids: tuple[str, ...] = ()
    phases_s: dict[str, float] = field(default_factory=dict)
    format_version: int = FORMAT_VERSION
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready data with ``format_version``."""
        return {"format_version": FORMAT_VERSION, "study": self.study, "set_up_at": self.set_up_at,
                "setup": self.setup, "block": self.block, "arm": dict(self.arm), "build_id": self.build_id,
                "targets": dict(self.targets), "devices": [dict(d) for d in self.devices],
                "notes": list(self.notes), "run_ids": list(self.run_ids), "phases_s": dict(self.phases_s),
                **self.extra}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, path: str = "testbed.json") -> TestbedRecord:
        """Read a set-up record (version 0: no ``format_version``, no ``setup``; migrated)."""
        _check_version(data, path)
        known, extra = _split(cls, data, path)
        if not isinstance(known.get("study"), str) or not isinstance(known.get("set_up_at"), str):
            raise SchemaError(f"{path}: study and set_up_at must be strings, got {known.get('study')!r}, "
                              f"{known.get('set_up_at')!r}")
        known["devices"] = tuple(known.get("devices") or ())
        known["notes"] = tuple(known.get("notes") or ())
        known["targets"] = dict(known.get("targets") or {})
        known["arm"] = dict(known.get("arm") or {})
        known["run_ids"] = tuple(known.get("run_ids") or ())
        known["phases_s"] = dict(known.get("phases_s") or {})
        known["setup"] = _typed(known.get("setup", 1), (int,), f"{path}: setup")
        known["block"] = _typed(known.get("block"), (int,), f"{path}: block")
        known["build_id"] = _typed(known.get("build_id"), (str,), f"{path}: build_id")
        return cls(**known, extra=extra)
