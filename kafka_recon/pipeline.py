"""The steps of one reconciliation run, as plain functions over a run folder.

Airflow tasks and `kafka-recon run` call the same functions; each step reads what earlier steps
wrote into the run folder and replaces its own output, so re-running a window is idempotent.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from kafka_recon.config import Flow, FlumeTier, SqlTier, load_flow
from kafka_recon.paths import REPO_ROOT
from kafka_recon.window import Window

DEFAULT_CONFIG = REPO_ROOT / "config" / "flows.yaml"


def config_path() -> Path:
    return Path(os.environ.get("KAFKA_RECON_CONFIG", DEFAULT_CONFIG))


def runs_root() -> Path:
    return Path(os.environ.get("KAFKA_RECON_OUT", REPO_ROOT / "runs"))


def run_dir(flow: str, start: str, end: str, root: Path | None = None) -> Path:
    """One folder per flow and window: a re-run of the window lands in the same place."""
    safe = "_".join(Window.parse(start, end).as_json().values()).replace(":", "")
    return (root or runs_root()) / flow / safe


def write_json(path: Path, payload: Any) -> None:
    """Whole or not at all: a reader never sees half a file, a re-run replaces it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, default=str))
    tmp.replace(path)


def _read_json(path: Path, step: str) -> Any:
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: the '{step}' step has not run for this window")
    return json.loads(path.read_text())


def unreadable(flow: Flow, window: Window, out: Path, reason: str) -> dict[str, Any]:
    """An inconclusive result for a run that could not read a source: owners still hear of it."""
    result = {"flow": flow.name, "window": window.as_json(), "status": "inconclusive",
              "tiers": [], "hops": [], "replays": [], "replays_consistent": False,
              "findings": [], "reasons": [reason]}
    write_json(out / "result.json", result)
    return result


def stage(flow: Flow, window: Window, out: Path, config_dir: Path | None = None
          ) -> list[dict[str, Any]]:
    """Step 1: check and count every upstream source, check the topic, audit the cluster.

    A source that cannot be read leaves an inconclusive result.json naming it, then raises.
    """
    from kafka_recon.audit import audit_flow
    from kafka_recon.flume import FlumeError, stage_flume_tier
    from kafka_recon.jdbc import JdbcError
    from kafka_recon.stage import SourceError, stage_sql_tier
    from kafka_recon.topic import TopicError, check_topic

    staged: list[dict[str, Any]] = []
    try:
        for t in flow.tiers:
            if isinstance(t, SqlTier):
                staged.append(stage_sql_tier(t, window, flow.bucket))
            elif isinstance(t, FlumeTier):
                staged += stage_flume_tier(flow, t, window)
        check_topic(flow.topic_tier.bootstrap, flow.topic_tier.topic)
        audit = audit_flow(flow, config_dir or config_path().parent)
    except (SourceError, FlumeError, TopicError, JdbcError) as exc:
        unreadable(flow, window, out, f"a source could not be read: {exc}")
        raise
    write_json(out / "audit.json", audit)
    write_json(out / "stage.json", staged)
    return staged


def validate(flow: Flow, out: Path) -> dict[str, Any]:
    from kafka_recon.validate import validate_result

    result = _read_json(out / "result.json", "reconcile")
    return validate_result(result, out, flow.tolerance.model_dump())


def report(out: Path) -> dict[str, str]:
    from kafka_recon.report import render_report

    result = _read_json(out / "result.json", "reconcile")
    validation_path = out / "validation.json"
    validation = json.loads(validation_path.read_text()) if validation_path.exists() else None
    return render_report(result, out, validation)


def notify(flow: Flow, out: Path, smtp_conn_id: str = "smtp_default") -> str:
    from kafka_recon.notify import send_report, subject

    result = _read_json(out / "result.json", "reconcile")
    html = out / "report.html"
    if not html.exists():
        raise FileNotFoundError(f"{html} is missing: the 'report' step has not run")
    send_report(result, html, flow.owners, smtp_conn_id)
    return subject(result)


def load(flow_name: str, start: str, end: str, config: Path | None = None
         ) -> tuple[Flow, Window, Path]:
    """The flow, its window (with the flow's grace) and the run folder."""
    flow = load_flow(config or config_path(), flow_name)
    window = Window.parse(start, end, flow.grace)
    return flow, window, run_dir(flow_name, start, end)
