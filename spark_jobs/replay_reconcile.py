"""spark-submit entry point of steps 2 and 3 in one Spark application, as the DAGs run them:
the first replay's records reach the reconcile from memory, not through a Parquet folder.

    spark-submit spark_jobs/replay_reconcile.py --config F --flow NAME --start T --end T \
        --out DIR [--replays N]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # spark-submit runs this file alone

from _entry import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main("replay_reconcile", "replay the window N times, then reconcile every hop"))
