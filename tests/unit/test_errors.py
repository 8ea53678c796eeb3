"""One line per failure: a Spark worker's Python failure is named by its own last exception."""

from __future__ import annotations

import pytest

from kafka_recon.errors import StepFailed, one_line

pytestmark = pytest.mark.unit

# as Py4J hands a failed job back to the driver (shortened): Java's message and stack around
# the worker's Python traceback, the chained exception last
SPARK = ("""An error occurred while calling o97.foreachPartition.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 3.0 """
         """failed 1 times, most recent failure: Lost task 0.0 in stage 3.0 (TID 3) """
         """(192.0.2.2 executor driver): org.apache.spark.api.python.PythonException: """
         """Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/pyspark/serializers.py", line 473, in loads
    return cloudpickle.loads(obj, encoding=encoding)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
KeyError: 'x'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/kafka_recon/spark/repair.py", line 12, in <module>
    from upath import UPath
ModuleNotFoundError: No module named 'upath'

\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(...)
\tat org.apache.spark.api.python.PythonRunner$$anon$3.read(PythonRunner.scala:945)
Driver stacktrace:
\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(...)
""")


class Py4JJavaError(Exception):
    pass


def test_a_spark_workers_failure_is_named_by_the_workers_last_exception() -> None:
    line = one_line(Py4JJavaError(SPARK))
    assert line == "a Spark worker failed: ModuleNotFoundError: No module named 'upath'"
    assert str(StepFailed("deliver", Py4JJavaError(SPARK))) == (
        "step 'deliver' failed: a Spark worker failed: ModuleNotFoundError: No module named "
        "'upath'")


def test_any_other_error_is_its_type_and_text_on_one_line_and_never_a_page() -> None:
    assert one_line(ValueError("bad\n  value")) == "ValueError: bad value"
    assert len(one_line(RuntimeError("x" * 5000))) == 500
