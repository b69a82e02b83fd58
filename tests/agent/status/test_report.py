"""agent.status.report: phases, statuses, what is significant, the secrets payload. Tables, no I/O."""

from __future__ import annotations

import base64
import copy
import datetime as dt
from typing import Any

import msgspec
import nacl.public
import pytest

from agent.status import report
from agent.tcp import managed
from protocol import keys, messages, names, sealing
from tests import helpers
from tests.agent import applying

SITE = "site-a"
NOW = helpers.T0


def tcp(
    *,
    kamaji: str | None = None,
    deleting: bool = False,
    endpoint: str | None = None,
    installed: str | None = None,
    deployment: dict[str, Any] | None = None,
    seq: int = 7,
) -> dict[str, Any]:
    """A managed TCP as the API returns it, with the status fields the test asks for."""
    obj = applying.applied(managed.desired(helpers.intent(generation=3), seq=seq))
    obj["metadata"].update(uid="tcp-uid-1", resourceVersion="42")
    if deleting:
        obj["metadata"]["deletionTimestamp"] = "2026-11-30T12:00:00Z"
    status: dict[str, Any] = {}
    version: dict[str, Any] = {}
    if kamaji is not None:
        version["status"] = kamaji
    if installed is not None:
        version["version"] = installed
    if version or deployment is not None:
        status["kubernetesResources"] = {"version": version, "deployment": deployment or {}}
    if endpoint is not None:
        status["controlPlaneEndpoint"] = endpoint
    if status:
        obj["status"] = status
    return obj


@pytest.mark.parametrize(
    ("kamaji", "deleting", "phase", "reason"),
    [
        (None, False, "Pending", "AwaitingKamaji"),
        ("", False, "Pending", "AwaitingKamaji"),
        ("Provisioning", False, "Provisioning", "Provisioning"),
        ("CertificateAuthorityRotating", False, "Provisioning", "CertificateAuthorityRotating"),
        ("Migrating", False, "Provisioning", "Migrating"),
        ("Upgrading", False, "Upgrading", "Upgrading"),
        ("Ready", False, "Ready", "Ready"),
        ("NotReady", False, "NotReady", "NotReady"),
        ("WriteLimited", False, "NotReady", "WriteLimited"),
        ("Unknown", False, "NotReady", "Unknown"),
        ("Sleeping", False, "Sleeping", "Sleeping"),
        ("Hibernating", False, "NotReady", "UnrecognizedHibernating"),
        ("Ready", True, "Deleting", "DeletionRequested"),
        (None, True, "Deleting", "DeletionRequested"),
    ],
)
def test_phase_of(kamaji: str | None, deleting: bool, phase: str, reason: str) -> None:
    assert report.phase_of(tcp(kamaji=kamaji, deleting=deleting)) == (phase, reason)


def test_phase_of_status_that_is_not_a_mapping() -> None:
    obj = tcp()
    obj["status"] = {"kubernetesResources": "garbage"}
    assert report.phase_of(obj) == ("Pending", "AwaitingKamaji")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("10.0.0.1:6443", ("10.0.0.1", 6443)),
        ("cp1.example.com:443", ("cp1.example.com", 443)),
        ("[fd00::1]:6443", ("fd00::1", 6443)),
        ("fd00::1:6443", ("fd00::1", 6443)),
        ("https://10.0.0.1:6443", ("10.0.0.1", 6443)),
        ("https://[fd00::1]:6443/", ("fd00::1", 6443)),
        (" 10.0.0.1:6443 ", ("10.0.0.1", 6443)),
        ("10.0.0.1", None),
        ("10.0.0.1:", None),
        (":6443", None),
        ("10.0.0.1:http", None),
        ("10.0.0.1:0", None),
        ("10.0.0.1:70000", None),
        ("[fd00::1]", None),
        ("[fd00::1]6443", None),
        ("not:an:address:6443", None),
        ("", None),
        (None, None),
        (6443, None),
    ],
)
def test_endpoint_of(value: Any, expected: tuple[str, int] | None) -> None:
    got = report.endpoint_of(value)
    assert ((got.host, got.port) if got else None) == expected


