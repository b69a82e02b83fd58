"""``kamaji-broker keys generate|retire``: the hub's key pairs, through ``common.files.keys``
and ``common.files.retire``.

Reports go to stderr; stdout carries only the Secret manifest of ``--print-secret``, which holds
the private keys and exists to do exactly that.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from common.files import keys as keyfiles
from common.files import retire


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    keys = sub.add_parser("keys", help="hub key pairs (signing and sealing)")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True, metavar="ACTION")
    gen = keys_sub.add_parser("generate", help="create the hub's key pairs (idempotent)")
    gen.add_argument("--out", required=True, type=Path, help="directory for the key files")
    gen.add_argument(
        "--rotate-signing", action="store_true", help="add a new signing key (old one stays trusted)"
    )
    gen.add_argument(
        "--rotate-sealing", action="store_true", help="add a new sealing key (old ones stay usable)"
    )
    gen.add_argument("--print-secret", metavar="NAME", help="print a Kubernetes Secret manifest named NAME")
    gen.add_argument("--namespace", help="namespace of the printed Secret")
    ret = keys_sub.add_parser(
        "retire",
        help="stop trusting a key id for good (after a rotation; deletes a sealing key's private file)",
        description="Remove KID from the keys agents trust and the hub opens, and list it as retired "
        "(agents refuse intents it signed, the hub boxes sealed to it). The current signing and "
        "sealing keys cannot be retired: rotate first. Then redeploy the hub's Secrets and the "
        "agents' hub-public-keys.json (deploy/README.md, 'Key rotation after a compromise').",
    )
    ret.add_argument("kid", metavar="KID", help="the key id (16 hex digits, as `keys generate` prints)")
    ret.add_argument("--out", required=True, type=Path, help="the key directory of `keys generate`")


def run(args: argparse.Namespace) -> int:
    if args.keys_command == "retire":
        return _retire(args)
    result = keyfiles.generate(
        args.out, rotate_signing=args.rotate_signing, rotate_sealing=args.rotate_sealing
    )
    for path in result.created:
        print(f"created {path}", file=sys.stderr)
    print(
        f"signing key id {result.signing_key_id}; sealing key ids {', '.join(result.sealing_key_ids)}",
        file=sys.stderr,
    )
    print(f"agents trust {args.out / keyfiles.PUBLIC_FILE} (--hub-public-keys)", file=sys.stderr)
    if args.print_secret:
        sys.stdout.write(keyfiles.secret_manifest(args.out, name=args.print_secret, namespace=args.namespace))
    return 0


def _retire(args: argparse.Namespace) -> int:
    retired = retire.retire(args.out, args.kid)
    for path in retired.removed:
        print(f"deleted {path}", file=sys.stderr)
    state = "was already retired" if retired.already else "retired"
    print(f"{retired.use} key id {retired.key_id} {state}", file=sys.stderr)
    print(
        f"it takes effect as the hub's key Secrets and every agent's {keyfiles.PUBLIC_FILE} are "
        f"redeployed from {args.out} (deploy/README.md: 'Key rotation after a compromise')",
        file=sys.stderr,
    )
    return 0
