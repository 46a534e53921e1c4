"""fio's host grammar: ``--client=`` / ``--server=`` addresses, host files, and host labels.

The one owner of how storagebench reads and writes fio server addresses. fio's own parser is
``fio_server_parse_string`` in fio ``server.c`` (3.33); the HOWTO section "Client/Server"
documents it:

* ``sock:PATH`` -- a Unix domain socket. fio takes *everything* after ``sock:`` as the path
  (commas included) and has no port. The path is limited by ``sockaddr_un.sun_path``: 107 bytes
  on Linux (fio copies it with ``snprintf``/``strncpy`` and a longer path is cut silently).
* ``ip:HOST[,PORT]``, ``ip4:HOST[,PORT]``, ``ip6:HOST[,PORT]`` -- TCP; the port follows the
  *first* comma (fio ``strchr``); ``ip6:`` addresses contain colons (``ip6:::1,8765``).
* ``HOST[,PORT]`` -- TCP, IPv4 unless storagebench sees an IPv6 literal (two colons or more).
* Port 8765 when none is given (``fio_net_port``).

storagebench also reads two forms of its own tidy tables: ``HOST:PORT`` (the label of a TCP
host) and ``[V6ADDR]:PORT``.

Labels (the ``host`` column of the tidy tables): fio's client JSON tags each server's entries
with ``"hostname"`` and ``"port"``. For a TCP server that is the address and port
(``127.0.0.1:8765``); for a socket server fio 3.33 reports the socket path as ``hostname``
and 8765 as ``port`` (checked with fio 3.33), so :func:`host_label` gives ``sock:/the/path``
for a hostname that is an absolute path. :attr:`Host.label` and ingest use that one function.

Host files (``fio --client=FILE`` reads one host a line): :func:`parse_hostfile` also skips
blank lines and ``#`` comments, and refuses a host listed twice, naming ``file:line``.

This module imports nothing from storagebench but :mod:`storagebench.errors`.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from .._inputs import read_text
from ..errors import HostError

__all__ = [
    "FIO_DEFAULT_PORT",
    "Host",
    "parse_host",
    "parse_hostfile",
    "format_hostfile",
    "host_label",
    "local_addresses",
    "is_local",
]

#: Largest fio host file read, bytes (one host a line).
MAX_HOSTFILE_BYTES = 2**20


#: fio's default server port (``fio_net_port`` in fio ``server.c``).
FIO_DEFAULT_PORT = 8765
#: Address families of fio's host grammar: TCP over IPv4, TCP over IPv6, Unix domain socket.
FAMILIES = ("ip", "ip6", "sock")
#: Longest socket path, bytes: ``sizeof(sockaddr_un.sun_path) - 1`` on Linux.
SUN_PATH_MAX = 107

_PREFIXES = (("sock:", "sock"), ("ip6:", "ip6"), ("ip4:", "ip"), ("ip:", "ip"))
_BAD_CHARS = re.compile(r"[\s\x00-\x1f\x7f]")
_TCP_NAME = re.compile(r"[A-Za-z0-9_.-]{1,253}")
_V6_ADDR = re.compile(r"[0-9A-Fa-f:.]{2,45}(%[A-Za-z0-9_.-]{1,15})?")
_V6_BRACKETS = re.compile(r"^\[(?P<addr>[0-9a-fA-F:.]+)\](?::(?P<port>[^:]*))?$")


@dataclass(frozen=True)
class Host:
    """One fio server address.

    Parameters
    ----------
    address : str
        IP address or host name (TCP), or the absolute path of a Unix socket (``family="sock"``).
    port : int
        TCP port (fio default 8765). A socket has no port; it keeps 8765, which is what fio's
        client JSON reports for it.
    family : {"ip", "ip6", "sock"}
        fio's address type (``--server=ip:...`` / ``ip6:...`` / ``sock:...``).

    Raises
    ------
    HostError
        Empty address, whitespace or a control character in it, a TCP address that is neither a host name
        nor an IP address (``;``, ``#``, ``$``, ``=`` ... would reach job files and hostfiles), a port outside
        1..65535, an unknown family, or a socket path that is relative or longer than :data:`SUN_PATH_MAX`
        bytes.
    """

    address: str
    port: int = FIO_DEFAULT_PORT
    family: str = "ip"

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise HostError(f"host family must be one of {list(FAMILIES)}, got {self.family!r}")
        if not isinstance(self.address, str) or not self.address:
            raise HostError(f"host address must be a non-empty string, got {self.address!r}")
        if _BAD_CHARS.search(self.address):
            raise HostError(f"host address must not contain whitespace or control characters, got {self.address!r}")
        if isinstance(self.port, bool) or not isinstance(self.port, int) or not 0 < self.port < 65536:
            raise HostError(f"port of host {self.address!r} must be an int in 1..65535, got {self.port!r}")
        if self.family == "sock":
            if not self.address.startswith("/"):
                raise HostError(
                    f"socket path must be absolute (fio resolves a relative one in the client's working "
                    f"directory, the run directory), got {self.address!r}")
            if len(os.fsencode(self.address)) > SUN_PATH_MAX:
                raise HostError(
                    f"socket path must be at most {SUN_PATH_MAX} bytes (sockaddr_un.sun_path; fio cuts a "
                    f"longer one silently), got {len(os.fsencode(self.address))}: {self.address!r}")
        elif "," in self.address or "/" in self.address:
            raise HostError(f"TCP host address must not contain ',' or '/', got {self.address!r}")
        elif self.family == "ip" and ":" in self.address:
            raise HostError(f"an IPv4 host (ip:) must not contain ':', got {self.address!r}; "
                            "IPv6 addresses take 'ip6:ADDR,PORT' or '[ADDR]:PORT'")
        elif not (_TCP_NAME if self.family == "ip" else _V6_ADDR).fullmatch(self.address):
            # the address reaches job files (span-log names), hostfiles, labels and write-ups: only what a host
            # name (RFC 1123 letters, digits, '-', '.', and the '_' some networks use) or an IP literal holds
            raise HostError(f"TCP host address must be a host name (letters, digits, '-', '_', '.') or an IP "
                            f"address, got {self.address!r}")

    @property
    def is_socket(self) -> bool:
        """True for a Unix-socket server (``sock:PATH``)."""
        return self.family == "sock"

    @property
    def label(self) -> str:
        """The ``host`` value of the tidy tables: ``address:port``, or ``sock:PATH`` for a socket."""
        return host_label(self.address, self.port)

    @property
    def fio_arg(self) -> str:
        """The ``--client=`` / ``--server=`` form: ``ip:127.0.0.1,8765``, ``sock:/run/x/fio.sock``."""
        if self.is_socket:
            return f"sock:{self.address}"
        return f"{self.family}:{self.address},{self.port}"

    @property
    def path(self) -> Path | None:
        """The socket path (``None`` for TCP)."""
        return Path(self.address) if self.is_socket else None

    def __str__(self) -> str:
        return self.label


def host_label(hostname: Any, port: Any) -> str:
    """The tidy-table label of the server fio's client JSON names ``hostname``/``port``.

    Parameters
    ----------
    hostname, port
        The ``client_stats`` entry's ``"hostname"`` and ``"port"`` values as fio wrote them.

    Returns
    -------
    str
        ``sock:HOSTNAME`` when ``hostname`` is an absolute path (fio 3.33 reports a Unix-socket
        server by its path, with port 8765), else ``HOSTNAME:PORT``. Equal to
        :attr:`Host.label` of the server the client was given.
    """
    name = "" if hostname is None else str(hostname)
    if name.startswith("/"):
        return f"sock:{name}"
    return f"{name}:{'' if port is None else port}"


def _port(text: str, spec: str) -> int:
    if not text.isdigit():
        raise HostError(f"port in host spec {spec!r} must be a number in 1..65535, got {text!r}")
    return int(text)


def parse_host(spec: "str | Host", default_port: int = FIO_DEFAULT_PORT) -> Host:
    """Parse one fio host specification.

    Accepted forms (fio ``server.c`` ``fio_server_parse_string``; plus the labels of the tidy
    tables): ``sock:/abs/path``, ``host``, ``host,port``, ``ip:host,port``, ``ip4:host,port``,
    ``ip6:addr,port``, ``[v6addr]:port``, ``host:port``.

    Parameters
    ----------
    spec : str or Host
    default_port : int
        Port of a TCP spec that names none (fio's 8765).

    Returns
    -------
    Host

    Raises
    ------
    HostError
        An empty spec, a port that is not a number in 1..65535, a relative or too long socket
        path, whitespace or a control character; the message quotes the spec.
    """
    if isinstance(spec, Host):
        return spec
    if not isinstance(spec, str):
        raise HostError(f"host spec must be a string such as 'host[,port]' or 'sock:/path', got {spec!r}")
    text = spec.strip()
    if not text:
        raise HostError("host spec must be 'host[,port]' or 'sock:/path', got ''")
    family = None
    for prefix, fam in _PREFIXES:
        if text.startswith(prefix):
            family, text = fam, text[len(prefix):]
            break
    if family == "sock":
        return Host(text, FIO_DEFAULT_PORT, "sock")
    if family is None:
        m6 = _V6_BRACKETS.match(text)
        if m6:
            port = _port(m6["port"], spec) if m6["port"] is not None else default_port
            return Host(m6["addr"], port, "ip6")
    addr, comma, port_text = text.partition(",")
    if comma:
        port = _port(port_text, spec)
    elif family is None and addr.count(":") == 1:  # host:port, the TCP label form
        addr, _, port_text = addr.partition(":")
        port = _port(port_text, spec)
    else:
        port = default_port
    if not addr:
        raise HostError(f"host spec {spec!r} names no host")
    if family is None:
        family = "ip6" if addr.count(":") >= 2 else "ip"
    return Host(addr, port, family)


def parse_hostfile(path_or_text: "str | os.PathLike[str]", default_port: int = FIO_DEFAULT_PORT) -> list[Host]:
    """Parse a fio host file: one host a line (``host[,port]``, ``ip:...``, ``sock:/path`` ...).

    fio reads a ``--client=FILE`` file line by line and has no comments; storagebench also skips
    blank lines and ``#`` comments (stripped before anything reaches fio, which is given each
    host as its own ``--client=``).

    Parameters
    ----------
    path_or_text : path or str
        A file path, or the file's text when it contains a newline.
    default_port : int
        Port of a TCP line that names none.

    Returns
    -------
    list of Host
        In file order.

    Raises
    ------
    HostError
        The file cannot be read, names no host, names a host twice, or has a bad line; a line's
        error names ``file:line``.
    """
    text = os.fspath(path_or_text) if isinstance(path_or_text, os.PathLike) else path_or_text
    if not isinstance(text, str):
        raise HostError(f"host file must be a path or text, got {path_or_text!r}")
    source = "<text>"
    if "\n" not in text:
        source = text
        try:
            text = read_text(text, max_bytes=MAX_HOSTFILE_BYTES, what="host file", error=HostError)
        except (OSError, UnicodeDecodeError) as exc:
            raise HostError(f"host file {source!r} cannot be read: {exc}") from None
    hosts: list[Host] = []
    seen: dict[str, int] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if len(line.split()) != 1:
            raise HostError(f"{source}:{n}: one host a line ('host[,port]' or 'sock:/path'), got {raw.strip()!r}")
        try:
            h = parse_host(line, default_port)
        except HostError as exc:
            raise HostError(f"{source}:{n}: {exc}") from None
        if h.label in seen:
            raise HostError(f"{source}:{n}: host {h.label} is listed twice (first on line {seen[h.label]})")
        seen[h.label] = n
        hosts.append(h)
    if not hosts:
        raise HostError(f"host file {source} names no host")
    return hosts


def format_hostfile(hosts: Iterable["str | Host"]) -> str:
    """The text of a fio host file for ``hosts``: one ``--client`` form (:attr:`Host.fio_arg`) a line.

    Raises
    ------
    HostError
        A bad host, or one listed twice.
    """
    hs = [parse_host(h) for h in hosts]
    labels = [h.label for h in hs]
    dup = sorted({x for x in labels if labels.count(x) > 1})
    if dup:
        raise HostError(f"hosts must be distinct, got {dup} more than once")
    return "".join(f"{h.fio_arg}\n" for h in hs)


def local_addresses(address: str) -> list[str]:
    """The addresses ``address`` resolves to that belong to this host (loopback or an interface's).

    An address belongs to this host when a socket can be bound to it (the kernel allows that only
    for its own addresses).
    """
    try:
        infos = socket.getaddrinfo(address, None, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError):
        return []
    out = []
    for family, _, _, _, sockaddr in infos:
        ip = ipaddress.ip_address(sockaddr[0].split("%")[0])
        if ip.is_loopback or ip.is_unspecified:
            out.append(str(ip))
            continue
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as s:
                s.bind((sockaddr[0], 0))  # succeeds only for an address of this host
            out.append(str(ip))
        except OSError:
            pass
    return sorted(set(out))


def _routed_to_local_namespace(address: str) -> bool:
    """The route to ``address`` leaves through a veth whose peer is in a network namespace of this host."""
    for ip_cmd in ("/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "ip"):
        try:
            out = subprocess.run([ip_cmd, "-o", "route", "get", address], capture_output=True, text=True,
                                 timeout=10).stdout
            break
        except (OSError, subprocess.TimeoutExpired):
            continue
    else:
        return False
    m = re.search(r"\bdev (\S+)", out)
    if not m:
        return False
    dev = Path("/sys/class/net") / m.group(1)
    try:
        iflink, ifindex = (dev / "iflink").read_text().strip(), (dev / "ifindex").read_text().strip()
    except OSError:
        return False
    return iflink != ifindex and not (dev / "device").exists()


def is_local(host: "str | Host") -> bool:
    """True when fio server ``host`` runs on this machine, so its paths are this machine's paths.

    Local: a Unix socket, a loopback address, an address of this host (:func:`local_addresses`), or
    an address routed to a network namespace of this host over a veth pair (the ``netns`` test
    servers).
    """
    h = parse_host(host)
    if h.family == "sock":
        return True
    if local_addresses(h.address):
        return True
    try:
        infos = socket.getaddrinfo(h.address, None, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError):
        return False
    return any(_routed_to_local_namespace(sa[0]) for *_, sa in infos)