def test_new_status_of_a_ready_tcp() -> None:
    deployment = {
        "replicas": 2,
        "readyReplicas": 2,
        "availableReplicas": 2,
        "updatedReplicas": 2,
        "unavailableReplicas": 0,
    }
    obj = tcp(kamaji="Ready", installed="v1.31.0", endpoint="10.0.0.1:6443", deployment=deployment)
    status = report.new_status(obj, site=SITE, now=NOW, secrets_checksum="abc")
    assert status == messages.Status(
        site=SITE,
        namespace="tenants",
        name="cp1",
        owner_uid="8d1c-uid",
        observed_generation=3,
        intent_seq=7,
        phase="Ready",
        reason="Ready",
        version="v1.31.0",
        endpoint=messages.Endpoint(host="10.0.0.1", port=6443),
        replicas=2,
        ready_replicas=2,
        available_replicas=2,
        updated_replicas=2,
        unavailable_replicas=0,
        secrets_checksum="abc",
        observed_at=NOW,
    )
    # It must be a valid wire message: a round trip through the codec keeps it.
    assert messages.decode_status(messages.encode(status)) == status


@pytest.mark.parametrize(
    ("installed", "spec_version", "expected"),
    [
        ("v1.31.0", "v1.32.0", "v1.31.0"),
        (None, "v1.32.0", "v1.32.0"),
        (None, None, ""),
    ],
)
def test_new_status_version(installed: str | None, spec_version: str | None, expected: str) -> None:
    obj = tcp(kamaji="Upgrading", installed=installed)
    if spec_version is None:
        del obj["spec"]["kubernetes"]["version"]
    else:
        obj["spec"]["kubernetes"]["version"] = spec_version
    assert report.new_status(obj, site=SITE, now=NOW).version == expected


@pytest.mark.parametrize(
    ("deployment", "expected"),
    [
        ({}, (0, 0, 0, 0, 0)),
        (
            {
                "replicas": 3,
                "readyReplicas": 1,
                "availableReplicas": 1,
                "updatedReplicas": 2,
                "unavailableReplicas": 2,
            },
            (3, 1, 1, 2, 2),
        ),
        (
            {"replicas": "2", "readyReplicas": -1, "updatedReplicas": None, "availableReplicas": True},
            (2, 0, 0, 0, 0),
        ),
        ({"replicas": "two", "readyReplicas": 1.5}, (0, 0, 0, 0, 0)),
    ],
)
def test_new_status_replica_counts(deployment: dict[str, Any], expected: tuple[int, ...]) -> None:
    s = report.new_status(tcp(kamaji="Ready", deployment=deployment), site=SITE, now=NOW)
    counts = (s.replicas, s.ready_replicas, s.available_replicas, s.updated_replicas, s.unavailable_replicas)
    assert counts == expected


DRIFTS: list[tuple[str, dict[str, Any], bool, str, str]] = [
    # id, spec changes at the site, deleting, phase, reason
    ("as applied", {}, False, "Ready", "Ready"),
    ("Kamaji's field beside ours", {"networkProfile": {"port": 6443}}, False, "Ready", "Ready"),
    ("an owned field edited", {"kubernetes": {"version": "v1.20.0"}}, False, "NotReady", "Drifted"),
    ("an owned field removed", {"controlPlane": {}}, False, "NotReady", "Drifted"),
    (
        "edited, but being deleted",
        {"kubernetes": {"version": "v1.20.0"}},
        True,
        "Deleting",
        "DeletionRequested",
    ),
]


@pytest.mark.parametrize(
    ("changes", "deleting", "phase", "reason"), [d[1:] for d in DRIFTS], ids=[d[0] for d in DRIFTS]
)
def test_new_status_of_a_drifted_tcp_is_not_ready(
    changes: dict[str, Any], deleting: bool, phase: str, reason: str
) -> None:
    obj = tcp(kamaji="Ready", installed="v1.31.0", deleting=deleting)
    obj["spec"] = {**obj["spec"], **changes}
    desired = helpers.intent(generation=3).spec
    status = report.new_status(obj, site="site-a", now=helpers.T0, desired=desired)
    assert (status.phase, status.reason) == (phase, reason)
    assert ("reverting" in status.message) is (reason == "Drifted")
    assert "v1.20.0" not in status.message
    # The spec applied not known yet (an agent just restarted): the anti-entropy pass tells.
    unknown = report.new_status(obj, site="site-a", now=helpers.T0)
    assert unknown.reason != "Drifted" or deleting


