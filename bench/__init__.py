"""Benchmarks: speed and memory goals live here, never in timed tests."""
