"""The caps of a throttled device (a spec's ``throttle:``), read and checked once.

A cap is a limit the kernel's block-I/O throttle puts on one device for the processes of one cgroup
(:mod:`storagebench._throttle`): ``riops``/``wiops`` (read/write I/Os per second) and ``rbps``/``wbps``
(read/write bytes per second). Only this module decides what a valid cap is; the spec (:mod:`storagebench._study`),
the testbed (:func:`storagebench.testbed.throttle`) and the records read caps through :func:`check_caps`.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

__all__ = ["CAP_KEYS", "CAP_RANGES", "MAX_ROLES", "check_caps", "check_throttle", "check_roles", "caps_text"]

#: The keys of a cap, in the order cgroup v2's ``io.max`` names them.
CAP_KEYS: tuple[str, ...] = ("riops", "wiops", "rbps", "wbps")
#: Allowed values of each key, inclusive: I/Os per second, bytes per second. A cap below the smallest would
#: make one I/O take seconds; above the largest it is no cap on anything a loop or zram device does.
CAP_RANGES: dict[str, tuple[int, int]] = {
    "riops": (1, 10_000_000), "wiops": (1, 10_000_000),
    "rbps": (4096, 1 << 40), "wbps": (4096, 1 << 40),
}
_UNITS = {"riops": "read IOPS", "wiops": "write IOPS", "rbps": "read B/s", "wbps": "write B/s"}
#: Most roles one spec may cap (a testbed has a handful of devices).
MAX_ROLES = 16


def _did_you_mean(word: str, allowed: Any) -> str:
    close = difflib.get_close_matches(word, sorted(allowed), n=2)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""


def check_caps(caps: Any, where: str = "throttle") -> dict[str, int]:
    """The caps of one device, checked: a mapping of :data:`CAP_KEYS` to integers within :data:`CAP_RANGES`.

    Parameters
    ----------
    caps : mapping
        E.g. ``{"riops": 200}``; keys not given are not capped.
    where : str
        Where the caps come from, for the messages (``throttle.slow``).

    Returns
    -------
    dict of str to int
        In the order of :data:`CAP_KEYS`.

    Raises
    ------
    ValueError
        Not a mapping, empty, an unknown key (with a did-you-mean), a value that is not an integer (``True``,
        ``200.5`` and ``"200"`` are not) or outside its range; the message names the key, the value and what is
        allowed.
    """
    if not isinstance(caps, Mapping) or not caps:
        raise ValueError(f"{where}: must be a mapping of one or more of {list(CAP_KEYS)} to integers, got {caps!r}")
    out: dict[str, int] = {}
    for key, value in caps.items():
        if key not in CAP_KEYS:
            raise ValueError(f"{where}: unknown cap {key!r}{_did_you_mean(str(key), CAP_KEYS)}; "
                             f"allowed: {', '.join(CAP_KEYS)}")
        lo, hi = CAP_RANGES[key]
        if type(value) is not int or not lo <= value <= hi:
            raise ValueError(f"{where}.{key}: must be an integer number of {_UNITS[key]} from {lo:,} to {hi:,}, "
                             f"got {value!r}")
        out[key] = value
    return {k: out[k] for k in CAP_KEYS if k in out}


def check_throttle(throttle: Any, where: str = "throttle") -> dict[str, dict[str, int]]:
    """A spec's ``throttle:`` section: device role -> caps (:func:`check_caps`), checked.

    The roles are the study's (a testbed study module lists them in ``throttle_roles``; the registry refuses
    others); here only their form: non-empty strings, at most :data:`MAX_ROLES`.

    Raises
    ------
    ValueError
        Naming the role or key and what is allowed.
    """
    if not isinstance(throttle, Mapping):
        raise ValueError(f"{where}: must be a mapping of device role -> caps ({{riops: 200}}), got {throttle!r}")
    if len(throttle) > MAX_ROLES:
        raise ValueError(f"{where}: at most {MAX_ROLES} roles, got {len(throttle)}")
    out = {}
    for role, caps in throttle.items():
        if not isinstance(role, str) or not role.strip() or len(role) > 64:
            raise ValueError(f"{where}: a role must be a non-empty string of at most 64 characters, got {role!r}")
        out[role] = check_caps(caps, f"{where}.{role}")
    return out


def check_roles(throttle: Mapping[str, Any], roles: tuple[str, ...], where: str = "throttle") -> None:
    """Refuse a role of ``throttle`` that is not one of ``roles`` (with a did-you-mean).

    Raises
    ------
    ValueError
    """
    for role in throttle:
        if role not in roles:
            raise ValueError(f"{where}: unknown device role {role!r}{_did_you_mean(role, roles)}; this study caps "
                             f"{', '.join(roles) or 'no device'}")


def caps_text(caps: Mapping[str, int]) -> str:
    """Caps in words: ``200 read IOPS, 1,048,576 write B/s``."""
    return ", ".join(f"{caps[k]:,} {_UNITS[k]}" for k in CAP_KEYS if k in caps)
