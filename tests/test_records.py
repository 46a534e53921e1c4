"""Typed provenance records: every landed provenance.json (format 0) reads, round-trips, and bad ones are named."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from storagebench.errors import IngestError, SchemaError
from storagebench.records import (
    FORMAT_VERSION,
    ClientServerInfo,
    DeviceInfo,
    FilesystemInfo,
    Provenance,
    SetUpInfo,
    TestbedRecord,
    provenance_records,
)

ROOT = Path(__file__).resolve().parents[1]
FIX = Path(__file__).parent / "fixtures"


def _landed() -> list[Path]:
    return sorted(FIX.rglob("provenance.json"))


def test_landed_provenance_files_read_and_round_trip():
    files = _landed()
    assert len(files) >= 10
    old = 0
    for f in files:
        data = json.loads(f.read_text())
        # most were written by 0.1.0 (no format_version); the ka_stripe_width capture by this format
        old += "format_version" not in data
        assert data.get("format_version", FORMAT_VERSION) == FORMAT_VERSION, f
        prov = Provenance.from_json(data, path=str(f))
        out = prov.to_json()
        assert out["format_version"] == FORMAT_VERSION
        assert {k: out[k] for k in data} == data  # every landed key and value written back as it was
        assert Provenance.from_json(out) == prov
        if prov.device is not None:
            assert isinstance(prov.device, DeviceInfo) and prov.device.devno
    assert old >= 10  # the 0.1.0 records (no format_version) are still read


def test_unknown_keys_survive_and_newer_versions_are_refused():
    prov = Provenance.from_json({"fio_version": "fio-3.33", "future_field": {"a": 1}})
    assert prov.extra == {"future_field": {"a": 1}} and prov.to_json()["future_field"] == {"a": 1}
    with pytest.raises(SchemaError, match=r"format_version 99 is newer than this storagebench reads \(formats 0 to 1\)"):
        Provenance.from_json({"format_version": 99})


@pytest.mark.parametrize("data, match", [
    ({"cpu_count": "2"}, "cpu_count: must be int"),
    ({"git_dirty": 1}, "git_dirty: must be bool"),
    ({"device": "vda"}, "device must be an object"),
    ({"device": {"size_bytes": 1.5}}, "device.size_bytes"),
    ({"hosts": "a,b"}, "hosts must be a list"),
    ({"format_version": -1}, "non-negative integer"),
])
def test_wrong_types_are_named(data, match):
    with pytest.raises(SchemaError, match=match):
        Provenance.from_json(data, path="p.json")


def test_records_are_frozen_and_replace_copies():
    prov = Provenance(fio_version="fio-3.33")
    with pytest.raises(AttributeError):
        prov.fio_version = "x"  # type: ignore[misc]
    later = prov.replace(duration_s=1.5)
    assert prov.duration_s is None and later.duration_s == 1.5


def test_client_server_and_testbed_records():
    cs = ClientServerInfo.from_json({"hosts": ["sock:/x"], "server_fio_versions": {"sock:/x": "fio-3.33"},
                                     "client_fio_version": "fio-3.33", "command": ["fio", "--client=sock:/x"]})
    prov = Provenance(client_server=cs, hosts=("sock:/x",))
    assert Provenance.from_json(prov.to_json()).client_server == cs
    tb = TestbedRecord.from_json({"study": "s", "set_up_at": "2026-11-24T00:00:00Z", "targets": {"raw": "/dev/loop3"}})
    assert tb.setup == 1 and TestbedRecord.from_json(tb.to_json()) == tb


def _committed_provenance() -> list[Path]:
    """Every provenance.json committed to the repository (tests/fixtures, data/ ...), by git."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--", "*provenance.json"], capture_output=True,
                         text=True, check=True).stdout.split()
    return [ROOT / p for p in out]


def test_every_committed_provenance_file_loads_through_the_one_reader():
    files = _committed_provenance()
    assert len(files) >= 12 and any("fixtures" in str(f) for f in files)
    for f in files:
        prov = Provenance.read(f)  # format 0 (no format_version): migrated
        assert prov.format_version == FORMAT_VERSION and prov.fio_version and prov.started_at
        assert isinstance(prov.filesystem, (FilesystemInfo, type(None)))
        again = Provenance.from_json(json.loads(json.dumps(prov.to_json())), path=str(f))
        assert again == prov and again.to_json() == prov.to_json()


