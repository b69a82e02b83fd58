"""`kamaji-broker keys generate` and `keys retire`: files, modes, idempotence, rotation,
retirement, the Secret manifest."""

from __future__ import annotations

import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from common.files import atomic
from common.files import keys as keyfiles
from common.files import retire as keyretire
from kamaji_broker import cli
from protocol import keys, messages, sealing, signing
from tests import helpers


def mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_generate_writes_private_files_0600(tmp_path: Path) -> None:
    assert cli.main(["keys", "generate", "--out", str(tmp_path / "k")]) == 0
    d = tmp_path / "k"
    [sealing_file] = list((d / "sealing").glob("*.key"))
    assert mode(d / "signing.key") == 0o600 and mode(sealing_file) == 0o600
    public = keys.decode_public_keys((d / "hub-public-keys.json").read_bytes())
    signer = keys.load_signing_key((d / "signing.key").read_text())
    assert [k.key_id for k in public.signing] == [keys.key_id(bytes(signer.verify_key))]
    assert public.newest_sealing().key_id == sealing_file.stem
    # The files work together: what the hub signs an agent verifies; what an agent seals the hub opens.
    verified = signing.verify(messages.encode(signing.sign(helpers.intent(), signer)), public.verify_keys())
    assert verified.name == "cp1"
    ring = sealing.Keyring([keys.load_sealing_key(sealing_file.read_text())])
    assert ring.open(sealing.seal(b"kc", public.newest_sealing()), key_id=sealing_file.stem) == b"kc"


def test_generate_is_idempotent(tmp_path: Path) -> None:
    first = keyfiles.generate(tmp_path)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    second = keyfiles.generate(tmp_path)
    assert second.created == () and second.signing_key_id == first.signing_key_id
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_rotation_keeps_old_public_keys(tmp_path: Path) -> None:
    first = keyfiles.generate(tmp_path)
    rotated = keyfiles.generate(tmp_path, rotate_signing=True, rotate_sealing=True)
    public = keys.decode_public_keys((tmp_path / "hub-public-keys.json").read_bytes())
    assert rotated.signing_key_id != first.signing_key_id
    assert [k.key_id for k in public.signing] == [first.signing_key_id, rotated.signing_key_id]
    assert len(public.sealing) == 2 and len(list((tmp_path / "sealing").glob("*.key"))) == 2
    assert public.newest_sealing().key_id == rotated.sealing_key_ids[-1]
    assert first.sealing_key_ids[0] in rotated.sealing_key_ids


