"""``kamaji-broker``: argument parsing and dispatch for every subcommand.

Operator tools (``keys``, ``site``, ``nats-config``, ``observer``) act on files (``observer
revoke`` also on the servers' account), ``status`` reads the fleet; ``hub``, ``agent`` and
``sandbox`` run the long-lived processes. Each subcommand's flags and work live in its module
of ``kamaji_broker.commands``; this module builds the parser from them and maps what fails to
an exit code. Errors in what the user typed are reported naming the
flag or value, with exit code 2; nothing prints secret material except ``keys generate
--print-secret``, which exists to do exactly that (to stdout only).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from common import logs
from common.kube import errors as kube_errors
from kamaji_broker import __version__, flags
from kamaji_broker.commands import doctor, keys, nats_config, observer, processes, site, status
from protocol import errors as protocol_errors

HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {
    "keys": keys.run,
    "site": site.run,
    "nats-config": nats_config.run,
    "observer": observer.run,
    "sandbox": processes.sandbox,
    "agent": processes.agent,
    "hub": processes.hub,
    "status": status.run,
    "doctor": doctor.run,
}
"""Each subcommand's ``run``, by the name it is typed with."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kamaji-broker",
        description="Run Kamaji control planes in remote sites, driven by Cluster API over NATS JetStream.",
    )
    p.add_argument("--version", action="version", version=f"kamaji-broker {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    processes.add(sub)
    keys.add(sub)
    site.add(sub)
    nats_config.add(sub)
    observer.add(sub)
    status.add(sub)
    doctor.add(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # Warnings and errors of the libraries, as text (the processes reconfigure for themselves).
    logs.configure(level="warning", log_format="text")
    try:
        return HANDLERS[args.command](args)
    except flags.SettingsError as exc:
        for line in str(exc).splitlines():
            print(f"kamaji-broker {args.command}: error: {line}", file=sys.stderr)
        return 2
    except kube_errors.KubeError as exc:
        print(f"kamaji-broker {args.command}: error: the management cluster: {exc}", file=sys.stderr)
        return 1
    except (protocol_errors.ProtocolError, ValueError, FileNotFoundError) as exc:
        print(f"kamaji-broker {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a path it cannot write: read-only root, not a directory, no space
        if exc.filename is None:  # not about a file (a socket, an address in use): as it is
            raise
        print(f"kamaji-broker {args.command}: error: {exc.filename}: {exc.strerror or exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
