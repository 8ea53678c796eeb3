"""spark-submit entry point of step 3, reconcile (the step is `kafka_recon.spark.reconcile`).

    spark-submit <kafka_recon>/jobs/reconcile.py --config F --flow NAME --start T --end T --out DIR
"""

import sys

# spark-submit runs this file by its path; the package it belongs to is installed beside it
from kafka_recon.jobs._entry import main

if __name__ == "__main__":
    sys.exit(main("reconcile", "per-hop missing, unexpected and duplicate records, exact"))
