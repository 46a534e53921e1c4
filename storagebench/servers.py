"""fio servers for client/server studies: addresses, host files, versions, test servers, exposure.

fio's own client/server mode is the distributed engine (fio HOWTO, "Client/Server"):
``fio --server=ADDR`` on each host, ``fio --client=ADDR job.fio ...`` on the controller.

**fio servers have no authentication.** Whoever can connect to one sends it job files, and a
job file runs programs (``exec_prerun``) and writes any path as the server's user -- root, for
a storage benchmark. So this module

* starts local test servers that only their owner can reach: by default a Unix socket
  (``fio --server=sock:PATH``) in a directory of mode 0700 created and checked here
  (:func:`private_dir`); or network namespaces ``sbtest-*`` reached over veth pairs, made
  root-only by an nftables table ``sbguard_*`` that rejects every packet to the namespaces from
  a socket not owned by root (``meta skuid``), and drops forwarded ones. Loopback TCP stays
  available (``mode="loopback"``) but every local account can reach it;
* tells which servers other local users can reach (:func:`exposure`, :func:`connect_as`),
* reads fio host specifications and host files through :mod:`storagebench.fio.hosts`,
* asks a server for its fio version (the probe reply of fio's client protocol: ``client.c``
  ``handle_probe`` prints ``hostname=..., fio=fio-X.Y`` in normal output) and refuses a
  mismatch with the controller's fio, because fio client/server misbehaves silently across versions,
* waits until each test server listens, and tears everything down by pid (process group), exact
  socket path, exact namespace / interface name and exact nftables table name (:func:`fio_servers`).

Servers never bind to all interfaces (``0.0.0.0`` / ``::``) unless ``allow_any=True``.

Its parts, whose public names it re-exports: :mod:`storagebench._serveraccess` (owner-only directories,
:func:`exposure`, :func:`connect_as`) and :mod:`storagebench._netns` (the namespaces and their nftables guard).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import secrets
import shutil
import socket
import stat
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from ._netns import (
    GUARD_PREFIX,
    Netns,
    create_netns,
    delete_netns,
    guard_install,
    guard_remove,
    used_subnets,
)
from ._netns import NETNS_PREFIX as NETNS_PREFIX  # reached here too, as before
from ._netns import nft_path as _nft
from ._serveraccess import connect_as, default_socket_root, exposure, make_private_dir, private_dir
from .errors import HostError, TestbedError
from .fio import process
from .fio.hosts import FIO_DEFAULT_PORT, Host, format_hostfile, parse_host

# Host, parse_host, parse_hostfile and FIO_DEFAULT_PORT are storagebench.fio.hosts's (their one home).
__all__ = [
    "FioServer",
    "write_hostfile",
    "server_versions",
    "check_versions",
    "host_error",
    "fio_servers",
    "TestHosts",
    "start_test_hosts",
    "stop_test_hosts",
    "private_dir",
    "default_socket_root",
    "connect_as",
    "exposure",
    "MODES",
]

#: Test-server modes: owner-only Unix sockets (default), loopback TCP, network namespaces.
MODES = ("socket", "loopback", "netns")
_MODES = MODES


def write_hostfile(hosts: Iterable["str | Host"], path: "str | os.PathLike[str]") -> Path:
    """Write ``hosts`` as a fio host file (``fio --client=FILE``, one ``--client`` form a line); returns the path.

    Raises
    ------
    HostError
        A bad host, or one listed twice.
    """
    p = Path(path)
    p.write_text(format_hostfile(hosts))
    return p


# ---- versions -----------------------------------------------------------------------------

_PROBE_JOB = "[sb-probe]\nioengine=null\nsize=4k\nbs=4k\nrw=read\n"
_PROBE_RE = re.compile(r"hostname=(?P<hostname>[^,]*),.*?fio=(?P<fio>[^,\s]+)")


def host_error(message: str, hosts: Sequence[str], output_path: "Path | None" = None) -> HostError:
    """A :class:`HostError` carrying ``hosts`` (``host:port`` at fault) and ``output_path``."""
    exc = HostError(message)
    exc.hosts = list(hosts)  # type: ignore[attr-defined]
    exc.output_path = output_path  # type: ignore[attr-defined]
    return exc


def server_version(host: "str | Host", fio_bin: str = "fio", timeout_s: float = 20.0) -> str:
    """Ask a running fio server for its fio version.

    Runs a null-engine probe job through ``fio --client`` with normal output; fio's client prints
    the server's probe reply (``client.c`` ``handle_probe``: ``hostname=..., fio=fio-X.Y``).
    The null engine does no I/O and creates no file on the server.

    Parameters
    ----------
    host : str or Host
    fio_bin : str
        Controller's fio executable.
    timeout_s : float
        Seconds before the probe is killed.

    Returns
    -------
    str
        The server's version, e.g. ``"fio-3.33"``.

    Raises
    ------
    HostError
        The server cannot be reached, does not answer within ``timeout_s``, or gives no version.
    FioNotFoundError
        The controller's fio is not installed.
    """
    h = parse_host(host)
    with tempfile.TemporaryDirectory(prefix="sb-probe-") as tmp:
        job = Path(tmp) / "probe.fio"
        job.write_text(_PROBE_JOB)
        try:
            out = process.run([process.find_fio(fio_bin), f"--client={h.fio_arg}", "--output-format=normal", str(job)],
                              timeout_s=timeout_s, cwd=tmp)
        except subprocess.TimeoutExpired:
            raise host_error(f"fio server {h.label} did not answer a version probe within {timeout_s} s",
                             [h.label]) from None
    m = _PROBE_RE.search(out.stdout)
    if m is None:
        msg = (out.stderr.strip() or out.stdout.strip() or f"exit status {out.returncode}").splitlines()
        raise host_error(f"fio server {h.label} is unreachable: {' / '.join(msg[-2:])}", [h.label])
    return m["fio"]


def server_versions(hosts: Sequence["str | Host"], fio_bin: str = "fio", timeout_s: float = 20.0) -> dict[str, str]:
    """:func:`server_version` of every host, probed in parallel; ``{"host:port": "fio-X.Y"}``."""
    hs = [parse_host(h) for h in hosts]
    def probe(h: Host) -> "str | HostError":
        try:
            return server_version(h, fio_bin, timeout_s)
        except HostError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=max(1, min(16, len(hs)))) as pool:
        versions = list(pool.map(probe, hs))
    failed = [(h, v) for h, v in zip(hs, versions, strict=True) if isinstance(v, HostError)]
    if failed:
        raise host_error("; ".join(str(e) for _, e in failed), [h.label for h, _ in failed])
    return {h.label: str(v) for h, v in zip(hs, versions, strict=True)}


def check_versions(versions: dict[str, str], expected: str) -> None:
    """Refuse servers whose fio version differs from ``expected``.

    Raises
    ------
    HostError
        Naming every mismatching host, its version and the expected one.
    """
    bad = {h: v for h, v in versions.items() if v != expected}
    if bad:
        detail = ", ".join(f"{h} runs {v}" for h, v in bad.items())
        raise host_error(
            f"fio version mismatch: controller runs {expected} but {detail}; fio client/server "
            "needs the same fio version on every host", sorted(bad))


# ---- test servers -------------------------------------------------------------------------


@dataclass
class FioServer:
    """A fio server process started by :func:`start_server`.

    Attributes
    ----------
    host : Host
        The address it listens on (``sock:PATH`` or TCP).
    pid : int
        fio's pid (the leader of its own process group).
    workdir : Path
        Its own directory (cwd of the server): put its target files here.
    netns : str or None
        Network namespace it runs in.
    log_path : Path
        fio's stdout/stderr.
    """

    host: Host
    pid: int
    workdir: Path
    netns: str | None = None
    log_path: Path | None = None
    _proc: subprocess.Popen | None = field(default=None, repr=False)
    exe_name: str = "fio"

    @property
    def label(self) -> str:
        return self.host.label

    def kill(self) -> None:
        """SIGKILL the server's whole process group, as a host crash would.

        fio's server forks a child per client connection that runs the jobs (fio ``server.c``),
        so killing only :attr:`pid` does not stop a run that is going: the group is killed.
        A socket server leaves its socket file behind, as after a crash.
        """
        if self._proc is not None or _is_our_server(self):
            process.stop_processes(_server_marker(self.host), self.exe_name, root_pid=self.pid)
        if self._proc is not None:
            self._proc.wait(timeout=10)



def _refuse_any(address: str, allow_any: bool) -> None:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return
    if ip.is_unspecified and not allow_any:
        raise HostError(
            f"refusing to bind a fio server to all interfaces ({address}); pass allow_any=True "
            "to do so on purpose, or give an explicit address (127.0.0.1, a namespace address)"
        )


def _listening(pid: int, host: Host) -> bool:
    """True when ``pid``'s network namespace has a socket listening on ``host``."""
    if host.is_socket:
        return _unix_listening(host.address, pid)
    try:
        ip = ipaddress.ip_address(host.address)
    except ValueError:
        ip = ipaddress.ip_address(socket.gethostbyname(host.address))
    table = "tcp6" if ip.version == 6 else "tcp"
    try:
        lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
    except OSError:
        return False
    if ip.version == 4:
        want = f"{int.from_bytes(ip.packed, 'little'):08X}:{host.port:04X}"
    else:
        words = [ip.packed[i:i + 4] for i in range(0, 16, 4)]
        want = "".join(f"{int.from_bytes(w, 'little'):08X}" for w in words) + f":{host.port:04X}"
    for line in lines:
        parts = line.split()
        if len(parts) > 3 and parts[1] == want and parts[3] == "0A":  # 0A = TCP_LISTEN
            return True
    return False


