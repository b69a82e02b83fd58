"""``kamaji-broker keys retire``: stop trusting one hub key id for good.

The key id leaves the trusted lists of ``hub-public-keys.json`` and joins ``retired`` there
(agents refuse it by name); a sealing key's id also goes into ``sealing/retired.json`` (the hub
refuses boxes sealed to it) and its private file is deleted. Idempotent. The keys in current use
(what the hub signs with, what agents seal to) cannot be retired: rotate first. Works on the
files ``common.files.keys`` lays out and reads.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from common.files import atomic
from common.files import keys as keyfiles
from protocol import keys


@dataclass(frozen=True)
class Retired:
    key_id: str
    use: keys.Use
    removed: tuple[str, ...]
    """Private key files deleted by this call."""
    already: bool
    """The key id was retired before (the call only made sure its file is gone)."""


def retire(out: Path, key_id: str) -> Retired:
    """Stop trusting ``key_id`` for good: out of the trusted lists, into ``retired``, and for a
    sealing key its private file deleted. Idempotent; refuses the keys in current use."""
    public = _public_keys(out, key_id)
    sealing_dir = out / keyfiles.SEALING_DIR
    private_file = sealing_dir / f"{key_id}.key"
    signing_ids = {k.key_id for k in public.signing}
    sealing_ids = {k.key_id for k in public.sealing} | ({key_id} if private_file.exists() else set())

    if key_id in public.retired:
        removed = _remove(private_file)
        was_sealing = key_id in sealing_ids or key_id in keyfiles.read_retired(sealing_dir)
        use: keys.Use = "sealing" if was_sealing else "signing"
        if use == "sealing":
            _write_retired(sealing_dir, keyfiles.read_retired(sealing_dir) | {key_id})
        keyfiles.write_public_keys(out, _without(public, key_id))
        return Retired(key_id=key_id, use=use, removed=removed, already=True)

    if key_id in signing_ids:
        current = keys.key_id(bytes(keyfiles.read_signing_key(out / keyfiles.SIGNING_FILE).verify_key))
        if key_id == current:
            raise keyfiles.KeyFileError(
                f"key id {key_id} is the current signing key ({out / keyfiles.SIGNING_FILE}): rotate first "
                "(keys generate --rotate-signing), roll the hub, then retire it"
            )
        keyfiles.write_public_keys(out, _without(public, key_id))
        return Retired(key_id=key_id, use="signing", removed=(), already=False)

    if key_id in sealing_ids:
        listed = [k for k in public.sealing if k.key_id not in public.retired]
        if not listed or public.newest_sealing().key_id == key_id:
            raise keyfiles.KeyFileError(
                f"key id {key_id} is the current sealing key (agents seal to it): rotate first "
                "(keys generate --rotate-sealing), roll the agents, then retire it"
            )
        # Public file and tombstone first, the private file last: a crash in between leaves a
        # retired id whose file a second `retire` removes.
        keyfiles.write_public_keys(out, _without(public, key_id))
        _write_retired(sealing_dir, keyfiles.read_retired(sealing_dir) | {key_id})
        return Retired(key_id=key_id, use="sealing", removed=_remove(private_file), already=False)

    known = sorted(signing_ids | sealing_ids)
    raise keyfiles.KeyFileError(
        f"key id {key_id} is not a key in {out} (known: {', '.join(known) or 'none'})"
    )


def _public_keys(out: Path, key_id: str) -> keys.HubPublicKeys:
    """The public keys of ``out``, once ``key_id`` is known to be a key id and the file is there."""
    if not keys.is_key_id(key_id):
        raise keyfiles.KeyFileError(f"{key_id!r} is not a key id (16 hex digits, as `keys generate` prints)")
    public_path = out / keyfiles.PUBLIC_FILE
    if not public_path.exists():
        raise keyfiles.KeyFileError(
            f"{public_path}: no such file (is {out} a directory made by `keys generate`?)"
        )
    return keyfiles.load_public_keys(public_path)


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


def _write_retired(sealing_dir: Path, retired: frozenset[str]) -> None:
    # Not secret, but it travels with the sealing keys (the same Secret), so it is kept like them.
    atomic.write_private(
        sealing_dir / keyfiles.RETIRED_FILE, json.dumps({"retired": sorted(retired)}, indent=2) + "\n"
    )
