"""``kamaji-broker keys``: the hub's key pairs on disk.

    DIR/signing.key            current Ed25519 signing key (0600) — the hub's --signing-key
    DIR/sealing/<key-id>.key   X25519 sealing keys (0600), all kept for decryption — --sealing-keys
    DIR/hub-public-keys.json   what agents trust and seal to (--hub-public-keys): every signing
                               public key still trusted and every sealing public key

Generating is idempotent: existing keys are kept. ``--rotate-signing`` / ``--rotate-sealing``
add a new key while the old public keys stay listed, so agents accept intents signed before a
rotation and the hub still opens boxes sealed to an older key.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import yaml

from common import files
from protocol import keys

SIGNING_FILE = "signing.key"
SEALING_DIR = "sealing"
PUBLIC_FILE = "hub-public-keys.json"


@dataclass(frozen=True)
class Generated:
    signing_key_id: str
    sealing_key_ids: tuple[str, ...]
    created: tuple[str, ...]


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _existing_public(out: Path) -> keys.HubPublicKeys:
    path = out / PUBLIC_FILE
    return keys.decode_public_keys(path.read_bytes()) if path.exists() else keys.HubPublicKeys()


def generate(out: Path, *, rotate_signing: bool = False, rotate_sealing: bool = False) -> Generated:
    out.mkdir(parents=True, exist_ok=True)
    previous = _existing_public(out)
    known = {k.key_id: k for k in (*previous.signing, *previous.sealing)}
    created: list[str] = []

    signing_path = out / SIGNING_FILE
    if rotate_signing or not signing_path.exists():
        signing = keys.new_signing_key()
        files.write_private(signing_path, keys.to_text(bytes(signing)) + "\n")
        created.append(str(signing_path))
    else:
        signing = keys.load_signing_key(signing_path.read_text())
    signing_pub = bytes(signing.verify_key)

    sealing_dir = out / SEALING_DIR
    sealing_private = [keys.load_sealing_key(p.read_text()) for p in sorted(sealing_dir.glob("*.key"))]
    if rotate_sealing or not sealing_private:
        new = keys.new_sealing_key()
        path = sealing_dir / f"{keys.key_id(bytes(new.public_key))}.key"
        files.write_private(path, keys.to_text(bytes(new)) + "\n")
        sealing_private.append(new)
        created.append(str(path))

    def entry(raw: bytes) -> keys.PublicKey:
        kid = keys.key_id(raw)
        return known[kid] if kid in known else keys.public_entry(raw, created_at=_now())

    current = entry(signing_pub)
    signing_entries = (*[k for k in previous.signing if k.key_id != current.key_id], current)
    sealing_entries = tuple(
        sorted((entry(bytes(k.public_key)) for k in sealing_private), key=lambda k: (k.created_at, k.key_id))
    )
    public = keys.HubPublicKeys(signing=signing_entries, sealing=sealing_entries)
    files.write_public(out / PUBLIC_FILE, keys.encode_public_keys(public).decode())
    return Generated(
        signing_key_id=current.key_id,
        sealing_key_ids=tuple(k.key_id for k in sealing_entries),
        created=tuple(created),
    )


def secret_manifest(out: Path, *, name: str, namespace: str | None) -> str:
    """A Kubernetes Secret holding the hub's keys (Secret keys cannot contain '/', so the
    sealing keys are flattened to ``sealing-<key-id>.key``)."""
    data = {SIGNING_FILE: (out / SIGNING_FILE).read_text(), PUBLIC_FILE: (out / PUBLIC_FILE).read_text()}
    for p in sorted((out / SEALING_DIR).glob("*.key")):
        data[f"sealing-{p.name}"] = p.read_text()
    metadata: dict[str, object] = {"name": name, "labels": {"app.kubernetes.io/part-of": "kamaji-broker"}}
    if namespace:
        metadata["namespace"] = namespace
    manifest = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata,
        "type": "Opaque",
        "stringData": data,
    }
    return yaml.safe_dump(manifest, sort_keys=False)