def _unix_listening(path: str, pid: int | None = None) -> bool:
    """True when a Unix stream socket listens on ``path`` (``/proc/net/unix``: flag ``__SO_ACCEPTCON``)."""
    src = f"/proc/{pid}/net/unix" if pid else "/proc/net/unix"
    try:
        lines = Path(src).read_text(errors="replace").splitlines()[1:]
    except OSError:
        return False
    for line in lines:
        parts = line.split(None, 7)  # Num RefCount Protocol Flags Type St Inode Path
        if len(parts) == 8 and parts[7] == path and int(parts[3], 16) & 0x10000:
            return True
    return False


def _server_pids(host: Host) -> list[int]:
    """Pids of processes running ``fio --server=<host>`` on this machine (for messages)."""
    want = f"--server={host.fio_arg}".encode()
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(OSError):
                if want in (d / "cmdline").read_bytes().split(b"\0"):
                    pids.append(int(d.name))
    return sorted(pids)


def _prepare_socket(host: Host) -> None:
    """The socket's directory is private (checked, not created); a stale socket is removed, a live one refused."""
    path = Path(host.address)
    d = private_dir(path.parent, create=False)
    if d != path.parent:
        raise HostError(f"socket path {host.address} must be resolved (its directory is {d})")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise HostError(f"{path} exists and is not a socket: refused")
    if _unix_listening(str(path)):
        pids = _server_pids(host)
        raise HostError(f"socket {path} is in use by another fio server"
                        + (f" (pid {', '.join(map(str, pids))})" if pids else "")
                        + ": stop it first (runners/test_hosts.py stop, or kill that pid)")
    path.unlink()  # left by a server that was killed: ours (our private directory)


