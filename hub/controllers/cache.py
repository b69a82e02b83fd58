"""A cache of watched objects kept as compact, compressed JSON bytes.

A parsed Kubernetes object costs ten times its JSON size as Python dicts and strings (about
13 kB against 1.3 kB for an RKCP): at 10,000 control planes that was most of the hub's memory.
Objects are decoded when a reconcile needs one; the indexes the controller consults often are
kept beside, small. What the API server and kubectl keep for their writers (managedFields, the
last-applied copy) is not kept: no reconcile reads it, and it was most of an RKCP's bytes; nor
are the top-level fields a cache's readers need not (``drop``: a Cluster's status).

Objects of one kind are mostly the same words (field names, condition types and reasons, the
API version): each is deflated against a sample of its kind, a Ready RKCP's 3 kB to about 180
bytes. The sample is the largest object put so far (the one carrying the most of those words),
chosen again each time the cache has grown sixteenfold, every object then deflated anew.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

import msgspec

from common import objects

Key = objects.Key

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(dict[str, Any])

_LEVEL = 3
"""Against a good sample, within a tenth of zlib's best size at its fastest level's speed."""
_RAW = -15
"""Raw deflate: no header or checksum (6 bytes an object; the cache is in memory)."""
_SAMPLE_MAX = 16 * 1024
"""A larger object (a user's big annotation) is no better a sample: deflate looks back 32 kB."""
_GROWTH = 16
"""The cache chooses its sample again each time it has grown by this factor."""


class ObjectCache:
    def __init__(self, *, drop: tuple[str, ...] = ()) -> None:
        self._raw: dict[Key, bytes] = {}
        self._drop = drop
        """Top-level fields no reader of this cache needs (a Cluster's ``status``: conditions
        that change on every step Cluster API takes), not kept."""
        self._sample = b""
        """What every object is deflated against."""
        self._largest = b""
        """The largest object put (up to ``_SAMPLE_MAX``): the next sample."""
        self._next_choice = 1
        """The size at which the cache chooses its sample again."""

    def __len__(self) -> int:
        return len(self._raw)

    def __contains__(self, key: object) -> bool:
        return key in self._raw

    def __iter__(self) -> Iterator[Key]:
        return iter(list(self._raw))

    def put(self, key: Key, obj: dict[str, Any]) -> None:
        kept = objects.slim(obj)
        if any(field in kept for field in self._drop):
            kept = {k: v for k, v in kept.items() if k not in self._drop}
        data = _encoder.encode(kept)
        if len(self._largest) < len(data) <= _SAMPLE_MAX:
            self._largest = data
        self._raw[key] = deflate(data, self._sample)
        if len(self._raw) >= self._next_choice:
            self._choose_sample()

    def get(self, key: Key) -> dict[str, Any] | None:
        raw = self._raw.get(key)
        return None if raw is None else _decoder.decode(inflate(raw, self._sample))

    def pop(self, key: Key) -> None:
        self._raw.pop(key, None)

    def _choose_sample(self) -> None:
        self._next_choice = len(self._raw) * _GROWTH
        if self._largest == self._sample:
            return
        old, self._sample = self._sample, self._largest
        for key, raw in self._raw.items():
            self._raw[key] = deflate(inflate(raw, old), self._sample)


def deflate(data: bytes, sample: bytes) -> bytes:
    packer = zlib.compressobj(_LEVEL, zlib.DEFLATED, _RAW, zdict=sample)
    return packer.compress(data) + packer.flush()


def inflate(raw: bytes, sample: bytes) -> bytes:
    return zlib.decompressobj(_RAW, zdict=sample).decompress(raw)
