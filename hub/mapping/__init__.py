"""RKCP (+ its Cluster) → the TenantControlPlane spec and coordinates a site runs. Pure.

tcp         the spec, its metadata and the coordinates
deployment  → ``controlPlane.deployment``
network     → ``networkProfile``, service, ingress, gateway
"""
