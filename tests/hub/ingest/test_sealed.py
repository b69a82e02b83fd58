"""hub.ingest.sealed: opening a sealed box, and keeping boxes within a byte budget (tables)."""

from __future__ import annotations

import pytest

from hub.ingest import sealed as boxes
from protocol import messages, sealing, streams
from protocol.coordinates import Coordinates
from tests.hub.ingest.test_observations import CP1, CP2, HUB, PAYLOAD, RING, STRANGER, public, sealed_to

CP3 = Coordinates("site-a", "tenants", "cp3")
BOX = sealed_to(HUB)
SIZE = boxes.size(BOX)
"""Every box here is as large (same payload, same names but for a digit)."""


@pytest.mark.parametrize(
    ("sealed", "error_part"),
    [
        pytest.param(sealed_to(HUB), None, id="opens"),
        pytest.param(sealed_to(STRANGER), public(STRANGER).key_id, id="unknown-key"),
        pytest.param(sealed_to(HUB, checksum="00" * 32), "checksum", id="checksum-mismatch"),
        pytest.param(
            sealed_to(HUB, plaintext=b'{"kubeconfig": 1}', checksum=sealing.checksum(b'{"kubeconfig": 1}')),
            "no valid SecretsPayload",
            id="not-a-payload",
        ),
    ],
)
def test_open_sealed(sealed: messages.SealedSecrets, error_part: str | None) -> None:
    opened = boxes.open_sealed(sealed, keyring=RING)
    if error_part is None:
        assert opened == PAYLOAD
        return
    assert isinstance(opened, boxes.DecryptError)
    assert opened.reason == "DecryptFailed"
    assert error_part in opened.message
    assert "TOP-SECRET" not in opened.message


def test_open_sealed_corrupt_box_names_key_id() -> None:
    good = sealed_to(HUB)
    corrupt = messages.SealedSecrets(
        **{f: getattr(good, f) for f in good.__struct_fields__ if f != "ciphertext"},
        ciphertext=bytes(len(good.ciphertext)),
    )
    opened = boxes.open_sealed(corrupt, keyring=RING)
    assert isinstance(opened, boxes.DecryptError)
    assert public(HUB).key_id in opened.message


def test_size_counts_the_ciphertext_and_strings() -> None:
    assert (
        boxes.OVERHEAD
        + len(BOX.ciphertext)
        + len(BOX.checksum)
        + len(BOX.site + BOX.namespace + BOX.name + BOX.owner_uid + BOX.recipient_key_id)
        == SIZE
    )
    bigger = sealed_to(HUB, plaintext=b"x" * 4096, checksum="c")
    assert boxes.size(bigger) > SIZE + 3000


KEEP, TAKE, DROP = "keep", "take", "drop"
Step = tuple[str, Coordinates, int]
"""(what, coordinates, seq): keep the box at seq, take, or drop (seq 0: whatever is kept)."""


@pytest.mark.parametrize(
    ("budget", "steps", "kept", "taken"),
    [
        pytest.param(3 * SIZE, [(KEEP, CP1, 5)], {CP1: 5}, [], id="kept"),
        pytest.param(3 * SIZE, [(KEEP, CP1, 5), (KEEP, CP1, 9)], {CP1: 9}, [], id="newer-replaces"),
        pytest.param(3 * SIZE, [(KEEP, CP1, 5), (TAKE, CP1, 0)], {}, [5], id="taken-once"),
        pytest.param(3 * SIZE, [(KEEP, CP1, 5), (TAKE, CP1, 0), (TAKE, CP1, 0)], {}, [5, None], id="twice"),
        pytest.param(3 * SIZE, [(TAKE, CP2, 0)], {}, [None], id="nothing-to-take"),
        pytest.param(3 * SIZE, [(KEEP, CP1, 5), (DROP, CP1, 0)], {}, [], id="dropped"),
        pytest.param(3 * SIZE, [(KEEP, CP1, 5), (DROP, CP1, 5)], {}, [], id="dropped-at-its-seq"),
        pytest.param(3 * SIZE, [(KEEP, CP1, 9), (DROP, CP1, 5)], {CP1: 9}, [], id="another-seq-stays"),
        pytest.param(
            2 * SIZE,
            [(KEEP, CP1, 1), (KEEP, CP2, 2), (KEEP, CP3, 3)],
            {CP1: 1, CP2: 2},
            [],
            id="full-keeps-no-more",
        ),
        pytest.param(
            2 * SIZE,
            [(KEEP, CP1, 1), (KEEP, CP2, 2), (KEEP, CP1, 4), (KEEP, CP3, 3)],
            {CP1: 4, CP2: 2},
            [],
            id="a-newer-box-replaces-its-own",
        ),
        pytest.param(
            2 * SIZE,
            [(KEEP, CP1, 1), (KEEP, CP2, 2), (TAKE, CP1, 0), (KEEP, CP3, 3)],
            {CP2: 2, CP3: 3},
            [1],
            id="room-again-once-taken",
        ),
        pytest.param(SIZE - 1, [(KEEP, CP1, 5)], {}, [], id="larger-than-budget"),
        pytest.param(0, [(KEEP, CP1, 5), (TAKE, CP1, 0)], {}, [None], id="budget-zero-keeps-nothing"),
        pytest.param(SIZE, [(KEEP, CP1, 5), (KEEP, CP2, 6)], {CP1: 5}, [], id="exactly-the-budget"),
    ],
)
def test_boxes(budget: int, steps: list[Step], kept: dict[Coordinates, int], taken: list[int | None]) -> None:
    store = boxes.Boxes(budget)
    got: list[int | None] = []
    for what, coords, seq in steps:
        if what == KEEP:
            store.keep(coords, sealed_to(HUB, name=coords.name), seq)
        elif what == TAKE:
            one = store.take(coords)
            got.append(one.seq if one is not None else None)
        else:
            store.drop(coords, seq=seq or None)
    assert got == taken
    held = {c: k.seq for c in (CP1, CP2, CP3) if (k := store.peek(c)) is not None}
    assert held == kept
    assert (len(store), store.bytes) == (len(kept), SIZE * len(kept))
    assert store.bytes <= budget


def test_keep_says_whether_it_kept() -> None:
    store = boxes.Boxes(SIZE)
    assert store.keep(CP1, BOX, 1)
    assert not store.keep(CP1, sealed_to(HUB, plaintext=b"x" * 4096, checksum="c"), 2)
    assert store.peek(CP1) is None  # the older one went too: it is not the latest any more


def test_a_negative_budget_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match="box budget"):
        boxes.Boxes(-1)


def test_the_default_budget_holds_a_hundred_boxes_of_the_largest_message() -> None:
    assert boxes.DEFAULT_BUDGET // streams.MAX_MSG_SIZE >= 100
