"""Tests of the benchmark scripts in bench/: each runs at a tiny size and prints what it promises.

test_nats_layout   bench/nats_layout.py: one JSON line per layout, with plausible figures
"""
