"""Pure reconcile functions of the hub: observations in, actions and status out (no I/O, no clock)."""
