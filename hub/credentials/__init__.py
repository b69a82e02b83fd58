"""Operator mode's NATS credentials, as the hub holds them (``--nats-operator-dir``).

service     answers the agents' bootstrap and renew requests, records the key in the Site
rules       whether a request gets a credential, and what it revokes (pure)
revocation  revoking NATS users: the account JWT with the revocation, pushed to the resolver
operator    the hub's ``--nats-operator-dir`` checked, and the NATS user it mints itself
"""
