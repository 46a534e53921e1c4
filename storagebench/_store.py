"""The on-disk layout of one study, atomic run writes, resume.

::

    results/<study>/
      study.yaml               the spec as run (a different spec under the same name is refused)
      .sweep.lock              held (flock) by the sweep measuring into this directory; holds its pid
      raw/<run_id>/            one completed run: job.fio, output.json, stderr.txt, point.json, provenance.json
      raw/.tmp-<run_id>-<pid>/ a run being measured (renamed to raw/<run_id>/ when complete); while
                               fio runs it holds .fio-process.json (fio's pid, argv, job file)
      failed/<run_id>/<utc>/   failed attempts: the same files + error.json
      aside/<utc>/<run_id>/    complete runs moved aside, never deleted: the rest of their set-up or
                               concurrency group could not be measured with them (reason.json says why)
      testbed.json             testbed studies: one record per build of the testbed (set-up)
      tidy/                    parquet tables (ingest); ingest.json: the record of the ingest that wrote them
                               (storagebench report), by which the notebooks know they hold the runs of raw/
      report.html

Records in this tree that root acts on (``.fio-process.json``, ``host_steps_journal.json``,
``created_targets.json``) are data, never instructions: they are read through the root-action gate
(:func:`storagebench._recorded.read_recorded`) and what they say is checked against live state
before anything is done. The tree's directories are made 0755 whatever the umask, and a sweep refuses
a study directory that is another user's or writable by group or others (:meth:`StudyStore.lock`).

A run is complete when ``raw/<run_id>/`` exists. It appears in one ``rename(2)`` of a
directory whose files and which itself were ``fsync``\\ ed first, so a sweep killed at any
moment (Ctrl-C, SIGKILL, power loss) leaves either the whole run or nothing of it.

One sweep at a time measures into a study's directory (:meth:`StudyStore.lock`): two sweeps
on one ``--out`` would measure the same points at the same time and disturb each other.
Reading (ingest, report) needs no lock: it sees complete runs only.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import stat
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ._inputs import completed_runs, read_input
from ._recorded import (
    RecordRefusedError,
    check_dir,
    check_in_tree,
    make_dirs,
    read_recorded,
    warn_refused,
    write_recorded,
)
from ._storefiles import (  # noqa: F401  # noqa: F401
    FileContent,
    StudyLock,
    _flock_held,
    _fsync_dir,
    _fsync_file,
    _lock_holder,
    _publishable,
    _write_file,
    pid_alive,
    utc_stamp,
)
from ._study import load_study
from .errors import SchemaError, StudyError
from .fio import process
from .records import FORMAT_VERSION, MAX_RECORD_BYTES, Provenance, TestbedRecord

if TYPE_CHECKING:  # pragma: no cover
    from ._study import Study

__all__ = ["StudyStore", "pid_alive", "utc_stamp"]

_TMP_PREFIX = ".tmp-"
LOCK_NAME = ".sweep.lock"
#: Files fio created for this study's runs (a later run may lay them out again: safety's size rule).
CREATED_NAME = "created_targets.json"
_CREATED_LOCK = threading.Lock()


class StudyStore:
    """The directory of one study: ``results/<study>/``.

    Parameters
    ----------
    root : str or path-like
        The study's directory (``<out_dir>/<study name>``); created when needed.
    """

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root).absolute()  # fio runs with the staging dir as cwd
        self._lock: StudyLock | None = None

    def lock(self) -> StudyLock:
        """The exclusive lock of this study's directory (created when needed); use as a context manager.

        :func:`storagebench._runner.run_study` holds it for the whole sweep. While it is held,
        every staging directory of another pid is a dead sweep's (:meth:`cleanup_stale`).

        Raises
        ------
        ResultsBusyError
            Another sweep holds it (the message names its pid).
        RecordRefusedError
            The study's directory is another user's or writable by group or others: records root acts
            on are kept there (:func:`storagebench._recorded.check_dir`).
        OSError
            The directory or lock file cannot be created.
        """
        make_dirs(self.root)
        check_dir(self.root, what="study directory")
        self._lock = StudyLock(self.root / LOCK_NAME)
        return self._lock.acquire()

    @property
    def locked(self) -> bool:
        """This store object holds its directory's lock."""
        return self._lock is not None and self._lock.held

    def sweep_holder(self) -> dict[str, Any] | None:
        """Whether a sweep is measuring into this directory now: who holds its lock, without taking it.

        Nothing is created, and the lock is not taken (``/proc/locks`` is read; only where it cannot be read is a
        shared lock tried for an instant), so a sweep starting at the same moment is never refused because of it.

        Returns
        -------
        dict or None
            ``None`` when no process holds ``.sweep.lock``; else what the holder wrote in it (``pid``: an int or
            ``None``, ``host``, ``since``). The file is data anyone able to write the directory could have
            written: show it, never act on it.
        """
        try:
            fd = os.open(self.root / LOCK_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return None  # no lock file (or a symlink, which no sweep makes): nobody measures here
        try:
            st = os.fstat(fd)
            held = _flock_held(st) if stat.S_ISREG(st.st_mode) else False
            if held is None:  # no /proc/locks: try a shared lock for an instant
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                except BlockingIOError:
                    held = True
                else:
                    fcntl.flock(fd, fcntl.LOCK_UN)
                    held = False
            return _lock_holder(fd) if held else None
        finally:
            os.close(fd)

    def progress(self) -> dict[str, Any]:
        """How far the study's sweep is: runs done, runs planned, and the sweep measuring now (if any).

        Returns
        -------
        dict
            ``done`` (completed runs, :meth:`completed_run_ids`), ``planned`` (runs of the plan of the stored
            ``study.yaml``, :attr:`Study.n_runs`; ``None`` when it cannot be read; under ``precision:`` the most the
            rule allows, ``max_repetitions`` per point or set-up), ``adaptive`` (the study has ``precision:``: it
            stops each point when answered, so ``planned`` is a maximum, not what it will run), ``holder``
            (:meth:`sweep_holder`: ``None`` when no sweep holds the lock).
        """
        holder = self.sweep_holder()
        try:
            study = load_study(self.spec_path, stored=True)
        except StudyError:
            planned, adaptive = None, False
        else:
            planned, adaptive = study.n_runs, study.precision is not None
        return {"done": len(self.completed_run_ids()), "planned": planned, "adaptive": adaptive, "holder": holder}

    @classmethod
    def for_study(cls, out_dir: str | os.PathLike[str], study: Study) -> StudyStore:
        """The store of ``study`` under ``out_dir`` (``<out_dir>/<study.name>``)."""
        return cls(Path(out_dir) / study.name)

    # -- paths ----------------------------------------------------------------------------

    @property
    def raw_dir(self) -> Path:
        """``raw/``: one directory per completed run."""
        return self.root / "raw"

    @property
    def failed_dir(self) -> Path:
        """``failed/``: failed attempts, by run id and UTC time."""
        return self.root / "failed"

    @property
    def tidy_dir(self) -> Path:
        """``tidy/``: the parquet tables."""
        return self.root / "tidy"

    @property
    def report_path(self) -> Path:
        """``report.html``."""
        return self.root / "report.html"

    @property
    def spec_path(self) -> Path:
        """``study.yaml``: the spec as run."""
        return self.root / "study.yaml"

    def run_dir(self, run_id: str) -> Path:
        """``raw/<run_id>/``."""
        return self.raw_dir / run_id

    @property
    def aside_dir(self) -> Path:
        """``aside/``: complete runs moved aside (:meth:`set_aside`)."""
        return self.root / "aside"

    @property
    def testbed_path(self) -> Path:
        """``testbed.json``: the set-up records of a testbed study."""
        return self.root / "testbed.json"

    @property
    def created_path(self) -> Path:
        """``created_targets.json``: files fio created for this study's runs (:meth:`own_files`)."""
        return self.root / CREATED_NAME

    # -- files the study's runs created ----------------------------------------------------

    def _created_entries(self) -> list[dict[str, Any]]:
        """The entries of ``created_targets.json`` as written, read through the root-action gate
        (refused: a warning, and none)."""
        try:
            data = read_recorded(self.created_path, tree=self.root, what="list of created targets")
            entries = [] if data is None else orjson.loads(data)
        except RecordRefusedError as exc:
            warn_refused(exc, stacklevel=3)
            return []
        except orjson.JSONDecodeError:
            warn_refused(RecordRefusedError(f"list of created targets {self.created_path} was not acted on: it is "
                                            "not JSON", path=str(self.created_path), reason="not JSON"), stacklevel=3)
            return []
        return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []

    def own_files(self) -> set[tuple[int, int, int]]:
        """Regular files this study's runs created (fio laid them out), as ``(major, minor, inode)``.

        What the list says is checked against the files: an entry counts only while its ``path`` is a
        regular file owned by root or by you whose identity is the recorded one (a planted entry naming
        another file's identity, or a file that replaced the created one, counts for nothing). The list
        itself goes through the root-action gate.

        Returns
        -------
        set of (int, int, int)
        """
        out = set()
        for entry in self._created_entries():
            path, ident = entry.get("path"), entry.get("identity")
            if not (isinstance(path, str) and os.path.isabs(path) and isinstance(ident, list) and len(ident) == 3
                    and all(isinstance(x, int) and not isinstance(x, bool) for x in ident)):
                continue
            try:
                st = os.stat(path)
            except (OSError, ValueError):
                continue
            if (stat.S_ISREG(st.st_mode) and st.st_uid in (0, os.geteuid())
                    and (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino) == tuple(ident)):
                out.add(tuple(ident))
        return out

    def note_created(self, paths: Iterable[str]) -> None:
        """Add files fio has just created for a run to ``created_targets.json`` (mode 0600, atomically).

        Parameters
        ----------
        paths : iterable of str
            Absolute paths; those that are not regular files now are skipped.
        """
        new = []
        for p in paths:
            try:
                st = os.stat(p)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                new.append({"path": p, "identity": [os.major(st.st_dev), os.minor(st.st_dev), st.st_ino]})
        if not new:
            return
        # the runs of a concurrency group finish in threads of this process: one read-modify-write at a time
        with _CREATED_LOCK:
            old = self._created_entries()
            write_recorded(self.created_path, orjson.dumps([*old, *new], option=orjson.OPT_INDENT_2), mode=0o600)

    # -- spec -----------------------------------------------------------------------------

    def ensure_spec(self, study: Study, *, overwrite: bool = False) -> None:
        """Store ``study.yaml`` on first use; refuse a different spec under the same name.

        Parameters
        ----------
        study : Study
        overwrite : bool
            When the stored spec differs, move the whole study directory aside to
            ``<root>.superseded-<utc>/`` (nothing measured is deleted) and start afresh.

        Raises
        ------
        StudyError
            A different spec (by :attr:`Study.spec_hash`) is stored and ``overwrite`` is false.
        """
        if self.spec_path.exists():
            try:
                stored = load_study(self.spec_path, stored=True)
            except StudyError as exc:
                stored_hash = f"unreadable ({exc})"
            else:
                stored_hash = stored.spec_hash
            if stored_hash == study.spec_hash:
                return
            if not overwrite:
                raise StudyError(
                    f"{self.root} holds results of a different spec of study {study.name!r} (spec hash "
                    f"{stored_hash}, this one {study.spec_hash}); rename the study, pass a new output "
                    "directory (--out), or pass overwrite=True (--overwrite) to move the old results aside"
                )
            aside = self.root.with_name(f"{self.root.name}.superseded-{utc_stamp()}")
            os.rename(self.root, aside)
            if self.locked:  # the lock file went aside too: the same lock object now locks the new directory
                self._lock.release()  # type: ignore[union-attr]
                make_dirs(self.root)
                self._lock.acquire()  # type: ignore[union-attr]
        make_dirs(self.raw_dir, tree=self.root)
        text = study.to_yaml(comments=[f"spec_hash: {study.spec_hash}"])
        tmp = self.root / f".study.yaml.tmp-{os.getpid()}"
        _write_file(tmp, text)
        os.rename(tmp, self.spec_path)
        _fsync_dir(self.root)

    # -- runs -----------------------------------------------------------------------------

    def completed_run_ids(self) -> set[str]:
        """Run ids with a complete ``raw/<run_id>/`` directory (:func:`storagebench._inputs.completed_runs`, the
        one rule ingest and the write-ups count by too)."""
        return set(completed_runs(self.raw_dir))

    def _stale_staging(self) -> list[Path]:
        """``raw/.tmp-*`` directories of sweeps that are gone: their pid is dead, or, while this
        store holds the lock, any pid but ours (a reused pid is not a sweep of this study)."""
        # raw/ as a symlink (a copied tree: raw -> /var/tmp) would make root remove what it takes for stale runs
        # outside the tree: the root-action gate refuses it
        if not check_in_tree(self.raw_dir, self.root, what="runs directory"):
            return []
        out = []
        for p in sorted(self.raw_dir.iterdir()):
            if not p.name.startswith(_TMP_PREFIX) or p.is_symlink() or not p.is_dir():
                continue  # a symlink planted here is never followed (nor removed: it is not a run of ours)
            pid_text = p.name.rsplit("-", 1)[-1]
            pid = int(pid_text) if pid_text.isdigit() else None
            if pid == os.getpid():
                continue
            if pid is not None and not self.locked and pid_alive(pid):
                continue  # another sweep may be measuring it right now
            out.append(p)
        return out

    def stop_stale_runs(self, *, fio_bin: str = "fio") -> list[dict[str, Any]]:
        """Stop fio processes that a killed sweep left running into this study.

        A sweep killed outright leaves its run's staging directory with fio's process record
        (:data:`storagebench.fio.process.RECORD_NAME`). Normally the sweep's watchdog has already
        killed fio and its workers; when it could not (it was killed too), this stops the processes
        that live state shows to be that run's fio (:func:`storagebench.fio.process.stop_recorded`:
        the fio binary, the recorded start time and boot, the recorded argv naming the run's job file).
        A record that fails the root-action gate or names anything else is not acted on: a
        :class:`storagebench.errors.StorageBenchWarning` names it and why.

        Parameters
        ----------
        fio_bin : str
            The fio the sweep runs (what a recorded ``exe`` must be).

        Returns
        -------
        list of dict
            One per run whose processes were stopped: ``staging`` (path), ``marker`` (the job
            file), ``parent_pid`` (the dead sweep), ``processes`` (``pid``, ``ppid``, ``pgid``,
            ``sid``, ``state``, ``cmdline`` of each).

        Raises
        ------
        FioError
            A process survived SIGKILL (uninterruptible I/O) for 30 s.
        """
        stopped = []
        for p in self._stale_staging():
            try:
                rec = process.stop_recorded(p / process.RECORD_NAME, tree=self.root, fio_bin=fio_bin)
            except RecordRefusedError as exc:
                warn_refused(exc)
                continue
            if rec is not None:
                stopped.append({"staging": str(p), **rec})
        return stopped

    def cleanup_stale(self, *, fio_bin: str = "fio") -> list[Path]:
        """Remove ``raw/.tmp-*`` directories left by sweeps that died, after stopping what they
        left running (:meth:`stop_stale_runs`).

        A directory is stale when its pid is gone; while this store holds the lock
        (:meth:`lock`), when its pid is not ours.

        Returns
        -------
        list of Path
            The directories removed.
        """
        self.stop_stale_runs(fio_bin=fio_bin)
        removed = []
        for p in self._stale_staging():
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
        return removed

    def staging_dir(self, run_id: str) -> Path:
        """A fresh ``raw/.tmp-<run_id>-<pid>/`` for a run being measured: mode 0700 while it is (its job
        file is read by fio as root; nobody else may reach it, whatever the umask), 0755 once committed."""
        make_dirs(self.raw_dir, tree=self.root)
        tmp = self.raw_dir / f"{_TMP_PREFIX}{run_id}-{os.getpid()}"
        if tmp.is_symlink():
            tmp.unlink()  # not ours: a run is never measured through a planted link
        elif tmp.exists():
            shutil.rmtree(tmp)
        make_dirs(tmp, mode=0o700)
        return tmp

    def sync_files(self, files) -> None:
        """``fsync`` files concurrently (the journal commits them together on ext4/xfs)."""
        files = list(files)
        if len(files) == 1:
            _fsync_file(files[0])
            return
        with ThreadPoolExecutor(max_workers=max(1, len(files))) as pool:
            for fut in [pool.submit(_fsync_file, f) for f in files]:
                fut.result()

    def sync_raw_dir(self) -> None:
        """``fsync`` ``raw/``: makes the renames of completed runs durable."""
        if self.raw_dir.is_dir():
            _fsync_dir(self.raw_dir)

    def commit_run(self, run_id: str, staging: Path, *, synced=(), sync_parent: bool = True) -> Path:
        """Make a staged run complete: fsync its files and directory, ``rename`` it into place.

        Parameters
        ----------
        run_id : str
        staging : Path
            From :meth:`staging_dir`.
        synced : iterable of Path
            Files already fsynced (skipped here).
        sync_parent : bool
            fsync ``raw/`` after the rename. Without it the rename is atomic but not yet
            durable: after a power loss the run is either whole or absent; call
            :meth:`sync_raw_dir` later (the runner does so while the next run starts).

        Raises
        ------
        StudyError
            ``raw/<run_id>/`` already exists (another sweep completed it).
        """
        done = {Path(p) for p in synced}
        _publishable(staging)
        files = [f for f in staging.iterdir() if f.is_file() and f not in done]
        # fsync the files and the staging directory concurrently: the filesystem's journal
        # commits them together (one commit instead of one per file on ext4/xfs)
        with ThreadPoolExecutor(max_workers=len(files) + 1) as pool:
            futures = [pool.submit(_fsync_file, f) for f in files] + [pool.submit(_fsync_dir, staging)]
            for fut in futures:
                fut.result()
        final = self.run_dir(run_id)
        if final.exists():
            raise StudyError(f"run {run_id} is already complete in {final}; not overwriting it")
        try:
            os.rename(staging, final)
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                raise StudyError(f"run {run_id} is already complete in {final}; not overwriting it") from exc
            raise
        if sync_parent:
            _fsync_dir(self.raw_dir)
        return final

    def write_run(self, run_id: str, files: Mapping[str, FileContent]) -> Path:
        """Write one complete run atomically.

        Parameters
        ----------
        run_id : str
        files : mapping of str to str, bytes or Path
            File name -> content (a Path is copied).

        Returns
        -------
        Path
            ``raw/<run_id>/``.
        """
        staging = self.staging_dir(run_id)
        try:
            for name, content in files.items():
                _write_file(staging / name, content)
            return self.commit_run(run_id, staging)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise

    def record_failure(
        self,
        run_id: str,
        files: Mapping[str, FileContent] | None = None,
        error: BaseException | str | Mapping[str, Any] = "",
        *,
        staging: Path | None = None,
    ) -> Path:
        """Keep a failed attempt under ``failed/<run_id>/<utc>/`` with ``error.json``.

        Parameters
        ----------
        run_id : str
        files : mapping, optional
            Extra files to write (name -> content).
        error : exception, str or mapping
            What went wrong; an exception's ``message``/``returncode`` are kept.
        staging : Path, optional
            A staging directory to move there (its files are kept as they are).

        Returns
        -------
        Path
            The attempt's directory.
        """
        dest_parent = self.failed_dir / run_id
        make_dirs(dest_parent, tree=self.root)
        dest = dest_parent / utc_stamp()
        if staging is not None and staging.exists():
            _publishable(staging)
            os.rename(staging, dest)
        else:
            make_dirs(dest)
        for name, content in (files or {}).items():
            _write_file(dest / name, content)
        if isinstance(error, Mapping):
            info = dict(error)
        elif isinstance(error, BaseException):
            info = {
                "type": type(error).__name__,
                "message": getattr(error, "message", str(error)),
                "returncode": getattr(error, "returncode", None),
            }
        else:
            info = {"type": "error", "message": str(error)}
        info.setdefault("run_id", run_id)
        info.setdefault("failed_at", datetime.now(timezone.utc).isoformat())
        _write_file(dest / "error.json", orjson.dumps(info, option=orjson.OPT_INDENT_2))
        _fsync_dir(dest)
        return dest

    def failed_attempts(self) -> dict[str, list[Path]]:
        """Run id -> its failed attempt directories, oldest first."""
        out: dict[str, list[Path]] = {}
        if not self.failed_dir.is_dir():
            return out
        for d in sorted(self.failed_dir.iterdir()):
            if d.is_dir():
                out[d.name] = sorted(p for p in d.iterdir() if p.is_dir())
        return out

    def set_aside(self, run_ids, reason: str, **info: Any) -> Path | None:
        """Move complete runs out of ``raw/`` to ``aside/<utc>/<run_id>/``, with ``reason.json``.

        For runs that may not be mixed with the runs measured next: the rest of a set-up whose
        testbed is gone (it is built and measured again as a whole), or the rest of a concurrency
        group that must be measured again together. Nothing is deleted; ingest reads only ``raw/``.

        Parameters
        ----------
        run_ids : iterable of str
            Runs to move (those without a complete ``raw/<run_id>/`` are ignored).
        reason : str
            Why, in words (kept in ``reason.json``).
        **info
            More JSON-ready facts for ``reason.json`` (e.g. the set-up and its build id).

        Returns
        -------
        Path or None
            ``aside/<utc>/``, or None when none of the runs was complete.
        """
        todo = [r for r in run_ids if self.run_dir(r).is_dir()]
        if not todo:
            return None
        dest = self.aside_dir / utc_stamp()
        make_dirs(self.aside_dir, tree=self.root)
        os.mkdir(dest, 0o755)
        os.chmod(dest, 0o755)
        _write_file(dest / "reason.json", orjson.dumps(
            {"reason": reason, "run_ids": todo, "moved_at": datetime.now(timezone.utc).isoformat(), **info},
            option=orjson.OPT_INDENT_2))
        for r in todo:
            os.rename(self.run_dir(r), dest / r)
        _fsync_dir(dest)
        self.sync_raw_dir()
        return dest

    def set_aside_runs(self) -> dict[str, list[Path]]:
        """Run id -> where it was moved aside (:meth:`set_aside`), oldest first."""
        out: dict[str, list[Path]] = {}
        if not self.aside_dir.is_dir():
            return out
        for d in sorted(p for p in self.aside_dir.iterdir() if p.is_dir()):
            for r in sorted(p for p in d.iterdir() if p.is_dir()):
                out.setdefault(r.name, []).append(r)
        return out

    def append_setup(self, record: Any) -> None:
        """Add one set-up record (:class:`storagebench.records.TestbedRecord`) to ``testbed.json``, atomically.

        The file holds ``format_version``, ``set_ups`` (every record, oldest first) and ``latest``.
        """
        history = [r.to_json() for r in self.setup_records()]
        history.append(record.to_json())
        data = {"format_version": FORMAT_VERSION, "latest": history[-1], "set_ups": history}
        tmp = self.root / f".testbed.json.tmp-{os.getpid()}"
        _write_file(tmp, orjson.dumps(data, option=orjson.OPT_INDENT_2, default=str))
        os.replace(tmp, self.testbed_path)
        _fsync_dir(self.root)

    def setup_records(self) -> list[Any]:
        """The set-up records of ``testbed.json`` (:class:`storagebench.records.TestbedRecord`), oldest first.

        Raises
        ------
        SchemaError
            A record of a newer format, or a malformed one.
        """
        path = self.testbed_path
        if not path.exists():
            return []
        try:
            data = orjson.loads(read_input(path, max_bytes=MAX_RECORD_BYTES, what="testbed record", error=SchemaError,
                                           root=self.root))
        except orjson.JSONDecodeError as exc:
            raise SchemaError(f"{path}: not valid JSON: {exc}") from exc
        recs = data.get("set_ups") if isinstance(data, dict) else None
        if not recs and isinstance(data, dict) and isinstance(data.get("latest"), dict):
            recs = [data["latest"]]
        return [TestbedRecord.from_json(r, path=str(path)) for r in recs or []]

    def provenance(self, run_ids: Iterable[str] | None = None) -> dict[str, Provenance]:
        """The typed ``raw/<run_id>/provenance.json`` of complete runs (:meth:`Provenance.read`).

        Parameters
        ----------
        run_ids : iterable of str, optional
            The runs to read; default every complete run. A run without the file is left out.

        Returns
        -------
        dict of str to Provenance
            Run id -> its record, in run-id order.

        Raises
        ------
        SchemaError
            A record that is not valid JSON, of a newer format, or malformed (the message names the file).
        """
        ids = sorted(self.completed_run_ids() if run_ids is None else {str(r) for r in run_ids})
        out = {}
        for rid in ids:
            path = self.run_dir(rid) / "provenance.json"
            try:
                out[rid] = Provenance.read(path, root=self.root)
            except FileNotFoundError:
                continue
        return out
