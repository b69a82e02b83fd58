"""A site of the real backend with the real Kamaji operator: what Kamaji itself does with the
TenantControlPlanes our agent writes.

binaries    where the operator, kwok and Kamaji's CRDs and webhook rules are (``gomod/build.sh
            kamaji`` builds them from Go modules)
datastore   the site's DataStore: an etcd with TLS, and the objects that point Kamaji at it
site        Site: a real cluster, kwok with fake Nodes, the DataStore and the operator (its
            webhooks by URL: ``sandbox.realkube.webhooks``), in a network namespace of its own
            (``sandbox.sitenet``)
pods        pure: a control plane's kube-apiserver container as a process
tenants     a tenant API server behind every control plane

The simulator (``sandbox.kamaji``) stays the fast default; this is what it is measured against.
"""

from sandbox.realkamaji.site import Site

__all__ = ["Site"]
