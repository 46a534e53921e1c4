"""run_clients: real fio client/server runs of ~1 s against test servers (owner-only Unix sockets,
and loopback TCP once)."""

from __future__ import annotations

import os
import subprocess
import threading

import orjson
import pytest

from storagebench._clientserver import client_command, read_client_output, run_clients
from storagebench.errors import FioError, HostError
from storagebench.fio.hosts import host_label
from storagebench.fio.process import fio_version
from storagebench.records import ClientServerInfo
from storagebench.servers import fio_servers, start_server, stop_server

JOB = """[global]
ioengine=psync
rw=randread
bs=4k
size=4m
runtime={runtime}
time_based
directory={directory}

[sb]
"""


def _jobs(servers, tmp_path, runtime=1):
    jobs = {}
    for i, s in enumerate(servers):
        p = tmp_path / f"job-{i}.fio"
        p.write_text(JOB.format(runtime=runtime, directory=s.workdir))
        jobs[s.label] = p
    return jobs


@pytest.fixture(scope="module")
def servers(tmp_path_factory, fio_bin):
    with fio_servers(3, workdir=tmp_path_factory.mktemp("servers")) as ss:
        yield ss


def test_run_clients_every_host_reports(servers, tmp_path):
    jobs = _jobs(servers, tmp_path)
    res = run_clients(jobs, [s.host for s in servers], tmp_path / "out.json", tmp_path / "err.txt", 60)
    assert res.returncode == 0
    assert res.hosts == [s.label for s in servers]
    assert set(res.server_versions.values()) == {fio_version()}
    doc, text = read_client_output(tmp_path / "out.json")
    names = [(c["jobname"], host_label(c["hostname"], c["port"])) for c in doc["client_stats"]]
    assert sorted(h for j, h in names if j == "sb") == sorted(res.hosts)
    assert [j for j, _ in names].count("All clients") == 1
    # each server wrote its file in its own directory
    for s in servers:
        assert any(s.workdir.iterdir())
    cs = res.provenance()
    assert cs.server_fio_versions == res.server_versions and cs.hosts == tuple(res.hosts)
    assert ClientServerInfo.from_json(orjson.loads(orjson.dumps(cs.to_json()))) == cs


def test_socket_servers_labels_agree_with_ingest_and_span_logs_are_read(servers, tmp_path):
    """fio reports a socket server as hostname=<path>, port=8765; the tidy ``host`` is Host.label
    (``sock:<path>``) in run_clients' check, in ingest and in the span logs."""
    from storagebench._clientserver import read_span_logs, span_log_prefix
    from storagebench.ingest import ingest_paths

    hs = [servers[0].host, servers[2].host]  # servers[1] is killed by a later test
    assert all(h.is_socket for h in hs)
    job = tmp_path / "job.fio"
    job.write_text(JOB.format(runtime=1, directory=tmp_path) + "numjobs=2\n")
    run = tmp_path / "run"
    run.mkdir()
    res = run_clients(job, hs, run / "output.json", run / "stderr.txt", 60)
    doc, _ = read_client_output(run / "output.json")
    entries = [c for c in doc["client_stats"] if c["jobname"] == "sb"]
    assert sorted({(c["hostname"], c["port"]) for c in entries}) == sorted((h.address, 8765) for h in hs)
    assert res.hosts == [h.label for h in hs] == [f"sock:{h.address}" for h in hs]
    runs = ingest_paths([run / "output.json"]).runs
    assert sorted(runs["host"].unique()) == sorted(h.label for h in hs)
    assert len(runs) == 4  # numjobs=2 on each server
    # one span log per socket server, flat in the run directory; fio's nested path is cleaned up
    assert sorted(p.name for p in run.iterdir() if p.name.startswith("sbspan")) == sorted(
        f"{span_log_prefix(h)}_iops.0.log.sock" for h in hs)
    assert not any(p.is_dir() for p in run.iterdir())
    spans = read_span_logs(run, hs, run_id="r")
    assert sorted(spans["host"].unique()) == sorted(h.label for h in hs)
    assert (spans["metric"] == "iops").all() and spans.groupby("host")["t_s"].agg(lambda t: t.max() - t.min()).gt(0.5).all()
    assert "fopen log" not in (run / "output.json").read_text()