def _remove_socket(host: Host) -> None:
    """Remove a socket server's socket file after it stopped: exact path, sockets only, never a live one."""
    if not host.is_socket:
        return
    path = Path(host.address)
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISSOCK(os.lstat(path).st_mode) and not _unix_listening(str(path)):
            path.unlink()


def start_server(
    host: "str | Host",
    workdir: "str | os.PathLike[str]",
    *,
    netns: str | None = None,
    fio_bin: str = "fio",
    allow_any: bool = False,
    wait_s: float = 15.0,
) -> FioServer:
    """Start ``fio --server=ADDR`` in the foreground (no ``--daemonize``) and wait until it listens.

    Parameters
    ----------
    host : str or Host
        ``sock:/abs/path`` (a Unix socket; its directory must be private, see
        :func:`private_dir`), or an explicit TCP address and port.
    workdir : path
        The server's own directory (created; its cwd, so relative job file names land here).
    netns : str, optional
        Network namespace to run in (``ip netns exec``).
    allow_any : bool
        Allow ``0.0.0.0`` / ``::`` (all interfaces). Refused otherwise.
    wait_s : float
        Seconds to wait for the listening socket.

    Returns
    -------
    FioServer

    Raises
    ------
    HostError
        All-interfaces address without ``allow_any``; a socket whose directory is not private, or
        that another server listens on; the server exited or did not listen in time (it is
        stopped, and fio's message is in the error).

    Notes
    -----
    fio creates a socket with mode 0777 (``umask(000)``); once it listens it is changed to 0600,
    so that it stays owner-only even if its directory is opened later.
    """
    h = parse_host(host)
    if h.is_socket:
        _prepare_socket(h)
    else:
        _refuse_any(h.address, allow_any)
    wd = Path(workdir)
    wd.mkdir(parents=True, exist_ok=True)
    log_path = wd / "fio-server.log"
    exe = process.find_fio(fio_bin)
    cmd = [exe, _server_marker(h)]
    if netns is not None:
        cmd = ["ip", "netns", "exec", netns, *cmd]
    with open(log_path, "wb") as log:
        # not tied to this process: runners/test_hosts.py start leaves its servers running
        fp = process.spawn(cmd, marker=_server_marker(h), stdout=log, stderr=subprocess.STDOUT, cwd=wd,
                           die_with_parent=False, exe_name=os.path.basename(exe))
    proc = fp.popen
    srv = FioServer(h, proc.pid, wd, netns, log_path, proc, os.path.basename(exe))
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            msg = log_path.read_text(errors="replace").strip()
            raise HostError(f"fio server {h.label} exited with status {proc.returncode}: {msg or 'no message'}")
        if _listening(proc.pid, h):
            if h.is_socket:
                os.chmod(h.address, 0o600)
            return srv
        time.sleep(0.05)
    stop_server(srv)
    raise HostError(f"fio server {h.label} did not listen within {wait_s} s")


