"""``python -m sandbox.kamaji --kubeconfig PATH``: run the Kamaji simulator against one cluster.

Runs until SIGINT or SIGTERM. ``--install-crds`` first installs the sandbox's compact
TenantControlPlane CRD (for a cluster that has none yet).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from collections.abc import Sequence

from common import kube
from sandbox import crds as crd_files
from sandbox.kamaji import crds, simulator


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sandbox.kamaji", description=__doc__)
    parser.add_argument("--kubeconfig", required=True, help="kubeconfig of the cluster to act on")
    parser.add_argument(
        "--ready-delay", type=float, default=3.0, help="seconds until a TCP becomes Ready (default 3)"
    )
    parser.add_argument(
        "--delete-delay",
        type=float,
        default=0.0,
        help="seconds before the finalizer of a deleted TCP is removed (default 0)",
    )
    parser.add_argument(
        "--address-pool",
        default="10.240.0.0/16",
        help="network the endpoints of TCPs without spec.networkProfile.address come from",
    )
    parser.add_argument("--install-crds", action="store_true", help="install the compact TCP CRD first")
    parser.add_argument("--log-level", default="INFO")
    return parser


async def _run(args: argparse.Namespace) -> None:
    api_client = await kube.api_client_from_kubeconfig(args.kubeconfig)
    try:
        if args.install_crds:
            await crds.install(api_client, [crd_files.TENANT_CONTROL_PLANE])
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        sim = simulator.Simulator(
            api_client,
            ready_delay=args.ready_delay,
            delete_delay=args.delete_delay,
            address_pool=args.address_pool,
        )
        async with sim:
            logging.getLogger(__name__).info("kamaji simulator running against %s", args.kubeconfig)
            await stop.wait()
    finally:
        await api_client.close()


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    asyncio.run(_run(args))


if __name__ == "__main__":
    main()
