"""spark-submit entry point of `repair plan` (the step is `kafka_recon.spark.repair`).

    spark-submit <kafka_recon>/jobs/repair_plan.py --config F --flow NAME --start T --end T \
        --out DIR
"""

import sys

# spark-submit runs this file by its path; the package it belongs to is installed beside it
from kafka_recon.jobs._entry import main

if __name__ == "__main__":
    sys.exit(main("repair_plan", "read each lost record of the window back from where it is"))
