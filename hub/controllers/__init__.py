"""The hub's controllers: thin shells that observe, call a pure reconcile, act, patch status once."""
