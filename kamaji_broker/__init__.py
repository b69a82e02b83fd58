"""The ``kamaji-broker`` command: one CLI for hub, agent, sandbox and the operator's tools."""

__version__ = "0.1.0"
