"""fio's host grammar (storagebench.fio.hosts): the forms fio's server.c parses, host files, labels."""

from __future__ import annotations

import pytest

from storagebench.errors import HostError
from storagebench.fio.hosts import (
    FIO_DEFAULT_PORT,
    SUN_PATH_MAX,
    Host,
    format_hostfile,
    host_label,
    parse_host,
    parse_hostfile,
)


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("127.0.0.1", Host("127.0.0.1", 8765)),
        ("127.0.0.1,9000", Host("127.0.0.1", 9000)),
        ("ip:10.77.1.2,8765", Host("10.77.1.2", 8765)),
        ("ip4:10.77.1.2", Host("10.77.1.2", 8765)),
        ("ip6:::1,9001", Host("::1", 9001, "ip6")),
        ("ip6:::1", Host("::1", 8765, "ip6")),
        ("::1", Host("::1", 8765, "ip6")),
        ("[::1]:9002", Host("::1", 9002, "ip6")),
        ("storage-07:9003", Host("storage-07", 9003)),
        ("  storage-07,9004 ", Host("storage-07", 9004)),
        ("sock:/tmp/fio.sock", Host("/tmp/fio.sock", 8765, "sock")),
        # fio takes everything after sock: as the path, commas included (server.c)
        ("sock:/run/a,b/fio.sock", Host("/run/a,b/fio.sock", 8765, "sock")),
    ],
)
def test_parse_host_forms(spec, expected):
    h = parse_host(spec)
    assert h == expected
    assert parse_host(h.fio_arg) == h  # the --client form reads back to the same host
    assert parse_host(h) is h


@pytest.mark.parametrize(
    "spec, message",
    [
        ("", "got ''"),
        ("host,notaport", "must be a number"),
        ("host:abc", "must be a number"),
        ("h,70000", "1..65535"),
        ("h,0", "1..65535"),
        ("sock:", "non-empty"),
        ("sock:fio.sock", "must be absolute"),
        ("sock:/tmp/a b.sock", "whitespace"),
        ("sock:/tmp/x\n[global]", "whitespace or control"),
        ("ip:host:9000", "must not contain ':'"),
        (":8765", "names no host"),
        ("10.0.0.0/24", "must not contain ',' or '/'"),
        (8765, "must be a string"),
    ],
)
def test_parse_host_refuses_with_the_reason(spec, message):
    with pytest.raises(HostError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_host(spec)


def test_socket_path_length_is_that_of_sun_path():
    ok = "/" + "d" * (SUN_PATH_MAX - 1)
    assert parse_host(f"sock:{ok}").address == ok
    with pytest.raises(HostError, match=f"at most {SUN_PATH_MAX} bytes"):
        parse_host(f"sock:{ok}x")


def test_labels_and_fio_args():
    tcp, v6, sock = Host("10.0.0.5", 9000), Host("::1", 9001, "ip6"), Host("/run/sb/server-0.sock", family="sock")
    assert [h.label for h in (tcp, v6, sock)] == ["10.0.0.5:9000", "::1:9001", "sock:/run/sb/server-0.sock"]
    assert [h.fio_arg for h in (tcp, v6, sock)] == ["ip:10.0.0.5,9000", "ip6:::1,9001", "sock:/run/sb/server-0.sock"]
    # the rule ingest applies to fio's client JSON ("hostname", "port") gives the same labels;
    # fio 3.33 reports a socket server as hostname=<path>, port=8765
    assert host_label("10.0.0.5", 9000) == tcp.label
    assert host_label("/run/sb/server-0.sock", FIO_DEFAULT_PORT) == sock.label
    assert host_label(None, None) == ":"
    assert parse_host(sock.label) == sock and parse_host(tcp.label) == tcp


def test_hostfile_comments_duplicates_and_bad_lines(tmp_path):
    p = tmp_path / "hosts.list"
    p.write_text("# cluster A\n127.0.0.1,9000\n\nip:127.0.0.2,9001  # second\nsock:/run/sb/s0.sock\n")
    assert parse_hostfile(p) == [Host("127.0.0.1", 9000), Host("127.0.0.2", 9001), Host("/run/sb/s0.sock", family="sock")]
    assert parse_hostfile(str(p)) == parse_hostfile(p.read_text())
    p.write_text("127.0.0.1,9000\n127.0.0.1 9001\n")
    with pytest.raises(HostError, match=r"hosts.list:2: one host a line"):
        parse_hostfile(p)
    p.write_text("127.0.0.1,9000\n# x\n127.0.0.1:9000\n")
    with pytest.raises(HostError, match=r"hosts.list:3: host 127.0.0.1:9000 is listed twice \(first on line 1\)"):
        parse_hostfile(p)
    p.write_text("sock:/run/a.sock\nsock:/run/a.sock\n")
    with pytest.raises(HostError, match=r"hosts.list:2: host sock:/run/a.sock is listed twice"):
        parse_hostfile(p)
    p.write_text("ok-host\nsock:relative.sock\n")
    with pytest.raises(HostError, match=r"hosts.list:2: socket path must be absolute"):
        parse_hostfile(p)
    p.write_text("# nothing\n\n")
    with pytest.raises(HostError, match="names no host"):
        parse_hostfile(p)
    with pytest.raises(HostError, match="does not exist"):
        parse_hostfile(tmp_path / "nope.list")
    p.write_bytes(b"\xff\xfe\n")
    with pytest.raises(HostError, match="must be UTF-8 text; byte 0 is not"):
        parse_hostfile(p)


def test_format_hostfile_round_trip_and_refuses_duplicates():
    hosts = ["127.0.0.1:9000", Host("::1", 9001, "ip6"), "sock:/run/sb/s0.sock"]
    text = format_hostfile(hosts)
    assert text == "ip:127.0.0.1,9000\nip6:::1,9001\nsock:/run/sb/s0.sock\n"
    assert parse_hostfile(text) == [parse_host(h) for h in hosts]
    with pytest.raises(HostError, match="distinct"):
        format_hostfile(["127.0.0.1,9000", "ip:127.0.0.1,9000"])


@pytest.mark.parametrize("spec", ["ip:a;b", "a#b,8765", "a$b", "x=y", "ip:[x]", "h\u00e9te", "a'b", "ip6:fe80::1%e;t,1"])
def test_a_tcp_address_holding_job_file_or_shell_syntax_is_refused(spec):
    """The address reaches job files (the span-log name), hostfiles and labels: a host name or an IP literal only
    (issue 18: a second way into a job file, found by attacking the gates)."""
    with pytest.raises(HostError, match="host name .* or an IP address"):
        parse_host(spec)


@pytest.mark.parametrize("spec, label", [("node-1.example.com", "node-1.example.com:8765"), ("my_host,9000", "my_host:9000"),
                                         ("10.1.2.3:8766", "10.1.2.3:8766"), ("[::1]:8765", "::1:8765"),
                                         ("ip6:fe80::1%eth0,8765", "fe80::1%eth0:8765")])
def test_host_names_and_ip_literals_still_parse(spec, label):
    assert parse_host(spec).label == label
