"""Who can reach a fio server: directories only their owner can enter, and the exposure of a server.

Part of :mod:`storagebench.servers`, which re-exports its public names. fio servers have no
authentication: whoever can connect to one sends it job files, and a job file runs programs as the
server's user. A socket server is kept to its owner by its directory (:func:`private_dir`, mode 0700,
every directory above it checked); :func:`exposure` and :func:`connect_as` tell who else can reach one.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

from .errors import HostError
from .fio.hosts import Host, local_addresses, parse_host

# ---- owner-only places --------------------------------------------------------------------


def _check_ancestors(path: Path) -> None:
    """Every directory from ``/`` down to ``path``: owned by root or by us, and writable by no one
    else unless sticky (as ``/tmp``). Otherwise another user could rename our directory away and
    put theirs in its place."""
    me = os.geteuid()
    for d in [*reversed(path.parents), path]:
        st = os.lstat(d)
        if stat.S_ISLNK(st.st_mode):  # pragma: no cover - path is resolved
            raise HostError(f"{d} is a symbolic link; give the resolved path")
        if st.st_uid not in (0, me):
            raise HostError(f"{d} belongs to uid {st.st_uid}: a private directory below it is not private "
                            "(its owner can rename it); use a directory of your own or of root")
        if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            raise HostError(f"{d} (mode {stat.S_IMODE(st.st_mode):04o}) is writable by other users and not "
                            "sticky: a private directory below it is not private")


def make_private_dir(path: "str | os.PathLike[str]", *, create: bool = True) -> tuple[Path, bool]:
    """:func:`private_dir`, and whether it was created here."""
    p = Path(path).expanduser()
    if not p.name or p.name in (".", ".."):
        raise HostError(f"private directory must name a directory, got {str(path)!r}")
    if create:
        p.parent.mkdir(parents=True, exist_ok=True)
    parent = Path(os.path.realpath(p.parent))
    p = parent / p.name
    _check_ancestors(parent)
    created = False
    if create:
        try:
            os.mkdir(p, 0o700)
            os.chmod(p, 0o700)
            created = True
        except FileExistsError:
            pass
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        raise HostError(f"private directory {p} does not exist") from None
    if stat.S_ISLNK(st.st_mode):
        raise HostError(f"{p} is a symbolic link, not a directory created for fio servers: refused")
    if not stat.S_ISDIR(st.st_mode):
        raise HostError(f"{p} exists and is not a directory: refused")
    if st.st_uid != os.geteuid():
        raise HostError(f"{p} exists and belongs to uid {st.st_uid}, not to us (uid {os.geteuid()}): refused; "
                        "fio servers need a directory only their owner can enter")
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise HostError(f"{p} exists with mode {stat.S_IMODE(st.st_mode):04o}; fio server sockets need a "
                        "directory only its owner can enter (0700): refused; give a new directory (it is created "
                        "with mode 0700) or one of yours with mode 0700")
    return p, created


def private_dir(path: "str | os.PathLike[str]", *, create: bool = True) -> Path:
    """A directory only its owner can enter (mode 0700, owned by us), for fio server sockets.

    fio creates its server socket with ``umask(000)`` (fio ``server.c`` ``fio_init_server_sock``),
    i.e. writable by everyone; what keeps other users out is the directory.

    Parameters
    ----------
    path : path
        The directory. Its parents are created when missing.
    create : bool
        Create it (mode 0700) when missing; ``False`` only checks it.

    Returns
    -------
    Path
        The directory, with its parents resolved.

    Raises
    ------
    HostError
        It exists but is a symbolic link, not a directory, not ours, or open to others (mode with
        group/other bits); or a directory above it belongs to another user, or is writable by
        others without the sticky bit.
    """
    return make_private_dir(path, create=create)[0]


def default_socket_root() -> Path:
    """Where stable test-server sockets go: ``$STORAGEBENCH_SERVERS_DIR``, else
    ``/run/storagebench-servers`` for root, ``$XDG_RUNTIME_DIR/storagebench-servers``, or
    ``<tmp>/storagebench-servers-<uid>``. Created 0700 and checked (:func:`private_dir`)."""
    env = os.environ.get("STORAGEBENCH_SERVERS_DIR")
    if env:
        return private_dir(env)
    if os.geteuid() == 0 and Path("/run").is_dir():
        return private_dir("/run/storagebench-servers")
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and Path(xdg).is_dir():
        return private_dir(Path(xdg) / "storagebench-servers")
    return private_dir(Path(tempfile.gettempdir()) / f"storagebench-servers-{os.geteuid()}")


# ---- who can reach a server ---------------------------------------------------------------

_CONNECT_PY = """\
import socket, sys
fam, addr, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
try:
    if fam == "sock":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(3)
        s.connect(addr)
    else:
        s = socket.create_connection((addr, port), timeout=3)
    s.close()
