"""``kamaji-broker keys``: the hub's key pairs on disk, and reading them back for hub and agent.

    DIR/signing.key            current Ed25519 signing key (0600) — the hub's --signing-key
    DIR/sealing/<key-id>.key   X25519 sealing keys (0600), all kept for decryption — --sealing-keys
    DIR/sealing/retired.json   ids of retired sealing keys: the hub refuses boxes sealed to them
    DIR/hub-public-keys.json   what agents trust and seal to (--hub-public-keys): every signing
                               public key still trusted, every sealing public key, retired ids

Generating is idempotent: existing keys are kept. ``--rotate-signing`` / ``--rotate-sealing``
add a new key while the old public keys stay listed, so agents accept intents signed before a
rotation and the hub still opens boxes sealed to an older key. ``retire`` ends that for one key
id: it leaves the trusted lists, joins ``retired`` (agents refuse it by name), and a sealing
key's private file is deleted. The current keys (what the hub signs with, what agents seal to)
cannot be retired: rotate first.

Reading a private key checks its file first: a key others may read is refused, naming the file
(group read is tolerated where ``group_ok``: Kubernetes mounts Secrets 0440 with an fsGroup).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import stat
from dataclasses import dataclass
from pathlib import Path

import nacl.public
import nacl.signing
import yaml

from common import files
from protocol import errors, keys, sealing

log = logging.getLogger(__name__)

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


@dataclass(frozen=True)
class Retired:
    key_id: str
    use: keys.Use
    removed: tuple[str, ...]
    """Private key files deleted by this call."""
    already: bool
    """The key id was retired before (the call only made sure its file is gone)."""


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


def _read_private(path: Path, what: str, *, group_ok: bool) -> bytes:
    check_private(path, group_ok=group_ok)
    try:
        return keys.from_text(path.read_text(), what=what)
    except (errors.SealError, UnicodeDecodeError) as exc:
        reason = str(exc) if isinstance(exc, errors.SealError) else f"{what}: not text"
        raise KeyFileError(f"{path}: {reason}") from None


def read_signing_key(path: Path, *, group_ok: bool = False) -> nacl.signing.SigningKey:
    return nacl.signing.SigningKey(_read_private(path, "signing key", group_ok=group_ok))


def read_sealing_keys(directory: Path, *, group_ok: bool = False) -> dict[str, nacl.public.PrivateKey]:
    """Every ``<key-id>.key`` of ``directory`` by key id; a file named after another key is refused."""
    found: dict[str, nacl.public.PrivateKey] = {}
    for path in sorted(directory.glob("*.key")):
        private = nacl.public.PrivateKey(_read_private(path, "sealing key", group_ok=group_ok))
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


def _write_public(out: Path, public: keys.HubPublicKeys) -> None:
    files.write_public(out / PUBLIC_FILE, keys.encode_public_keys(public).decode())


def _write_retired(sealing_dir: Path, retired: frozenset[str]) -> None:
    # Not secret, but it travels with the sealing keys (the same Secret), so it is kept like them.
    files.write_private(sealing_dir / RETIRED_FILE, json.dumps({"retired": sorted(retired)}, indent=2) + "\n")


def generate(out: Path, *, rotate_signing: bool = False, rotate_sealing: bool = False) -> Generated:
    out.mkdir(parents=True, exist_ok=True)
    previous = _existing_public(out)
    retired = set(previous.retired)
    known = {k.key_id: k for k in (*previous.signing, *previous.sealing)}
    created: list[str] = []

    signing_path = out / SIGNING_FILE
    if rotate_signing or not signing_path.exists():
        signing = keys.new_signing_key()
        files.write_private(signing_path, keys.to_text(bytes(signing)) + "\n")
        created.append(str(signing_path))
    else:
        signing = read_signing_key(signing_path)
    signing_pub = bytes(signing.verify_key)
    if keys.key_id(signing_pub) in retired:
        raise KeyFileError(f"{signing_path}: holds retired key id {keys.key_id(signing_pub)}; rotate it")

    sealing_dir = out / SEALING_DIR
    sealing_private = read_sealing_keys(sealing_dir)
    for kid in sorted(retired & set(sealing_private)):
        # Restored from a backup? A retired key never comes back into use.
        raise KeyFileError(
            f"{sealing_dir / f'{kid}.key'}: holds retired key id {kid}; "
            f"delete it (kamaji-broker keys retire {kid})"
        )
    if rotate_sealing or not sealing_private:
        new = keys.new_sealing_key()
        kid = keys.key_id(bytes(new.public_key))
        path = sealing_dir / f"{kid}.key"
        files.write_private(path, keys.to_text(bytes(new)) + "\n")
        sealing_private[kid] = new
        created.append(str(path))

    def entry(raw: bytes) -> keys.PublicKey:
        kid = keys.key_id(raw)
        return known[kid] if kid in known else keys.public_entry(raw, created_at=_now())

    current = entry(signing_pub)
    signing_entries = (*[k for k in previous.signing if k.key_id != current.key_id], current)
    sealing_entries = tuple(
        sorted(
            (entry(bytes(k.public_key)) for k in sealing_private.values()),
            key=lambda k: (k.created_at, k.key_id),
        )
    )
    public = keys.HubPublicKeys(signing=signing_entries, sealing=sealing_entries, retired=previous.retired)
    _write_public(out, public)
    return Generated(
        signing_key_id=current.key_id,
        sealing_key_ids=tuple(k.key_id for k in sealing_entries),
        created=tuple(created),
    )


def retire(out: Path, key_id: str) -> Retired:
    """Stop trusting ``key_id`` for good: out of the trusted lists, into ``retired``, and for a
    sealing key its private file deleted. Idempotent; refuses the keys in current use."""
    if not keys.is_key_id(key_id):
        raise KeyFileError(f"{key_id!r} is not a key id (16 hex digits, as `keys generate` prints)")
    public_path = out / PUBLIC_FILE
    if not public_path.exists():
        raise KeyFileError(f"{public_path}: no such file (is {out} a directory made by `keys generate`?)")
    public = load_public_keys(public_path)
    sealing_dir = out / SEALING_DIR
    private_file = sealing_dir / f"{key_id}.key"
    signing_ids = {k.key_id for k in public.signing}
    sealing_ids = {k.key_id for k in public.sealing} | ({key_id} if private_file.exists() else set())

    if key_id in public.retired:
        removed = _remove(private_file)
        was_sealing = key_id in sealing_ids or key_id in read_retired(sealing_dir)
        use: keys.Use = "sealing" if was_sealing else "signing"
        if use == "sealing":
            _write_retired(sealing_dir, read_retired(sealing_dir) | {key_id})
        _write_public(out, _without(public, key_id))
        return Retired(key_id=key_id, use=use, removed=removed, already=True)

    if key_id in signing_ids:
        current = keys.key_id(bytes(read_signing_key(out / SIGNING_FILE).verify_key))
        if key_id == current:
            raise KeyFileError(
                f"key id {key_id} is the current signing key ({out / SIGNING_FILE}): rotate first "
                "(keys generate --rotate-signing), roll the hub, then retire it"
            )
        _write_public(out, _without(public, key_id))
        return Retired(key_id=key_id, use="signing", removed=(), already=False)

    if key_id in sealing_ids:
        listed = [k for k in public.sealing if k.key_id not in public.retired]
        if not listed or public.newest_sealing().key_id == key_id:
            raise KeyFileError(
                f"key id {key_id} is the current sealing key (agents seal to it): rotate first "
                "(keys generate --rotate-sealing), roll the agents, then retire it"
            )
        # Public file and tombstone first, the private file last: a crash in between leaves a
        # retired id whose file a second `retire` removes.
        _write_public(out, _without(public, key_id))
        _write_retired(sealing_dir, read_retired(sealing_dir) | {key_id})
        return Retired(key_id=key_id, use="sealing", removed=_remove(private_file), already=False)

    known = sorted(signing_ids | sealing_ids)
    raise KeyFileError(f"key id {key_id} is not a key in {out} (known: {', '.join(known) or 'none'})")


def _without(public: keys.HubPublicKeys, key_id: str) -> keys.HubPublicKeys:
    return keys.HubPublicKeys(
        signing=tuple(k for k in public.signing if k.key_id != key_id),
        sealing=tuple(k for k in public.sealing if k.key_id != key_id),
        retired=tuple(sorted({*public.retired, key_id})),
    )


def _remove(path: Path) -> tuple[str, ...]:
    if not path.exists():
        return ()
    path.unlink()
    return (str(path),)


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
