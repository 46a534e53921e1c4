"""nbval reads the expected outputs of the notebooks' checked cells from their sidecars.

The templates in ``notebooks/`` are stored without outputs. The expected stdout of each cell nbval checks
(``# NBVAL_CHECK_OUTPUT``) is in ``tests/notebook_outputs/`` (written by
``runners/store_checked_outputs.py``, the owner of that format). The collector below is nbval's own,
given those outputs as the cells' reference: nbval runs each notebook once, as before, and compares and
reports a difference itself. A checked cell without a stored output fails, naming the command that
stores it (without one nbval would take the cell as never run and compare nothing).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import nbformat
import pytest
from nbval.plugin import IPyNbCell, IPyNbFile, NbCellError

_spec = importlib.util.spec_from_file_location(
    "store_checked_outputs", Path(__file__).resolve().parent / "runners" / "store_checked_outputs.py")
sidecars = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sidecars)


class MissingExpectedOutput(Exception):
    """A checked cell whose expected output is not stored."""


class SidecarCell(IPyNbCell):
    """nbval's cell item; fails after running when its checked output has no stored reference."""

    def __init__(self, *args, missing: str | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.missing = missing

    def runtest(self):
        super().runtest()  # runs the cell (later cells need its state) and compares what is stored
        if self.missing:
            raise MissingExpectedOutput(self.missing)

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, MissingExpectedOutput):
            return str(excinfo.value)
        text = super().repr_failure(excinfo)
        if isinstance(excinfo.value, NbCellError) and str(excinfo.value) == "Cell outputs differ":
            text += (f"\nThe reference is the output stored for cell {self.cell.id} in {self.parent.sidecar} (in a "
                     f"diff above: + stored, - printed now). If the change is deliberate, store it and review the "
                     f"sidecar's diff: {sidecars.COMMAND} {self.parent.notebook}\n")
        return text


class SidecarNotebook(IPyNbFile):
    """nbval's notebook collector with each checked cell's reference output read from its sidecar."""

    def collect(self):
        expected = sidecars.read_expected(self.path)
        self.notebook = self.path.resolve().relative_to(sidecars.ROOT).as_posix()  # as the command takes it
        self.sidecar = sidecars.sidecar_path(self.path).relative_to(sidecars.ROOT).as_posix()
        for item in super().collect():
            cell, missing = item.cell, None
            if item.options["check"]:
                if cell.get("id") in expected:
                    text = expected[cell.id]
                    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)] if text else []
                    cell.execution_count = 1  # nbval compares only cells that have been run
                else:
                    missing = (f"{self.notebook} {item.name} (cell id {cell.get('id')}) is checked "
                               f"(# NBVAL_CHECK_OUTPUT) but {self.sidecar} stores no output for it: "
                               f"run `{sidecars.COMMAND} {self.notebook}` and review the diff")
            yield SidecarCell.from_parent(self, name=item.name, cell_num=item.cell_num, cell=cell,
                                          options=item.options, missing=missing)


@pytest.hookimpl(wrapper=True)
def pytest_collect_file(file_path, parent):
    """nbval's collector for a notebook of ``notebooks/`` becomes :class:`SidecarNotebook`."""
    collected = yield
    if not file_path.resolve().is_relative_to(sidecars.NOTEBOOKS):
        return collected
    return [SidecarNotebook.from_parent(parent, path=file_path) if type(node) is IPyNbFile else node
            for node in collected]


