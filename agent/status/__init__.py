"""The status loop: managed TenantControlPlanes and their generated Secrets → Status and SealedSecrets.

``report`` decides (pure); ``cache`` holds what the informers saw, ``schedule`` which TCPs are
due, ``syncing`` publishes one TCP's news; ``loop`` runs the informers and the publishing task.
"""
