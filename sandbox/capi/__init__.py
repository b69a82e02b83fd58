"""A stand-in for the Cluster API controller the sandbox needs and does not run: the topology
controller, which makes a ClusterClass-based Cluster's control plane and InfraCluster
(``topology`` decides, ``controller`` reads and writes the management cluster). Not CAPI, and
not a controller to copy: it polls, and simulates only what the sandbox's ClusterClass uses.
"""
