"""spark-submit entry point of step 3, reconcile (the step is `kafka_recon.spark.reconcile`).

    spark-submit spark_jobs/reconcile.py --config F --flow NAME --start T --end T --out DIR
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # spark-submit runs this file alone

from _entry import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main("reconcile", "per-hop missing, unexpected and duplicate records, exact"))
