"""Fuzzed study specs (issue 8 item 5): every case is a clear StudyError or a valid spec, never a
traceback or a hang, and a valid spec's job files say exactly what was checked.

Three corpora, all seeded:

* **mutations** of every committed ``data/studies/*.yaml``: hostile strings (newlines, control
  characters, ``[``/``]``, ``;``, ``#``, ``$``, unicode, 5000 characters) in every string position
  and every key, hostile numbers (inf, nan, 1e9, 2**70, 10**5000, -1, 1e-9, bools) in every number
  position, wrong types, self-references, shared-reference bombs, deep nesting, duplicated or
  mixed-type levels; each loaded as a mapping and as the YAML ``yaml.safe_dump`` makes of it;
* **hostile YAML** written by hand: alias and merge bombs under every key, recursive aliases,
  deep nesting, duplicate keys, Python tags, huge literals, non-UTF-8, fifos and devices;
* **hypothesis**-generated specs (``derandomize=True``) drawn from the same hostile values.

A case is classified as ``error`` (a StudyError whose message names the key and never holds the
hostile text raw), ``valid`` (it loads and expands) or ``traceback``/``hang`` (a defect). For a
valid spec every rendered job file is parsed back (and fio itself parses one per distinct option
set) and must hold exactly the checked options. The per-case time limit is a hang guard only
(no speed is asserted). ``python tests/test_study_fuzz.py`` prints the counts per class.
"""

from __future__ import annotations

import copy
import json
import os
import random
import re
import shutil
import signal
import sys
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from storagebench._jobfile import parse_jobfile, render_jobfile, rendered_options, verify_fio_parse
from storagebench._study import load_study
from storagebench.errors import StudyError
from storagebench.fio.options import canonical_name

ROOT = Path(__file__).resolve().parents[1]
STUDIES = sorted((ROOT / "data" / "studies").glob("*.yaml"))
SEED = 20260806
#: Hang guard per case, s: generous (the machine is shared); nothing here takes more than ~1 s.
CASE_LIMIT_S = 60
DEFAULT_TARGET = "/tmp/storagebench-fuzz-target.dat"

HOSTILE_STRINGS: list[str] = [
    "x\n[global]\nexec_prerun=touch /tmp/storagebench-fuzz-pwned",
    "x\r\n[evil]\r\nfilename=/dev/loop0",
    "x\n",
    "x]\n[y",
    "[global]",
    "]",
    "a;b",
    "a # comment",
    "${HOME}",
    "$ncpus",
    "x=y",
    "include /etc/passwd",
    "\x00",
    "a\x1b[31mred",
    "\x7f",
    "tab\there",
    "line\u2028sep",
    "\u202eevil",
    "zero\u200bwidth",
    "ｆｕｌｌ",
    "caf\u00e9",
    "\U0001f600",
    " lead",
    "trail ",
    "",
    "-dash",
    ".dot",
    "../../etc/passwd",
    "/dev/loop0",
    "a" * 65,
    "a" * 300,
    "b" * 5000,
    "*alias",
    "&anchor",
    "!!python/object/apply:os.system ['id']",
    "{a: 1}",
    "'quoted'",
    '"dq"',
    "back\\slash",
    "4k\n",
    "randread\n[x]",
]
HOSTILE_NUMBERS: list[Any] = [
    1e9, float("inf"), float("-inf"), float("nan"), 2**63, 2**64, 2**70, 10**5000, -1, 0, -(2**63) - 1,
    1e308, 1e-9, 0.5, 1.5, True, False, None, 10**19,
]

# ---- classification -----------------------------------------------------------------------------


class _Hang(Exception):
    pass


def _alarm(signum, frame):  # noqa: ARG001
    raise _Hang()


def _has_control(text: str) -> bool:
    return bool(re.search(r"[\x00-\x1f\x7f\u2028\u2029]", text))


