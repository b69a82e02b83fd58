"""hub.ingest.observations: ordering by stream sequence, coordinates checks, the box kept until it
is written."""

from __future__ import annotations

import dataclasses

import nacl.public
import pytest

from hub.ingest import observations
from hub.ingest import sealed as boxes
from protocol import keys, messages, sealing
from protocol.coordinates import Coordinates
from tests import helpers

CP1 = Coordinates("site-a", "tenants", "cp1")
CP2 = Coordinates("site-a", "tenants", "cp2")
HUB = keys.new_sealing_key()
STRANGER = keys.new_sealing_key()
PAYLOAD = messages.SecretsPayload(
    kubeconfig="apiVersion: v1\nkind: Config\n", ca_crt="CRT", ca_key="TOP-SECRET-KEY"
)


def public(key: nacl.public.PrivateKey) -> keys.PublicKey:
    return keys.public_entry(bytes(key.public_key), created_at=helpers.T0)


def sealed_to(
    key: nacl.public.PrivateKey = HUB,
    *,
    plaintext: bytes | None = None,
    checksum: str | None = None,
    name: str = "cp1",
    site: str = "site-a",
) -> messages.SealedSecrets:
    """SealedSecrets as the agent makes them, sealed to ``key`` (overrides make bad ones)."""
    encoded = messages.encode(PAYLOAD) if plaintext is None else plaintext
    recipient = public(key)
    return messages.SealedSecrets(
        site=site,
        namespace="tenants",
        name=name,
        owner_uid="8d1c-uid",
        recipient_key_id=recipient.key_id,
        ciphertext=sealing.seal(encoded, recipient),
        checksum=sealing.checksum(encoded) if checksum is None else checksum,
        observed_at=helpers.T0,
    )


RING = sealing.Keyring([HUB])
R, S, D, M = (
    observations.Outcome.RECORDED,
    observations.Outcome.STALE,
    observations.Outcome.DUPLICATE,
    observations.Outcome.MISMATCH,
)


@pytest.mark.parametrize(
    ("steps", "outcomes", "held_phase", "held_seq", "version"),
    [
        pytest.param([(CP1, "Ready", 5)], [R], "Ready", 5, 1, id="first"),
        pytest.param([(CP1, "Provisioning", 5), (CP1, "Ready", 9)], [R, R], "Ready", 9, 2, id="newer-wins"),
        pytest.param(
            [(CP1, "Ready", 9), (CP1, "Provisioning", 5)], [R, S], "Ready", 9, 1, id="older-ignored"
        ),
        pytest.param([(CP1, "Ready", 9), (CP1, "Ready", 9)], [R, D], "Ready", 9, 1, id="same-seq-ignored"),
        pytest.param([(CP2, "Ready", 9)], [M], None, 0, None, id="subject-of-another"),
        pytest.param(
            [(CP1, "Ready", 9), (CP2, "Deleted", 12)], [R, M], "Ready", 9, 1, id="mismatch-keeps-held"
        ),
    ],
)
def test_apply_status(
    steps: list[tuple[Coordinates, str, int]],
    outcomes: list[observations.Outcome],
    held_phase: str | None,
    held_seq: int,
    version: int | None,
) -> None:
    obs = observations.Observations()
    got = [
        obs.apply_status(subject, helpers.status(phase=phase), seq).outcome for subject, phase, seq in steps
    ]
    assert got == outcomes
    held = obs.get(CP1)
    if version is None:
        assert held is None
        assert obs.coordinates() == frozenset()
        return
    assert held is not None
    assert held.status is not None
    assert (held.status.phase, held.status_seq, held.version) == (held_phase, held_seq, version)
    assert held.coordinates == CP1


def test_mismatch_names_both_coordinates() -> None:
    applied = observations.Observations().apply_status(CP2, helpers.status(), 3)
    assert not applied.recorded
    assert "site-a/tenants/cp1" in applied.message
    assert "site-a/tenants/cp2" in applied.message


def _opened(sealed: messages.SealedSecrets) -> messages.SecretsPayload | boxes.DecryptError:
    return boxes.open_sealed(sealed, keyring=RING)