# ---- markers for the inner loop (`make test-quick`) and groups for parallel workers (`make test`) ----------
#
# Markers (registered in pyproject.toml) are given by what a test USES, so a new test is marked without
# naming it anywhere: a test whose fixtures include ``fio_bin`` is ``fio``, ``require_root`` (and so
# ``testbed_ready``, ``loop_dev``) ``root``, ``browser`` ``browser``; a notebook cell collected by nbval, or a
# test whose code (or a fixture's, of this project) calls papermill through the library, is ``notebook``.
# What a test actually starts is checked as it runs (an audit hook on process creation): a test with none of
# these markers (one `make test-quick` selects) that starts fio, a kernel, a browser or a root-only tool
# fails, naming the fixture or marker it needs; where the run's -m expression leaves that marker out
# (`make test-quick`), the start is refused, so the inner loop never runs fio, a kernel, a browser or a root
# action. (Processes started by a child process are not seen.)
#
# Parallel workers (pytest-xdist, --dist loadgroup): tests that share a fixture of this project wider than a
# function (a session fio sweep, a module's published write-ups) are one group, so the fixture runs once; the
# cells of one notebook are one group (one kernel, in order); every ``root`` test is in one group, so loop
# devices, mounts, namespaces and nftables tables are made by one worker at a time.

import inspect  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402

SUITE_MARKERS = ("fio", "root", "browser", "notebook", "slow")
_BY_FIXTURE = {"fio_bin": "fio", "require_root": "root", "browser": "browser"}
#: library entry points that execute a notebook in a kernel (papermill), as they appear in a test's code
_NOTEBOOK_CALLS = re.compile(r"\b(execute_notebook|publish_report|run_batch)\s*[,(]|\b(papermill|nbclient)\.\w+\("
                             r"|\"batch\.py\"|app,\s*\[\"(publish|batch|report|demo)\"")
_ROOT_TOOLS = {"losetup", "mount", "umount", "modprobe", "nft", "zramctl"}
_FIO_ASKS = {"--version", "--help", "--parse-only", "--cmdhelp", "--enghelp"}
_HERE = Path(__file__).resolve().parent


def _what_it_starts(argv) -> str | None:
    """The marker a process start needs (``fio``, ``notebook``, ``browser``, ``root``) or None."""
    try:
        args = [os.fsdecode(a) for a in argv][:12]
    except TypeError:
        return None
    names = [os.path.basename(a) for a in args]
    if names and names[0] in ("which", "pgrep", "ps"):
        return None
    if "fio" in names:  # also behind a wrapper (ip netns exec, setpriv, nsenter ...)
        # asking fio what it is (--version, --help, --parse-only) measures nothing: not a fio run
        return None if _FIO_ASKS & set(args) else "fio"
    if "ipykernel_launcher" in args or "ipykernel" in args:
        return "notebook"
    if {"chromedriver", "chromium", "chromium-browser"} & set(names):
        return "browser"
    if _ROOT_TOOLS & set(names) or any(n.startswith("mkfs") for n in names) or (
            names and names[0] == "ip" and {"netns", "add", "del"} & set(args)):
        return "root"
    return None


class _Spawns:
    """The test being run, and the processes it started that its markers do not allow for."""

    def __init__(self):
        self.item = None
        self.excluded: set[str] = set()  # markers the run's -m expression leaves out
        self.found: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def hook(self, event, args):
        if event != "subprocess.Popen" and event != "os.posix_spawn" and event != "os.exec":
            return
        item = self.item
        if item is None:
            return
        argv = args[1]  # (executable, args, cwd, env) or (path, argv, env)
        if isinstance(argv, (str, bytes)):
            argv = [argv]
        need = _what_it_starts(argv or [])
        if need is None or any(item.get_closest_marker(m) is not None for m in SUITE_MARKERS):
            return  # only a test that `make test-quick` selects must start none of these
        with self.lock:
            self.found.append((need, " ".join(os.fsdecode(a) for a in list(argv)[:6])))
        if need in self.excluded:
            raise UnmarkedStart(_advice(item, need, argv))


class UnmarkedStart(RuntimeError):
    """A test started fio, a kernel, a browser or a root tool its markers do not declare."""


