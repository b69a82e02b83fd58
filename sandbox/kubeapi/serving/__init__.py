"""The REST API over HTTP, on top of ``state``.

handlers   one aiohttp catch-all route that dispatches a request
routing    URL paths of the Kubernetes REST API → what they address
calls      one resource request, resolved, and what the verbs read from it
writing    POST (create), PUT (replace), PATCH, and the ``scale`` subresource
deleting   DELETE of one object and of a collection
streaming  watch streams: initial events, live events, bookmarks, timeouts, 410s
rendering  response bodies: objects, lists, Tables and watch events in the version asked for
responses  JSON bodies, and errors as ``metav1.Status``
reviews    SelfSubjectAccessReviews: may I do this?
rbac       RBAC evaluated as kube-apiserver's RBAC authorizer does
protobuf   protobuf request bodies of the built-in kinds kubectl creates imperatively
"""