@pytest.mark.parametrize(
    ("steps", "outcomes", "opened", "has_error", "held_seq"),
    [
        pytest.param([(CP1, sealed_to(HUB), 4)], [R], True, False, 4, id="payload"),
        pytest.param([(CP1, sealed_to(STRANGER), 4)], [R], False, True, 4, id="decrypt-error"),
        pytest.param(
            [(CP1, sealed_to(STRANGER), 4), (CP1, sealed_to(HUB), 6)],
            [R, R],
            True,
            False,
            6,
            id="error-healed",
        ),
        pytest.param(
            [(CP1, sealed_to(HUB), 6), (CP1, sealed_to(STRANGER), 4)],
            [R, S],
            True,
            False,
            6,
            id="older-ignored",
        ),
        pytest.param([(CP1, sealed_to(HUB, name="cp2"), 4)], [M], False, False, 0, id="subject-of-another"),
    ],
)
def test_apply_sealed(
    steps: list[tuple[Coordinates, messages.SealedSecrets, int]],
    outcomes: list[observations.Outcome],
    opened: bool,
    has_error: bool,
    held_seq: int,
) -> None:
    obs = observations.Observations()
    got = [obs.apply_sealed(coords, sealed, _opened(sealed), seq).outcome for coords, sealed, seq in steps]
    assert got == outcomes
    held = obs.get(CP1)
    if held_seq == 0:
        assert held is None
        return
    assert held is not None
    assert (held.secrets_error is None, held.secrets_error is not None, held.sealed_seq) == (
        opened,
        has_error,
        held_seq,
    )
    # Only what decides is kept: the checksum, the owner, the key id; never the box or its payload.
    assert held.sealed == observations.SealedRef.of(steps[-1 if outcomes[-1] is R else 0][1])
    assert held.status is None


def test_status_and_secrets_share_one_version() -> None:
    obs = observations.Observations()
    obs.apply_status(CP1, helpers.status(), 3)
    sealed = sealed_to(HUB)
    obs.apply_sealed(CP1, sealed, _opened(sealed), 3)  # another stream: its own sequence
    held = obs.get(CP1)
    assert held is not None
    assert (held.version, held.status_seq, held.sealed_seq) == (2, 3, 3)
    assert repr(held).count("TOP-SECRET") == 0


def test_forget_keeps_sequences_and_version_growing() -> None:
    obs = observations.Observations()
    obs.apply_status(CP1, helpers.status(), 10)
    obs.mark_loaded(CP1)
    obs.forget(CP1)
    assert obs.get(CP1) is None
    assert obs.coordinates() == frozenset()
    assert not obs.loaded(CP1)
    # A late redelivery of the purged status stays ignored...
    assert obs.apply_status(CP1, helpers.status(phase="Deleted"), 10).outcome is D
    assert obs.get(CP1) is None
    # ...while a new control plane of the same coordinates (a later sequence) is recorded.
    assert obs.apply_status(CP1, helpers.status(phase="Pending"), 11).recorded
    held = obs.get(CP1)
    assert held is not None
    assert held.status is not None
    assert (held.status.phase, held.version) == ("Pending", 3)


def test_forget_of_unknown_is_a_no_op() -> None:
    obs = observations.Observations()
    obs.forget(CP1)
    assert obs.held_seq(CP1) == (0, 0)
    assert obs.get(CP1) is None


def test_plain_tuples_address_the_same_entry() -> None:
    obs = observations.Observations()
    obs.apply_status(Coordinates(*("site-a", "tenants", "cp1")), helpers.status(), 1)
    assert obs.get(("site-a", "tenants", "cp1")) is not None
    assert obs.coordinates() == {CP1}


def test_a_held_observation_holds_no_secret_material() -> None:
    obs = observations.Observations()
    sealed = sealed_to(HUB)
    obs.apply_sealed(CP1, sealed, _opened(sealed), 3)
    held = obs.get(CP1)
    assert held is not None and held.sealed is not None
    assert sealed.ciphertext not in repr(held).encode() and "TOP-SECRET" not in repr(held)
    values = [getattr(held, f.name) for f in dataclasses.fields(held)]
    assert not any(isinstance(v, bytes | messages.SecretsPayload) for v in values)


def test_drop_sealed_waits_for_the_next_box_and_keeps_its_sequence() -> None:
    obs = observations.Observations()
    obs.apply_status(CP1, helpers.status(), 2)
    sealed = sealed_to(HUB)
    obs.apply_sealed(CP1, sealed, _opened(sealed), 3)
    obs.drop_sealed(CP1)
    held = obs.get(CP1)
    assert held is not None and (held.sealed, held.secrets_error, held.sealed_seq) == (None, None, 3)
    assert held.status is not None  # the status stays
    assert obs.apply_sealed(CP1, sealed, _opened(sealed), 3).outcome is D
    assert obs.apply_sealed(CP1, sealed, _opened(sealed), 4).recorded


