"""connectors.json: each Kafka Connect connector a flow names, as its cluster's REST API
showed it when the run staged the window: config, state, every task's state and trace, and
offsets (docs/connect.md). Causes and `check` read it; nothing in it is ever written back."""

from __future__ import annotations

from typing import Any, Literal

from kafka_recon.runfiles.base import Part, RunFile

# config keys whose values are never kept (a connector's database password, a key store's)
SECRET_WORDS = ("password", "secret", "token", "credential", "key.pass", "sasl.jaas")
HIDDEN = "[hidden]"


def redacted(config: dict[str, Any]) -> dict[str, str]:
    """A connector's config as kept in a run folder: secrets hidden."""
    return {k: HIDDEN if any(w in k.lower() for w in SECRET_WORDS) else str(v)
            for k, v in sorted(config.items())}


class TaskState(Part):
    id: int
    """The task's number."""
    state: str
    """RUNNING, PAUSED, FAILED, UNASSIGNED, RESTARTING."""
    worker: str | None = None
    """The worker running it."""
    trace: str | None = None
    """A FAILED task's stack trace."""

    @property
    def said(self) -> str:
        """The task as a person reads it: 'task 0 FAILED: <the trace's first line>'."""
        head = f"task {self.id} {self.state}"
        first = (self.trace or "").strip().splitlines()
        return f"{head}: {first[0]}" if self.state == "FAILED" and first else head


class ConnectorSnapshot(Part):
    tier: str
    """The flow's tier the connector writes (a source) or loads (a sink)."""
    name: str
    """The connector's name in its Connect cluster."""
    cluster: str
    """The Connect REST API it was read from (no password)."""
    role: Literal["source", "sink"]
    """source (writes the tier's topic) or sink (loads the tier from the topic before it)."""
    state: str | None = None
    """The connector's own state: RUNNING, PAUSED, STOPPED, FAILED (null: not read)."""
    tasks: list[TaskState] = []
    """Every task's state."""
    config: dict[str, str] = {}
    """Its config, secrets hidden."""
    offsets: list[dict[str, Any]] = []
    """`GET /connectors/<name>/offsets`: a source's source offsets, a sink's committed Kafka
    offsets (`kafka_topic`, `kafka_partition`, `kafka_offset`)."""
    dead_letter_topic: str | None = None
    """A sink's dead-letter queue topic: its config's, else the flow's."""
    error: str | None = None
    """Why the cluster could not be read (the causes then say so; the run goes on)."""

    @property
    def tolerance(self) -> str:
        """errors.tolerance: none (the default) or all."""
        return self.config.get("errors.tolerance", "none")

    @property
    def context_headers(self) -> bool:
        return self.config.get("errors.deadletterqueue.context.headers.enable",
                               "false").lower() == "true"

    @property
    def failed(self) -> list[TaskState]:
        """Tasks that FAILED (a FAILED connector counts as its own task -1)."""
        out = [t for t in self.tasks if t.state == "FAILED"]
        if self.state == "FAILED" and not out:
            out.append(TaskState(id=-1, state="FAILED"))
        return out

    def sink_offsets(self) -> dict[str, dict[int, int]]:
        """A sink's committed offsets: topic -> partition -> next offset to read."""
        out: dict[str, dict[int, int]] = {}
        for o in self.offsets:
            part, off = o.get("partition") or {}, o.get("offset") or {}
            if "kafka_topic" in part and "kafka_offset" in off:
                out.setdefault(str(part["kafka_topic"]), {})[int(part["kafka_partition"])] = \
                    int(off["kafka_offset"])
        return out


class Connectors(RunFile):
    """connectors.json: the flow's connectors at staging."""
    FILE = "connectors"
    connectors: list[ConnectorSnapshot] = []

    def of(self, tier: str) -> ConnectorSnapshot | None:
        return next((c for c in self.connectors if c.tier == tier), None)