def classify(source: Any, *, payloads: tuple[str, ...] = (), key: str | None = None,
             tmp: Path | None = None, fio_sets: dict | None = None) -> tuple[str, str]:
    """(class, detail): ``error``, ``valid``, ``traceback``, ``hang`` or ``bad-message``/``smuggled``."""
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, CASE_LIMIT_S)
    try:
        try:
            study = load_study(source)
            plan = study.expand()
        except StudyError as exc:
            msg = str(exc)
            problem = _message_problem(msg, payloads, key)
            return ("bad-message", f"{problem}: {msg[:300]!r}") if problem else ("error", msg)
        problem = _rendering_problem(study, plan, tmp, fio_sets)
        return ("smuggled", problem) if problem else ("valid", f"{len(plan)} runs")
    except _Hang:
        return "hang", f"more than {CASE_LIMIT_S} s"
    except Exception as exc:  # noqa: BLE001 - the thing being counted
        return "traceback", f"{type(exc).__name__}: {str(exc)[:300]}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _message_problem(msg: str, payloads: tuple[str, ...], key: str | None) -> str | None:
    if not msg.strip():
        return "empty message"
    if len(msg) > 2000:
        return f"message of {len(msg)} characters"
    for p in payloads:
        if p and (_has_control(p) or len(p) > 100) and p in msg:
            return "the hostile text appears raw"
    if key is not None and key not in msg and "max_runs" not in msg and "YAML" not in msg:
        return f"the key {key!r} is not named"
    return None


def _rendering_problem(study, plan, tmp: Path | None, fio_sets: dict | None) -> str | None:
    """Render up to 6 points; each job file re-read must hold exactly the checked options."""
    for point in plan.points[:6]:
        target = point.factors.get("target") or study.target or DEFAULT_TARGET
        if not os.path.isabs(str(target)):
            target = os.path.join("/tmp/storagebench-fuzz", str(target))
        text = render_jobfile(point, study, target)
        expected = rendered_options(point, target)
        want_names = {canonical_name(k) for k in point.options} | {"filename"}
        if set(expected) != want_names:
            return f"rendered option names {sorted(expected)} != checked {sorted(want_names)}"
        for line in text.splitlines():
            if line.startswith("; "):
                if not re.fullmatch(r"; [\x20-\x7e]*", line):
                    return f"comment line with unprintable text: {line!r}"
                continue
            if line in ("[global]", f"[{point.run_id}]"):
                continue
            name = line.split("=", 1)[0]
            if name not in expected:
                return f"line {line!r} sets an option that was not checked"
        jf = parse_jobfile(text, base_dir="/nonexistent-include-dir")
        if [n for n, _ in jf.sections] != ["global", point.run_id]:
            return f"sections {[n for n, _ in jf.sections]}"
        (_, opts), = jf.jobs
        if {canonical_name(k): v for k, v in opts.items()} != dict(expected):
            return f"re-read {opts} != checked {expected}"
        if fio_sets is not None and tmp is not None and shutil.which("fio"):
            key = json.dumps(sorted((k, v) for k, v in expected.items() if k != "filename"), default=str)
            if key not in fio_sets and len(fio_sets) < 40:
                path = tmp / f"fio-{len(fio_sets)}.fio"
                path.write_text(text)
                verify_fio_parse(path, expected)  # raises JobFileError (a traceback here) on disagreement
                fio_sets[key] = str(path)
    return None


# ---- corpus 1: mutations of the committed specs -----------------------------------------------


