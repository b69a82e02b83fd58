"""sandbox.kubeapi.serving.protobuf: the request bodies of typed client-go clients (pure).

The emulator's own decoder, no server: run on the emulator only (kubectl's protobuf requests meet
both servers in test_kubectl's ``test_imperative_create_sends_protobuf``)."""

from __future__ import annotations

import pytest

from sandbox.kubeapi import errors
from sandbox.kubeapi.serving import protobuf


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes | int) -> bytes:
    if isinstance(payload, int):
        return _varint(number << 3) + _varint(payload)
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    type_meta = _field(1, api_version.encode()) + _field(2, kind.encode())
    return (
        protobuf.MAGIC
        + _field(1, type_meta)
        + _field(2, raw)
        + _field(4, b"application/vnd.kubernetes.protobuf")
    )


def test_decode_a_secret() -> None:
    meta = (
        _field(1, b"creds")
        + _field(2, b"")
        + _field(3, b"team")
        + _field(11, _field(1, b"app") + _field(2, b"web"))
        + _field(
            13,
            _field(1, b"ConfigMap")
            + _field(3, b"owner")
            + _field(4, b"u-1")
            + _field(5, b"v1")
            + _field(6, 1),
        )
        + _field(14, b"example.com/hold")
    )
    raw = _field(1, meta) + _field(2, _field(1, b"token") + _field(2, b"abc")) + _field(3, b"Opaque")
    assert protobuf.decode(_envelope("v1", "Secret", raw)) == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "creds",
            "namespace": "team",
            "labels": {"app": "web"},
            "ownerReferences": [
                {"kind": "ConfigMap", "name": "owner", "uid": "u-1", "apiVersion": "v1", "controller": True}
            ],
            "finalizers": ["example.com/hold"],
        },
        "data": {"token": "YWJj"},
        "type": "Opaque",
    }


def test_decode_a_lease_with_micro_time() -> None:
    renew = _field(1, 1_700_000_000) + _field(2, 123_456_000)
    raw = _field(1, _field(1, b"hub")) + _field(2, _field(1, b"a") + _field(2, 15) + _field(4, renew))
    lease = protobuf.decode(_envelope("coordination.k8s.io/v1", "Lease", raw))
    assert lease["spec"] == {
        "holderIdentity": "a",
        "leaseDurationSeconds": 15,
        "renewTime": "2023-11-14T22:13:20.123456Z",
    }


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"{}", 400),
        (_envelope("v1", "Pod", b""), 415),
        (protobuf.MAGIC + _field(1, _field(2, b"Secret")) + b"\x12\x7f", 400),
    ],
)
def test_bad_bodies(body: bytes, code: int) -> None:
    with pytest.raises(errors.ApiError) as info:
        protobuf.decode(body)
    assert info.value.code == code
