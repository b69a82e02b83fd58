"""``kamaji-broker doctor hub|agent``: check a process's configuration, one line per check.

Takes exactly the flags and environment variables of ``kamaji-broker hub`` / ``agent`` (``-v``
shows the connection attempts' log lines on stderr), plus ``-o text|json`` (and, for the agent,
``--health-url``: where its /readyz is, when not at its ``--listen`` port here); runs
``hub.doctor`` / ``agent.doctor``'s checks and prints them (``common.doctor.results``). Exit 0
when nothing FAILs, 1 otherwise, 2 when the settings do not load (each bad flag reported as a
FAIL line).
"""

from __future__ import annotations

import argparse
import asyncio
import logging

from agent import doctor as agent_doctor
from agent.settings import AgentSettings
from common import logs
from common.doctor import results, running
from hub import doctor as hub_doctor
from hub.settings import HubSettings
from kamaji_broker import flags
from kamaji_broker.commands import processes

STEP_TIMEOUT = 30.0
"""Seconds one check may take (an API server or a NATS server that does not answer)."""
_ROLES = ("hub", "agent")


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    doctor = sub.add_parser(
        "doctor",
        help="check a hub's or an agent's configuration (NATS, TLS, credentials, permissions, "
        "consumer, keys, Kubernetes, RBAC, CRDs) and whether the agent runs (heartbeat, /readyz), "
        "each with a fix hint",
        description="Run with the same flags and environment variables as the process.",
    )
    roles = doctor.add_subparsers(dest="role", required=True, metavar="ROLE")
    for role in _ROLES:
        p = roles.add_parser(
            role,
            help=f"check `kamaji-broker {role}`'s configuration",
            description=f"Every flag of `kamaji-broker {role}`, with its environment variable "
            "(in brackets). Changes nothing: reads, and probes permissions without publishing data.",
        )
        flags.add(p, HubSettings if role == "hub" else AgentSettings)
        if role == "agent":
            p.add_argument(
                "--health-url",
                metavar="URL",
                help="where the running agent serves /readyz, for doctor to ask it (default: "
                "http://127.0.0.1:<port of --listen>, right when doctor runs in the agent's pod)",
            )
        processes.add_verbose(p)
        p.add_argument("-o", "--output", choices=("text", "json"), default="text", help="(default: text)")


def run(args: argparse.Namespace) -> int:
    # The report is the output: the connection attempts' own log lines would only repeat it,
    # unless asked for with -v (on stderr, as the process logs them).
    logs.configure(level="info" if args.verbose else "critical", log_format="text", verbosity=args.verbose)
    if not args.verbose:
        logging.getLogger("nats").setLevel(logging.CRITICAL)
    model: type[HubSettings] | type[AgentSettings] = HubSettings if args.role == "hub" else AgentSettings
    try:
        settings: HubSettings | AgentSettings = flags.load(model, args)
    except flags.SettingsError as exc:
        prefix = str(model.model_config.get("env_prefix") or "")
        _print(results.from_settings_error(str(exc), env_prefix=prefix), args.output)
        return 2
    found = [results.passed(results.SETTINGS, "flags and environment load")]
    found += asyncio.run(_diagnose(settings, health_url=getattr(args, "health_url", None)))
    _print(found, args.output)
    return results.exit_code(found)


async def _diagnose(settings: HubSettings | AgentSettings, *, health_url: str | None) -> list[results.Result]:
    doctor = (
        hub_doctor.HubDoctor(settings)
        if isinstance(settings, HubSettings)
        else agent_doctor.AgentDoctor(settings, health_url=health_url)
    )
    try:
        return await running.run(doctor.steps(), timeout=STEP_TIMEOUT)
    finally:
        await doctor.close()


def _print(found: list[results.Result], output: str) -> None:
    print(results.render_json(found) if output == "json" else results.render_text(found), end="")
