"""fio's value grammar for sizes and times: ``parse_size``, ``parse_time_us``, their spelling checks and
``render_time`` (fio 3.33's rules; part of :mod:`storagebench.fio.options`).
"""

from __future__ import annotations

import re
from typing import Any

#: Largest size or count storagebench accepts: fio keeps sizes in signed 64-bit arithmetic.
MAX_BYTES = 2**63 - 1


_IEC = ("pib", "tib", "gib", "mib", "kib")


_SI = ("p", "t", "g", "m", "k")


def _strtoll(text: str, base: int) -> tuple[int, int]:
    """C ``strtoll``: (value, index after the number); index 0 when no digits were read."""
    i = 0
    n = len(text)
    while i < n and text[i] in " \t\n\v\f\r":
        i += 1
    sign = 1
    if i < n and text[i] in "+-":
        sign = -1 if text[i] == "-" else 1
        i += 1
    if base == 16 and text[i:i + 2].lower() == "0x" and i + 2 < n and text[i + 2] in "0123456789abcdefABCDEF":
        i += 2
    digits = "0123456789abcdefABCDEF" if base == 16 else "0123456789"
    start = i
    while i < n and text[i] in digits:
        i += 1
    if i == start:
        return 0, 0
    if i - start > 40:  # strtoll saturates; int() of > 4300 digits would raise
        return sign * 2**64, i
    return sign * int(text[start:i], base), i


def _mult_bytes(text: str, kb_base: int) -> tuple[int, bool]:
    """fio ``get_mult_bytes``: (multiplier, is a percentage)."""
    if len(text) < 2:
        rest: str | None = text
    else:
        i, digit_seen = 0, False
        while i < len(text):
            c = text[i]
            if not c.isdigit() and ((c not in "+-") or digit_seen):
                break
            digit_seen |= c.isdigit()
            i += 1
        rest = text[i:] if i < len(text) and (text[i].isascii() and text[i].isalpha() or text[i] == "%") else None
    if rest is None:
        return 1, False
    c = rest.lower()
    inverse = {1000: 1024, 1024: 1000}.get(kb_base, kb_base)
    for pow_, iec in zip((5, 4, 3, 2, 1), _IEC, strict=True):
        if c.startswith(iec):
            return inverse**pow_, False
    for pow_, si in zip((5, 4, 3, 2, 1), _SI, strict=True):
        if c.startswith(si):
            return kb_base**pow_, False
    if c.startswith("%"):
        return 1, True
    return 1, False


def parse_size_or_percent(value: Any, kb_base: int = 1024) -> tuple[int | None, int | None]:
    """Read a fio size value as fio 3.33 does: ``(bytes, None)`` or ``(None, percent)``.

    Parameters
    ----------
    value : int or str
        ``4096``, ``"4k"``, ``"64KiB"``, ``"10%"`` (a percentage of the file or device, where the
        option allows one: ``size``, ``offset``, ``io_size``...).
    kb_base : {1024, 1000}
        fio ``kb_base`` of the job. With 1024 (fio's default) ``k``/``ki``/``kb`` are 1024 and the
        IEC spellings ``kib``/``KiB`` are 1000 (fio's compatibility mode inverts them); with 1000 it
        is the other way round.

    Returns
    -------
    (int or None, int or None)

    Raises
    ------
    ValueError
        Not a size fio can read (no leading digits, empty), negative, or above 2**63 - 1 bytes.

    Notes
    -----
    Mirrors fio 3.33 ``parse.c`` (``str_to_decimal``/``get_mult_bytes``, built without
    ``CONFIG_ARITHMETIC`` as Debian's fio is): ``strtoll`` reads the number (base 16 when the text
    holds ``0x``) and stops at the first other character; the suffix is looked for after the leading
    digits only, matched by its first letters, case-insensitively; an unknown suffix multiplies by 1.
    Checked against ``fio --debug=parse --parse-only`` in ``tests/test_fio_options.py``.
    """
    if isinstance(value, bool):
        raise ValueError(f"must be a size such as 4k, 64k, 1m or a number of bytes, got {value!r}")
    if isinstance(value, int):
        if value < 0 or value > MAX_BYTES:
            raise ValueError(f"must be a size from 0 to 2**63-1 bytes, got {value!r}")
        return value, None
    if isinstance(value, float):
        if value != value or value < 0 or not value.is_integer() or value > MAX_BYTES:
            raise ValueError(f"must be a whole number of bytes, got {value!r}")
        return int(value), None
    if kb_base not in (1000, 1024):
        raise ValueError(f"kb_base must be 1000 or 1024, got {kb_base!r}")
    text = str(value)
    if not text:
        raise ValueError("must be a size such as 4k, 64k, 1m or a number of bytes, got ''")
    base = 16 if ("0x" in text or "0X" in text) else 10
    number, end = _strtoll(text, base)
    if end == 0:
        raise ValueError(f"must be a size such as 4k, 64k, 1m or a number of bytes, got {value!r}")
    if number < 0:
        raise ValueError(f"must not be negative, got {value!r}")
    if re.match(r"[+-]?\d+[zZ]", text):
        raise ValueError(f"counts zones of a zoned device ('z' suffix), not bytes, got {value!r}")
    mult, percent = _mult_bytes(text, kb_base)
    if percent:
        return None, number
    out = number * mult
    if out > MAX_BYTES:
        raise ValueError(f"is more than 2**63-1 bytes (fio's limit), got {value!r}")
    return out, None


