"""The Kubernetes API emulator: one in-memory cluster per ``Server``, real REST API on 127.0.0.1.

Speaks enough of the Kubernetes API (discovery, built-ins, CRDs with structural-schema
validation, list/watch with resourceVersions, patches, subresources, finalizers, garbage
collection) that kubectl, kubernetes_asyncio and the official client work against it unchanged::

    from sandbox import kubeapi
    server = kubeapi.Server(name="mgmt")
    await server.start(port=0)
    server.write_kubeconfig(".sandbox/mgmt.kubeconfig")
    await server.stop()

Layers, bottom up: pure pieces (``errors``, ``selectors``, ``patching``, ``formats``,
``schema``, ``pruning``, ``resources``, ``routing``, ``discovery``, ``tables``, ``protobuf``,
``options``, ``authn``, ``rbac``), the state (``watching``, ``objects``, ``owners``,
``listing``, ``metadata``, ``admission``, ``store``, ``collecting``), HTTP (``rendering``,
``responses``, ``calls``, ``streaming``, ``writing``, ``deleting``, ``reviews``, ``handlers``,
``server``). Known deviations from a
real apiserver are listed in ``DEVIATIONS``.
"""

from __future__ import annotations

from sandbox.kubeapi.errors import ApiError
from sandbox.kubeapi.server import Request, Server

__all__ = ["DEVIATIONS", "ApiError", "Request", "Server"]

DEVIATIONS = """\
- Strategic merge patch is applied as JSON merge patch (lists replaced, no $patch directives);
  server-side apply (application/apply-patch+yaml) is a merge patch that creates when absent,
  without field ownership (managedFields are not kept).
- OpenAPI: /openapi/v3 answers an empty index and /openapi/v2 an empty document (no schemas),
  so kubectl skips client-side validation without --validate=false and relies on the server's
  fieldValidation (Warn by default, Strict from kubectl: unknown fields of custom resources are
  reported; built-in kinds are not checked for unknown fields). `kubectl explain` has nothing.
- CEL rules (x-kubernetes-validations) are not evaluated; other structural-schema checks are.
- Custom resources are served in every served version without conversion (only apiVersion
  changes); status/scale subresources come from the storage version.
- events and events.k8s.io/v1 Events are stored separately (no conversion between them).
- One history window for the whole cluster (not one watch cache per resource); lists are
  served from memory at the requested page's resourceVersion.
- Garbage collection, namespace cleanup and CRD cleanup run synchronously at the end of the
  write that triggers them, not a moment later in a controller.
- Authorisation only for SelfSubjectAccessReviews: they are answered from the stored RBAC
  objects (Roles, ClusterRoles and their bindings; aggregated ClusterRoles are not expanded)
  for the user of a bearer token listed in the optional token auth file (kube-apiserver's
  --token-auth-file CSV, or impersonated by the admin: `kubectl auth can-i --as`); any other
  request is the admin (system:masters). Ordinary requests are never authorised nor refused by
  RBAC: every request is allowed. No admission webhooks.
- Built-in kinds are not validated beyond metadata (and Secret data being base64).
- Responses are always JSON; protobuf request bodies are decoded only for Namespace, Secret,
  ConfigMap, Lease and SelfSubjectAccessReview (what `kubectl create namespace|secret|configmap`
  and `kubectl auth can-i` send), others get 415.
- Watches without timeoutSeconds last 30 min; BOOKMARKs (when allowed) every 10 s of idleness.
"""
