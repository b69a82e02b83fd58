"""The subcommands of ``kamaji-broker``, one module each: ``add`` declares its flags on the
parser ``kamaji_broker.cli`` builds, ``run`` does the work from the parsed arguments.

    keys          the hub's key pairs (``common.keyfiles``, ``common.keyretire``)
    site          site onboarding: NATS identity and the Site object (``common.natsfiles``, ``sitefiles``)
    nats_config   a nats-server configuration, with cluster and TLS (``common.natsconfig``, ``tlsfiles``)
    observer      ``status``'s read-only NATS user: issue it again, revoke it (``common.natsfiles``)
    processes     hub, agent and sandbox: the long-lived processes
    doctor        ``doctor hub`` and ``doctor agent``: a process's configuration checked
"""
