"""The ``kamaji-broker`` command: one CLI for hub, agent, sandbox and the operator's tools.

commands/   the subcommands, one module each

cli          parsing and dispatch
flags        flags from the settings models, and the docs' flag tables (``python -m kamaji_broker.flags``)
kustomizing  a kustomization built as kubectl builds it
release      the clusterctl provider repository (``make release-manifests``)
sitefiles    the ``<site>.site.yaml``
"""

__version__ = "0.1.0"
