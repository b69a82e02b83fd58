"""Kubernetes plumbing shared by hub, agent and the sandbox: one generic client, typed errors, resources.

client      Kube (get/list/watch/create/replace/patch/delete on any Resource), api clients
errors      KubeError → NotFound | Conflict | Gone | Invalid | Unavailable
resources   Resource descriptors (paths) of everything we touch
retrying    the jittered exponential backoff every retry on the API uses
watching    list-then-watch with resume and relist on 410 (informer-like)
"""

from common.kube import errors, resources
from common.kube.client import (
    JSON_PATCH,
    MERGE_PATCH,
    Kube,
    Listing,
    WatchEvent,
    api_client_from_kubeconfig,
    api_client_in_cluster,
)

__all__ = [
    "JSON_PATCH",
    "MERGE_PATCH",
    "Kube",
    "Listing",
    "WatchEvent",
    "api_client_from_kubeconfig",
    "api_client_in_cluster",
    "errors",
    "resources",
]
