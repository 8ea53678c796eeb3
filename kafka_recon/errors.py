"""The one failure policy of kafka-recon: every error it raises on purpose descends from here.

The families, and what each face does with them:

- `CannotRun`: the run cannot even be made (a bad flow config or window, a wrong command line,
  missing jars, another run holding the window). Nothing is written; the command exits 2 with
  one line naming what and where.
- `SourceUnreadable`: a source could not be read, and its kind says which: `SqlTierError`
  (a SQL tier's database or queries; `JdbcError` as Spark reads it), `TableTierError` (a
  lakehouse table or its catalog), `ConnectionUnusable`
  (a connection that cannot be resolved or driven), `FlumeError`, `TopicError` (the cluster,
  the topic, or kafka-recon's client settings), `RegistryError` (the schema registry). The
  run folder gets an `inconclusive` result naming the source, owners hear of it, and the
  command exits 2.
- `ResultError`: a run file (`result.json`, a step's file) that is not its contract or was
  written by a newer kafka-recon: one line naming the file and the field.
- `SparkUnavailable`, `StoreUnreachable`, `StepFailed`: the Spark a run was sent to cannot be
  used, kafka-recon's own database did not answer, or a step failed for another reason: the
  result is inconclusive naming the step and why.

Anything else that escapes a step (a Spark error, a bug) is caught by the orchestration: the
run's result becomes `inconclusive` naming the step that failed, and the command exits 2. Exit
code 1 means findings (or inconclusive), never a crash.
"""

from __future__ import annotations

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class ReconError(Exception):
    """Base of every error kafka-recon raises on purpose; str() is one line naming where."""


class CannotRun(ReconError):
    """The run cannot be made as asked: exit 2, nothing written."""


class ConfigError(CannotRun, ValueError):
    """A flow config that cannot be used; the message says file, flow, field and expectation."""


class FlowInvalid(ConfigError):
    """One flow of the config is wrong: which flow, and each field with what is wrong with it
    (the page lists such flows apart; the other flows run). str() is the whole text."""

    def __init__(self, text: str, flow: str, fields: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(text)
        self.flow, self.fields = flow, fields


class WindowError(CannotRun, ValueError):
    """A window that cannot be reconciled (unparseable, empty, out of bounds)."""


class UsageError(CannotRun, ValueError):
    """A command line, trigger form or setting that asks for something impossible."""


class MissingJarsError(CannotRun):
    """The Maven-resolved jars are not where they should be."""


class RunInProgress(CannotRun):
    """Another run of the same flow and window is under way: one run per window at a time."""


class SourceUnreadable(ReconError):
    """A source could not be read: the run is inconclusive, naming it."""


class ConnectionUnusable(SourceUnreadable):
    """A connection (SQL or Kafka) that cannot be resolved, parsed or driven."""


class ConnectionNotFound(ConnectionUnusable):
    """A connection id that resolves nowhere."""


class SqlTierError(SourceUnreadable):
    """A SQL tier's database or queries could not be read."""


class JdbcError(SqlTierError):
    """A SQL tier Spark cannot read over JDBC."""


class TableTierError(SourceUnreadable):
    """A table tier (Iceberg, Delta, Parquet) Spark could not read."""


class RegistryError(SourceUnreadable):
    """The schema registry a topic's records name could not be read."""


class FlumeError(SourceUnreadable):
    """A Flume agent's metrics, or the snapshot store, could not be read."""


class TopicError(SourceUnreadable):
    """The Kafka cluster or topic could not be read."""


class ConnectorFailed(ReconError):
    """A Kafka Connect connector a flow names is FAILED, or has a FAILED task (`check`), or
    its Connect cluster does not answer."""


class SparkUnavailable(ReconError):
    """The Spark Connect server a run was sent to cannot be reached, or is not set up as
    kafka-recon needs (its JVMs off UTC): the step fails and the run is inconclusive."""


class StoreUnreachable(ReconError):
    """kafka-recon's own database (`KAFKA_RECON_STORE`: history, window leases) or the object
    store holding the run folders did not answer: the step fails and the run is inconclusive,
    naming the store."""


class ResultError(ReconError, ValueError):
    """A run file (result.json or a step's file) that is not its contract: names the file and
    the field, or the schema version it cannot read."""


class StepFailed(ReconError):
    """A step of a run failed for a reason that is neither of the above (Spark, a bug)."""

    def __init__(self, step: str, cause: BaseException) -> None:
        self.step, self.cause = step, cause
        super().__init__(f"step '{step}' failed: {one_line(cause)}")


# a line is cut here: a Java error's text can run to pages
LONGEST = 500


def one_line(exc: BaseException) -> str:
    """An exception as one line: its type where the text alone would not say what it is. A
    failure inside a Spark worker's Python is named by the worker's own last exception, not by
    the Java stack and Python traceback around it."""
    text = str(exc)
    worker = worker_exception(text)
    if worker:
        return f"a Spark worker failed: {worker}"[:LONGEST]
    text = " ".join(text.split()) or type(exc).__name__
    if isinstance(exc, ReconError):
        return text
    return f"{type(exc).__name__}: {text}"[:LONGEST]


def worker_exception(text: str) -> str | None:
    """The exception a Spark worker's Python raised last, from the Python traceback in an
    error's text (the last of a chain), or None when the text holds no traceback."""
    lines = text.splitlines()
    try:
        first = next(i for i, line in enumerate(lines) if _TRACEBACK in line)
    except StopIteration:
        return None
    last = None
    for line in lines[first + 1:]:
        if line.startswith("\tat "):
            break  # the Java stack the traceback was wrapped in
        if line.strip() and not line.startswith((" ", "\t")) and _TRACEBACK not in line \
                and line.strip() not in _CHAINED:
            last = line.strip()
    return last


_TRACEBACK = "Traceback (most recent call last)"
_CHAINED = ("During handling of the above exception, another exception occurred:",
            "The above exception was the direct cause of the following exception:")
