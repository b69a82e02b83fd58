"""``python -m sandbox.kubeapi``: run one emulated cluster until Ctrl-C.

Prints the URL, writes the kubeconfig, loads the given CRD files.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from pathlib import Path

from sandbox.kubeapi.server import Server


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sandbox.kubeapi", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port (0: a free one)")
    parser.add_argument("--kubeconfig", required=True, help="where to write the kubeconfig")
    parser.add_argument("--name", default="sandbox", help="cluster, user and context name")
    parser.add_argument("--crd", action="append", default=[], help="a YAML file of CRDs to load (repeatable)")
    parser.add_argument("--history", type=int, default=10_000, help="watch history window, in events")
    parser.add_argument(
        "--token-auth-file",
        type=Path,
        help='kube-apiserver\'s static token CSV (token,user,uid,"group1,group2"): users for '
        "SelfSubjectAccessReviews (RBAC); without a listed token a request is the admin",
    )
    return parser


async def _run(args: argparse.Namespace) -> None:
    server = Server(args.name, history=args.history, token_auth_file=args.token_auth_file)
    server.apply_crd_files(args.crd)
    await server.start(port=args.port, host=args.host)
    path = server.write_kubeconfig(args.kubeconfig)
    print(f"{server.url} (kubeconfig: {path})", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await server.stop()


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    asyncio.run(_run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
