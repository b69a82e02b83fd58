"""Anti-entropy: re-apply drifted TCP specs and handle orphans (DESIGN §5 agent 3).

orphans     pure: (managed TCPs, latest intent per subject, caught up?, clocks, now) → actions
loop        the shell: list, Direct-Get, verify, decide, patch/delete/emit events, republish
"""