def _walk(obj: Any, path: tuple = ()):
    """(path, value, is_key) for every value and every mapping key."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield path + (k,), k, True
            yield from _walk(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _walk(v, path + (i,))
    yield path, obj, False


def _set(obj: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    parent = obj
    for p in path[:-1]:
        parent = parent[p]
    parent[path[-1]] = value
    return obj


def _rename(obj: Any, path: tuple, new_key: Any) -> Any:
    parent = obj
    for p in path[:-1]:
        parent = parent[p]
    items = list(parent.items())
    parent.clear()
    for k, v in items:
        parent[new_key if k == path[-1] else k] = v
    return obj


def _bomb(depth: int = 12) -> list:
    x: Any = ["lol"] * 9
    for _ in range(depth):
        x = [x] * 9
    return x


def _deep(depth: int = 200) -> list:
    x: Any = "leaf"
    for _ in range(depth):
        x = [x]
    return x


def _mutations(spec_name: str, spec: dict, rng: random.Random, n: int) -> list[dict]:
    cases: list[dict] = []
    sites = list(_walk(spec))
    strings = [(p, v) for p, v, is_key in sites if not is_key and isinstance(v, str) and p]
    numbers = [(p, v) for p, v, is_key in sites if not is_key and isinstance(v, (int, float)) and p]
    keys = [(p, v) for p, v, is_key in sites if is_key]
    lists = [(p, v) for p, v, is_key in sites if not is_key and isinstance(v, list) and p]
    containers = [(p, v) for p, v, is_key in sites if not is_key and isinstance(v, (list, dict)) and p]

    def add(op: str, path: tuple, mutated: dict, payload: Any = None) -> None:
        payloads = (payload,) if isinstance(payload, str) else ()
        cases.append({"id": f"{spec_name}:{op}:{'.'.join(map(str, path))}", "spec": mutated, "payloads": payloads,
                      "key": str(path[0]) if path and op not in ("rename",) else None})

    # every string position and every key gets hostile strings; every number hostile numbers
    for path, _ in strings:
        for s in rng.sample(HOSTILE_STRINGS, 3):
            add("string", path, _set(copy.deepcopy(spec), path, s), s)
    for path, _ in keys:
        s = rng.choice(HOSTILE_STRINGS)
        add("rename", path, _rename(copy.deepcopy(spec), path, s), s)
    for path, _ in numbers:
        for x in rng.sample(HOSTILE_NUMBERS, 3):
            add("number", path, _set(copy.deepcopy(spec), path, x))
    for path, value in containers:
        wrong = rng.choice([42, "text", None, [], {}, [value], {"k": value}])
        add("wrong-type", path, _set(copy.deepcopy(spec), path, wrong))
    for path, value in lists:
        if value:
            m = copy.deepcopy(spec)
            _set(m, path, value + [copy.deepcopy(value[0])])
            add("duplicate-level", path, m)
            first = value[0]
            other = str(first) if isinstance(first, (int, float)) and not isinstance(first, bool) else (
                1 if isinstance(first, str) else True)
            m = copy.deepcopy(spec)
            _set(m, path, value + [other])
            add("mixed-type-level", path, m)
    for where in ("unknown_key", "fixed", "description", "factors"):
        m = copy.deepcopy(spec)
        if where == "fixed":
            m["fixed"] = dict(m.get("fixed") or {}, rw=_bomb())
        elif where == "factors":
            m["factors"] = dict(m.get("factors") or {}, bomb=_bomb())
        else:
            m[where] = _bomb()
        add("shared-bomb", (where,), m)
    m = copy.deepcopy(spec)
    m["fixed"] = dict(m.get("fixed") or {})
    m["fixed"]["self"] = m["fixed"]
    add("self-reference", ("fixed",), m)
    m = copy.deepcopy(spec)
    m["factors"] = dict(m.get("factors") or {}, deep=_deep())
    add("deep-nesting", ("factors",), m)
    m = copy.deepcopy(spec)
    m["factors"] = dict(m.get("factors") or {}, **{f"g{i}": list(range(10)) for i in range(20)})
    add("grid-1e20", ("factors",), m)
    rng.shuffle(cases)
    return cases[:n]


def mutation_cases() -> list[dict]:
    rng = random.Random(SEED)
    out = []
    for path in STUDIES:
        spec = yaml.safe_load(path.read_text())
        out += _mutations(path.stem, spec, rng, 45)
    return out


# ---- corpus 2: hostile YAML written by hand ----------------------------------------------------

GOOD = "name: fz\nfactors:\n  iodepth: [1, 2]\nfixed:\n  rw: randread\n  bs: 4k\nruntime: 1\n"


def _laughs(key: str, indent: str = "") -> str:
    lines = [f"{indent}{key}:", f"{indent}  a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i, name in enumerate("bcdefghi"):
        prev = "abcdefghi"[i]
        lines.append(f"{indent}  {name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def _merge_bomb(key: str) -> str:
    lines = [f"{key}:", "  m0: &m0 {k0: 1, k1: 2, k2: 3}"]
    for i in range(1, 14):
        lines.append(f"  m{i}: &m{i} {{<<: [" + ", ".join([f"*m{i - 1}"] * 8) + "]}")
    return "\n".join(lines) + "\n"


def yaml_cases() -> list[dict]:
    c: list[dict] = []

    def add(case_id: str, text: str | bytes, key: str | None = None, payloads: tuple[str, ...] = ()) -> None:
        c.append({"id": f"yaml:{case_id}", "text": text, "key": key, "payloads": payloads})

    add("good", GOOD)
    add("good-crlf", GOOD.replace("\n", "\r\n"))
    add("good-bom", "\ufeff" + GOOD)
    add("good-alias", "name: fz\nfactors:\n  pattern:\n    - &p {name: a, rw: randread, bs: 4k}\n"
        "    - {<<: *p, name: b, bs: 8k}\nruntime: 1\n")
    for key in ("unknown", "fixed", "factors", "description", "name", "allow", "hosts", "allow_remote"):
        add(f"laughs-under-{key}", GOOD + _laughs(key), key)
        add(f"merge-bomb-under-{key}", GOOD + _merge_bomb(key), key)
    add("laughs-in-level", "name: fz\nfactors:\n" + _laughs("sw", "  ").replace("  sw:\n", "  sw:\n") + "runtime: 1\n",
        "factors")
    add("recursive-alias", GOOD + "fixed2: &r [*r]\n")
    add("recursive-alias-fixed", "name: fz\nfixed: &f {rw: read, again: *f}\n")
    add("recursive-mapping-level", "name: fz\nfactors:\n  p: &l [{name: a, rw: read}, *l]\n")
    add("deep-flow", GOOD + "description: " + "[" * 5000 + "]" * 5000 + "\n")
    add("deep-block", GOOD + "".join("  " * i + f"k{i}:\n" for i in range(300)) + "  " * 300 + "x: 1\n")
    add("deep-flow-map", GOOD + "x: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n")
    add("dup-runtime", GOOD + "runtime: 6000\n", "runtime")
    add("dup-fixed", GOOD + "fixed:\n  rw: randwrite\n", "fixed")
    add("dup-option", GOOD.replace("  bs: 4k\n", "  bs: 4k\n  bs: 1m\n"), "bs")
    add("dup-alias-option", GOOD.replace("  rw: randread\n", "  rw: randread\n  readwrite: write\n"), "fixed")
    add("dup-level-key", "name: fz\nfactors:\n  p:\n    - {name: a, rw: read, rw: write}\n", "rw")
    add("reps-1e9", GOOD + "repetitions: 1e9\n", "repetitions")  # text to YAML 1.1
    add("reps-1.0e+9", GOOD + "repetitions: 1.0e+9\n", "repetitions")  # a float
    add("reps-1e9-int", GOOD + "repetitions: 1000000000\n", "repetitions")
    add("reps-float", GOOD + "repetitions: 2.0\n", "repetitions")
    add("reps-string", GOOD + "repetitions: '3'\n", "repetitions")
    add("runtime-inf", GOOD.replace("runtime: 1", "runtime: .inf"), "runtime")
    add("runtime-nan", GOOD.replace("runtime: 1", "runtime: .nan"), "runtime")
    add("runtime-neg-inf", GOOD.replace("runtime: 1", "runtime: -.inf"), "runtime")
    add("runtime-1e300", GOOD.replace("runtime: 1", "runtime: 1e300"), "runtime")
    add("runtime-ns", GOOD.replace("runtime: 1", "runtime: 0.0000001"), "runtime")
    add("runtime-suffix", GOOD.replace("runtime: 1", "runtime: 2m"), "runtime")
    add("ramp-inf", GOOD + "ramp_time: .inf\n", "ramp_time")
    add("timeout-huge", GOOD + "timeout: 1e12\n", "timeout")
    add("seed-2-70", GOOD + f"seed: {2**70}\n", "seed")
    add("seed-neg", GOOD + "seed: -1\n", "seed")
    add("seed-float", GOOD + "seed: 1.5\n", "seed")
    add("seed-5000-digits", GOOD + "seed: " + "9" * 5000 + "\n", "seed")
    add("seed-hex-huge", GOOD + "seed: 0x" + "f" * 100 + "\n", "seed")
    add("size-1p", GOOD + "size: 1p\n")
    add("size-huge", GOOD + "size: 99999999p\n", "size")
    add("size-digits", GOOD + "size: " + "9" * 4000 + "k\n", "size")
    add("size-float", GOOD + "size: 1.5e9\n", "size")
    add("size-bool", GOOD + "size: yes\n", "size")
    add("size-neg", GOOD + "size: -4k\n", "size")
    add("grid-1e20", "name: fz\nfactors:\n" + "".join(f"  f{i}: [0,1,2,3,4,5,6,7,8,9]\n" for i in range(20))
        + "labels: [" + ", ".join(f"f{i}" for i in range(20)) + "]\n")
    add("grid-big-levels", "name: fz\nfactors:\n  iodepth: [" + ", ".join(str(i) for i in range(1, 60001)) + "]\n")
    add("name-300", GOOD.replace("name: fz", "name: " + "a" * 300), "name")
    add("name-newline", GOOD.replace("name: fz", 'name: "x\\n"'), "name", ("x\n",))
    add("name-trailing-newline-block", GOOD.replace("name: fz", "name: |\n  x"), "name")
    add("name-slash", GOOD.replace("name: fz", "name: ../etc"), "name")
    add("name-int", GOOD.replace("name: fz", "name: 12"), "name")
    add("name-null", GOOD.replace("name: fz", "name: ~"), "name")
    add("level-1-'1'", "name: fz\nfactors:\n  sw: [1, '1']\n", "factors")
    add("level-true-1", "name: fz\nfactors:\n  sw: [true, 1]\n", "factors")
    add("level-1.0-1", "name: fz\nfactors:\n  sw: [1, 1.0]\n", "factors")
    add("level-null", "name: fz\nfactors:\n  sw: [~, a]\n", "factors")
    add("level-nan", "name: fz\nfactors:\n  sw: [.nan, .nan]\n", "factors")
    add("level-injection", "name: fz\nfactors:\n  pattern:\n    - {name: \"x\\n[global]\\nexec_prerun=id\", rw: read}\n",
        "factors", ("x\n[global]\nexec_prerun=id",))
    add("option-level-injection", "name: fz\nfactors:\n  bs: [\"4k\\n[x]\\nexec_prerun=id\"]\n", "factors",
        ("4k\n[x]\nexec_prerun=id",))
    add("fixed-injection", "name: fz\nfixed:\n  description: \"a\\n[g]\\nexec_prerun=id\"\n", "fixed",
        ("a\n[g]\nexec_prerun=id",))
    add("target-injection", "name: fz\ntarget: \"/tmp/x\\n[g]\\nexec_prerun=id\"\n", "target",
        ("/tmp/x\n[g]\nexec_prerun=id",))
    add("target-level-semicolon", "name: fz\nfactors:\n  target: [/tmp/a, '/tmp/b;exec_prerun=id']\n", "factors")
    add("hosts-newline", "name: fz\nhosts: [\"127.0.0.1\\n--exec\"]\n", "hosts", ("127.0.0.1\n--exec",))
    add("factor-name-injection", "name: fz\nfactors:\n  \"a]\\n[b\": [1]\n", "factors", ("a]\n[b",))
    add("key-injection", GOOD + "\"x\\n[global]\": 1\n", None, ("x\n[global]",))
    add("dollar", GOOD.replace("bs: 4k", "bs: ${BS}"), "fixed")
    add("semicolon", GOOD.replace("bs: 4k", "bs: 4k;rw=write"), "fixed")
    add("hash", GOOD.replace("bs: 4k", "bs: 4k #x"), None)
    add("python-tag", GOOD + "x: !!python/object/apply:os.system ['id']\n")
    add("python-name-tag", "name: !!python/name:os.system\n")
    add("binary-tag", GOOD + "description: !!binary aGVsbG8=\n", "description")
    add("set-tag", "name: fz\nfactors:\n  sw: !!set {a, b}\n", "factors")
    add("bad-timestamp", GOOD + "description: 2001-13-45\n")
    add("bad-float-tag", GOOD + "seed: !!float abc\n")
    add("bad-int-tag", GOOD + "seed: !!int abc\n")
    add("timestamp-seed", GOOD + "seed: 2001-01-01\n", "seed")
    add("unhashable-key", GOOD + "? [a, b]\n: 1\n")
    add("two-documents", GOOD + "---\n" + GOOD)
    add("empty", "")
    add("null-doc", "~\n")
    add("list-doc", "- a\n- b\n")
    add("scalar-doc", "just text\n")
    add("nul-byte", GOOD + "description: a\x00b\n")
    add("tab-indent", GOOD + "fixed:\n\trw: read\n")
    add("non-utf8", GOOD.encode() + b"description: \xff\xfe\n")
    add("utf16", ("\ufeff" + GOOD).encode("utf-16"))
    add("bidi-name", GOOD.replace("name: fz", "name: \"f\\u202ez\""), "name")
    add("fullwidth-name", GOOD.replace("name: fz", "name: ｆｚ"), "name")
    add("emoji-level", "name: fz\nfactors:\n  sw: [\"\U0001f600\"]\n", "factors")
    add("unicode-description", GOOD + "description: \"caf\u00e9 \u202e \U0001f600\"\n")
    add("description-5000", GOOD + "description: " + "d" * 5000 + "\n", "description")
    add("mapping-level-no-name", "name: fz\nfactors:\n  p: [{rw: read}]\n", "factors")
    add("mapping-level-bool-name", "name: fz\nfactors:\n  p: [{name: yes, rw: read}]\n", "factors")
    add("mapping-level-mixed-names", "name: fz\nfactors:\n  p: [{name: 1, rw: read}, {name: b, rw: write}]\n",
        "factors")
    add("iops-factor", "name: fz\nfactors:\n  iops: [a, b]\n", "factors")
    add("run-id-factor", "name: fz\nfactors:\n  run_id: [a, b]\n", "factors")
    add("int-option-2-70", GOOD.replace("bs: 4k", f"rate_iops: {2**70}"), "fixed")
    add("float-option-1e300", GOOD.replace("bs: 4k", "rate_iops: 1e300"), "fixed")
    add("unknown-option-long", GOOD.replace("bs: 4k", "b" * 3000 + ": 1"), "fixed")
    add("big-file", GOOD + "description: '" + "x" * (300 * 1024) + "'\n")
    return c


def path_cases(tmp: Path) -> list[dict]:
    out = []
    fifo = tmp / "fifo.yaml"
    os.mkfifo(fifo)
    out.append({"id": "path:fifo", "path": fifo})
    link = tmp / "zero.yaml"
    link.symlink_to("/dev/zero")
    out.append({"id": "path:dev-zero-symlink", "path": link})
    out.append({"id": "path:directory", "path": tmp})
    out.append({"id": "path:missing", "path": tmp / "missing.yaml"})
    return out


# ---- the tests ---------------------------------------------------------------------------------


def _run(cases: list[dict], tmp: Path, fio_sets: dict | None) -> tuple[Counter, list[str]]:
    counts: Counter = Counter()
    failures = []
    for i, case in enumerate(cases):
        forms: list[tuple[str, Any]] = []
        if "spec" in case:
            forms.append(("mapping", case["spec"]))
            try:
                text = yaml.safe_dump(case["spec"], allow_unicode=True, width=10**6)
            except (RecursionError, yaml.YAMLError, ValueError):
                text = None  # a structure PyYAML cannot write (deep nesting): the mapping form covers it
            if text is not None:
                p = tmp / f"case-{i}.yaml"
                p.write_text(text, encoding="utf-8", errors="surrogatepass")
                forms.append(("yaml", p))
        elif "text" in case:
            p = tmp / f"case-{i}.yaml"
            p.write_bytes(case["text"] if isinstance(case["text"], bytes) else case["text"].encode("utf-8"))
            forms.append(("yaml", p))
        else:
            forms.append(("path", case["path"]))
        for form, source in forms:
            kind, detail = classify(source, payloads=case.get("payloads", ()), key=case.get("key"), tmp=tmp,
                                    fio_sets=fio_sets)
            counts[kind] += 1
            if kind not in ("error", "valid"):
                failures.append(f"{case['id']} [{form}]: {kind}: {detail}")
    return counts, failures


def _report(name: str, counts: Counter) -> None:
    print(f"\nstudy fuzz {name}: " + json.dumps(dict(sorted(counts.items()))))


@pytest.mark.slow
def test_mutations_of_committed_specs(tmp_path):
    cases = mutation_cases()
    assert len(cases) >= 250 and len(STUDIES) >= 7
    counts, failures = _run(cases, tmp_path, None)
    _report("mutations", counts)
    assert not failures, "\n".join(failures[:20])
    assert counts["error"] > 100 and counts["valid"] > 20, counts


def test_hostile_yaml(tmp_path):
    cases = yaml_cases() + path_cases(tmp_path)
    counts, failures = _run(cases, tmp_path, None)
    _report("hostile yaml", counts)
    assert not failures, "\n".join(failures[:20])
    assert len(cases) >= 100 and counts["error"] >= 90, counts


def test_valid_specs_are_parsed_by_fio_as_checked(tmp_path, fio_bin):
    """The committed specs and their valid mutations: fio's own parse of one job file per option set."""
    fio_sets: dict = {}
    cases = [{"id": p.stem, "text": p.read_text()} for p in STUDIES] + mutation_cases()
    counts, failures = _run(cases, tmp_path, fio_sets)
    assert not failures, "\n".join(failures[:20])
    assert len(fio_sets) >= 10, len(fio_sets)


