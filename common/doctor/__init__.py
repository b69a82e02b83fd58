"""``kamaji-broker doctor``'s checks shared by hub and agent: each decides purely from what a
named seam read, with the process's own settings and identity.

results       Result (PASS/WARN/FAIL/SKIP, detail, fix), text and JSON rendering, exit code
running       Step and run: checks in order, SKIP when a prerequisite did not pass
process       Doctor: what hub and agent check alike, on the connections earlier checks made
natschecks    NATS reachable (refused/DNS/timeout/authorization/TLS), TLS verified, safe probes
credchecks    a user JWT: expiry (the /readyz rule), the grants the role needs
streamchecks  the intents stream, site streams, an agent's consumer
livechecks    a running process: the age of a site's latest heartbeat on the bus
kubechecks    Kubernetes reachable, RBAC by SelfSubjectAccessReview, CRDs served
"""
