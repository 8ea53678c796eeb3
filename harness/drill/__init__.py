"""The loss drill: every scenario of docs/design.md's catalogue made to happen for real, then found.

A scenario runs real client applications (`apps`) with the seeds' settings on a real
three-broker KRaft cluster, injects a real fault timed from observed state (`faults`), runs the
reconciliation, and compares its findings with the truth computed from the apps' ledgers and the
tiers themselves (`truth`), never from the reconciliation's own code. `runner` drives it and
writes the matrix (`docs/drill.md`, `docs/drill.json`).
"""
