"""The demo flow: an upstream `orders` table, a producer app, a consumer app and a sink table.

The consumer commits offsets before it processes a batch (seed 000's mistake) and is made to crash
once in between, so a known set of records is lost on the consume side. The apps keep ledgers of
what they did; the truth the reconciliation must match comes from those, not from its own code.
"""