def test_print_secret(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(
        ["keys", "generate", "--out", str(tmp_path), "--print-secret", "hub-keys", "--namespace", "kb"]
    )
    assert code == 0
    out, err = capsys.readouterr()
    manifest = yaml.safe_load(out)
    assert manifest["kind"] == "Secret" and manifest["metadata"] == {
        "name": "hub-keys",
        "labels": {"app.kubernetes.io/part-of": "kamaji-broker"},
        "namespace": "kb",
    }
    names = set(manifest["stringData"])
    assert {"signing.key", "hub-public-keys.json"} < names
    assert any(n.startswith("sealing-") for n in names) and not any("/" in n for n in names)
    # Key material goes to stdout only when asked, never to the log stream.
    assert (tmp_path / "signing.key").read_text().strip() not in err


# -- keys retire -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Rotated:
    """A key directory after one rotation of each kind: (old, current) signing and sealing ids."""

    out: Path
    old_signing: str
    signing: str
    old_sealing: str
    sealing: str


@pytest.fixture
def rotated(tmp_path: Path) -> Rotated:
    out = tmp_path / "keys"
    first = keyfiles.generate(out)
    second = keyfiles.generate(out, rotate_signing=True, rotate_sealing=True)
    [old_sealing] = first.sealing_key_ids
    [new_sealing] = set(second.sealing_key_ids) - {old_sealing}
    return Rotated(out, first.signing_key_id, second.signing_key_id, old_sealing, new_sealing)


def public_of(out: Path) -> keys.HubPublicKeys:
    return keys.decode_public_keys((out / keyfiles.PUBLIC_FILE).read_bytes())


def retire(out: Path, kid: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli.main(["keys", "retire", kid, "--out", str(out)])
    out_text, err = capsys.readouterr()
    assert out_text == ""  # nothing on stdout, ever: no key material to pipe anywhere
    return code, err


RETIRE_CASES = [
    # (id, which key id, exit code, what stderr says)
    ("old-signing", lambda r: r.old_signing, 0, "signing key id {kid} retired"),
    ("old-sealing", lambda r: r.old_sealing, 0, "sealing key id {kid} retired"),
    ("current-signing", lambda r: r.signing, 2, "key id {kid} is the current signing key"),
    ("current-sealing", lambda r: r.sealing, 2, "key id {kid} is the current sealing key"),
    ("unknown", lambda r: "0123456789abcdef", 2, "key id {kid} is not a key in"),
    ("not-a-key-id", lambda r: "../signing", 2, "'{kid}' is not a key id"),
    ("upper-case", lambda r: r.old_signing.upper(), 2, "'{kid}' is not a key id"),
    ("trailing-newline", lambda r: r.old_signing + "\n", 2, "is not a key id"),
]


@pytest.mark.parametrize(
    ("kid_of", "code", "says"), [c[1:] for c in RETIRE_CASES], ids=[c[0] for c in RETIRE_CASES]
)
def test_retire(
    rotated: Rotated,
    capsys: pytest.CaptureFixture[str],
    kid_of: Callable[[Rotated], str],
    code: int,
    says: str,
) -> None:
    kid = kid_of(rotated)
    before = public_of(rotated.out)
    files_before = sorted(p.name for p in rotated.out.rglob("*"))
    got, err = retire(rotated.out, kid, capsys)
    assert (got, says.format(kid=kid) in err) == (code, True), err
    after = public_of(rotated.out)
    if code != 0:
        assert after == before and sorted(p.name for p in rotated.out.rglob("*")) == files_before
        return
    assert after.retired == (kid,)
    assert kid not in after.trusted_key_ids() and kid not in {k.key_id for k in after.sealing}
    assert set(after.verify_keys()) == set(before.verify_keys()) - {kid}
    # What stays in use does not change: the hub signs and agents seal as before.
    assert after.newest_sealing().key_id == rotated.sealing and rotated.signing in after.verify_keys()
    assert not (rotated.out / "sealing" / f"{kid}.key").exists()
    for p in (rotated.out / "signing.key", *(rotated.out / "sealing").iterdir()):
        assert mode(p) == 0o600, p


def test_retiring_a_sealing_key_deletes_it_and_tells_the_hub(
    rotated: Rotated, capsys: pytest.CaptureFixture[str]
) -> None:
    old_file = rotated.out / "sealing" / f"{rotated.old_sealing}.key"
    code, err = retire(rotated.out, rotated.old_sealing, capsys)
    assert code == 0 and f"deleted {old_file}" in err
    assert keyfiles.read_retired(rotated.out / "sealing") == {rotated.old_sealing}
    ring = keyfiles.keyring(rotated.out / "sealing")
    assert ring.key_ids == {rotated.sealing} and ring.retired == {rotated.old_sealing}


def test_retire_is_idempotent(rotated: Rotated, capsys: pytest.CaptureFixture[str]) -> None:
    assert retire(rotated.out, rotated.old_sealing, capsys)[0] == 0
    after_first = {p: p.read_bytes() for p in rotated.out.rglob("*") if p.is_file()}
    code, err = retire(rotated.out, rotated.old_sealing, capsys)
    assert code == 0 and f"sealing key id {rotated.old_sealing} was already retired" in err
    assert {p: p.read_bytes() for p in rotated.out.rglob("*") if p.is_file()} == after_first


def test_a_restored_retired_key_is_refused_then_retired_again(
    rotated: Rotated, capsys: pytest.CaptureFixture[str]
) -> None:
    old_file = rotated.out / "sealing" / f"{rotated.old_sealing}.key"
    backup = old_file.read_text()
    assert retire(rotated.out, rotated.old_sealing, capsys)[0] == 0
    atomic.write_private(old_file, backup)  # restored from a backup
    code = cli.main(["keys", "generate", "--out", str(rotated.out)])
    assert code == 2 and f"{old_file}: holds retired key id {rotated.old_sealing}" in capsys.readouterr().err
    code, err = retire(rotated.out, rotated.old_sealing, capsys)
    assert code == 0 and f"deleted {old_file}" in err and "already retired" in err
    assert cli.main(["keys", "generate", "--out", str(rotated.out)]) == 0


def test_generate_and_rotate_keep_what_was_retired(rotated: Rotated) -> None:
    keyretire.retire(rotated.out, rotated.old_signing)
    keyretire.retire(rotated.out, rotated.old_sealing)
    again = keyfiles.generate(rotated.out, rotate_signing=True, rotate_sealing=True)
    public = public_of(rotated.out)
    assert public.retired == tuple(sorted((rotated.old_signing, rotated.old_sealing)))
    assert public.trusted_key_ids() == (rotated.signing, again.signing_key_id)
    assert rotated.old_sealing not in again.sealing_key_ids


def test_retire_in_a_directory_without_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = retire(tmp_path, "0123456789abcdef", capsys)
    assert code == 2 and f"{tmp_path / keyfiles.PUBLIC_FILE}: no such file" in err


@pytest.mark.parametrize("use", ["signing", "sealing"])
def test_the_only_key_of_a_kind_cannot_be_retired(
    use: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    made = keyfiles.generate(tmp_path)
    kid = made.signing_key_id if use == "signing" else made.sealing_key_ids[0]
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    code, err = retire(tmp_path, kid, capsys)
    assert code == 2 and f"key id {kid} is the current {use} key" in err and "rotate first" in err
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_a_directory_it_cannot_write_is_named_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As on a read-only root filesystem (tests/containers: EROFS): one line naming the path."""
    (tmp_path / "file").write_text("")
    out = tmp_path / "file" / "keys"
    assert cli.main(["keys", "generate", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err == f"kamaji-broker keys: error: {out}: Not a directory\n"