@pytest.mark.usefixtures("fio_bin")
def test_loopback_tcp_servers_run_and_span_logs(tmp_path):
    """The TCP path (loopback mode): labels address:port, per-job span logs named by address."""
    from storagebench._clientserver import read_span_logs

    with fio_servers(2, mode="loopback", workdir=tmp_path / "srv") as ss:
        jobs = _jobs(ss, tmp_path)
        res = run_clients(jobs, [s.host for s in ss], tmp_path / "out.json", tmp_path / "err.txt", 60)
        assert res.hosts == [f"127.0.0.1:{s.host.port}" for s in ss]
    spans = read_span_logs(tmp_path, [s.host for s in ss], run_id="r")
    assert sorted(spans["host"].unique()) == sorted(res.hosts)
    assert sorted(p.name.split(".log.")[1] for p in tmp_path.glob("sbspan-*")) == ["127.0.0.1", "127.0.0.1"]


def test_one_job_file_for_all_and_bad_job_lists(servers, tmp_path):
    job = tmp_path / "all.fio"
    job.write_text(JOB.format(runtime=1, directory=tmp_path))
    cmd = client_command(job, [s.host for s in servers], tmp_path / "o.json")
    assert cmd.count(str(job)) == 3
    assert [a for a in cmd if a.startswith("--client=")] == [f"--client={s.host.fio_arg}" for s in servers]
    with pytest.raises(HostError, match="one job file per host"):
        client_command([job], [s.host for s in servers], tmp_path / "o.json")
    with pytest.raises(HostError, match="distinct"):
        client_command(job, [servers[0].host, servers[0].label], tmp_path / "o.json")
    with pytest.raises(FioError, match="does not exist"):
        client_command(tmp_path / "missing.fio", [servers[0].host], tmp_path / "o.json")


def test_server_killed_mid_run_is_named_others_kept(servers, tmp_path):
    jobs = _jobs(servers, tmp_path, runtime=2)
    victim = servers[1]
    hosts = [s.host for s in servers]
    # kill the victim's process group once its job is running (its job file appears)
    def kill_when_running():
        import time

        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not any(victim.workdir.glob("*.sb.*")):
            time.sleep(0.05)
        time.sleep(0.5)
        victim.kill()

    for f in victim.workdir.glob("*.sb.*"):
        f.unlink()
    t = threading.Thread(target=kill_when_running)
    t.start()
    with pytest.raises(HostError) as ei:
        run_clients(jobs, hosts, tmp_path / "out.json", tmp_path / "err.txt", 60)
    t.join()
    assert ei.value.hosts == [victim.label]
    assert victim.label in str(ei.value)
    doc, _ = read_client_output(tmp_path / "out.json")
    kept = {host_label(c["hostname"], c["port"]) for c in doc["client_stats"] if c["jobname"] == "sb"}
    assert kept == {servers[0].label, servers[2].label}

    # the dead server is unreachable now: refused before the run, named
    with pytest.raises(HostError, match=victim.label.replace(".", r"\.")):
        run_clients(jobs, hosts, tmp_path / "out2.json", tmp_path / "err2.txt", 60, reuse_versions=False)
    # (the rerun that completes the point is tested through the runner below)


def test_timeout_kills_the_client_process_group(servers, tmp_path):
    jobs = _jobs(servers[:1], tmp_path, runtime=30)
    with pytest.raises(FioError, match="timed out") as ei:
        run_clients(jobs, [servers[0].host], tmp_path / "out.json", tmp_path / "err.txt", 2)
    assert ei.value.returncode is None
    out = subprocess.run(["pgrep", "-f", f"--output={tmp_path / 'out.json'}"], capture_output=True, text=True)
    assert out.stdout.strip() == ""


def test_job_error_on_a_server_is_a_host_error(servers, tmp_path):
    # a job whose filename is a directory: fio reports err=21 (EISDIR) for that client
    adir = tmp_path / "adir"
    adir.mkdir()
    bad = tmp_path / "bad.fio"
    bad.write_text(f"[sb]\nioengine=psync\nrw=read\nbs=4k\nsize=1m\nfilename={adir}\n")
    with pytest.raises(HostError, match=r"error=21") as ei:
        run_clients(bad, [servers[0].host], tmp_path / "out.json", tmp_path / "err.txt", 60)
    assert ei.value.hosts == [servers[0].label]
    assert os.path.exists(tmp_path / "out.json")