def parse_size(value: Any, kb_base: int = 1024) -> int:
    """Bytes in a fio size value, read exactly as fio 3.33 reads it (see :func:`parse_size_or_percent`).

    Raises
    ------
    ValueError
        What :func:`parse_size_or_percent` refuses, and a percentage (``"10%"``), which is not a
        number of bytes.
    """
    size, percent = parse_size_or_percent(value, kb_base)
    if size is None:
        raise ValueError(f"must be a number of bytes here, not a percentage, got {value!r}")
    return size


_PLAIN_SIZE = re.compile(r"(\d+)([kmgtp](?:b|i)?)?", re.IGNORECASE)


_IEC_SIZE = re.compile(r"(\d+)([kmgtp]ib)", re.IGNORECASE)


_HEX_SIZE = re.compile(r"0x[0-9a-f]+", re.IGNORECASE)


def size_spelling_problem(value: Any, kb_base: int = 1024, *, percent_ok: bool = False) -> str | None:
    """Why fio would read size ``value`` differently from what its author most likely meant, or ``None``.

    Accepted: whole numbers of bytes, and ``<digits><k|m|g|t|p>[b|i]`` in any case; IEC
    ``KiB``-style suffixes only with ``kb_base=1000``, where fio reads them as 1024-based; ``N%``
    where ``percent_ok``.

    Returns
    -------
    str or None
        e.g. ``"fio 3.33 reads '1.5k' as 1 byte (strtoll stops at '.'); write 1536"``.
    """
    if isinstance(value, bool):
        return f"a size must be a number or a string such as 4k, got {value!r}"
    if isinstance(value, int):
        return None if 0 <= value <= MAX_BYTES else f"must be a size from 0 to 2**63-1 bytes, got {value!r}"
    if isinstance(value, float):
        return None if value.is_integer() and 0 <= value <= MAX_BYTES else (
            f"must be a whole number of bytes, got {value!r}")
    text = str(value)
    try:
        size, percent = parse_size_or_percent(text, kb_base)
    except ValueError as exc:
        return str(exc)
    if percent is not None:
        if not percent_ok:
            return f"a percentage is not allowed here, got {value!r}"
        if percent > 100:
            # parse.h parse_is_percent: fio stores N% as -1ULL - N and takes it as a percentage only for
            # N <= 100; above, it is a byte count of 2**64-1-N, and fio lays the file out again to that size
            return (f"fio 3.33 reads {text!r} as a byte count of {2**64 - 1 - percent:,} bytes, not a "
                    "percentage: a percentage is at most 100%")
        return None if re.fullmatch(r"\d+%", text) else (
            f"fio 3.33 reads {text!r} as {percent}% (only whole percentages); write {percent}%")
    if _PLAIN_SIZE.fullmatch(text) or _HEX_SIZE.fullmatch(text):
        return None
    if _IEC_SIZE.fullmatch(text):
        if kb_base == 1000:
            return None
        return (f"fio 3.33 with kb_base=1024 (its default) reads {text!r} as {size:,} bytes: it inverts IEC "
                f"suffixes; write {text[:-2]} for {parse_size(text[:-2]):,} bytes, or the number of bytes")
    return (f"fio 3.33 reads {text!r} as {size:,} byte(s) (it reads the leading digits and a k/m/g/t/p "
            "suffix only: no fractions, spaces or other suffixes); write a whole number with k, m, g, t or p")


_TIME_MULT_US = (("usec", 1), ("us", 1), ("msec", 1000), ("ms", 1000))


