"""The operator's files on disk: the hub's keys, the NATS server's configuration, operator mode's
keys and JWTs, the NATS TLS material. Written by the CLI (``keys``, ``nats-config``, ``site``,
``observer``), the sandbox and the benches; read by hub and agent (their key files; the hub's
operator mode its account JWT). Every file is written whole (``atomic``), private unless it is
meant to be handed out (public keys, the account JWT).

atomic      private, atomic files
keys        the hub's key files (signing and sealing keys, hub-public-keys.json)
retire      retiring a key id
serverconf  nats-server configuration text
natsserver  the NATS server's files on disk (configuration, users, sites' credentials)
operator    operator mode's keys and JWTs on disk (``nats-config --auth operator``)
rotation    rotating the operator's and the account's signing keys in two steps (``nats-config
            --rotate-signing-key``, ``--retire-previous-signing-keys``)
tls         the NATS CA and server certificate
"""
