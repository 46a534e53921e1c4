"""json+ bins as text and as a table (private part of the fio reader, used by
:class:`storagebench.ingest._fiorows.RowSink`): the raw-text fast path that parses the bins of many files at a
time, and the ``histograms`` table built from the sink's compact blocks."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pyarrow as pa

from ._fiodoc import (
    MAX_VALUE,
)

#: ``bytes.translate`` table of json+ bins text for ``numpy.fromstring(sep=",")`` (JSON whitespace, quotes
#: and ``{`` are deleted first): digits kept, ``:`` and ``}`` (end of a block) separate numbers like ``,``,
#: and any other byte is ``x``, which no number has (fromstring stops there: the text is refused)
_BINS_TEXT = bytes(c if (0x30 <= c <= 0x39 or c == 0x2C) else 0x2C if c in b":}" else 0x78 for c in range(256))
#: 0, 10, 100, ... 10**18: a key of ``w`` digits (1 <= w <= 18, no leading zero) is in ``[_POW10[w-1], _POW10[w])``
_POW10 = np.r_[0, 10 ** np.arange(1, 19, dtype=np.int64)]
#: the same bounds indexed by ``w + 1`` (the distance between a key's quotes): no ``width - 1`` array to make
_KEY_LO = np.r_[0, 0, _POW10[:-1]]
_KEY_HI = np.r_[0, _POW10]


def _parse_bins_text(raws: list[bytes]) -> tuple | None:
    """(keys, counts, bins per block) of the raw json+ bins objects ``raws`` (int64 arrays), or None when
    they are not the text :meth:`RowSink.parse_bins` takes (see there)."""
    text = b"".join([*raws, b"  "])  # two blanks after the last block: a[closing + 2] is in range
    a = np.frombuffer(text, dtype=np.uint8)
    ends = np.cumsum(np.fromiter(map(len, raws), dtype=np.int64, count=len(raws)))
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1]
    if not ((a[starts] == 0x7B).all() and (a[ends - 1] == 0x7D).all()):
        return None  # not an object (an object inside one leaves an empty number between separators)
    quotes = (a == 0x22).nonzero()[0]
    if len(quotes) % 2:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # numpy < 2.3 warns and stops early where 2.3+ raises
            # a number per quote (per key and per count, when the checks below pass): allocated once;
            # fewer numbers raise, more are found by the key check (a key holding a separator)
            values = np.fromstring(text.translate(_BINS_TEXT, b' \t\r\n"{'), dtype=np.int64,
                                   sep=",", count=len(quotes))
    except (ValueError, DeprecationWarning):
        return None  # a character no integer key or count has (sign, '.', 'e', letter, escape ...)
    opening, closing = quotes[0::2], quotes[1::2]
    colon = closing + 1
    colon += a[colon] == 0x20  # one blank may come before the ':' (fio's " : ")
    if not (a[colon] == 0x3A).all():
        return None  # a string that is not a key (a string count)
    keys, counts = values[0::2], values[1::2]
    # each key's characters are exactly its digits: 10**(width-1) <= key < 10**width (0 <= key < 10 for
    # width 1). Else a leading zero, a space, nothing, or a ',' or ':' in it (its number is then only
    # the part before; with every string a key this is also the only way to more numbers than quotes)
    width = closing - opening  # the key's width + 1
    if len(width) and not (2 <= width.min() and width.max() <= 19
                           and (_KEY_LO[width] <= keys).all() and (keys < _KEY_HI[width]).all()):
        return None
    if len(counts) and int(counts.max()) >= MAX_VALUE:
        return None  # 2**63-1 is also where fromstring saturates: let the decoder judge
    n = (np.searchsorted(quotes, ends) - np.searchsorted(quotes, starts)) // 2
    if not n.all():
        return None
    step = np.diff(keys) <= 0
    step[(np.cumsum(n) - n)[1:] - 1] = False  # a block's first key may be below the last one of the block before
    if step.any():
        return None  # keys not increasing: a repeated key, which a dict keeps once
    return keys, counts, n  # every other number: views, made contiguous once all blocks are parsed



def block_sums(counts: np.ndarray, n_bins: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int64 sum of each block's counts, whether that sum passed 2**63 - 1) of the flat ``counts`` of blocks
    of ``n_bins`` bins each. The int64 sum wraps past 2**63 - 1 (an edited count): the float64 sum says where
    it did. When no block's bins times the largest count reach 2**53 (every real output) both sums are exact
    and below 2**63: the float one is not made (one pass over the counts, not two)."""
    starts = np.zeros(len(n_bins), dtype=np.int64)
    np.cumsum(n_bins[:-1], out=starts[1:])
    if not len(counts):
        return np.zeros(len(n_bins), np.int64), np.zeros(len(n_bins), bool)
    sums = np.add.reduceat(counts, starts)
    if int(counts.max()) * int(n_bins.max()) >= 2**53:
        return sums, np.add.reduceat(counts.astype(np.float64), starts) >= 2.0**63
    return sums, np.zeros(len(n_bins), bool)