def _advice(item, need: str, argv) -> str:
    how = {"fio": "request the fio_bin fixture (it skips where fio is missing)",
           "root": "request the require_root fixture (or testbed_ready / loop_dev)",
           "browser": "request the browser fixture",
           "notebook": "mark it @pytest.mark.notebook"}[need]
    return (f"{item.nodeid} started {os.path.basename(os.fsdecode(list(argv)[0]))} but is not marked `{need}`: "
            f"{how}, so that `make test-quick` leaves it out")


_SPAWNS = _Spawns()


def _project_fixture(fixturedef) -> bool:
    try:
        src = Path(inspect.getsourcefile(fixturedef.func)).resolve()
    except (TypeError, OSError):
        return False
    return src.is_relative_to(_HERE) and ".venv" not in src.parts


def _source(func) -> str:
    try:
        return inspect.getsource(func)
    except (TypeError, OSError):
        return ""


def pytest_configure(config):
    for name in SUITE_MARKERS:  # also registered in pyproject.toml; here so a copied conftest works alone
        config.addinivalue_line("markers", f"{name}: see conftest.py")
    # pytest-xdist's marker (read with --dist loadgroup); registered for runs without xdist too
    config.addinivalue_line("markers", "xdist_group(name): tests of one group run on one worker")
    expr = config.getoption("markexpr", "") or ""
    if expr:
        from _pytest.mark.expression import Expression

        compiled = Expression.compile(expr)
        _SPAWNS.excluded = {m for m in SUITE_MARKERS
                            if not compiled.evaluate(lambda name, /, m=m, **kw: name == m)}
    sys.addaudithook(_SPAWNS.hook)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a: str, b: str) -> None:
        parent[find(a)] = find(b)

    shared_of = {}
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        for fixture, marker in _BY_FIXTURE.items():
            if fixture in names:
                item.add_marker(marker)
        defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
        own = [fd for fds in defs.values() for fd in fds if _project_fixture(fd)]
        if isinstance(item, IPyNbCell) or item.path.suffix == ".ipynb":
            item.add_marker("notebook")
        elif item.get_closest_marker("notebook") is None and any(
                _NOTEBOOK_CALLS.search(_source(f)) for f in [getattr(item, "function", None),
                                                             *(fd.func for fd in own)] if f is not None):
            item.add_marker("notebook")
        keys = [f"fixture {fd.baseid} {fd.argname}" for fd in own
                if fd.scope != "function" and fd.argname not in _BY_FIXTURE]
        if isinstance(item, IPyNbCell):
            keys.append(f"notebook {item.path.relative_to(_HERE)}")
        if item.get_closest_marker("root") is not None:
            keys.append("root")
        for k in keys[1:]:
            union(keys[0], k)
        shared_of[item] = keys[0] if keys else None
    for item, key in shared_of.items():
        if key is not None and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(re.sub(r"\W+", "_", find(key)).strip("_")))
    if getattr(config.option, "loadgroup", False):  # on an xdist worker with --dist loadgroup
        _group_node_ids(items)


def _group_node_ids(items) -> None:
    """Give each grouped test's node id its ``@group`` suffix, which xdist's loadgroup scheduler reads.

    pytest-xdist 3.8 writes it to ``item._nodeid``, which pytest 9.2 no longer reads (the node id is
    ``item._id``), so without this every group would be spread over the workers."""
    try:
        from _pytest.nodeid import coerce_node_id
    except ImportError:  # pytest < 9.2: xdist's own suffix works
        return
    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})
        if names and "@" not in item.nodeid.rsplit("]", 1)[-1]:
            item._id = coerce_node_id(f"{item.nodeid}@{'_'.join(names)}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _SPAWNS.item, _SPAWNS.found = item, []
    try:
        return (yield)
    finally:
        _SPAWNS.item = None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    result = yield
    if _SPAWNS.found:
        need, cmd = _SPAWNS.found[0]
        pytest.fail(_advice(item, need, cmd.split()) + f" (it ran: {cmd})", pytrace=False)
    return result
