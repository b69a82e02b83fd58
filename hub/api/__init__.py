"""The hub's API: the pydantic models of its custom resources and of what it reads, and the CRDs
generated from them (``python -m hub.api.crds --check``). Pure data: the models import only
``hub.conditions`` of the hub; ``crds`` is the command that writes them to ``deploy/crds/``.

rkcp        the RemoteKamajiControlPlane model
components  its addons, kubelet, components and Deployment
network     its ``network`` (Service, Ingress, Gateway, load balancer)
template    the RKCP template (ClusterClass)
site        the Site model
cluster     CAPI's Cluster as read
machinery   what the models share: base models, metadata, names, CEL rules, conditions
openapi     pydantic schema → structural OpenAPI
crds        the CRDs, written and checked
"""
