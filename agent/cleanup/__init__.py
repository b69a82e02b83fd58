"""Anti-entropy: re-apply drifted TCP specs and handle orphans.

orphans     pure: (managed TCPs, latest intent per subject, caught up?, clocks, now) → actions, Events
reading     NATS: the latest intent per subject (Direct Get, verified), whether the consumer caught up
loop        the shell: list, read, decide, patch/delete/emit events, republish
reapplying  an intent applied again where it drifted (an older agent's TCP handed over first)
"""