@pytest.mark.parametrize(
    "steps",
    [
        pytest.param(["status"], id="a-status"),
        pytest.param(["sealed"], id="sealed-secrets"),
        pytest.param(["status", "sealed", "status"], id="both"),
    ],
)
def test_what_the_consumer_records_does_not_count_as_loaded(steps: list[str]) -> None:
    """A restarted hub's consumer delivers only what came after the previous process's acks: the
    streams' last messages must still be read once, whatever it recorded first."""
    obs = observations.Observations()
    for seq, step in enumerate(steps, start=1):
        if step == "status":
            obs.apply_status(CP1, helpers.status(), seq)
        else:
            sealed = sealed_to(HUB)
            obs.apply_sealed(CP1, sealed, _opened(sealed), seq)
    assert obs.get(CP1) is not None
    assert not obs.loaded(CP1)


@pytest.mark.parametrize(
    ("mapped", "kept", "gone"),
    [
        pytest.param({CP1, CP2}, {CP1, CP2}, [], id="all-mapped"),
        pytest.param({CP1}, {CP1}, [CP2], id="one-unmapped"),
        pytest.param(set(), set(), [CP1, CP2], id="none-mapped"),
    ],
)
def test_retain_drops_what_no_rkcp_maps_to(
    mapped: set[Coordinates],
    kept: set[Coordinates],
    gone: list[Coordinates],
) -> None:
    obs = observations.Observations()
    obs.apply_status(CP1, helpers.status(name="cp1"), 1)
    obs.apply_sealed(CP2, sealed_to(name="cp2"), PAYLOAD, 2)
    obs.mark_loaded(CP1)
    assert sorted(obs.retain(mapped.__contains__)) == sorted(gone)
    assert obs.coordinates() == kept
    for coords in gone:
        assert obs.get(coords) is None
        assert not obs.loaded(coords)  # an RKCP mapping to it later reads the streams again
    # The sequences stay: a late redelivery of what was held is still ignored.
    if CP1 in gone:
        assert obs.apply_status(CP1, helpers.status(name="cp1"), 1).outcome is observations.Outcome.DUPLICATE


def test_unload_of_a_loaded_empty_entry_makes_the_next_look_read_the_streams() -> None:
    obs = observations.Observations()
    obs.mark_loaded(CP1)  # loaded, nothing found
    obs.unload(CP1)
    assert not obs.loaded(CP1) and obs.get(CP1) is None
    obs.unload(CP2)  # never seen: nothing is created for it
    assert obs.retain(lambda _: False) == []


def test_a_box_held_unopened_records_why_it_does_not_open_once_opened() -> None:
    """``Intake.load`` records a box without opening it (observing only reads); the write path
    opens it, and a box that does not open says so at the sequence already held."""
    obs = observations.Observations()
    box = sealed_to(STRANGER)
    assert obs.apply_sealed(CP1, box, None, 3).recorded
    held = obs.get(CP1)
    assert held is not None and (held.sealed, held.secrets_error, held.version) == (
        observations.SealedRef.of(box),
        None,
        1,
    )
    failed = _opened(box)
    assert isinstance(failed, boxes.DecryptError)
    assert obs.apply_sealed(CP1, box, failed, 3).recorded
    held = obs.get(CP1)
    assert held is not None and (held.secrets_error, held.sealed_seq, held.version) == (failed, 3, 2)
    # Known now: the same failure again, or the box unopened again, changes nothing.
    assert obs.apply_sealed(CP1, box, failed, 3).outcome is observations.Outcome.DUPLICATE
    assert obs.apply_sealed(CP1, box, None, 3).outcome is observations.Outcome.DUPLICATE
    assert obs.get(CP1) == held


def test_the_streams_last_message_is_held_again_after_unload() -> None:
    """``unload`` (no RKCP maps to it, or a released owner's messages were purged): reading the
    stream's last messages again holds them at their sequences; a redelivery still does not."""
    obs = observations.Observations()
    box = sealed_to(HUB)
    obs.apply_status(CP1, helpers.status(), 4)
    obs.apply_sealed(CP1, box, _opened(box), 5)
    obs.unload(CP1)
    assert obs.apply_status(CP1, helpers.status(), 4).outcome is observations.Outcome.DUPLICATE
    assert obs.get(CP1) is None
    assert obs.apply_status(CP1, helpers.status(), 4, last=True).recorded
    assert obs.apply_sealed(CP1, box, None, 5, last=True).recorded
    held = obs.get(CP1)
    assert held is not None and (held.status_seq, held.sealed_seq) == (4, 5)
    assert held.sealed == observations.SealedRef.of(box)
    # Held now: the same message again, as the last one or redelivered, changes nothing.
    assert obs.apply_status(CP1, helpers.status(), 4, last=True).outcome is observations.Outcome.DUPLICATE
    assert obs.apply_sealed(CP1, box, None, 5, last=True).outcome is observations.Outcome.DUPLICATE


