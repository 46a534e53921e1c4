#!/usr/bin/env python3
"""Start and stop test fio servers for client/server studies on this machine.

    runners/test_hosts.py start [-n 4] [--mode socket|loopback|netns] [--socket-dir DIR] [--port P]
                                [--insecure-tcp] [--state FILE] [--hostfile FILE]
    runners/test_hosts.py stop  [--state FILE]
    runners/test_hosts.py status [--state FILE]

fio servers have no authentication: whoever connects runs jobs (and programs) as the server's
user. ``start`` therefore runs ``fio --server`` where only its owner can reach it: by default on
Unix sockets ``sock:DIR/server-<i>.sock`` in a directory of mode 0700 (``--socket-dir``, default
a new temporary one); or, as root, in one network namespace ``sbtest-*`` per server reached over
a veth pair (10.77.S.2) behind an nftables table that rejects everyone but root. ``--mode
loopback`` (127.0.0.1 ports) is reachable by every local account. It writes a fio host file (one
``sock:PATH`` or ``ip:ADDR,PORT`` a line, for ``fio --client=FILE`` or a study's ``hosts:``) and a
state file (pids, sockets, namespaces, guard). ``stop`` stops exactly those pids (checking that
each still runs ``fio --server=<its address>``) and removes exactly those sockets, namespaces,
veths and nftables table.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from storagebench.errors import StorageBenchError  # noqa: E402
from storagebench.servers import (  # noqa: E402
    TestHosts,
    _is_our_server,
    start_test_hosts,
    stop_test_hosts,
    write_hostfile,
)

DEFAULT_STATE = Path(".storagebench-test-hosts.json")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    st = sub.add_parser("start", help="start test fio servers")
    st.add_argument("-n", type=int, default=4, help="number of servers (default 4)")
    st.add_argument("--mode", default="socket", choices=["socket", "loopback", "netns"],
                    help="socket (default, owner-only), loopback (every local account can reach it), netns (root)")
    st.add_argument("--socket-dir", default=None, help="socket mode: directory of the sockets (created 0700)")
    st.add_argument("--port", type=int, default=None, help="first port (loopback) / port (netns)")
    st.add_argument("--insecure-tcp", action="store_true",
                    help="netns without the nftables owner guard (every local account can reach the servers)")
    st.add_argument("--workdir", default=None, help="parent of the servers' directories (default: a temp dir)")
    st.add_argument("--hostfile", default="test_hosts.list", help="fio host file to write")
    for p in (st, sub.add_parser("stop", help="stop them"), sub.add_parser("status", help="list them")):
        p.add_argument("--state", default=str(DEFAULT_STATE), help=f"state file (default {DEFAULT_STATE})")
    args = ap.parse_args(argv)
    state = Path(args.state)
    try:
        if args.cmd == "start":
            if state.exists():
                print(f"test_hosts: {state} exists: stop those servers first", file=sys.stderr)
                return 2
            th = start_test_hosts(args.n, args.mode, workdir=args.workdir, port=args.port,
                                  socket_dir=args.socket_dir, insecure_tcp=args.insecure_tcp)
            state.write_text(json.dumps(th.to_dict(), indent=2))
            write_hostfile(th.hosts, args.hostfile)
            for s in th.servers:
                print(f"{s.host.label}\tpid {s.pid}\t{s.netns or '-'}\t{s.workdir}")
            print(f"host file: {args.hostfile}; state: {state}")
            if args.mode == "loopback" or (args.mode == "netns" and th.guard is None):
                print("warning: every local account can connect to these servers, and fio servers have no "
                      "authentication (they run anyone's jobs as their user)", file=sys.stderr)
            return 0
        if not state.exists():
            print(f"test_hosts: no state file {state}: nothing started", file=sys.stderr)
            return 2
        th = TestHosts.from_dict(json.loads(state.read_text()))
        if args.cmd == "status":
            for s in th.servers:
                print(f"{s.host.label}\tpid {s.pid}\t{'running' if _is_our_server(s) else 'gone'}\t{s.netns or '-'}")
            return 0
        stop_test_hosts(th)
        state.unlink()
        print(f"stopped {len(th.servers)} server(s), deleted {len(th.namespaces)} namespace(s)")
        return 0
    except StorageBenchError as exc:
        print(f"test_hosts: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
