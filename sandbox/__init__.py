"""The embedded default: everything needed to run kamaji-broker on one machine.

Owns the Kubernetes API emulator (``sandbox.kubeapi``), the Kamaji simulator
(``sandbox.kamaji``), the embedded nats-server launcher (``sandbox.natsd``) and the
``kamaji-broker sandbox`` command. Production code never imports this package; only the
CLI and the tests do (import-linter enforces it).

capi/        the Cluster API stand-in and a stand-in infrastructure provider
crds/        the CRDs the emulated clusters are given
kamaji/      the Kamaji simulator
kubeapi/     the Kubernetes API emulator
launcher/    the whole system as processes
realcapi/    Cluster API's own controllers on a real management cluster
realkamaji/  a site with the real Kamaji operator
realkube/    real Kubernetes clusters from the binaries built from Go modules
sitenet/     a site's network namespace

hints        what its Ready screen says to try, and ``--print-cluster``'s generated objects
natsd        the embedded nats-server
natsmonitor  its /jsz
ports        listener ports that two runs side by side do not collide on
processes    one child process (of the system, and of the real clusters beside it)
templating   clusterctl's ``${VAR:=default}`` substitution
progress     how far the control planes are
run          the ``sandbox`` command
"""
