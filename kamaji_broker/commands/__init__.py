"""The subcommands of ``kamaji-broker``, one module each: ``add`` declares its flags on the
parser ``kamaji_broker.cli`` builds, ``run`` does the work from the parsed arguments.

    keys          the hub's key pairs (``common.files``: keys, retire)
    site          site onboarding: NATS identity and the Site object (``common.files``, ``sitefiles``)
    nats_config   a nats-server configuration, with cluster, TLS and operator mode (``common.files``)
    observer      ``status``'s read-only NATS user: issue it again, revoke it (``common.files``)
    status        the fleet's table, JSON or live view (``fleet``)
    processes     hub, agent and sandbox: the long-lived processes
    doctor        ``doctor hub`` and ``doctor agent``: a process's configuration checked
"""
