"""fio test servers: owner-only Unix sockets (default), loopback TCP, root-only network namespaces;
versions; who else can reach a server. Real fio servers throughout."""

from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import stat
import subprocess
import tempfile
from pathlib import Path

import orjson
import pytest

from storagebench.errors import HostError, TestbedError
from storagebench.fio.hosts import Host, parse_host, parse_hostfile
from storagebench.fio.process import fio_version
from storagebench.servers import (
    GUARD_PREFIX,
    check_versions,
    connect_as,
    exposure,
    fio_servers,
    private_dir,
    server_version,
    server_versions,
    start_server,
    stop_server,
    write_hostfile,
)

#: A job that does no I/O and touches no file: what "nobody" sends to a server (never exec_*).
PROBE_JOB = "[sb-probe]\nioengine=null\nsize=4k\nbs=4k\nrw=read\n"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); it is gone for our purpose
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


@pytest.fixture
def nobody(require_root):
    """Run a command as the unprivileged account ``nobody`` (setpriv), with a probe job it can read."""
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed")
    pw = pwd.getpwnam("nobody")
    pub = Path(tempfile.mkdtemp(prefix="sb-nobody-"))
    pub.chmod(0o755)
    job = pub / "probe.fio"
    job.write_text(PROBE_JOB)
    job.chmod(0o644)

    def run(*cmd: str, as_nobody: bool = True) -> subprocess.CompletedProcess:
        prefix = ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--clear-groups"] if as_nobody else []
        return subprocess.run([*prefix, *cmd], capture_output=True, text=True, timeout=60, cwd=pub)

    run.job = job  # type: ignore[attr-defined]
    run.uid = pw.pw_uid  # type: ignore[attr-defined]
    yield run
    shutil.rmtree(pub)


def _client(fio_bin: str, host: Host, job: Path) -> list[str]:
    return [fio_bin, f"--client={host.fio_arg}", "--output-format=json", str(job)]


def _reported(proc: subprocess.CompletedProcess) -> list[str]:
    """``hostname`` of each ``sb-probe`` entry in the client's JSON on stdout ([] when there is no JSON)."""
    m = re.search(r"^\{", proc.stdout, flags=re.M)
    if m is None:
        return []
    doc = orjson.loads(proc.stdout[m.start(): proc.stdout.rfind("}") + 1])
    return [str(c.get("hostname")) for c in doc.get("client_stats", []) if c.get("jobname") == "sb-probe"]


# ---- the defect of issue 8: other local accounts must not reach the test servers --------------


def test_nobody_cannot_reach_socket_test_servers_root_can(nobody, fio_bin):
    """The default test servers: `nobody` running fio --client=sock:PATH is refused; root is served."""
    with fio_servers(2, fio_bin=fio_bin) as servers:
        sock = servers[0].host
        d = Path(sock.address).parent
        assert stat.S_IMODE(os.lstat(d).st_mode) == 0o700 and os.lstat(d).st_uid == os.geteuid()
        assert stat.S_IMODE(os.lstat(sock.address).st_mode) == 0o600  # fio made it 0777; we tightened it
        # nobody can read the probe job (so a refusal is about the server, not the job file)
        assert nobody("cat", str(nobody.job)).stdout == PROBE_JOB
        denied = nobody(*_client(fio_bin, sock, nobody.job))
        print(f"\n$ setpriv --reuid=nobody ... fio --client={sock.fio_arg} --output-format=json probe.fio\n"
              f"exit status {denied.returncode}\n{denied.stdout}{denied.stderr}")
        assert denied.returncode != 0
        assert "connect; Permission denied" in denied.stdout + denied.stderr
        assert _reported(denied) == []
        # control: root, the same command, is served by the same server
        served = nobody(*_client(fio_bin, sock, nobody.job), as_nobody=False)
        print(f"$ fio --client={sock.fio_arg} --output-format=json probe.fio  (as root)\n"
              f"exit status {served.returncode}; client_stats hostnames: {_reported(served)}")
        assert served.returncode == 0, served.stdout + served.stderr
        assert _reported(served) == [sock.address]
        # and a bare connect as nobody is refused too; the check used by `storagebench hosts`
        assert connect_as(sock) is False
        assert exposure(sock) == []