_TIME_EXACT_US = {"s": 1_000_000, "m": 60_000_000, "h": 3_600_000_000, "d": 86_400_000_000}


def parse_time_us(value: Any, *, default_unit: str = "s") -> int:
    """Microseconds in a fio time value, read as fio 3.33 reads it.

    Parameters
    ----------
    value : int, float or str
        ``60``, ``"2m"``, ``"500ms"``, ``"250us"``. A bare number is in ``default_unit``.
    default_unit : {"s", "us"}
        ``s`` for ``runtime``, ``ramp_time``, ``startdelay`` and the steady-state times (fio
        ``is_seconds``); ``us`` for the others.

    Returns
    -------
    int
        µs.

    Raises
    ------
    ValueError
        No leading digits, negative, or beyond 2**63-1 µs.

    Notes
    -----
    fio 3.33 ``get_mult_time``: the suffix after the leading digits, lower-cased, is ``us``/``usec``
    or ``ms``/``msec`` by prefix, or exactly ``s``, ``m``, ``h`` or ``d``; anything else multiplies
    by 1 µs, so ``10sec`` is 10 µs and ``2min`` 2 µs; a fraction is dropped (``1.5`` is 1 s).
    """
    if default_unit not in ("s", "us"):
        raise ValueError(f"default_unit must be 's' or 'us', got {default_unit!r}")
    unit_us = 1_000_000 if default_unit == "s" else 1
    if isinstance(value, bool):
        raise ValueError(f"must be a time such as 60, 2m or 500ms, got {value!r}")
    if isinstance(value, (int, float)):
        if value != value or value < 0 or value * unit_us > MAX_BYTES:
            raise ValueError(f"must be a finite, non-negative time, got {value!r}")
        return int(value * unit_us)
    text = str(value)
    base = 16 if ("0x" in text or "0X" in text) else 10
    number, end = _strtoll(text, base)
    if end == 0:
        raise ValueError(f"must be a time such as 60, 2m or 500ms, got {value!r}")
    if number < 0:
        raise ValueError(f"must not be negative, got {value!r}")
    i = 0
    while i < len(text) and (text[i].isdigit() or text[i] in "+-"):
        i += 1
    rest = text[i:]
    if not rest or not (rest[0].isascii() and rest[0].isalpha()):
        mult = unit_us
    else:
        low = rest.lower()
        mult = next((m for pre, m in _TIME_MULT_US if low.startswith(pre)), None)
        if mult is None:
            mult = _TIME_EXACT_US.get(low, 1)
    out = number * mult
    if out > MAX_BYTES:
        raise ValueError(f"is longer than fio can count, got {value!r}")
    return out


_PLAIN_TIME = re.compile(r"\d+(us|usec|ms|msec|s|m|h|d)?", re.IGNORECASE)


def time_spelling_problem(value: Any, *, default_unit: str = "s") -> str | None:
    """Why fio would read time ``value`` differently from what its author most likely meant, or ``None``."""
    if isinstance(value, bool):
        return f"a time must be a number or a string such as 2m, got {value!r}"
    if isinstance(value, (int, float)):
        if value != value or value in (float("inf"), float("-inf")) or value < 0:
            return f"must be a finite, non-negative time, got {value!r}"
        return None
    text = str(value)
    try:
        us = parse_time_us(text, default_unit=default_unit)
    except ValueError as exc:
        return str(exc)
    if _PLAIN_TIME.fullmatch(text):
        return None
    return (f"fio 3.33 reads {text!r} as {us:,} µs (it knows us, ms, s, m, h and d only, and no fractions); "
            "write e.g. 90, 1500ms or 2m")


def render_time(seconds: float) -> str:
    """A time in seconds as fio reads it exactly: ``"60"`` or, below whole seconds, ``"1500ms"``/``"250us"``.

    fio drops the fraction of ``1.5`` (it would run 1 s); milliseconds and microseconds are exact.

    Raises
    ------
    ValueError
        Negative, not finite, or finer than 1 µs.
    """
    if seconds != seconds or seconds in (float("inf"), float("-inf")) or seconds < 0:
        raise ValueError(f"a time must be finite and >= 0 s, got {seconds!r}")
    us = round(seconds * 1_000_000)
    if abs(us - seconds * 1_000_000) > 1e-6 * max(1.0, seconds * 1_000_000):
        raise ValueError(f"fio counts time in whole microseconds, got {seconds!r} s")
    if us % 1_000_000 == 0:
        return str(us // 1_000_000)
    if us % 1000 == 0:
        return f"{us // 1000}ms"
    return f"{us}us"
