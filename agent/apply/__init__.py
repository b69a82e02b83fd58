"""The apply loop: intents from the agent's durable consumer → TenantControlPlanes at the site.

outcomes   the words of an outcome: Result (metric label), Reason (refusals), Settle
intake     pure: bytes → verified Intent, or a Refusal; ``misplaced``, the one body-vs-subject check
intents    pure: (intent, seq, observed TCP) → Decision (action, report, settle)
applying   one delivery: verify, observe, decide, execute, report, settle
keeper     in-progress acks for the deliveries held
loop       bind, replay at start, fetch, one worker per TCP
failures   pure: what the API's refusal of an action on a TCP means for its intent
"""
