"""spark-submit entry point of steps 2 and 3 in one Spark application, as the DAGs run them:
the first replay's records reach the reconcile from memory, not through a Parquet folder.

    spark-submit <kafka_recon>/jobs/replay_reconcile.py --config F --flow NAME --start T --end T \
        --out DIR [--replays N]
"""

import sys

# spark-submit runs this file by its path; the package it belongs to is installed beside it
from kafka_recon.jobs._entry import main

if __name__ == "__main__":
    sys.exit(main("replay_reconcile", "replay the window N times, then reconcile every hop"))
