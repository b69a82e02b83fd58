"""The apply loop: intents from the agent's durable consumer → TenantControlPlanes at the site.

``intents`` decides (pure), ``loop`` fetches, verifies, observes, executes and settles.
"""
