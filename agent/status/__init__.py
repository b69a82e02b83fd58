"""The status loop: managed TenantControlPlanes and their generated Secrets → Status and SealedSecrets.

``report`` decides (pure), ``loop`` watches, caches, coalesces and publishes.
"""