@pytest.mark.parametrize("case_id", ["laughs-under-unknown", "laughs-under-fixed", "merge-bomb-under-fixed",
                                     "deep-flow", "grid-1e20", "big-file"])
def test_bombs_are_refused_with_bounded_memory(tmp_path, case_id):
    """Python's traced allocations while a bomb is refused stay under 64 MiB (a bomb would need GiBs)."""
    case = next(c for c in yaml_cases() if c["id"] == f"yaml:{case_id}")
    path = tmp_path / "bomb.yaml"
    path.write_text(case["text"])
    tracemalloc.start()
    try:
        with pytest.raises(StudyError) as info:
            load_study(path).expand()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20, (case_id, peak)
    assert "Traceback" not in str(info.value)


def test_tester_findings_have_clear_messages(tmp_path):
    """The cases of issue 8's report, each refused with the key, the value and what is allowed."""
    by_id = {c["id"]: c for c in yaml_cases()}
    expect = {
        "laughs-under-unknown": ["unknown", "more than 100,000 values"],
        "laughs-under-fixed": ["fixed", "more than 100,000 values"],
        "reps-1e9": ["repetitions", "'1e9'", "integer from 1 to 1,000", "write the digits"],
        "reps-1.0e+9": ["repetitions", "1000000000.0", "integer from 1 to 1,000", "float"],
        "grid-1e20": ["100,000,000,000,000,000,000 runs", "20 factors", "the limit is 100,000 (max_runs)"],
        "runtime-inf": ["runtime", "inf", "finite"],
        "seed-2-70": ["seed", str(2**70), "64 bits"],
        "name-300": ["name", "1-64 letters, digits and _.+-", "aaaa..."],
        "name-newline": ["name", "'x\\n'", "1-64 letters"],
        "level-1-'1'": ["factors.sw", "one type", "integer 1", "string '1'"],
        "level-true-1": ["factors.sw", "one type", "boolean True"],
        "level-1.0-1": ["factors.sw", "one type", "float 1.0"],
        "size-huge": ["size", "99999999p", "2**63-1 bytes"],
    }
    for case_id, words in expect.items():
        path = tmp_path / "c.yaml"
        path.write_text(by_id[f"yaml:{case_id}"]["text"])
        with pytest.raises(StudyError) as info:
            load_study(path).expand()
        for w in words:
            assert w in str(info.value), (case_id, w, str(info.value))


