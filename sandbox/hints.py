"""What the sandbox tells its user to try once every control plane is Ready: kubectl on the
management cluster and the sites, a tenant's kubeconfig from its CAPI Secret, ``kamaji-broker
status`` reading what the live view reads, and how to ask for one more control plane. Pure text
from a running ``sandbox.launcher.System``; ``sandbox.run`` prints it.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import yaml

from fleet import verdicts, view
from protocol import names
from sandbox import launcher, progress
from sandbox.launcher import workload

NAME = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
"""A name ``--print-cluster`` takes: an RFC 1035 label, which every object it names accepts."""

__all__ = ["another", "generated_yaml", "kubectl_commands", "print_ready", "status_command"]


def _quote(path: Path) -> str:
    return shlex.quote(str(path))


def kubectl_commands(t: launcher.System, snapshot: verdicts.Fleet) -> list[str]:
    """What to try once it is ready: RKCPs and Sites in the management cluster, TCPs at each site,
    a tenant kubeconfig read from its Secret (with the real Kamaji, kubectl with it)."""
    mgmt = _quote(t.mgmt_kubeconfig)
    lines = [f"kubectl --kubeconfig {mgmt} get rkcp -A", f"kubectl --kubeconfig {mgmt} get sites"]
    lines += [f"kubectl --kubeconfig {_quote(t.kubeconfig(s))} get tcp -n {t.namespace}" for s in t.sites]
    if snapshot.control_planes:
        cp = snapshot.control_planes[0]
        lines.append(
            f"kubectl --kubeconfig {mgmt} -n {cp.namespace} get secret {names.capi_kubeconfig(cp.cluster)} "
            f"-o jsonpath='{{.data.{names.CAPI_KUBECONFIG_KEY}}}' | base64 -d"
            + (f" > {_quote(t.directory / 'tenant.kubeconfig')}" if t.options.kamaji == "real" else "")
        )
        if t.options.kamaji == "real":
            lines.append(f"kubectl --kubeconfig {_quote(t.directory / 'tenant.kubeconfig')} get namespaces")
    return lines


def _program() -> list[str]:
    # Ready to paste means the program this very sandbox runs as: the console script (what
    # `make sandbox` runs), or the interpreter with -m (a checkout's tests run it so).
    if Path(sys.argv[0]).name == "kamaji-broker":
        return [shlex.quote(sys.argv[0])]
    return [shlex.quote(sys.executable), "-m", "kamaji_broker.cli"]


def status_command(t: launcher.System) -> str:
    """``kamaji-broker status`` on this sandbox, reading what the live view reads: the management
    cluster, and the bus with the observer's read-only credential."""
    return " ".join([
        *_program(), "status", "--kubeconfig", _quote(t.mgmt_kubeconfig),
        "--nats-url", shlex.quote(",".join(t.nats_urls)), "--nats-creds", _quote(t.observer_credential()),
        "--nats-ca-file", _quote(t.nats_ca_file),
    ])  # fmt: skip


def print_ready(
    t: launcher.System,
    snapshot: verdicts.Fleet,
    screen: progress.Screen,
    *,
    elapsed: float,
    staying: bool,
    topology: bool,
) -> None:
    count = len(snapshot.control_planes)
    screen.say("")
    where = f"{view.counted(count, 'control plane')} at {view.counted(len(t.sites), 'site')}"
    screen.say(f"Ready: {where} after {elapsed:.1f}s. Try:")
    screen.say("")
    for line in kubectl_commands(t, snapshot):
        screen.say(f"  {line}")
    screen.say("")
    screen.say("The fleet at a glance, sites and control planes, as this view reads it:")
    screen.say(f"  {status_command(t)}")
    screen.say("")
    screen.say(
        "One more control plane, the release's template rendered as clusterctl generate cluster would:"
    )
    screen.say(f"  {another(t, topology=topology)}")
    screen.say("")
    screen.say(f"Hub /readyz and /metrics: {t.hub_health_url}; logs: {t.logs_dir}/")
    if staying:
        screen.say("Running until Ctrl-C.")


def generated_yaml(name: str, *, site: str, sites: int, topology: bool, capi: str) -> str:
    """``kamaji-broker sandbox --print-cluster NAME --at SITE``: what ``clusterctl generate
    cluster NAME`` prints from the release's templates with the sandbox's values (``workload.
    generated``), for a user without clusterctl; ``ValueError`` naming the sites for another."""
    known = workload.site_names(sites)
    if site not in known:
        raise ValueError(f"--at {site}: the sandbox's sites are {', '.join(known)} (--sites {sites})")
    if not NAME.fullmatch(name):
        raise ValueError(
            f"--print-cluster {name!r}: a Cluster's name here is a DNS label (at most 63 lower-case "
            "letters, digits and '-', starting with a letter, ending with a letter or digit)"
        )
    made = workload.generated(
        name, namespace="default", site=site, target_namespace=launcher.Options().namespace,
        topology=topology, capi=capi,
    )  # fmt: skip
    named = [d["metadata"]["name"] for d in made if d["kind"] == "Cluster"]
    if named != [name]:  # substituted into YAML text, as clusterctl does: "yes" would read as true
        raise ValueError(f"--print-cluster {name}: YAML reads that name as {named[0]!r}; choose another")
    return yaml.safe_dump_all(made, sort_keys=False)


def another(t: launcher.System, *, topology: bool) -> str:
    """The command that asks this sandbox for one more control plane, as a user would."""
    flags = ["--sites", str(len(t.sites))]
    flags += ["--kubernetes", "real", "--capi", t.options.capi] if t.options.kubernetes == "real" else []
    flags += ["--topology"] if topology else []
    return " ".join([
        *_program(), "sandbox", *flags, "--print-cluster", "extra-1", "--at", t.sites[0],
        "|", "kubectl", "--kubeconfig", _quote(t.mgmt_kubeconfig), "apply", "-f", "-",
    ])  # fmt: skip
