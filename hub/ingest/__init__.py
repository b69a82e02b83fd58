"""Everything the hub reads off the site streams, one pipeline: a consumer per site stream
delivers, ``record`` checks, decodes and records, ``observations`` is the view the controllers
decide from.

consumer      the consumer of each site's stream (no acks; a gap in its deliveries reads the site
              again), emitting changed coordinates
gaps          whether the hub saw every delivery
record        check, decode, record what a site sent; ``load``, ``open_latest`` (the kept box, or
              the stream's), what each site's stream holds
held          the subjects a stream is known to hold
sealed        opening a sealed box, and the boxes kept (sealed, within a byte budget) until written
observations  the pure view of each control plane
liveness      the sites' heartbeats and backlog, as held (pure)
heartbeats    heartbeats and backlogs into ``liveness``: delivered, read once, polled when due
"""
