"""The embedded default: everything needed to run kamaji-broker on one machine.

Owns the Kubernetes API emulator (``sandbox.kubeapi``), the Kamaji simulator
(``sandbox.kamaji``), the embedded nats-server launcher (``sandbox.natsd``) and the
``kamaji-broker sandbox`` command. Production code never imports this package; only the
CLI and the tests do (import-linter enforces it).
"""