def test_format_0_with_every_optional_part_is_migrated_into_typed_parts():
    data = json.loads((FIX / "study_demo" / "raw" / "0d5748d0b2c7" / "provenance.json").read_text())
    data.update(set_up={"setup": 2, "block": 1, "arm": {"datastore": "a"}, "build_id": "0123456789ab"},
                hosts=["sock:/s/0"], client_server={"hosts": ["sock:/s/0"], "server_fio_versions": {
                    "sock:/s/0": "fio-3.33"}, "client_fio_version": "fio-3.33", "command": ["fio", "--client=x"],
                    "started_at": "2026-11-22T05:51:00Z", "elapsed_s": 1.2, "returncode": 0},
                host_steps=[{"step": "drop_page_cache", "level": 3, "cached_before_bytes": 10}])
    prov = Provenance.from_json(data)
    assert prov.set_up == SetUpInfo(setup=2, block=1, arm={"datastore": "a"}, build_id="0123456789ab")
    assert prov.client_server.server_fio_versions == {"sock:/s/0": "fio-3.33"} and prov.hosts == ("sock:/s/0",)
    assert prov.host_steps[0]["step"] == "drop_page_cache" and prov.extra == {}
    out = prov.to_json()
    assert {k: out[k] for k in data} == data and out["format_version"] == FORMAT_VERSION
    for bad, match in [({"set_up": {"setup": "2"}}, "set_up.setup"), ({"set_up": "b1"}, "set_up must be an object"),
                       ({"host_steps": "drop"}, "host_steps must be a list"),
                       ({"host_steps": [{"level": 3}]}, "each with a 'step' name"),
                       ({"client_server": {"server_fio_versions": {"h": 3.33}}}, "server_fio_versions"),
                       ({"client_server": {"elapsed_s": "1"}}, "client_server.elapsed_s"),
                       ({"device": {"path": 5}}, "device.path")]:
        with pytest.raises(SchemaError, match=match):
            Provenance.from_json({**data, **bad})


def test_read_names_the_file_and_ingest_refuses_a_newer_format_by_name(tmp_path):
    from storagebench.ingest import ingest_study
    from storagebench.ingest.fio import check_provenance

    bad = tmp_path / "provenance.json"
    bad.write_text("{not json")
    with pytest.raises(SchemaError, match=f"{bad}: not valid JSON"):
        Provenance.read(bad)
    with pytest.raises(IngestError, match=r"format_version 7 is newer .*formats 0 to 1"):
        check_provenance(b'{"format_version": 7, "fio_version": "fio-3.33"}', "p/provenance.json")
    # in a study: that run is an error naming both versions, the others are ingested
    study = tmp_path / "s"
    shutil.copytree(FIX / "study_demo" / "raw", study / "raw")
    victim = sorted((study / "raw").iterdir())[0]
    data = json.loads((victim / "provenance.json").read_text())
    (victim / "provenance.json").write_text(json.dumps({**data, "format_version": FORMAT_VERSION + 1}))
    res = ingest_study(study)
    assert len(res.errors) == 1 and f"format_version {FORMAT_VERSION + 1} is newer" in res.errors[0].reason
    assert f"formats 0 to {FORMAT_VERSION}" in res.errors[0].reason
    assert res.runs["run_id"].nunique() == 11 and victim.name not in set(res.runs["run_id"])


def test_provenance_records_takes_every_form_a_caller_holds():
    recs = [Provenance.read(f) for f in sorted((FIX / "study_demo" / "raw").glob("*/provenance.json"))]
    as_json = [r.to_json() for r in recs]
    assert provenance_records(recs) == recs == provenance_records(as_json)
    assert provenance_records(recs[0]) == [recs[0]] == provenance_records(as_json[0])
    frame = pd.DataFrame([{k: v for k, v in j.items() if k not in ("device", "filesystem", "quiet_host", "safety")}
                          for j in as_json]).assign(device_note=float("nan"))  # a missing value is null
    assert [r.hostname for r in provenance_records(frame)] == [r.hostname for r in recs]
    assert provenance_records(None) == []
    with pytest.raises(SchemaError, match="provenance must be a Provenance record"):
        provenance_records("vda")
    with pytest.raises(SchemaError, match=r"provenance\[1\]: must be a Provenance record"):
        provenance_records([recs[0], 5])
    with pytest.raises(SchemaError, match=r"provenance\[0\]: cpu_count"):
        provenance_records([{"cpu_count": "2"}])


def test_collect_provenance_is_the_typed_record(tmp_path, fio_bin):
    from storagebench._hostinfo import collect_provenance

    target = tmp_path / "t.dat"
    target.write_bytes(b"\0" * 4096)
    prov = collect_provenance(target, spec_hash="abc", fio_bin=fio_bin)
    assert isinstance(prov, Provenance) and prov.target_kind == "file" and prov.spec_hash == "abc"
    assert prov.finished_at is None and prov.duration_s is None  # known only after the run: the runner adds them
    assert Provenance.from_json(json.loads(json.dumps(prov.to_json()))) == prov
    client = collect_provenance(None, fio_bin=fio_bin)
    assert client.device is None and client.filesystem is None and "client/server" in client.device_note
