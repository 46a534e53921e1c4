"""The registry of ingest formats (issue 19): every registered format has samples under tests/fixtures, is
recognised in them, and they ingest (or are refused with the format's own reason); an unknown format is a
clear error. The tests iterate the registry, so a new format is tested without an edit here."""

from __future__ import annotations

import pytest
from conftest import FIXTURES

from storagebench.errors import IngestError
from storagebench.ingest import _parse_loadgen, ingest_paths, loadgen

FORMATS = list(loadgen.FORMATS.values())


#: Files of a fixture directory that are not samples: how they were made, where they come from.
_NOT_SAMPLES = (".py", ".sh", ".md", ".tsv")


def _samples(fmt: loadgen.Format) -> list:
    """The sample files of the format's fixture directory (not below it) that :func:`detect_format` says are
    of it (its generator script and notes are not samples)."""
    return sorted(p for p in (FIXTURES / fmt.fixtures).iterdir()
                  if p.is_file() and p.suffix not in _NOT_SAMPLES and p.name != "NOTICE"
                  and loadgen.detect_format(p.read_bytes()) == fmt.name)


#: The built-in formats in the order detection asks them (a looser test after a stricter one).
BUILT_IN = ["fio", "diskspd-xml", "iometer-icf", "iometer-instantaneous", "iometer", "diskspd-linux", "diskspd-text"]


def test_the_built_in_formats_are_registered_in_their_order():
    assert [n for n in loadgen.FORMATS if n in BUILT_IN] == BUILT_IN  # a new format may come anywhere
    assert [n for n in loadgen.ingestible() if n in BUILT_IN] == ["fio", "diskspd-xml", "iometer-instantaneous",
                                                                   "iometer", "diskspd-text"]


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_every_format_has_samples_and_they_ingest(fmt):
    """A format with a parser (or fio's JSON) must name a fixture directory holding samples of it; each
    sample ingests into rows with no error. A format recognised only to be refused is refused with its
    reason, for each of its samples (when it has some)."""
    ingested = fmt.parse is not None or fmt.name == loadgen.FIO
    if fmt.fixtures is None:
        assert not ingested, f"{fmt.name}: a format whose rows are ingested needs fixtures"
        return
    samples = _samples(fmt)
    assert samples, f"{fmt.name}: no file of tests/fixtures/{fmt.fixtures} is recognised as {fmt.name}"
    res = ingest_paths(samples)
    if ingested:
        good = [p for p in samples if not any(e.path == str(p) for e in res.errors)]
        assert good and len(res.runs) > 0, [str(e) for e in res.errors]
        if fmt.name != loadgen.FIO:  # fio's directory also holds its refused outputs (killed, truncated ...)
            assert res.errors == [] and res.files == len(samples)
    else:
        assert res.files == 0 and len(res.errors) == len(samples)
        assert all(e.reason == fmt.refusal for e in res.errors)


def test_an_unknown_format_is_a_clear_error_naming_it_and_the_formats_known(tmp_path):
    with pytest.raises(IngestError, match=r"unknown ingest format 'toy'; the formats known are \['fio', 'diskspd-xml'"):
        _parse_loadgen("toy", b"toy data", "x.toy", None)
    odd = tmp_path / "notes.txt"
    odd.write_text("hello world\nnot a benchmark\n")
    (err,) = ingest_paths([odd]).errors
    assert err.reason.startswith("no fio JSON in the file; it says: 'hello world'")
    assert err.reason.endswith(f"nor is it any other format storagebench reads (known: {', '.join(loadgen.FORMATS)})")
    assert ingest_paths([tmp_path]).errors == []  # in a directory, content of no format is skipped, as before


def test_a_format_registers_once_with_a_parser_or_a_refusal():
    with pytest.raises(ValueError, match="'iometer' is registered twice"):
        loadgen.register(loadgen.Format("iometer", lambda text: False, refusal="no"))
    with pytest.raises(ValueError, match="needs a parse function or a refusal"):
        loadgen.Format("toy", lambda text: False)
    with pytest.raises(ValueError, match="lower-case words"):
        loadgen.Format("Toy Format", lambda text: False, refusal="no")
    assert "toy" not in loadgen.FORMATS