def test_new_status_of_a_tcp_that_is_not_ours() -> None:
    obj = tcp(kamaji="Ready")
    obj["metadata"]["labels"][managed.SITE] = "site-b"
    s = report.new_status(obj, site=SITE, now=NOW)
    assert (s.owner_uid, s.observed_generation, s.intent_seq, s.phase) == ("", 0, 0, "Ready")


def test_deleted_status() -> None:
    s = report.deleted_status(
        site=SITE, namespace="tenants", name="cp1", owner_uid="8d1c-uid", intent_seq=9, now=NOW
    )
    assert (s.phase, s.reason, s.owner_uid, s.intent_seq, s.endpoint) == (
        "Deleted",
        "NotFound",
        "8d1c-uid",
        9,
        None,
    )


BASE = report.new_status(
    tcp(kamaji="Ready", installed="v1.31.0", endpoint="10.0.0.1:6443", deployment={"replicas": 2}),
    site=SITE,
    now=NOW,
    secrets_checksum="c1",
)


@pytest.mark.parametrize(
    ("change", "matters"),
    [
        ({"observed_at": NOW + dt.timedelta(minutes=5)}, False),
        ({"message": "informational"}, False),
        ({"phase": "NotReady"}, True),
        ({"reason": "WriteLimited"}, True),
        ({"version": "v1.32.0"}, True),
        ({"endpoint": messages.Endpoint(host="10.0.0.2", port=6443)}, True),
        ({"endpoint": None}, True),
        ({"replicas": 3}, True),
        ({"ready_replicas": 1}, True),
        ({"available_replicas": 1}, True),
        ({"updated_replicas": 1}, True),
        ({"unavailable_replicas": 1}, True),
        ({"observed_generation": 4}, True),
        ({"intent_seq": 8}, True),
        ({"owner_uid": "other"}, True),
        ({"secrets_checksum": "c2"}, True),
    ],
)
def test_significant(change: dict[str, Any], matters: bool) -> None:
    changed = msgspec.structs.replace(BASE, **change)
    assert (report.significant(changed) != report.significant(BASE)) is matters


def secret(name: str, data: dict[str, bytes | str], *, owner_uid: str | None = "tcp-uid-1") -> dict[str, Any]:
    encoded = {k: v if isinstance(v, str) else base64.b64encode(v).decode() for k, v in data.items()}
    meta: dict[str, Any] = {"name": name, "namespace": "tenants", "resourceVersion": "5"}
    if owner_uid is not None:
        meta["ownerReferences"] = [{"kind": "TenantControlPlane", "name": "cp1", "uid": owner_uid}]
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "data": encoded}


KUBECONFIG = secret(
    "cp1-admin-kubeconfig", {"admin.conf": b"kubeconfig: 1\n", "other.conf": b"kubeconfig: 2\n"}
)
CA = secret("cp1-ca", {"ca.crt": b"CERT", "ca.key": b"KEY", "tls.crt": b"CERT", "tls.key": b"KEY"})


def without(obj: dict[str, Any], key: str) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    del out["data"][key]
    return out


def with_data(obj: dict[str, Any], key: str, value: str) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["data"][key] = value
    return out


