"""Operator mode: the agent's own NATS identity (``--nats-identity-secret``).

keeper  its own key in a Secret, bootstrap and renewal of its JWT
state   the Secret's content, JWT usable, when to renew, readiness (pure)
"""