def histogram_frame(blocks: list[tuple], bins, counts, n_bins=None):
    """Build the ``histograms`` DataFrame from blocks ``(run_id, host, job, job_index, direction, n_bins)``,
    the flat json+ bin keys (ints, ns; checked to be in 0..2**63-1 when decoded) and counts.
    ``n_bins`` (int64 array, optional) gives the blocks' lengths instead of their last field.

    ``bins`` and ``counts`` are int64 arrays or iterables of ints holding ``sum(n_bins)`` values each.
    Work is done in bulk: each string key column is built from its two buffers (:func:`_repeat_strings`).

    Returns
    -------
    pandas.DataFrame
        ``run_id, host, job, job_index, direction, bin_ns, count`` in schema dtypes, one row per bin
        (not yet validated).
    """
    run_id, host, job, job_index, direction, lengths = zip(*blocks, strict=True)
    if n_bins is None:
        n = np.array(lengths, dtype=np.int64)
    else:
        n = np.asarray(n_bins, dtype=np.int64)
        lengths = n.tolist()
    cols = {}
    for name, values in (("run_id", run_id), ("host", host), ("job", job), ("job_index", job_index),
                         ("direction", direction)):
        if name == "job_index":
            cols[name] = np.repeat(np.array(values, dtype=np.int64), n)
            continue
        cols[name] = pd.arrays.ArrowStringArray(_repeat_strings(values, lengths, n))
    total = int(n.sum())
    cols["bin_ns"] = bins if isinstance(bins, np.ndarray) else np.fromiter(bins, dtype=np.int64, count=total)
    cols["count"] = counts if isinstance(counts, np.ndarray) else np.fromiter(counts, dtype=np.int64, count=total)
    return pd.DataFrame(cols, copy=False)  # no consolidation of the int columns into one block (a copy)


#: rows of the one chunk a constant string column of the ``histograms`` table repeats
_CONST_CHUNK = 1 << 16


def _repeat_strings(values: tuple, repeats: tuple, n):
    """pyarrow string array of ``values[i]`` repeated ``repeats[i]`` times, built from its two buffers:
    the bytes by one ``numpy.repeat`` of the values as fixed-width bytes when they all have one length
    (run ids: one copy, ~6x faster than joining ``bytes * k``), else by one C-level ``join`` of
    ``bytes * k``; the offsets by one cumulative sum, or one ``arange`` when every value has the same
    length (run ids, ``local``, one job name): about twice as fast as ``take``, which copies string by
    string. Built as ``large_string``, the type pandas' ``ArrowStringArray`` stores (it casts, i.e.
    copies, a ``string`` array)."""
    total = int(n.sum())
    if len(set(values)) == 1:  # one host, job name or direction: no encoding per block
        first = values[0].encode()
        if total > _CONST_CHUNK and len(first) * _CONST_CHUNK < 2**31:
            # one chunk of the value, the same object many times: the column's buffers are not repeated
            piece = _repeat_strings((values[0],), (_CONST_CHUNK,), np.array([_CONST_CHUNK]))
            full, rest = divmod(total, _CONST_CHUNK)
            return pa.chunked_array([piece] * full + ([piece.slice(0, rest)] if rest else []))
        encoded = [first]
        data = first * total
    else:
        encoded = [v.encode() for v in values]
        first = encoded[0]
        if first and len(set(map(len, encoded))) == 1:  # one width (run ids): one numpy repeat of the bytes
            data = np.repeat(np.frombuffer(b"".join(encoded), dtype=f"S{len(first)}"), n)
        else:
            data = b"".join([e * k for e, k in zip(encoded, repeats, strict=True)])
    if (data.nbytes if isinstance(data, np.ndarray) else len(data)) >= 2**31 - 1:  # past int32 offsets: chunked
        return pa.chunked_array([pa.array([v] * k, type=pa.large_string())
                                 for v, k in zip(values, repeats, strict=True)])
    width = len(first)
    if len(set(map(len, encoded))) == 1:
        offsets = np.arange(0, (total + 1) * width, width, dtype=np.int64) if width else np.zeros(total + 1, np.int64)
    else:
        lengths = np.repeat(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), n)
        offsets = np.zeros(total + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
    # large_string (64-bit offsets): what pandas' ArrowStringArray keeps; a string array would be cast (copied)
    return pa.LargeStringArray.from_buffers(total, pa.py_buffer(offsets), pa.py_buffer(data))


