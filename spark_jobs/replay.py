"""spark-submit entry point of step 2, replay (the step is `kafka_recon.spark.replay`).

    spark-submit spark_jobs/replay.py --config F --flow NAME --start T --end T --out DIR \
        [--replays N]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # spark-submit runs this file alone

from _entry import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main("replay", "read the topic's window N times, each with a fresh consumer group"))
