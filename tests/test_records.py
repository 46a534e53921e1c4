"""Typed provenance records: every landed provenance.json (format 0) reads, round-trips, and bad ones are named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from storagebench.errors import SchemaError
from storagebench.records import FORMAT_VERSION, ClientServerInfo, DeviceInfo, Provenance, TestbedRecord

FIX = Path(__file__).parent / "fixtures"


def _landed() -> list[Path]:
    return sorted(FIX.rglob("provenance.json"))


def test_landed_provenance_files_read_and_round_trip():
    files = _landed()
    assert len(files) >= 10
    for f in files:
        data = json.loads(f.read_text())
        assert "format_version" not in data  # written by 0.1.0
        prov = Provenance.from_json(data, path=str(f))
        out = prov.to_json()
        assert out["format_version"] == FORMAT_VERSION
        assert {k: out[k] for k in data} == data  # every landed key and value written back as it was
        assert Provenance.from_json(out) == prov
        if prov.device is not None:
            assert isinstance(prov.device, DeviceInfo) and prov.device.devno


def test_unknown_keys_survive_and_newer_versions_are_refused():
    prov = Provenance.from_json({"fio_version": "fio-3.33", "future_field": {"a": 1}})
    assert prov.extra == {"future_field": {"a": 1}} and prov.to_json()["future_field"] == {"a": 1}
    with pytest.raises(SchemaError, match="format_version 99 is newer"):
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
