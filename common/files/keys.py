"""``kamaji-broker keys``: the hub's key pairs on disk, and reading them back for hub and agent.

    DIR/signing.key            current Ed25519 signing key (0600) — the hub's --signing-key
    DIR/sealing/<key-id>.key   X25519 sealing keys (0600), all kept for decryption — --sealing-keys
    DIR/sealing/retired.json   ids of retired sealing keys: the hub refuses boxes sealed to them
    DIR/hub-public-keys.json   what agents trust and seal to (--hub-public-keys): every signing
                               public key still trusted, every sealing public key, retired ids

Generating is idempotent: existing keys are kept. ``--rotate-signing`` / ``--rotate-sealing``
add a new key while the old public keys stay listed, so agents accept intents signed before a
rotation and the hub still opens boxes sealed to an older key. ``common.files.retire`` ends that
for one key id (it leaves the trusted lists and joins ``retired``). ``secret_manifest`` prints
the keys as the hub's Kubernetes Secret.

Reading a private key checks its file first: a key others may read is refused, naming the file
(group read is tolerated where ``group_ok``: Kubernetes mounts Secrets 0440 with an fsGroup).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import nacl.public
import nacl.signing
import yaml

from common.files import atomic
from protocol import errors, keys, sealing

log = logging.getLogger(__name__)

_Key = TypeVar("_Key", nacl.signing.SigningKey, nacl.public.PrivateKey)

SIGNING_FILE = "signing.key"
SEALING_DIR = "sealing"
PUBLIC_FILE = "hub-public-keys.json"
RETIRED_FILE = "retired.json"


class KeyFileError(ValueError):
    """A key file that cannot be used (permissions, content) or a key operation refused; the
    message names the file or the key id, never key material."""


@dataclass(frozen=True)
class Generated:
    signing_key_id: str
    sealing_key_ids: tuple[str, ...]
    created: tuple[str, ...]


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


# -- reading ---------------------------------------------------------------------------------


def check_private(path: Path, *, group_ok: bool = False) -> None:
    """Refuse a private key file others may read or write (and the group, unless ``group_ok``)."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        raise KeyFileError(f"{path}: no such key file") from None
    wide = mode & (0o007 if group_ok else 0o077)
    if wide:
        raise KeyFileError(
            f"{path}: permissions {mode:04o} let {'others' if wide & 0o007 else 'the group'} "
            f"at a private key; chmod 600 {path}"
        )


def _read_private(path: Path, load: Callable[[str], _Key], what: str, *, group_ok: bool) -> _Key:
    """``load`` (``protocol.keys``) of the private key file at ``path``, checked first."""
    check_private(path, group_ok=group_ok)
    try:
        return load(path.read_text())
    except (errors.SealError, UnicodeDecodeError) as exc:
        reason = str(exc) if isinstance(exc, errors.SealError) else f"{what}: not text"
        raise KeyFileError(f"{path}: {reason}") from None


def read_signing_key(path: Path, *, group_ok: bool = False) -> nacl.signing.SigningKey:
    return _read_private(path, keys.load_signing_key, "signing key", group_ok=group_ok)


def read_sealing_keys(directory: Path, *, group_ok: bool = False) -> dict[str, nacl.public.PrivateKey]:
    """Every ``<key-id>.key`` of ``directory`` by key id; a file named after another key is refused."""
    found: dict[str, nacl.public.PrivateKey] = {}
    for path in sorted(directory.glob("*.key")):
        private = _read_private(path, keys.load_sealing_key, "sealing key", group_ok=group_ok)
        kid = keys.key_id(bytes(private.public_key))
        if path.stem != kid:
            raise KeyFileError(f"{path}: holds key id {kid}, not {path.stem}")
        found[kid] = private
    return found


def read_retired(directory: Path) -> frozenset[str]:
    """The retired sealing key ids listed in ``directory/retired.json`` (none when absent)."""
    path = directory / RETIRED_FILE
    if not path.exists():
        return frozenset()
    try:
        ids = json.loads(path.read_text())["retired"]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise KeyFileError(f'{path}: not {{"retired": [key ids]}}') from None
    if not isinstance(ids, list) or not all(isinstance(k, str) and keys.is_key_id(k) for k in ids):
        raise KeyFileError(f"{path}: retired must be a list of key ids (16 hex digits)")
    return frozenset(ids)


def keyring(directory: Path) -> sealing.Keyring:
    """The hub's keyring from ``--sealing-keys``: its keys minus the retired ones."""
    retired = read_retired(directory)
    private = read_sealing_keys(directory, group_ok=True)
    for kid in sorted(retired & set(private)):
        # The Secret was updated without pruning (kubectl apply keeps entries it did not create).
        log.warning(
            "sealing key %s is retired but %s is still there: not using it; delete it",
            kid,
            directory / f"{kid}.key",
        )
    return sealing.Keyring(private.values(), retired=retired)


