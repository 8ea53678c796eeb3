"""spark-submit entry point of step 2, replay (the step is `kafka_recon.spark.replay`).

    spark-submit <kafka_recon>/jobs/replay.py --config F --flow NAME --start T --end T --out DIR \
        [--replays N]
"""

import sys

# spark-submit runs this file by its path; the package it belongs to is installed beside it
from kafka_recon.jobs._entry import main

if __name__ == "__main__":
    sys.exit(main("replay", "read the topic's window N times, each with a fresh consumer group"))
