"""storagebench._safeyaml: YAML with a size cap, a nesting cap and aliases that cannot multiply."""

from __future__ import annotations

import os

import pytest

from storagebench._safeyaml import MAX_YAML_BYTES, ShapeError, expanded_size, load_yaml, read_text_capped
from storagebench.errors import StudyError


def _laughs(levels: int, width: int = 9) -> str:
    lines = ["l0: &l0 [" + ", ".join(["lol"] * width) + "]"]
    for i in range(1, levels + 1):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def test_aliases_within_the_limit_are_kept_and_shared():
    data = load_yaml("base: &b {rw: randread, bs: 4k}\nlevels:\n  - {<<: *b, name: a}\n  - {<<: *b, name: b, bs: 8k}\n")
    assert data["levels"] == [{"rw": "randread", "bs": "4k", "name": "a"}, {"rw": "randread", "bs": "8k", "name": "b"}]
    # 3 levels of 9: 1 + 9 + 81 + 729 lols and lists under l3, well within the limit
    assert len(load_yaml(_laughs(3))["l3"]) == 9


def test_expanded_size_counts_shared_references_without_expanding():
    x: list = ["lol"] * 9
    for _ in range(30):  # 9**31 values: counted over 32 distinct objects
        x = [x] * 9
    with pytest.raises(ShapeError, match="more than 100,000 values"):
        expanded_size(x, max_depth=64)
    small = [["a", "b"]] * 3
    assert expanded_size(small) == 1 + 3 * 3  # the outer list, 3 x (a list of 2 strings)
    loop: list = [1]
    loop.append(loop)
    with pytest.raises(ShapeError, match="contains itself"):
        expanded_size(loop)
    deep: object = 1
    for _ in range(40):
        deep = [deep]
    with pytest.raises(ShapeError, match="nested more than 32"):
        expanded_size(deep)


@pytest.mark.parametrize("text, words", [
    (_laughs(9), ["key 'l5'", "more than 100,000 values", "aliases"]),
    ("a: &a [*a]\n", ["contains itself"]),
    ("x: " + "[" * 100 + "]" * 100 + "\n", ["nested more than 32 levels", "line 1"]),
    ("a: 1\nb: 2\na: 3\n", ["key 'a' appears twice", "first at line 1", "line 3"]),
    ("n: " + "7" * 50 + "\n", ["integer of 50 digits"]),
    ("d: 2001-13-45\n", ["ValueError", "month must be in 1..12"]),
    ("x: !!python/object/apply:os.system ['true']\n", ["could not determine a constructor"]),
    ("a\x00: 1\n", ["unacceptable character"]),
    ("a: 1\n---\nb: 2\n", ["expected a single document"]),
])
def test_hostile_documents_are_refused_by_name(text, words):
    with pytest.raises(StudyError) as info:
        load_yaml(text, where="spec.yaml", error=StudyError)
    msg = str(info.value)
    assert msg.startswith("spec.yaml: not valid YAML: ")
    for w in words:
        assert w in msg, (w, msg)


def test_merge_bomb_is_refused_before_construction():
    lines = ["m0: &m0 {a: 1, b: 2}"] + [f"m{i}: &m{i} {{<<: [" + ", ".join([f"*m{i - 1}"] * 8) + "]}"
                                       for i in range(1, 12)]
    with pytest.raises(StudyError, match="expands to more than"):
        load_yaml("\n".join(lines), error=StudyError)


def test_read_text_capped_refuses_what_is_not_a_small_regular_file(tmp_path):
    ok = tmp_path / "ok.yaml"
    ok.write_text("\ufeffname: x\n", encoding="utf-8")
    assert read_text_capped(ok) == "name: x\n"
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * (MAX_YAML_BYTES + 1))
    with pytest.raises(StudyError, match=r"of 262,145 bytes, more than the size cap of 262,144 bytes"):
        read_text_capped(big, error=StudyError, what="study spec")
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)  # opening a fifo for reading without O_NONBLOCK would wait for a writer forever
    with pytest.raises(StudyError, match=r"not a regular file \(a (FIFO|character device)\)"):
        read_text_capped(fifo, error=StudyError, what="study spec")
    zero = tmp_path / "zero.yaml"
    zero.symlink_to("/dev/zero")
    with pytest.raises(StudyError, match=r"not a regular file \(a (FIFO|character device)\)"):
        read_text_capped(zero, error=StudyError, what="study spec")
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"name: caf\xe9\n")
    with pytest.raises(StudyError, match="must be UTF-8 text; byte 9"):
        read_text_capped(latin, error=StudyError, what="study spec")