def load_public_keys(path: Path) -> keys.HubPublicKeys:
    """An agent's ``--hub-public-keys``, errors naming the file."""
    try:
        return keys.decode_public_keys(path.read_bytes())
    except errors.DecodeError as exc:
        raise KeyFileError(f"{path}: {exc}") from None


def _existing_public(out: Path) -> keys.HubPublicKeys:
    path = out / PUBLIC_FILE
    return load_public_keys(path) if path.exists() else keys.HubPublicKeys()


# -- writing ---------------------------------------------------------------------------------


def write_public_keys(out: Path, public: keys.HubPublicKeys) -> None:
    """``out/hub-public-keys.json``: what agents trust and seal to."""
    atomic.write_public(out / PUBLIC_FILE, keys.encode_public_keys(public).decode())


def generate(out: Path, *, rotate_signing: bool = False, rotate_sealing: bool = False) -> Generated:
    """Make the keys missing in ``out`` (or a new one with ``rotate_*``) and list every public
    key still trusted; see the module docstring."""
    out.mkdir(parents=True, exist_ok=True)
    previous = _existing_public(out)
    retired = frozenset(previous.retired)
    created: list[str] = []
    signing = _signing_key(out / SIGNING_FILE, rotate=rotate_signing, retired=retired, created=created)
    sealers = _sealing_keys(out / SEALING_DIR, rotate=rotate_sealing, retired=retired, created=created)
    public = _public_keys(previous, bytes(signing.verify_key), sealers)
    write_public_keys(out, public)
    return Generated(
        signing_key_id=public.signing[-1].key_id,
        sealing_key_ids=tuple(k.key_id for k in public.sealing),
        created=tuple(created),
    )


def _signing_key(
    path: Path, *, rotate: bool, retired: frozenset[str], created: list[str]
) -> nacl.signing.SigningKey:
    """The signing key in ``path``, new when asked or missing (its file appended to ``created``)."""
    if rotate or not path.exists():
        signing = keys.new_signing_key()
        atomic.write_private(path, keys.to_text(bytes(signing)) + "\n")
        created.append(str(path))
    else:
        signing = read_signing_key(path)
    kid = keys.key_id(bytes(signing.verify_key))
    if kid in retired:
        raise KeyFileError(f"{path}: holds retired key id {kid}; rotate it")
    return signing


def _sealing_keys(
    directory: Path, *, rotate: bool, retired: frozenset[str], created: list[str]
) -> dict[str, nacl.public.PrivateKey]:
    """The sealing keys in ``directory`` by key id, plus a new one when asked or there is none."""
    private = read_sealing_keys(directory)
    for kid in sorted(retired & set(private)):
        # Restored from a backup? A retired key never comes back into use.
        raise KeyFileError(
            f"{directory / f'{kid}.key'}: holds retired key id {kid}; "
            f"delete it (kamaji-broker keys retire {kid})"
        )
    if rotate or not private:
        new = keys.new_sealing_key()
        kid = keys.key_id(bytes(new.public_key))
        path = directory / f"{kid}.key"
        atomic.write_private(path, keys.to_text(bytes(new)) + "\n")
        private[kid] = new
        created.append(str(path))
    return private


def _public_keys(
    previous: keys.HubPublicKeys, signing: bytes, sealers: dict[str, nacl.public.PrivateKey]
) -> keys.HubPublicKeys:
    """The public keys to list: the earlier signing keys, then ``signing`` (the current one, last),
    and every sealing key, oldest first. A key listed before keeps its entry (and creation time)."""
    known = {k.key_id: k for k in (*previous.signing, *previous.sealing)}

    def entry(raw: bytes) -> keys.PublicKey:
        kid = keys.key_id(raw)
        return known[kid] if kid in known else keys.public_entry(raw, created_at=_now())

    current = entry(signing)
    signing_entries = (*[k for k in previous.signing if k.key_id != current.key_id], current)
    sealing_entries = tuple(
        sorted((entry(bytes(k.public_key)) for k in sealers.values()), key=lambda k: (k.created_at, k.key_id))
    )
    return keys.HubPublicKeys(signing=signing_entries, sealing=sealing_entries, retired=previous.retired)


def secret_manifest(out: Path, *, name: str, namespace: str | None) -> str:
    """A Kubernetes Secret holding the hub's keys (Secret keys cannot contain '/', so the
    sealing keys are flattened to ``sealing-<key-id>.key``). Retired keys are not in it: their
    files are gone, and the public keys list them as retired only."""
    data = {SIGNING_FILE: (out / SIGNING_FILE).read_text(), PUBLIC_FILE: (out / PUBLIC_FILE).read_text()}
    retired = read_retired(out / SEALING_DIR)
    for p in sorted((out / SEALING_DIR).glob("*.key")):
        if p.stem not in retired:
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