def stop_server(server: FioServer, timeout_s: float = 5.0) -> None:
    """Stop a server started by :func:`start_server`: SIGTERM, then SIGKILL, until none of its processes is left.

    The server forks a child per client connection and that child the job processes, each in a
    session of its own (fio ``backend.c`` ``thread_main``: ``setsid()``), so the process group
    does not hold them all: every descendant of the server's pid that runs its command line
    (``fio --server=ADDR``) is stopped (:func:`storagebench.fio.process.stop_processes`), and
    this returns only when none is left, so nothing listens on the address any more. Stopping a
    server that already exited is a no-op. A socket server's socket file is removed (fio leaves
    it), by exact path, once nothing listens on it.

    Parameters
    ----------
    server : FioServer
    timeout_s : float
        Grace after SIGTERM, s, before SIGKILL.

    Raises
    ------
    FioError
        A process of the server survived SIGKILL for 30 s.
    """
    if server._proc is not None or _is_our_server(server):
        # SIGTERM, then SIGKILL, to the server and every process it forked (seen before any signal)
        process.stop_processes(_server_marker(server.host), server.exe_name, root_pid=server.pid, grace_s=timeout_s)
    if server._proc is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            server._proc.wait(timeout=timeout_s)
    _remove_socket(server.host)


def _server_marker(host: Host) -> str:
    """The argument that names a server in its command line: ``--server=ADDR``."""
    return f"--server={host.fio_arg}"


