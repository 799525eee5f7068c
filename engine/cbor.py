"""Canonical CBOR (RFC 8949) of what a block hash covers: bytes, text, ints, None, tuples.

The encoding `cbor2.dumps(value, canonical=True)` gives these types (vLLM's
`sha256_cbor` hashes it), written with the standard library only.
"""

from __future__ import annotations

from typing import Any

_UNSIGNED, _NEGATIVE, _BYTES, _TEXT, _ARRAY = 0, 1, 2, 3, 4
_POSITIVE_BIGNUM, _NEGATIVE_BIGNUM = 0xC2, 0xC3
_NULL = b"\xf6"
_MAX_UINT64 = (1 << 64) - 1


def canonical_cbor(value: Any) -> bytes:
    """`value` encoded as canonical CBOR (heads in their shortest form)."""
    out = bytearray()
    _encode(value, out)
    return bytes(out)


def _encode(value: Any, out: bytearray) -> None:
    if value is None:
        out += _NULL
    elif isinstance(value, bool):
        raise TypeError("a block hash covers no booleans")
    elif isinstance(value, int):
        _encode_int(value, out)
    elif isinstance(value, bytes):
        _head(_BYTES, len(value), out)
        out += value
    elif isinstance(value, str):
        encoded = value.encode()
        _head(_TEXT, len(encoded), out)
        out += encoded
    elif isinstance(value, tuple | list):
        _head(_ARRAY, len(value), out)
        for item in value:
            _encode(item, out)
    else:
        raise TypeError(f"a block hash covers no {type(value).__name__}")


def _encode_int(value: int, out: bytearray) -> None:
    """An int as a head, or past 64 bits as a bignum (a tag before its big-endian bytes)."""
    major, magnitude = (_UNSIGNED, value) if value >= 0 else (_NEGATIVE, -1 - value)
    if magnitude <= _MAX_UINT64:
        _head(major, magnitude, out)
        return
    out.append(_POSITIVE_BIGNUM if major == _UNSIGNED else _NEGATIVE_BIGNUM)
    _encode(magnitude.to_bytes((magnitude.bit_length() + 7) // 8, "big"), out)


def _head(major: int, argument: int, out: bytearray) -> None:
    """A data item's first bytes: its major type and its argument, shortest form first."""
    if argument < 24:
        out.append(major << 5 | argument)
        return
    for additional, size in ((24, 1), (25, 2), (26, 4), (27, 8)):
        if argument < 1 << (8 * size):
            out.append(major << 5 | additional)
            out += argument.to_bytes(size, "big")
            return
