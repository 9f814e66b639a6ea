"""Chained block hashes for prefix caching (vLLM v1 automatic prefix caching design).

A full block's hash is ``H(parent_hash, token_ids, extra_keys)``, so a block's hash
names its whole prefix: two blocks share a hash only if every token before and in them
and every extra key agree. ``extra_keys`` (tenant, LoRA adapter id, cache salt) keep
caches of different requests apart.

The hash is SHA-256 over a canonical byte encoding, never Python's ``hash()`` (which is
salted per process for ``str``), so hashes are the same in every process and on every
machine. Encoding, in order:

- the parent digest (32 bytes); the first block of a sequence uses :data:`ROOT_HASH`;
- ``b"T"``, the token count as 8-byte little-endian, each token id as 8-byte
  little-endian two's complement (ids must fit in int64);
- ``b"K"``, the number of extra keys (8 bytes), then each key as a one-byte type tag
  (``i`` int, ``s`` str as UTF-8, ``b`` bytes), its length (8 bytes) and its bytes
  (a str with a lone surrogate has no UTF-8 encoding and is refused);
  ints are encoded as 16-byte little-endian two's complement.
"""
from __future__ import annotations

import hashlib
from typing import Iterable, Sequence, Union

import numpy as np

ExtraKey = Union[int, str, bytes]

#: parent of a sequence's first block: SHA-256 of a fixed label
ROOT_HASH: bytes = hashlib.sha256(b"refimpl.kvcache prefix root").digest()


#: int extra keys are hashed as 16-byte two's complement: [-2**127, 2**127)
EXTRA_INT_LIMIT = 1 << 127


def _u64(n: int) -> bytes:
    return n.to_bytes(8, "little")


def _refuse_bare_key(extra_keys: object) -> None:
    # a bare str or bytes would be iterated: b"\x01" would become the int key (1,)
    # and "ab" the two keys ("a", "b"), so two tenants could share cached blocks
    if isinstance(extra_keys, (str, bytes, bytearray, memoryview)):
        raise TypeError("extra_keys must be a sequence of keys, got a single "
                        f"{type(extra_keys).__name__}; wrap it: ({extra_keys!r},)")


def check_extra_keys(extra_keys: Sequence[ExtraKey]) -> tuple[ExtraKey, ...]:
    """``extra_keys`` as a tuple, each key an int, str or bytes; a bare str or bytes
    (one key not wrapped in a sequence) is refused rather than iterated."""
    _refuse_bare_key(extra_keys)
    keys = tuple(extra_keys)
    encode_extra_keys(keys)  # type checks
    return keys


def encode_extra_keys(extra_keys: Sequence[ExtraKey]) -> bytes:
    """Canonical bytes for ``extra_keys`` (see the module docstring)."""
    _refuse_bare_key(extra_keys)
    parts = [b"K", _u64(len(extra_keys))]
    for i, key in enumerate(extra_keys):
        if isinstance(key, (bool, np.bool_)):
            raise TypeError(f"extra_keys[{i}]: bool is ambiguous; use int, str or bytes")
        if isinstance(key, (int, np.integer)):
            key = int(key)  # a NumPy integer hashes as the int it equals
            if not -EXTRA_INT_LIMIT <= key < EXTRA_INT_LIMIT:
                raise ValueError(f"extra_keys[{i}] = {key} is outside the int keys' range "
                                 f"[-2**127, 2**127) (use a str or bytes key)")
            tag, data = b"i", key.to_bytes(16, "little", signed=True)
        elif isinstance(key, str):
            try:
                tag, data = b"s", key.encode("utf-8")
            except UnicodeEncodeError as e:
                # a lone surrogate ("\ud800") has no UTF-8 encoding, so no canonical bytes
                raise ValueError(f"extra_keys[{i}] = {key!r} is not valid Unicode text "
                                 f"(character {e.start} cannot be encoded as UTF-8); "
                                 "use bytes for binary keys") from None
        elif isinstance(key, bytes):
            tag, data = b"b", key
        else:
            raise TypeError(f"extra_keys[{i}] must be int, str or bytes, "
                            f"got {type(key).__name__}")
        parts += [tag, _u64(len(data)), data]
    return b"".join(parts)


def block_hash(parent: bytes, token_ids: Sequence[int],
               extra_keys: Sequence[ExtraKey] = ()) -> bytes:
    """SHA-256 digest naming a full block and everything before it.

    Args:
        parent: the previous block's digest, or :data:`ROOT_HASH` for the first block.
        token_ids: the block's token ids (ints in int64 range).
        extra_keys: ints, strs or bytes that must also match for a cache hit.
    """
    if len(parent) != 32:
        raise ValueError(f"parent hash must be 32 bytes, got {len(parent)}")
    h = hashlib.sha256(parent)
    h.update(b"T" + _u64(len(token_ids)))
    for i, t in enumerate(token_ids):
        try:
            h.update(int(t).to_bytes(8, "little", signed=True))
        except OverflowError:
            raise ValueError(f"token_ids[{i}] = {t} does not fit in int64") from None
    h.update(encode_extra_keys(extra_keys))
    return h.digest()


def hash_blocks(token_ids: Sequence[int], block_size: int,
                extra_keys: Sequence[ExtraKey] = (),
                parent: bytes = ROOT_HASH) -> list[bytes]:
    """Chained hashes of every *full* block of ``token_ids`` (a partial tail is skipped)."""
    out: list[bytes] = []
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        parent = block_hash(parent, token_ids[start:start + block_size], extra_keys)
        out.append(parent)
    return out


def check_token_ids(token_ids: Iterable[int], name: str = "prompt_tokens") -> list[int]:
    """Token ids as a list of Python ints, with a clear error for anything else."""
    out = []
    for i, t in enumerate(token_ids):
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)):
            raise TypeError(f"{name}[{i}] must be an int token id, got {t!r}")
        t = int(t)
        if not -(1 << 63) <= t < (1 << 63):
            raise ValueError(f"{name}[{i}] = {t} does not fit in int64")
        out.append(t)
    return out
