"""The fleet as a reader sees it: every site's verdict, every control plane's phase and why it is
not Ready, fitted to a terminal. Read by ``kamaji-broker status`` (with ``--watch``, kept by
watching) and the sandbox's Ready screen and live view; the hub never runs it. Imports ``hub``
(its models, its pure Site conditions, the sites' liveness) and ``common``.

verdicts       every site's verdict and the fleet's problems (pure)
controlplanes  a control plane's phase and why it is not Ready (pure)
reading        reading the fleet once from the management cluster and the bus (the observer's user)
watching       the fleet kept by list + watch, the bus read every few seconds, a look when it changed
keeping        what a watcher keeps of each object, and whether a change shows (pure)
view           the status table, its JSON, the live view's events (pure)
wording        why not Ready in words, timestamps as ages (pure)
columns        tables and lines fitted to a terminal's width, cut at a word (pure)
screen         the fleet redrawn in place on a terminal, one line per event otherwise
"""
