"""Real Kubernetes on this machine: the binaries built from Go modules, and clusters of them.

binaries   where etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubectl are
           ($KUBEBUILDER_ASSETS, else the cache ``gomod/build.sh`` builds into)
pki        a cluster's CA, serving certificate, token signing key and kubeconfigs
cluster    Cluster: etcd + kube-apiserver + kube-controller-manager (+ kube-scheduler) on 127.0.0.1
tokens     a ServiceAccount's kubeconfig (TokenRequest): a local process as that identity
audit      what a user did, and in which namespace, from the audit log
webhooks   pure: a controller's admission and conversion webhooks registered by URL with our
           own certificate's CA, as envtest registers them

The emulator (``sandbox.kubeapi``) is the fast default of the sandbox; this is the ground truth
the tests hold it and the product to. Used by ``sandbox.launcher`` (``--kubernetes real``) and
the tests' ``real`` backend.
"""

from sandbox.realkube.binaries import Binaries, MissingBinaries
from sandbox.realkube.cluster import Cluster

__all__ = ["Binaries", "Cluster", "MissingBinaries"]