except OSError as exc:
    print("refused", exc.errno, exc.strerror)
    sys.exit(1)
print("connected")
"""


def connect_as(host: "str | Host", user: str = "nobody", timeout_s: float = 10.0) -> bool | None:
    """Can a process of another local account connect to fio server ``host``?

    Runs a bare ``connect()`` (then ``close()``: no job is sent, the server's connection child
    exits on EOF) as ``user`` with ``setpriv --reuid --regid --clear-groups`` (util-linux).

    Parameters
    ----------
    host : str or Host
    user : str
        The account to try as (default ``nobody``).
    timeout_s : float
        Seconds before the attempt is abandoned.

    Returns
    -------
    bool or None
        True: it connected; False: refused (permission, firewall, timeout); None: this cannot
        be tried here (not root, no ``setpriv``, unknown user, the interpreter cannot run as ``user``).
    """
    h = parse_host(host)
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        return None
    try:
        pw = pwd.getpwnam(user)
    except KeyError:
        return None
    cmd = [setpriv, f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--clear-groups", "--",
           sys.executable, "-I", "-c", _CONNECT_PY, h.family, h.address, str(h.port)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd="/",
                             env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"})
    except (subprocess.TimeoutExpired, OSError):
        return None
    if out.returncode == 0 and out.stdout.startswith("connected"):
        return True
    if out.returncode == 1 and out.stdout.startswith("refused"):
        return False
    return None


def _socket_exposure(path: str) -> list[str]:
    """Why accounts other than the socket's owner (and root) can connect to ``path``, from permissions."""
    try:
        real = Path(os.path.realpath(path))
        st = os.stat(real)
    except OSError as exc:
        return [f"cannot inspect socket {path}: {exc.strerror}"]
    owner = st.st_uid
    reasons = []
    chain = [*reversed(real.parents), real]
    stats = [os.stat(d) for d in chain]
    for d, s in zip(chain, stats, strict=True):
        if s.st_uid not in (0, owner):
            reasons.append(f"{d} belongs to uid {s.st_uid}, who can change its permissions")
        with contextlib.suppress(OSError):
            if "system.posix_acl_access" in os.listxattr(d):
                reasons.append(f"{d} has a POSIX ACL that may grant others access (getfacl {d})")
    searchable = all(stat.S_IMODE(s.st_mode) & 0o011 for s in stats[:-1])
    writable = stat.S_IMODE(st.st_mode) & 0o022
    if searchable and writable:
        reasons.append(f"socket {real} has mode {stat.S_IMODE(st.st_mode):04o} (fio creates it writable by "
                       "everyone) and every directory above it can be entered by others")
    return reasons


def exposure(host: "str | Host", *, probe: bool = True) -> list[str]:
    """Why local accounts other than the server's owner can reach fio server ``host``.

    fio servers have no authentication: whoever connects runs jobs, and programs
    (``exec_prerun``), as the server's user. A Unix socket is judged from the permissions on
    its path (a client needs search permission on every directory and write permission on the
    socket); a TCP server on an address of this host (loopback or an interface's) is reachable
    by every local account. When root, the verdict is also tried for real: a bare connect as
    ``nobody`` (:func:`connect_as`), which also tells whether a firewall owner match (such as the
    nftables guard of the ``netns`` test servers) keeps other users out.

    Parameters
    ----------
    host : str or Host
    probe : bool
        Try the connect as ``nobody`` (root only).

    Returns
    -------
    list of str
        The reasons, empty when only the owner (and root) can reach the server as far as can
        be told.
    """
    h = parse_host(host)
    nobody = connect_as(h) if probe else None
    if h.is_socket:
        reasons = _socket_exposure(h.address)
        if nobody and not reasons:
            reasons.append("a process running as nobody connected to it")
        return reasons
    local = local_addresses(h.address)
    where = (f"{h.address} is an address of this host ({', '.join(local)})" if local
             else f"{h.address} is reached over the network")
    if nobody is True:
        return [f"a process running as nobody connected to it: {where}, and a TCP port there is open to "
                "every local account"]
    if nobody is False:
        return []
    if local:
        return [f"{where}: every local account can connect to a TCP port on it"]
    return [f"{where}: every local account can connect to what this machine reaches, unless a firewall "
            "owner match stops it (not checked: needs root)"]