@pytest.mark.usefixtures("fio_bin")
def test_study_on_servers_killed_server_fails_one_run_rerun_completes(tmp_path):
    """Through the runner: a server killed mid-run fails that run (named), keeps the rest; a rerun completes."""
    import time

    import orjson as _orjson

    from storagebench._runner import run_study
    from storagebench._study import load_study

    with fio_servers(2, workdir=tmp_path / "servers") as servers:
        spec = load_study({
            "name": "cs-kill", "factors": {"bs": ["4k", "8k"]},
            "fixed": {"rw": "randread", "ioengine": "psync"}, "runtime": 2, "size": "4m",
            "target": "cs.dat", "repetitions": 1, "seed": 1, "hosts": [s.host.fio_arg for s in servers],
        })
        victim = servers[1]
        order = [p.run_id for p in spec.expand()]
        stop = threading.Event()

        def kill_during_first_run():
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not stop.is_set():
                if any((victim.workdir).glob("cs.dat")):  # the victim's job is laying out / running
                    time.sleep(0.8)
                    victim.kill()
                    return
                time.sleep(0.05)

        t = threading.Thread(target=kill_during_first_run)
        t.start()
        first = run_study(spec, out_dir=tmp_path / "results", progress=False)
        stop.set()
        t.join()
        assert first.failed, "the killed server should have failed a run"
        failed_id = first.failed[0]
        assert victim.label in first.errors[failed_id]
        failed_dirs = list((first.root / "failed" / failed_id).iterdir())
        out_doc, _ = read_client_output(failed_dirs[0] / "output.json")
        assert out_doc is not None  # the surviving server's results are kept with the failure
        kept = {host_label(c["hostname"], c["port"]) for c in out_doc["client_stats"] if c["jobname"] != "All clients"}
        assert kept == {servers[0].label}
        # restart the server on the same address: the rerun measures exactly the missing runs
        revived = start_server(victim.host, victim.workdir)
        try:
            from storagebench import _clientserver as clientserver

            clientserver._VERSION_CACHE.clear()
            second = run_study(spec, out_dir=tmp_path / "results", progress=False)
        finally:
            stop_server(revived)
        assert not second.failed
        assert set(second.completed) == set(first.failed)
        assert set(second.skipped) == set(order) - set(first.failed)
        prov = _orjson.loads((first.root / "raw" / failed_id / "provenance.json").read_bytes())
        assert prov["hosts"] == [s.host.fio_arg for s in servers]


# ---- the native clients factor: one study, one random order, one resume ---------------------


def _clients_spec(hosts, **extra) -> dict:
    spec = {"name": "cs-clients", "factors": {"clients": [1, 2, 3]},
            "fixed": {"rw": "randread", "bs": "4k", "ioengine": "psync", "iodepth": 1},
            "runtime": 1, "size": "4m", "target": "cs.dat", "repetitions": 2, "seed": 3, "hosts": hosts}
    spec.update(extra)
    return spec


