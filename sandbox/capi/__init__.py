"""A stand-in for the Cluster API controller the sandbox needs and does not run: the topology
controller, which makes a ClusterClass-based Cluster's control plane and InfraCluster
(``topology`` decides, ``controller`` reads and writes the management cluster). Not CAPI, and
not a controller to copy: it polls, and simulates only what the sandbox's ClusterClass uses.
``ownership`` (pure) is the owner and label CAPI's Cluster controller writes on what a Cluster
points at; ``infra`` is a stand-in infrastructure provider (``StandInCluster``), for Cluster
API's own controllers.
"""