def _free_port(address: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((address, 0))
        return s.getsockname()[1]


# ---- sets of test servers -----------------------------------------------------------------


@dataclass
class TestHosts:
    """Test fio servers started by :func:`start_test_hosts`: what to stop, by pid and exact name.

    Attributes
    ----------
    servers : list of FioServer
    namespaces : list of (namespace, host-side veth) pairs created for them
    root : Path
        Parent of the servers' directories.
    mode : {"socket", "loopback", "netns"}
    owns_root : bool
        ``root`` was created here (removed at teardown).
    socket_dir : Path or None
        Directory of the sockets (mode 0700), socket mode.
    owns_socket_dir : bool
        ``socket_dir`` was created here (removed at teardown when empty).
    guard : str or None
        nftables table (family ``inet``) that makes the netns servers root-only.
    """

    __test__ = False  # not a pytest test class

    servers: list[FioServer]
    namespaces: list[tuple[str, str]]
    root: Path
    mode: str
    owns_root: bool = False
    socket_dir: Path | None = None
    owns_socket_dir: bool = False
    guard: str | None = None

    @property
    def hosts(self) -> list[Host]:
        return [s.host for s in self.servers]

    def to_dict(self) -> dict:
        """JSON-ready record (for ``runners/test_hosts.py stop``)."""
        return {"mode": self.mode, "root": str(self.root), "owns_root": self.owns_root,
                "socket_dir": None if self.socket_dir is None else str(self.socket_dir),
                "owns_socket_dir": self.owns_socket_dir, "guard": self.guard,
                "namespaces": [list(n) for n in self.namespaces],
                "servers": [{"host": s.host.fio_arg, "pid": s.pid, "workdir": str(s.workdir), "netns": s.netns}
                            for s in self.servers]}

    @classmethod
    def from_dict(cls, d: dict) -> "TestHosts":
        servers = [FioServer(parse_host(x["host"]), int(x["pid"]), Path(x["workdir"]), x.get("netns"))
                   for x in d["servers"]]
        sd = d.get("socket_dir")
        return cls(servers, [tuple(n) for n in d.get("namespaces", [])], Path(d["root"]), d["mode"],
                   bool(d.get("owns_root", False)), None if sd is None else Path(sd),
                   bool(d.get("owns_socket_dir", False)), d.get("guard"))


def _is_our_server(server: FioServer) -> bool:
    """The pid still runs ``fio --server=<this address>`` (guards against pid reuse)."""
    try:
        cmd = Path(f"/proc/{server.pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return _server_marker(server.host).encode() in cmd


def start_test_hosts(n: int, mode: str = "socket", *, workdir: "str | os.PathLike[str] | None" = None,
                     fio_bin: str = "fio", port: int | None = None,
                     socket_dir: "str | os.PathLike[str] | None" = None,
                     insecure_tcp: bool = False) -> TestHosts:
    """Start ``n`` test fio servers; see :func:`fio_servers` (which also stops them).

    ``port``: loopback mode uses ``port, port+1, ...`` (free ports when ``None``); netns mode
    uses ``port`` (8765 when ``None``) in every namespace; socket mode has no port.
    ``socket_dir`` (socket mode): where the sockets ``server-<i>.sock`` go, a directory only we
    can enter (created 0700, or an existing one that passes :func:`private_dir`); default
    ``<root>/sock``. On any error everything started so far is stopped and deleted before the
    error is raised.
    """
    if mode not in MODES:
        raise HostError(f"mode must be one of {list(MODES)}, got {mode!r}")
    if not (isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= 64):
        raise HostError(f"n must be an int in 1..64, got {n!r}")
    if mode == "netns" and os.geteuid() != 0:
        raise TestbedError("mode='netns' needs root (ip netns add)")
    if mode == "netns" and not insecure_tcp and _nft() is None:
        raise TestbedError(
            "mode='netns' makes its servers root-only with an nftables owner match, and nft (package "
            "nftables) is not installed: install it (apt-get install nftables, or make sysdeps), use "
            "mode='socket', or pass insecure_tcp=True to accept servers that every local account can "
            "reach (fio servers have no authentication: they run anyone's jobs as root)")
    if socket_dir is not None and mode != "socket":
        raise HostError(f"socket_dir is for mode='socket', got mode={mode!r}")
    owns = workdir is None
    root = Path(tempfile.mkdtemp(prefix="sb-servers-")) if owns else Path(workdir)
    th = TestHosts([], [], root, mode, owns)
    tag = f"{os.getpid() % 100000:x}"
    try:
        if mode == "socket":
            root.mkdir(parents=True, exist_ok=True)
            th.socket_dir, th.owns_socket_dir = make_private_dir(socket_dir if socket_dir is not None else root / "sock")
            for i in range(n):
                sock = Host(str(th.socket_dir / f"server-{i}.sock"), family="sock")
                th.servers.append(start_server(sock, root / f"server-{i}", fio_bin=fio_bin))
        elif mode == "loopback":
            for i in range(n):
                for attempt in range(5):  # a free port can be taken between probe and bind
                    try:
                        p = port + i if port is not None else _free_port()
                        th.servers.append(start_server(Host("127.0.0.1", p), root / f"server-{i}", fio_bin=fio_bin))
                        break
                    except HostError:
                        if port is not None or attempt == 4:
                            raise
        else:
            used = used_subnets()
            free = [x for x in range(1, 255) if x not in used]
            if len(free) < n:
                raise TestbedError(f"not enough free 10.77.x.0/24 subnets for {n} namespaces")
            addresses = [f"10.77.{free[i]}.2" for i in range(n)]
            if _nft() is not None:
                # before any namespace exists: no moment at which another user could connect
                th.guard = f"{GUARD_PREFIX}{tag}_{secrets.token_hex(3)}"
                try:
                    guard_install(th.guard, addresses)
                except TestbedError as exc:
                    th.guard = None
                    if not insecure_tcp:
                        raise TestbedError(f"could not install the nftables owner guard of the netns servers "
                                           f"({exc}); pass insecure_tcp=True to start them unguarded") from None
            for i in range(n):
                ns = create_netns(tag, i, free[i])
                th.namespaces.append((ns.name, ns.veth_host))
                th.servers.append(start_server(Host(addresses[i], port or FIO_DEFAULT_PORT),
                                               root / f"server-{i}", netns=ns.name, fio_bin=fio_bin))
            if th.guard is not None and any(connect_as(s.host) for s in th.servers):
                raise TestbedError(f"the nftables guard {th.guard} did not keep uid nobody out of the netns "
                                   "servers; refusing to leave them running")
    except BaseException:
        stop_test_hosts(th)
        raise
    return th


def stop_test_hosts(th: TestHosts) -> None:
    """Stop every server of ``th`` by pid (process group) and remove what was created for them.

    Sockets are removed by exact path, the socket directory when it was created here and is
    empty, namespaces/veths and the nftables guard table by exact name. A pid that no longer runs
    ``fio --server=<its address>`` is left alone (pid reuse).
    """
    for s in th.servers:
        if s._proc is not None or _is_our_server(s):
            stop_server(s)
        else:
            _remove_socket(s.host)
    for name, veth in th.namespaces:
        delete_netns(Netns(name, veth, 0))
    if th.guard:
        guard_remove(th.guard)  # after the servers are gone: never a moment unguarded
    if th.socket_dir is not None and th.owns_socket_dir:
        with contextlib.suppress(OSError):
            th.socket_dir.rmdir()
    if th.owns_root:
        shutil.rmtree(th.root, ignore_errors=True)


@contextlib.contextmanager
def fio_servers(
    n: int,
    mode: str = "socket",
    *,
    workdir: "str | os.PathLike[str] | None" = None,
    fio_bin: str = "fio",
    port: int | None = None,
    socket_dir: "str | os.PathLike[str] | None" = None,
    insecure_tcp: bool = False,
) -> Iterator[list[FioServer]]:
    """Start ``n`` test fio servers that only their owner can reach, yield them, and always tear them down.

    Parameters
    ----------
    n : int
        Number of servers (1..64).
    mode : {"socket", "loopback", "netns"}
        ``socket`` (default): ``fio --server=sock:<socket_dir>/server-<i>.sock``; the directory
        has mode 0700, so only its owner (and root) can connect.
        ``loopback``: servers on 127.0.0.1, each on its own port (``port + i``, or free ports).
        **Every local account can connect to them** (fio servers have no authentication):
        use it only on a machine whose users you trust.
        ``netns``: one network namespace ``sbtest-<tag>-<i>`` per server with a veth pair; the
        controller end is ``10.77.S.1/24``, the server listens on ``10.77.S.2`` (port ``port`` or
        8765). Root only; an nftables table ``sbguard_*`` rejects packets to the servers from
        sockets not owned by root and drops forwarded ones, and each server is checked to refuse
        ``nobody`` before it is handed out.
    workdir : path, optional
        Parent of the servers' own directories ``server-<i>/`` (a temporary directory, removed
        afterwards, when not given).
    port : int, optional
        See above.
    socket_dir : path, optional
        Socket mode: the directory of the sockets (default ``<workdir>/sock``); created 0700 or
        checked to be ours and 0700.
    insecure_tcp : bool
        netns mode without the nftables guard (nft missing or failing): accepted only with this.

    Yields
    ------
    list of FioServer
        ``server.host.label`` is the ``host`` that ingest puts in ``runs.host``
        (``sock:/path`` or ``address:port``).

    Raises
    ------
    HostError
        ``mode`` not one of the modes, ``n`` out of range, a socket directory that is not private,
        a server that did not start.
    TestbedError
        A namespace, veth or the guard could not be created (not root, no iproute2, no nftables
        without ``insecure_tcp``).

    Notes
    -----
    Teardown stops each server by pid (its process group), then removes exactly the sockets,
    veths, namespaces and guard table created here, even when the body raised.
    """
    th = start_test_hosts(n, mode, workdir=workdir, fio_bin=fio_bin, port=port, socket_dir=socket_dir,
                          insecure_tcp=insecure_tcp)
    try:
        yield th.servers
    finally:
        stop_test_hosts(th)