@pytest.mark.slow
def test_max_runs_can_be_raised_by_the_caller_not_the_spec(tmp_path):
    spec = {"name": "big", "factors": {"iodepth": list(range(1, 401)), "sw": list(range(300))}, "labels": ["sw"],
            "runtime": 1}
    study = load_study(spec)
    assert study.n_runs == 120_000
    with pytest.raises(StudyError, match=r"the plan has 120,000 runs \(2 factors: 400 x 300 levels, x 1 repetition\); "
                                         r"the limit is 100,000 \(max_runs\)"):
        study.expand()
    assert len(load_study(spec, max_runs=120_000).expand()) == 120_000
    assert len(study.expand(max_runs=200_000)) == 120_000
    with pytest.raises(StudyError, match="limit is 1,000"):
        load_study(spec, max_runs=1_000)
    with pytest.raises(StudyError, match="unknown key"):
        load_study(dict(spec, max_runs=10**6))  # the author cannot raise it


# ---- corpus 3: hypothesis ---------------------------------------------------------------------

try:
    from hypothesis import HealthCheck, given, seed, settings
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover - hypothesis is a test dependency
    st = None

if st is not None:
    _names = st.sampled_from(["t", "fz", "a.b", "x+y", "A-1"]) | st.sampled_from(HOSTILE_STRINGS) | st.text(max_size=70)
    _numbers = st.sampled_from(HOSTILE_NUMBERS) | st.integers(-(2**80), 2**80) | st.floats(allow_nan=True,
                                                                                            allow_infinity=True)
    _scalars = _numbers | _names | st.sampled_from(["4k", "64k", "1m", "randread", "read", "libaio", "0x10", "10%"])
    _option_names = st.sampled_from(["rw", "bs", "iodepth", "numjobs", "ioengine", "direct", "rwmixread", "size",
                                     "runtime", "readwrite", "exec_prerun", "filename", "description", "rate_iops",
                                     "norandommap", "write_lat_log", "opendir", "blocksize"]) | _names
    _mapping_level = st.fixed_dictionaries({"name": _names}, optional={"rw": _scalars, "bs": _scalars,
                                                                       "target": _names, "iodepth": _scalars})
    _levels = st.lists(_scalars, min_size=0, max_size=6) | st.lists(_mapping_level, min_size=1, max_size=4) | _scalars
    _factor_names = st.sampled_from(["iodepth", "bs", "rw", "pattern", "sw", "clients", "target", "numjobs",
                                     "iops", "run_id"]) | _names
    _spec = st.fixed_dictionaries(
        {"name": _names},
        optional={
            "factors": st.dictionaries(_factor_names, _levels, max_size=4) | _scalars,
            "fixed": st.dictionaries(_option_names, _scalars, max_size=5) | _scalars,
            "runtime": _numbers | _names, "ramp_time": _numbers, "timeout": _numbers, "size": _scalars,
            "repetitions": _numbers, "seed": _numbers, "target": _names, "description": _names,
            "hosts": st.lists(_names, max_size=3) | _names, "allow": st.lists(_names, max_size=2),
            "allow_exec": st.booleans() | _scalars,
            "allow_remote": st.dictionaries(_names, st.lists(_names, max_size=2), max_size=2),
        },
    )
    # specs that are mostly valid, with free text where fio takes free text (description, buffer_pattern,
    # target, level names): the valid ones exercise the rendering and re-read checks
    _safe_names = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,10}", fullmatch=True)
    _free_text = st.text(min_size=1, max_size=40)
    _plausible = st.fixed_dictionaries(
        {"name": _safe_names, "runtime": st.integers(1, 5) | st.sampled_from([0.5, 1.25, 0.001])},
        optional={
            "factors": st.fixed_dictionaries({}, optional={
                "iodepth": st.lists(st.integers(1, 64), min_size=1, max_size=3, unique=True),
                "bs": st.lists(st.sampled_from(["4k", "8k", "64k", "1m", "512"]), min_size=1, max_size=3, unique=True),
                "pattern": st.lists(st.fixed_dictionaries({"name": _safe_names | _free_text}, optional={
                    "rw": st.sampled_from(["read", "randread", "randrw", "randwrite:8"]),
                    "rwmixread": st.integers(0, 100), "description": _free_text, "target": _free_text}),
                    min_size=1, max_size=3),
                "sw": st.lists(_safe_names | _free_text, min_size=1, max_size=3),
            }),
            "fixed": st.fixed_dictionaries({}, optional={
                "description": _free_text, "buffer_pattern": _free_text, "ioengine": st.sampled_from(["psync", "libaio"]),
                "randrepeat": st.sampled_from([0, 1, True, False, 2, None]), "norandommap": st.sampled_from([True, None, 1]),
            }),
            "description": _free_text, "target": _free_text | st.just("/tmp/x:y"), "size": st.sampled_from(
                ["16m", "1p", 4096, "10%", "1.5k", "1MiB"]),
            "repetitions": st.integers(1, 3), "seed": st.integers(0, 2**64 - 1), "ramp_time": st.sampled_from([0, 1, 0.5]),
        },
    )
    _spec = _spec | _plausible
    HYPOTHESIS_COUNTS: Counter = Counter()

    @pytest.fixture(scope="module", autouse=True)
    def _hypothesis_report():
        yield
        if HYPOTHESIS_COUNTS:
            _report("hypothesis", HYPOTHESIS_COUNTS)

    @seed(SEED)
    @settings(max_examples=400, derandomize=True, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                                     HealthCheck.function_scoped_fixture])
    @given(spec=_spec)
    def test_hypothesis_specs(tmp_path, spec):
        kind, detail = classify(spec, tmp=tmp_path)
        HYPOTHESIS_COUNTS[kind] += 1
        assert kind in ("error", "valid"), (kind, detail, spec)


def main() -> int:  # pragma: no cover - the lead's note: python tests/test_study_fuzz.py
    import tempfile

    total: Counter = Counter()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for name, cases in (("mutations", mutation_cases()), ("hostile yaml", yaml_cases() + path_cases(tmp))):
            counts, failures = _run(cases, tmp, {} if shutil.which("fio") else None)
            print(f"{name}: {len(cases)} specs, {sum(counts.values())} loads: {dict(sorted(counts.items()))}")
            for f in failures:
                print("  FAIL", f)
            total += counts
        if st is not None:
            test_hypothesis_specs(tmp_path=tmp)
            print(f"hypothesis: {sum(HYPOTHESIS_COUNTS.values())} specs: {dict(sorted(HYPOTHESIS_COUNTS.items()))}")
            total += HYPOTHESIS_COUNTS
    print(f"total: {dict(sorted(total.items()))}")
    return 0 if set(total) <= {"error", "valid"} else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
