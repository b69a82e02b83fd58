"""Kubernetes plumbing shared by hub, agent and the sandbox: one generic client, typed errors, resources.

reviews     version and SelfSubjectAccessReviews (what doctor asks)
answers     Listing, WatchEvent: what a list and a watch answer
client      Kube (get/list/watch/create/replace/patch/apply/delete on any Resource, close)
connecting  connect: a Kube owning the ApiClient of a kubeconfig or of the pod; api clients
errors      KubeError → NotFound | Conflict | Gone | Invalid | Unavailable
events      core/v1 Event objects, as client-go's recorder writes them
resources   Resource descriptors (paths) of everything we touch
watching    list-then-watch with resume and relist on 410
informer    inform: keep a Sink (the caller's cache) in step with one resource
lazy        kubernetes_asyncio's generated API and model classes loaded only when asked for
"""

# ruff: noqa: E402 (the library is made lazy before the modules that import it)
from common.kube import lazy

lazy.install()  # before any module of ours imports kubernetes_asyncio

from common.kube import errors, resources
from common.kube.answers import Listing, WatchEvent
from common.kube.client import APPLY_PATCH, JSON_PATCH, MERGE_PATCH, Kube
from common.kube.connecting import api_client_from_kubeconfig, api_client_in_cluster, connect

__all__ = [
    "APPLY_PATCH",
    "JSON_PATCH",
    "MERGE_PATCH",
    "Kube",
    "Listing",
    "WatchEvent",
    "api_client_from_kubeconfig",
    "api_client_in_cluster",
    "connect",
    "errors",
    "resources",
]
