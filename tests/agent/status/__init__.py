"""Tests of the status loop (agent.status)."""
