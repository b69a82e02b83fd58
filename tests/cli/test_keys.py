"""`kamaji-broker keys generate`: files, modes, idempotence, rotation, the Secret manifest."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
import yaml

from common import keyfiles
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
