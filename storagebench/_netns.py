"""Network namespaces for test fio servers, and the nftables owner guard that makes them root-only.

Part of :mod:`storagebench.servers` (``start_test_hosts(n, mode="netns")``): one namespace ``sbtest-<tag>-<i>``
per server with a veth pair (controller end ``10.77.S.1/24``, server ``10.77.S.2``), and an nftables table
``sbguard_*`` (family ``inet``) that rejects packets to the namespaces from a socket not owned by root
(``meta skuid``) and drops forwarded ones. Everything is created and deleted by exact name.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from .errors import TestbedError

#: Prefix of every network namespace this module creates; teardown deletes exact names only.
NETNS_PREFIX = "sbtest-"
#: Prefix of the nftables tables (family ``inet``) that make netns test servers root-only.
GUARD_PREFIX = "sbguard_"


def _run(cmd: list[str], stdin: str | None = None) -> None:
    out = subprocess.run(cmd, capture_output=True, text=True, input=stdin)
    if out.returncode != 0:
        raise TestbedError(f"{' '.join(cmd)} failed: {out.stderr.strip() or out.returncode}")


def used_subnets() -> set[int]:
    """The ``S`` of every ``10.77.S.x`` address on this host's interfaces (taken: not given to a namespace)."""
    out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True).stdout
    return {int(m) for m in re.findall(r"inet 10\.77\.(\d+)\.", out)}


@dataclass
class Netns:
    """A namespace made by :func:`create_netns`: its name, the host end of its veth pair, its subnet ``S``."""

    name: str
    veth_host: str
    subnet: int


def create_netns(tag: str, i: int, subnet: int) -> Netns:
    """Namespace ``sbtest-<tag>-<i>`` with a veth pair on ``10.77.<subnet>.0/24`` (deleted again if a step fails)."""
    ns = f"{NETNS_PREFIX}{tag}-{i}"
    vh, vn = f"sbh{tag}{i}"[:15], f"sbn{tag}{i}"[:15]
    made = Netns(ns, vh, subnet)
    _run(["ip", "netns", "add", ns])
    try:
        _run(["ip", "link", "add", vh, "type", "veth", "peer", "name", vn])
        _run(["ip", "link", "set", vn, "netns", ns])
        _run(["ip", "addr", "add", f"10.77.{subnet}.1/24", "dev", vh])
        _run(["ip", "link", "set", vh, "up"])
        _run(["ip", "-n", ns, "addr", "add", f"10.77.{subnet}.2/24", "dev", vn])
        _run(["ip", "-n", ns, "link", "set", vn, "up"])
        _run(["ip", "-n", ns, "link", "set", "lo", "up"])
    except TestbedError:
        delete_netns(made)
        raise
    return made


def delete_netns(ns: Netns) -> None:
    """Delete the veth pair and the namespace of ``ns``, by exact name."""
    # Deleting the host end of a veth pair deletes its peer; deleting the namespace deletes
    # whatever is left inside it. Exact names only.
    subprocess.run(["ip", "link", "del", ns.veth_host], capture_output=True)
    subprocess.run(["ip", "netns", "del", ns.name], capture_output=True)


# ---- the owner guard of netns servers (nftables) ------------------------------------------


def nft_path() -> str | None:
    """Path of ``nft`` (nftables), ``None`` when not installed."""
    return shutil.which("nft", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"]))


def guard_install(table: str, addresses: Sequence[str]) -> None:
    """nftables table ``inet <table>``: packets to ``addresses`` from a socket not owned by us
    (root) are rejected on output, and forwarded packets to them dropped.

    ``meta skuid`` is the uid owning the sending socket (nftables ``meta`` expression); a local
    account's connect() to a namespace address is refused, root's passes. The forward chain keeps
    other network namespaces and other machines out. Removed by :func:`guard_remove` by exact
    table name.
    """
    nft = nft_path()
    if nft is None:
        raise TestbedError("nft (package nftables) is not installed")
    addrs = ", ".join(str(ipaddress.IPv4Address(a)) for a in addresses)
    uid = os.geteuid()
    script = (
        f"table inet {table} {{\n"
        "  chain output {\n"
        "    type filter hook output priority filter; policy accept;\n"
        f"    ip daddr {{ {addrs} }} meta skuid != {uid} counter reject\n"
        "  }\n"
        "  chain forward {\n"
        "    type filter hook forward priority filter; policy accept;\n"
        f"    ip daddr {{ {addrs} }} counter drop\n"
        "  }\n"
        "}\n"
    )
    _run([nft, "-f", "-"], stdin=script)


def guard_remove(table: str) -> None:
    """Delete nftables table ``inet <table>`` (only a name of ours, :data:`GUARD_PREFIX`)."""
    if not table.startswith(GUARD_PREFIX):  # pragma: no cover - only our own names are recorded
        return
    nft = nft_path()
    if nft is not None:
        subprocess.run([nft, "delete", "table", "inet", table], capture_output=True)