def test_loopback_tcp_server_is_reachable_by_nobody(nobody, fio_bin):
    """Why loopback is not the default: `nobody` gets a job run by a root loopback server (a null-engine
    probe: it does no I/O), and `storagebench hosts`' check says so."""
    with fio_servers(1, mode="loopback", fio_bin=fio_bin) as servers:
        tcp = servers[0].host
        reached = nobody(*_client(fio_bin, tcp, nobody.job))
        assert reached.returncode == 0, reached.stdout + reached.stderr
        assert _reported(reached) == [tcp.address]
        assert connect_as(tcp) is True
        why = exposure(tcp)
        assert len(why) == 1 and "nobody connected" in why[0] and "address of this host (127.0.0.1)" in why[0]
        # without the probe the rule alone says the same
        assert exposure(tcp, probe=False) == [
            "127.0.0.1 is an address of this host (127.0.0.1): every local account can connect to a TCP port on it"]


def _netns_ok() -> None:
    if subprocess.run(["ip", "netns", "list"], capture_output=True).returncode != 0:
        pytest.skip("iproute2 netns support is not available")
    if shutil.which("nft", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin") is None:
        pytest.skip("nft (nftables) is not installed")


def _nft_tables() -> str:
    nft = shutil.which("nft", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
    return subprocess.run([nft, "list", "tables"], capture_output=True, text=True).stdout


def _netns_and_links() -> tuple[str, str]:
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return ns, links


def test_netns_servers_are_root_only_and_torn_down(nobody, fio_bin):
    _netns_ok()
    with fio_servers(2, mode="netns", fio_bin=fio_bin) as servers:
        names = [s.netns for s in servers]
        assert all(n.startswith("sbtest-") for n in names)
        ns, links = _netns_and_links()
        assert all(n in ns for n in names)
        assert all(s.host.address.startswith("10.77.") for s in servers)
        guards = [t.split()[-1] for t in _nft_tables().splitlines() if GUARD_PREFIX in t]
        assert len([g for g in guards if g.startswith(GUARD_PREFIX + f"{os.getpid() % 100000:x}_")]) == 1
        # the controller (root) reaches each server over its veth
        versions = server_versions([s.host for s in servers], fio_bin)
        assert set(versions.values()) == {fio_version(fio_bin)}
        # nobody does not: the nftables owner match rejects it
        for s in servers:
            denied = nobody(*_client(fio_bin, s.host, nobody.job))
            assert denied.returncode != 0 and _reported(denied) == [], denied.stdout
            assert "Connection refused" in denied.stdout + denied.stderr
            assert connect_as(s.host) is False
            assert exposure(s.host) == []
        served = nobody(*_client(fio_bin, servers[0].host, nobody.job), as_nobody=False)
        assert served.returncode == 0 and _reported(served) == [servers[0].host.address]
        pids = [s.pid for s in servers]
    ns, links = _netns_and_links()
    assert not any(n in ns for n in names)
    assert not any(f"sbh{n.split('-')[1]}" in links for n in names)
    assert not any(_pid_alive(p) for p in pids)
    assert not any(g in _nft_tables() for g in guards)


def test_netns_refuses_to_start_unguarded_without_insecure_tcp(require_root, monkeypatch):
    from storagebench import servers as srv

    monkeypatch.setattr(srv, "_nft", lambda: None)
    before = _netns_and_links()[0]
    with pytest.raises(TestbedError, match=r"nft \(package nftables\) is not installed.*insecure_tcp=True"):
        with fio_servers(1, mode="netns"):
            pass
    assert _netns_and_links()[0] == before  # nothing was created


# ---- private directories and sockets ------------------------------------------------------


def test_private_dir_creates_0700_and_refuses_what_others_can_enter(tmp_path):
    d = private_dir(tmp_path / "a" / "sock")
    assert stat.S_IMODE(d.stat().st_mode) == 0o700 and d.stat().st_uid == os.geteuid()
    assert private_dir(d, create=False) == d  # ours and 0700: accepted again
    d.chmod(0o755)
    with pytest.raises(HostError, match=r"mode 0755.*0700\): refused"):
        private_dir(d)
    os.symlink(tmp_path / "a", tmp_path / "link")
    with pytest.raises(HostError, match="symbolic link"):
        private_dir(tmp_path / "link")
    (tmp_path / "file").write_text("")
    with pytest.raises(HostError, match="not a directory"):
        private_dir(tmp_path / "file")
    with pytest.raises(HostError, match="does not exist"):
        private_dir(tmp_path / "missing", create=False)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # writable by others, not sticky: someone could swap our directory
    with pytest.raises(HostError, match=r"writable by other users and not sticky"):
        private_dir(shared / "sock")
    assert not (shared / "sock").exists()
    if os.geteuid() == 0:
        other = tmp_path / "other"
        other.mkdir(mode=0o700)
        os.chown(other, pwd.getpwnam("nobody").pw_uid, -1)
        with pytest.raises(HostError, match=r"belongs to uid \d+, not to us"):
            private_dir(other)


def test_socket_in_use_refused_stale_socket_replaced_and_removed_on_stop(tmp_path, fio_bin):
    d = private_dir(tmp_path / "sock")
    h = Host(str(d / "s.sock"), family="sock")
    srv = start_server(h, tmp_path / "w", fio_bin=fio_bin)
    try:
        with pytest.raises(HostError, match=rf"in use by another fio server \(pid {srv.pid}\)"):
            start_server(h, tmp_path / "w2", fio_bin=fio_bin)
        srv.kill()  # SIGKILL: fio leaves its socket file behind
        assert stat.S_ISSOCK(os.lstat(h.address).st_mode)
        srv = start_server(h, tmp_path / "w", fio_bin=fio_bin)  # the stale socket is replaced
        assert server_version(h, fio_bin) == fio_version(fio_bin)
    finally:
        stop_server(srv)
    assert not os.path.lexists(h.address)
    (d / "s.sock").write_text("not a socket")
    with pytest.raises(HostError, match="exists and is not a socket"):
        start_server(h, tmp_path / "w", fio_bin=fio_bin)
    d.chmod(0o755)
    with pytest.raises(HostError, match="mode 0755"):
        start_server(Host(str(d / "t.sock"), family="sock"), tmp_path / "w", fio_bin=fio_bin)


def test_refuses_all_interfaces_without_allow_any(tmp_path, fio_bin):
    for addr in ("0.0.0.0", "::"):
        with pytest.raises(HostError, match="all interfaces"):
            start_server(Host(addr, 18999, "ip6" if ":" in addr else "ip"), tmp_path, fio_bin=fio_bin)
    out = subprocess.run(["ss", "-Hltn", "sport = :18999"], capture_output=True, text=True).stdout
    assert out.strip() == ""


def test_bad_mode_count_and_socket_dir():
    with pytest.raises(HostError, match=r"must be one of \['socket', 'loopback', 'netns'\], got 'lan'"):
        with fio_servers(2, mode="lan"):
            pass
    with pytest.raises(HostError, match="n must be"):
        with fio_servers(0):
            pass
    with pytest.raises(HostError, match="socket_dir is for mode='socket'"):
        with fio_servers(1, mode="loopback", socket_dir="/tmp/x"):
            pass


def test_socket_servers_listen_report_version_and_go_away(tmp_path, fio_bin):
    with fio_servers(3, workdir=tmp_path / "servers", fio_bin=fio_bin) as servers:
        labels = [s.label for s in servers]
        sock_dir = Path(servers[0].host.address).parent
        assert sock_dir == tmp_path / "servers" / "sock"
        assert labels == [f"sock:{sock_dir}/server-{i}.sock" for i in range(3)]
        assert len({s.workdir for s in servers}) == 3
        versions = server_versions([s.host for s in servers], fio_bin)
        assert set(versions) == set(labels)
        assert set(versions.values()) == {fio_version(fio_bin)}
        check_versions(versions, fio_version(fio_bin))  # same version: accepted
        with pytest.raises(HostError, match="version mismatch") as ei:
            check_versions(versions, "fio-2.0")
        assert sorted(ei.value.hosts) == sorted(labels)
        pids = [s.pid for s in servers]
    assert not any(_pid_alive(p) for p in pids)
    assert not sock_dir.exists()  # sockets removed by exact path, then the directory we made


def test_loopback_servers_listen_report_version_and_go_away(fio_bin):
    with fio_servers(2, mode="loopback", fio_bin=fio_bin) as servers:
        labels = [s.label for s in servers]
        assert len(set(labels)) == 2 and all(lb.startswith("127.0.0.1:") for lb in labels)
        assert set(server_versions([s.host for s in servers], fio_bin).values()) == {fio_version(fio_bin)}
        pids = [s.pid for s in servers]
    assert not any(_pid_alive(p) for p in pids)
    out = subprocess.run(["ss", "-Hltn"], capture_output=True, text=True).stdout
    assert not any(f":{lb.split(':')[1]} " in out for lb in labels)


def test_unreachable_server_is_named(fio_bin):
    with fio_servers(1, fio_bin=fio_bin) as servers:
        host = servers[0].host
    with pytest.raises(HostError, match=host.label.replace(".", r"\.")) as ei:
        server_version(host, fio_bin, timeout_s=10)
    assert ei.value.hosts == [host.label]


def test_runner_script_start_status_stop(tmp_path, fio_bin):
    import sys

    from conftest import ROOT

    script = [sys.executable, str(ROOT / "runners" / "test_hosts.py")]
    state, hostfile = tmp_path / "state.json", tmp_path / "hosts.list"
    out = subprocess.run([*script, "start", "-n", "2", "--state", str(state), "--hostfile", str(hostfile),
                          "--workdir", str(tmp_path / "srv")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "warning" not in out.stderr
    hosts = parse_hostfile(hostfile)
    assert [h.family for h in hosts] == ["sock", "sock"]
    assert hostfile.read_text().startswith("sock:/")
    rec = orjson.loads(state.read_bytes())
    assert rec["mode"] == "socket" and rec["socket_dir"] == str(tmp_path / "srv" / "sock")
    try:
        assert set(server_versions(hosts, fio_bin).values()) == {fio_version(fio_bin)}
        again = subprocess.run([*script, "start", "--state", str(state)], capture_output=True, text=True)
        assert again.returncode == 2 and "stop those servers first" in again.stderr
        status = subprocess.run([*script, "status", "--state", str(state)], capture_output=True, text=True)
        assert status.stdout.count("running") == 2
    finally:
        stop = subprocess.run([*script, "stop", "--state", str(state)], capture_output=True, text=True, timeout=60)
    assert stop.returncode == 0, stop.stderr
    assert not state.exists()
    assert not any(os.path.lexists(h.address) for h in hosts)
    assert not (tmp_path / "srv" / "sock").exists()
    with pytest.raises(HostError):
        server_version(hosts[0], fio_bin, timeout_s=10)


def test_runner_script_stop_kills_only_its_own_pids(tmp_path, fio_bin):
    """A state file whose pid was reused by another process: stop leaves that process alone."""
    import sys

    from conftest import ROOT

    script = [sys.executable, str(ROOT / "runners" / "test_hosts.py")]
    state = tmp_path / "state.json"
    out = subprocess.run([*script, "start", "-n", "1", "--state", str(state), "--hostfile", str(tmp_path / "h"),
                          "--workdir", str(tmp_path / "srv")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    rec = orjson.loads(state.read_bytes())
    real_pid = rec["servers"][0]["pid"]
    other = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        rec["servers"][0]["pid"] = other.pid
        state.write_bytes(orjson.dumps(rec))
        stop = subprocess.run([*script, "stop", "--state", str(state)], capture_output=True, text=True, timeout=60)
        assert stop.returncode == 0
        assert other.poll() is None  # not fio --server=<that socket>: untouched
        assert _pid_alive(real_pid)  # and the real server was not found under that record
        assert os.path.lexists(rec["servers"][0]["host"][len("sock:"):])  # a live socket is never removed
    finally:
        other.kill()
        other.wait()
        os.killpg(real_pid, signal.SIGKILL)
    # once its server is gone, the record's socket is stale: removed by a second stop from a fresh record
    rec["servers"][0]["pid"] = real_pid
    state.write_bytes(orjson.dumps(rec))
    assert subprocess.run([*script, "stop", "--state", str(state)], capture_output=True, text=True,
                          timeout=60).returncode == 0
    assert not os.path.lexists(rec["servers"][0]["host"][len("sock:"):])


# ---- storagebench hosts -------------------------------------------------------------------


def test_cli_hosts_checks_reachability_version_and_warns_on_tcp(tmp_path, fio_bin):
    from typer.testing import CliRunner

    from storagebench.cli import app

    runner = CliRunner()
    with fio_servers(2, fio_bin=fio_bin) as servers:
        hostfile = write_hostfile([servers[1].host], tmp_path / "h.list")
        ok = runner.invoke(app, ["hosts", servers[0].label, "--hostfile", str(hostfile)])
        assert ok.exit_code == 0, ok.output
        assert ok.output.count(fio_version(fio_bin)) == 2
        assert "warning" not in ok.output  # owner-only sockets
        dead = servers[0].host
    bad = runner.invoke(app, ["hosts", dead.label])
    assert bad.exit_code == 1
    assert dead.label in bad.output
    with fio_servers(1, mode="loopback", fio_bin=fio_bin) as servers:
        tcp = runner.invoke(app, ["hosts", servers[0].label])
    print(tcp.output)
    assert tcp.exit_code == 0, tcp.output
    assert f"warning: fio server {servers[0].label} can be reached by other local users" in tcp.stderr
    assert "127.0.0.1 is an address of this host" in tcp.stderr
    assert "fio servers have no authentication" in tcp.stderr
    assert "ssh -L /dir/fio.sock:/remote/fio.sock" in tcp.stderr


def test_cli_hosts_warns_on_a_socket_others_can_open(fio_bin):
    from typer.testing import CliRunner

    from storagebench.cli import app

    base = Path(tempfile.mkdtemp(prefix="sb-expose-"))  # under /tmp: every directory above it can be entered
    base.chmod(0o755)
    d = private_dir(base / "sock")
    srv = start_server(Host(str(d / "s.sock"), family="sock"), base / "w", fio_bin=fio_bin)
    try:
        assert exposure(srv.host) == []  # 0700 directory, 0600 socket
        d.chmod(0o755)
        assert exposure(srv.host, probe=False) == []  # the socket itself is 0600: still owner-only
        os.chmod(srv.host.address, 0o777)  # what fio itself creates
        why = exposure(srv.host, probe=False)
        assert len(why) == 1 and "mode 0777" in why[0] and "every directory above it" in why[0]
        res = CliRunner().invoke(app, ["hosts", srv.label])
        assert res.exit_code == 0, res.output
        assert f"warning: fio server {srv.label} can be reached by other local users: socket" in res.stderr
        if os.geteuid() == 0:
            assert connect_as(srv.host) is True
    finally:
        stop_server(srv)
        shutil.rmtree(base)


def test_parse_host_is_the_fio_layer_one():
    from storagebench.fio import hosts as fio_hosts

    assert parse_host is fio_hosts.parse_host and parse_hostfile is fio_hosts.parse_hostfile
    assert Host is fio_hosts.Host
