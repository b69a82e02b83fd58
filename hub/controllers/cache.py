"""A cache of watched objects kept as compact JSON bytes.

A parsed Kubernetes object costs ten times its JSON size as Python dicts and strings (about
13 kB against 1.3 kB for an RKCP): at 10,000 control planes that was most of the hub's memory.
Objects are decoded when a reconcile needs one; the indexes the controller consults often are
kept beside, small. What the API server and kubectl keep for their writers (managedFields, the
last-applied copy) is not kept: no reconcile reads it, and it was most of an RKCP's bytes; nor
are the top-level fields a cache's readers need not (``drop``: a Cluster's status).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec

from common import objects

Key = objects.Key

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(dict[str, Any])


class ObjectCache:
    def __init__(self, *, drop: tuple[str, ...] = ()) -> None:
        self._raw: dict[Key, bytes] = {}
        self._drop = drop
        """Top-level fields no reader of this cache needs (a Cluster's ``status``: conditions
        that change on every step Cluster API takes), not kept."""

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
        self._raw[key] = _encoder.encode(kept)

    def get(self, key: Key) -> dict[str, Any] | None:
        raw = self._raw.get(key)
        return None if raw is None else _decoder.decode(raw)

    def pop(self, key: Key) -> None:
        self._raw.pop(key, None)