@pytest.mark.usefixtures("fio_bin")
def test_clients_factor_one_study_random_order_hosts_per_run_kill_and_resume(tmp_path):
    """1..3 clients as ONE study: interleaved run order, hosts[:clients] per run, SIGKILL + rerun resumes."""
    import signal
    import sys
    import time
    from pathlib import Path

    import yaml

    from storagebench._runner import run_study
    from storagebench._study import load_study
    from storagebench.scaling import load_scaling

    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "results"
    raw = out / "cs-clients" / "raw"
    with fio_servers(3, workdir=tmp_path / "servers") as servers:
        hosts = [s.host.fio_arg for s in servers]
        spec_path = tmp_path / "cs-clients.yaml"
        spec_path.write_text(yaml.safe_dump(_clients_spec(hosts)))
        study = load_study(spec_path)
        plan = study.expand()
        # seed 3: the run order interleaves the client counts (grouped by count it would be 3 blocks)
        assert [p.factors["clients"] for p in plan] == [3, 1, 1, 2, 3, 2]

        def complete():
            return [p.name for p in raw.iterdir() if not p.name.startswith(".")] if raw.is_dir() else []

        def staging():
            return [p for p in raw.iterdir() if p.name.startswith(".tmp-")] if raw.is_dir() else []

        proc = subprocess.Popen([sys.executable, "-m", "storagebench.cli", "run", str(spec_path), "--out", str(out),
                                 "--no-progress"], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while not (len(complete()) >= 2 and staging()):
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, "sweep made no progress"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
        # the fio client dies with the sweep (PR_SET_PDEATHSIG), it does not keep the servers busy
        gone = time.monotonic() + 15
        while subprocess.run(["pgrep", "-f", f"--output={raw}"], capture_output=True).returncode == 0:
            assert time.monotonic() < gone, "fio client outlived the killed sweep"
            time.sleep(0.05)
        before = set(complete())
        assert 2 <= len(before) < len(plan)
        assert before == set(plan.run_ids[: len(before)])  # measured in the plan's order

        again = run_study(study, out_dir=out, progress=False)
    assert again.ok, again.errors
    assert again.root == out / "cs-clients"  # one study directory, not one per client count
    assert set(again.skipped) == before
    assert set(again.completed) == set(plan.run_ids) - before
    assert sorted(complete()) == sorted(plan.run_ids)

    started = {}
    for p in plan:
        d = raw / p.run_id
        point = orjson.loads((d / "point.json").read_bytes())
        prov = orjson.loads((d / "provenance.json").read_bytes())
        assert point["factors"]["clients"] == p.factors["clients"]
        assert prov["hosts"] == hosts[: p.factors["clients"]]  # the first n hosts ran the point
        started[p.run_id] = prov["started_at"]
    assert sorted(started, key=started.get) == list(plan.run_ids)  # executed in the random order

    res, spans = load_scaling(again)
    runs = res.runs
    assert not res.errors
    per_run = runs.groupby("run_id").agg(clients=("clients", "first"), hosts=("host", "nunique"))
    assert len(per_run) == len(plan)
    assert (per_run["hosts"] == per_run["clients"]).all(), per_run
    assert sorted(per_run["clients"].tolist()) == [1, 1, 2, 2, 3, 3]
    # factor columns are point.json's, for every host row
    assert set(runs["bs_bytes"]) == {4096} and set(runs["rw"]) == {"randread"} and set(runs["iodepth"]) == {1}
    span_hosts = spans.groupby("run_id")["host"].nunique()
    assert (span_hosts.reindex(per_run.index) == per_run["clients"]).all()


def test_clients_beyond_a_host_file_refused_before_anything_runs(tmp_path, fio_bin):
    from storagebench._runner import run_study
    from storagebench._study import load_study
    from storagebench.errors import StudyError

    hostfile = tmp_path / "hosts.txt"
    hostfile.write_text("# two servers\n127.0.0.1,18991\n127.0.0.1,18992\n")
    study = load_study(_clients_spec(str(hostfile)))
    with pytest.raises(StudyError, match=r"level 3 needs 3 hosts, but hosts has 2"):
        run_study(study, out_dir=tmp_path / "results", progress=False)
    assert not (tmp_path / "results" / "cs-clients" / "raw").exists()


@pytest.mark.usefixtures("fio_bin")
def test_measure_scaling_is_one_study_and_refuses_bad_levels_before_servers_start(tmp_path):
    from storagebench._study import load_study
    from storagebench.errors import StudyError
    from storagebench.scaling import measure_scaling, scaling_study

    spec = os.path.join(os.path.dirname(__file__), "..", "data", "studies", "scaling.yaml")
    with pytest.raises(StudyError, match=r"levels.pattern: must be a non-empty subset of .*got \['4k_randreed'\]"):
        measure_scaling(spec, out_dir=tmp_path, patterns=["4k_randreed"], test_port=None)
    with pytest.raises(StudyError, match=r"level 4 needs 4 hosts, but test_hosts is 2"):
        measure_scaling(spec, out_dir=tmp_path, test_hosts=2, test_port=None)
    with pytest.raises(StudyError, match=r"level 4 needs 4 hosts, got 2"):
        scaling_study(spec, ["127.0.0.1,1", "127.0.0.1,2"])
    with pytest.raises(StudyError, match=r"has no factor 'clients'"):
        scaling_study(load_study({"name": "x", "hosts": ["127.0.0.1,1"]}), None)
    assert not any(tmp_path.iterdir())
    sweep = measure_scaling(spec, out_dir=tmp_path, test_hosts=2, test_port=None, runtime=1, ramp_time=0,
                            repetitions=1, patterns=["4k_randread", "1m_seqread"], max_clients=2)
    assert sweep.ok, sweep.errors
    assert sweep.root == tmp_path / "scaling" and len(sweep.completed) == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scaling"]
    stored = load_study(sweep.root / "study.yaml")
    assert stored.factors["clients"] == [1, 2] and len(stored.hosts) == 2


def test_ingest_takes_factor_columns_of_a_runner_run_from_point_json(servers, tmp_path):
    """fio's client "global options" hold one value per key for all hosts (the hosts' keys repeated,
    one host's value kept): per-host job files that differ are mislabelled there. For a runner run
    (point.json with ``options``) ingest takes the factor columns from point.json."""
    from storagebench.ingest import ingest_paths

    hs = [servers[0], servers[2]]  # servers[1] is killed by an earlier test
    jobs = {}
    for i, s in enumerate(hs):
        p = tmp_path / f"job-{i}.fio"
        p.write_text(f"[global]\nioengine=psync\nrw=randread\nbs={4 * (i + 1)}k\nsize=4m\nruntime=1\ntime_based\n"
                     f"iodepth={i + 1}\ndirectory={s.workdir}\n\n[sb]\n")
        jobs[s.label] = p
    run = tmp_path / "run"
    run.mkdir()
    run_clients(jobs, [s.host for s in hs], run / "output.json", run / "stderr.txt", 60)
    doc, _ = read_client_output(run / "output.json")
    # what fio reports: ONE iodepth/bs for both hosts, though they ran 1/4k and 2/8k
    assert doc["global options"]["iodepth"] in ("1", "2") and doc["global options"]["bs"] in ("4k", "8k")
    alone = ingest_paths([run / "output.json"]).runs
    assert alone["iodepth"].nunique() == 1 and alone["bs_bytes"].nunique() == 1  # the mislabelling
    point = {"study": "t", "run_id": "abcdefabcdef", "repetition": 1, "run_order": 0,
             "factors": {"clients": 2}, "options": {"rw": "randread", "bs": "8k", "iodepth": 2, "ioengine": "psync",
                                                     "runtime": 1, "time_based": True}}
    (run / "point.json").write_bytes(orjson.dumps(point))
    runs = ingest_paths([run]).runs
    assert len(runs) == 2 and set(runs["host"]) == {s.label for s in hs}
    assert set(runs["iodepth"]) == {2} and set(runs["bs_bytes"]) == {8192} and set(runs["clients"]) == {2}


def test_runner_keeps_the_servers_fio_versions_and_the_client_command(tmp_path, fio_bin):
    """A client/server study on two fio servers on 127.0.0.1: each run's provenance.json holds the
    client_server record run_clients made (every server's fio version, the client command), typed."""
    from storagebench._runner import run_study
    from storagebench._study import load_study
    from storagebench.records import FORMAT_VERSION, Provenance

    version = fio_version(fio_bin)
    with fio_servers(2, mode="loopback", workdir=tmp_path / "srv") as ss:
        spec = load_study({"name": "cs-prov", "factors": {"bs": ["4k", "8k"]},
                           "fixed": {"rw": "randread", "ioengine": "psync"}, "runtime": 1, "size": "4m",
                           "target": "cs.dat", "seed": 2, "hosts": [s.host.fio_arg for s in ss]})
        res = run_study(spec, out_dir=tmp_path / "results", fio_bin=fio_bin, progress=False)
        labels = [s.label for s in ss]
    assert res.ok and len(res.completed) == 2
    assert all(lb.startswith("127.0.0.1:") for lb in labels)
    for d in res.run_dirs():
        raw = orjson.loads((d / "provenance.json").read_bytes())
        assert raw["format_version"] == FORMAT_VERSION
        prov = Provenance.read(d / "provenance.json")
        cs = prov.client_server
        assert cs is not None and cs.hosts == tuple(labels)
        assert cs.server_fio_versions == {lb: version for lb in labels}
        assert cs.client_fio_version == version and cs.returncode == 0 and cs.elapsed_s > 0.5
        assert [a for a in cs.command if a.startswith("--client=")] == [f"--client={s.host.fio_arg}" for s in ss]
        assert cs.command[0] == fio_bin or cs.command[0].endswith("/fio")
        assert prov.hosts == tuple(s.host.fio_arg for s in ss) and prov.target == "cs.dat"
        assert prov.device is None and "client/server" in prov.device_note
        assert cs.started_at.endswith("Z") and prov.started_at <= cs.started_at <= prov.finished_at
        assert Provenance.from_json(raw) == prov and prov.to_json() == raw  # written once, as the record says