KeptStep = tuple[str, int]
"""(what, seq) on CP1: ``opened``/``unopened``/``fails`` record a box kept (the consumer; load;
a box that does not open), ``written`` records one not to keep (``Intake.open_latest``),
``mismatch`` a box naming CP1 on CP2's subject, ``stray`` keeps a box behind the records' back;
the rest call the method of that name."""


def _kept_step(obs: observations.Observations, what: str, seq: int) -> int | str | None:
    box, bad = sealed_to(HUB), sealed_to(STRANGER)
    if what in ("opened", "unopened", "written"):
        obs.apply_sealed(CP1, box, PAYLOAD if what != "unopened" else None, seq, keep=what != "written")
    elif what == "fails":
        obs.apply_sealed(CP1, bad, _opened(bad), seq, keep=True)
    elif what == "mismatch":
        obs.apply_sealed(CP2, box, None, seq, keep=True)
    elif what == "stray":
        obs.boxes.keep(CP1, box, seq)
    elif what == "take":
        taken = obs.take_box(CP1)
        return taken.seq if taken is not None else None
    elif what == "drop_box":
        obs.drop_box(CP1, seq=seq)
    elif what == "retain":
        obs.retain(lambda _: False)
    else:
        getattr(obs, what)(CP1)
    return "-"


@pytest.mark.parametrize(
    ("steps", "kept", "taken"),
    [
        pytest.param([("opened", 5)], 5, [], id="consumer-keeps"),
        pytest.param([("unopened", 5)], 5, [], id="load-keeps-unopened"),
        pytest.param([("opened", 5), ("opened", 9)], 9, [], id="newer-wins"),
        pytest.param([("opened", 9), ("opened", 5)], 9, [], id="older-ignored"),
        pytest.param([("fails", 5)], None, [], id="not-opening-keeps-nothing"),
        pytest.param([("unopened", 5), ("fails", 5)], None, [], id="learned-not-to-open"),
        pytest.param([("opened", 5), ("fails", 9)], None, [], id="newer-failing-drops-older"),
        pytest.param([("mismatch", 5)], None, [], id="mismatch-keeps-nothing"),
        pytest.param([("opened", 5), ("take", 0)], None, [5], id="taken-to-write"),
        pytest.param([("opened", 5), ("take", 0), ("take", 0)], None, [5, None], id="taken-once"),
        pytest.param([("take", 0)], None, [None], id="nothing-kept"),
        pytest.param([("opened", 5), ("take", 0), ("written", 5)], None, [5], id="written-not-kept-again"),
        pytest.param([("opened", 5), ("written", 9)], None, [], id="newer-read-to-write-drops-older"),
        pytest.param([("opened", 5), ("forget", 0)], None, [], id="forget"),
        pytest.param([("opened", 5), ("unload", 0)], None, [], id="unload"),
        pytest.param([("opened", 5), ("retain", 0)], None, [], id="retained-away"),
        pytest.param([("opened", 5), ("drop_sealed", 0)], None, [], id="drop-sealed"),
        pytest.param([("opened", 5), ("drop_box", 5)], None, [], id="decided-not-to-write"),
        pytest.param([("opened", 9), ("drop_box", 5)], 9, [], id="a-newer-box-stays"),
        pytest.param([("opened", 5), ("stray", 3), ("take", 0)], None, [None], id="only-the-latest-held"),
        pytest.param([("opened", 5), ("forget", 0), ("unopened", 5)], None, [], id="forgotten-seq-stays"),
    ],
)
def test_the_kept_box(steps: list[KeptStep], kept: int | None, taken: list[int | None]) -> None:
    obs = observations.Observations()
    results = [_kept_step(obs, what, seq) for what, seq in steps]
    assert [r for r in results if r != "-"] == taken
    box = obs.boxes.peek(CP1)
    assert (box.seq if box is not None else None) == kept
    assert obs.boxes.bytes == (boxes.size(sealed_to(HUB)) if kept else 0)
    assert len(obs.boxes) == (1 if kept else 0)


def test_the_box_budget_is_the_observations_own() -> None:
    obs = observations.Observations(box_budget=0)
    box = sealed_to(HUB)
    assert obs.apply_sealed(CP1, box, PAYLOAD, 5, keep=True).recorded
    assert obs.take_box(CP1) is None  # recorded, not kept: the write reads the stream
    held = obs.get(CP1)
    assert held is not None and held.sealed == observations.SealedRef.of(box)