@pytest.mark.parametrize(
    ("kubeconfig", "ca", "key", "expected"),
    [
        (KUBECONFIG, CA, "admin.conf", ("admin.conf", "kubeconfig: 1\n", "CERT", "KEY")),
        (KUBECONFIG, CA, "other.conf", ("other.conf", "kubeconfig: 2\n", "CERT", "KEY")),
        (KUBECONFIG, CA, "missing.conf", None),
        (None, CA, "admin.conf", None),
        (KUBECONFIG, None, "admin.conf", None),
        (KUBECONFIG, without(CA, "ca.key"), "admin.conf", None),
        (KUBECONFIG, without(CA, "ca.crt"), "admin.conf", None),
        (KUBECONFIG, with_data(CA, "ca.key", "!!not base64!!"), "admin.conf", None),
        (KUBECONFIG, with_data(CA, "ca.key", base64.b64encode(b"\xff\xfe").decode()), "admin.conf", None),
        (with_data(KUBECONFIG, "admin.conf", ""), CA, "admin.conf", None),
        ({"metadata": {"name": "cp1-admin-kubeconfig"}}, CA, "admin.conf", None),
    ],
)
def test_payload(
    kubeconfig: dict[str, Any] | None, ca: dict[str, Any] | None, key: str, expected: tuple[str, ...] | None
) -> None:
    got = report.payload(kubeconfig, ca, key=key)
    assert ((got.kubeconfig_key, got.kubeconfig, got.ca_crt, got.ca_key) if got else None) == expected


def test_checksum_follows_the_plaintext() -> None:
    one = report.payload(KUBECONFIG, CA, key="admin.conf")
    again = report.payload(copy.deepcopy(KUBECONFIG), copy.deepcopy(CA), key="admin.conf")
    other = report.payload(
        KUBECONFIG, with_data(CA, "ca.key", base64.b64encode(b"KEY2").decode()), key="admin.conf"
    )
    assert one is not None and other is not None
    assert report.checksum(one) == report.checksum(again) == sealing.checksum(messages.encode(one))
    assert report.checksum(one) != report.checksum(other)
    assert report.checksum(None) == ""


def test_new_sealed_opens_with_the_hub_key_only() -> None:
    private = keys.new_sealing_key()
    recipient = keys.public_entry(bytes(private.public_key), created_at=NOW)
    plaintext = report.payload(KUBECONFIG, CA, key="admin.conf")
    assert plaintext is not None
    sealed = report.new_sealed(tcp(kamaji="Ready"), plaintext, site=SITE, recipient=recipient, now=NOW)
    assert (sealed.namespace, sealed.name, sealed.owner_uid) == ("tenants", "cp1", "8d1c-uid")
    assert sealed.recipient_key_id == recipient.key_id
    assert sealed.checksum == report.checksum(plaintext)
    wire = messages.encode(sealed)
    # The payload in clear, as msgspec writes it or as a Secret's base64 holds a value: in
    # none of its forms (a short marker like "KEY" also turns up by chance in base64 ciphertext).
    assert messages.encode(plaintext) not in wire
    assert b"kubeconfig: 1" not in wire and base64.b64encode(b"kubeconfig: 1\n") not in wire
    opened = sealing.Keyring([private]).open(sealed.ciphertext, key_id=recipient.key_id)
    assert messages.decode_secrets_payload(opened) == plaintext
    stranger = nacl.public.PrivateKey.generate()
    with pytest.raises(Exception, match="does not open"):
        sealing.Keyring([stranger]).open(sealed.ciphertext, key_id=keys.key_id(bytes(stranger.public_key)))


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("cp1-admin-kubeconfig", ("cp1",)),
        ("cp1-ca", ("cp1",)),
        ("my-ca-ca", ("my-ca",)),
        ("cp1-admin-kubeconfig-ca", ("cp1-admin-kubeconfig",)),
        ("cp1-api-server-certificate", ()),
        ("-ca", ()),
        ("-admin-kubeconfig", ()),
    ],
)
def test_tcp_names_of_secret(name: str, expected: tuple[str, ...]) -> None:
    assert report.tcp_names_of_secret(name) == expected
    for tcp_name in expected:
        assert name in (names.kamaji_kubeconfig(tcp_name), names.kamaji_ca(tcp_name))


@pytest.mark.parametrize(
    ("owner_uid", "expected"),
    [("tcp-uid-1", True), ("an-earlier-tcp", False), (None, True)],
)
def test_belongs(owner_uid: str | None, expected: bool) -> None:
    assert report.belongs(secret("cp1-ca", {}, owner_uid=owner_uid), tcp()) is expected


def test_payload_repr_has_no_secret_material() -> None:
    plaintext = report.payload(KUBECONFIG, CA, key="admin.conf")
    assert "KEY" not in repr(plaintext) and "kubeconfig: 1" not in repr(plaintext)
