"""The Kubernetes API emulator: one in-memory cluster per ``Server``, real REST API on 127.0.0.1.

Speaks enough of the Kubernetes API (discovery, built-ins, CRDs with structural-schema
validation, list/watch with resourceVersions, patches, subresources, finalizers, garbage
collection) that kubectl, kubernetes_asyncio and the official client work against it unchanged::

    from sandbox import kubeapi
    server = kubeapi.Server(name="mgmt")
    await server.start(port=0)
    server.write_kubeconfig(".sandbox/mgmt.kubeconfig")
    await server.stop()

Layers, bottom up (each imports only those below it):

errors    ``ApiError``: one exception type that renders as a ``metav1.Status``
authn     who is asking: the token auth file and ServiceAccount tokens, for access reviews
options   a server's settings (watch timing, token users) and a request's query parameters
kinds/    the kinds served and what a custom object is checked against (pure)
apply/    patches and server-side apply (pure)
state/    one cluster's state: objects, history, watches, what a write does
serving/  the REST API over HTTP
server    ``Server``: one emulated cluster on 127.0.0.1, with its kubeconfig and CRD loading

``python -m sandbox.kubeapi`` (``__main__``) runs one until Ctrl-C. Known deviations from a real
apiserver are listed in ``DEVIATIONS``; tests/sandbox/kubeapi runs its contract tests against a
real kube-apiserver too and probes that each deviation listed there still holds.
"""

from __future__ import annotations

from sandbox.kubeapi.errors import ApiError
from sandbox.kubeapi.server import Request, Server

__all__ = ["DEVIATIONS", "ApiError", "Request", "Server"]

DEVIATIONS = """\
- Of the built-in resources only namespaces, secrets, configmaps, serviceaccounts, events (core
  and events.k8s.io), leases, the RBAC kinds, SelfSubjectAccessReviews and CRDs are served: no
  pods, services, deployments (apps), webhook configurations, ... (they are 404).
- Discovery is the unaggregated kind only: a request for aggregated discovery
  (apidiscovery.k8s.io/v2) is answered an APIGroupList, which clients accept as well.
- No controllers but those of deletion (below): a new namespace gets neither its `default`
  ServiceAccount nor its `kube-root-ca.crt` ConfigMap, and resourceVersions advance with the
  clients' own writes only (on a real server etcd's revision is shared with the controllers').
- Strategic merge patch is applied as JSON merge patch (lists replaced, no $patch directives).
  Server-side apply and managedFields are kept per manager (Apply and Update, conflicts, force,
  removal of what a manager stops applying), but lists of type map (`x-kubernetes-list-type:
  map`, metadata.ownerReferences) are owned whole, as atomic lists are, and so is every list of
  a built-in kind (the emulator has no schemas for them; metadata.finalizers is a set).
- OpenAPI: /openapi/v3 answers an empty index and /openapi/v2 an empty document (no schemas),
  so kubectl skips client-side validation without --validate=false and relies on the server's
  fieldValidation (Warn by default, Strict from kubectl: unknown fields of custom resources are
  reported; built-in kinds are not checked for unknown fields). `kubectl explain` has nothing.
- CEL rules (x-kubernetes-validations) are not evaluated; other structural-schema checks are
  (and where the real server would not run the rules either, its notice that they were not
  checked is given too).
- CRDs are checked for their names, scope and versions, not for a structural schema (the real
  server also refuses, say, a list-map key that is neither required nor defaulted).
- Custom resources are served in every served version without conversion: only apiVersion
  changes, as with the None strategy; a conversion webhook is never called.
- events and events.k8s.io/v1 Events are stored separately (no conversion between them).
- One history window for the whole cluster (not one watch cache per resource): its last
  `history` changes of any resource (10,000 by default); lists are served from memory at the
  requested page's resourceVersion.
- Garbage collection, namespace cleanup, CRD establishment and CRD cleanup run synchronously
  at the end of the write that triggers them, not a moment later in a controller (a new CRD is
  Established in the answer to its create; a real namespace takes seconds to go, and the real
  garbage collector learns of a new CRD's resource only at its next resync, up to 30 s later).
- Authorisation only for SelfSubjectAccessReviews (the only kind of authorization.k8s.io served):
  they are answered from the stored RBAC objects (Roles, ClusterRoles and their bindings;
  aggregated ClusterRoles are not expanded) for the user of a bearer token listed in the optional
  token auth file (kube-apiserver's --token-auth-file CSV) or minted by
  `Server.service_account_kubeconfig`, or impersonated by the admin (`kubectl auth can-i --as`);
  any other request is the admin (system:masters). Ordinary requests are never authorised nor
  refused by RBAC: every request is allowed. No admission webhooks.
- Built-in kinds are not validated beyond metadata (and Secret data being base64, and the
  namespaces a cluster is made with not being deleted).
- Responses are always JSON; protobuf request bodies are decoded only for Namespace, Secret,
  ConfigMap, Lease and SelfSubjectAccessReview (what `kubectl create namespace|secret|configmap`
  and `kubectl auth can-i` send), others get 415.
- BOOKMARKs (when allowed) come after every 10 s of idleness (a real server's come 2 s before
  the watch's timeoutSeconds or after a minute, and only when it has news); watches without
  timeoutSeconds last 30 min (a real server's 30 to 60).
"""
