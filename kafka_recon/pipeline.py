"""The steps of one reconciliation run, as plain functions over a run folder.

Airflow tasks and `kafka-recon run` call the same functions; each step reads what earlier steps
wrote into the run folder and replaces its own output, so re-running a window is idempotent.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
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


def reconcile_in_process(spark: Any, config: Path, flow_name: str, start: datetime,
                         end: datetime, out: Path) -> dict[str, Any]:
    """stage, replay and reconcile on a Spark session of this process (the drill, the tests).

    The same steps as the DAG's tasks and `kafka-recon run`, without spark-submit.
    """
    from spark_jobs import reconcile as reconcile_job
    from spark_jobs import replay as replay_job

    flow = load_flow(config, flow_name)
    stage(flow, Window(start, end, flow.grace), out, config.parent)
    args = SimpleNamespace(config=config, flow=flow_name, start=start.isoformat(),
                           end=end.isoformat(), out=out, replays=None)
    replay_job.run(spark, args)  # type: ignore[arg-type]
    result: dict[str, Any] = reconcile_job.run(spark, args)  # type: ignore[arg-type]
    return result


def staged_tiers(flow: Flow) -> list[str]:
    """The tiers staged before Spark runs: every SQL and Flume tier (the topic is replayed)."""
    return [t.name for t in flow.tiers if isinstance(t, SqlTier | FlumeTier)]


def stage_tier(flow: Flow, tier_name: str, window: Window, out: Path) -> list[dict[str, Any]]:
    """Step 1a, one upstream or sink tier: check it and count it into staged/<tier>.json.

    A source that cannot be read leaves an inconclusive result.json naming it, then raises.
    """
    from kafka_recon.flume import FlumeError, stage_flume_tier
    from kafka_recon.jdbc import JdbcError
    from kafka_recon.stage import SourceError, stage_sql_tier

    tier = next((t for t in flow.tiers if t.name == tier_name), None)
    if tier is None or tier_name not in staged_tiers(flow):
        raise ValueError(f"flow '{flow.name}' has no SQL or Flume tier '{tier_name}' "
                         f"(it has {staged_tiers(flow)})")
    try:
        staged = [stage_sql_tier(tier, window, flow.bucket)] if isinstance(tier, SqlTier) \
            else stage_flume_tier(flow, tier, window)  # type: ignore[arg-type]
    except (SourceError, FlumeError, JdbcError) as exc:
        unreadable(flow, window, out, f"a source could not be read: {exc}")
        raise
    write_json(out / "staged" / f"{tier_name}.json", staged)
    return staged


def stage_topic(flow: Flow, window: Window, out: Path, config_dir: Path | None = None
                ) -> list[dict[str, Any]]:
    """Step 1b: check the topic, audit the cluster, and gather every tier's staging into
    stage.json (the order of the flow, whatever order the tier tasks finished in)."""
    from kafka_recon.audit import audit_flow
    from kafka_recon.topic import TopicError, check_topic

    try:
        check_topic(flow.topic_tier.bootstrap, flow.topic_tier.topic)
        audit = audit_flow(flow, config_dir or config_path().parent)
    except TopicError as exc:
        unreadable(flow, window, out, f"a source could not be read: {exc}")
        raise
    staged: list[dict[str, Any]] = []
    for name in staged_tiers(flow):
        staged += _read_json(out / "staged" / f"{name}.json", f"stage {name}")
    write_json(out / "audit.json", audit)
    write_json(out / "stage.json", staged)
    return staged


def stage(flow: Flow, window: Window, out: Path, config_dir: Path | None = None
          ) -> list[dict[str, Any]]:
    """Step 1, every tier then the topic: what the command line runs in one go."""
    for name in staged_tiers(flow):
        stage_tier(flow, name, window, out)
    return stage_topic(flow, window, out, config_dir)


def validate(flow: Flow, out: Path) -> dict[str, Any]:
    """Step 4: the Great Expectations suites; a flow with no upstream count also gets the volume
    band learned from the history."""
    from kafka_recon.validate import validate_result

    result = _read_json(out / "result.json", "reconcile")
    volume = None
    if flow.points[0].name == flow.topic_tier.name:
        from kafka_recon import history
        from kafka_recon.window import Window

        w = Window.parse(result["window"]["start"], result["window"]["end"])
        volume = history.volume_band(flow, flow.topic_tier.name, w.start, w.end)
    return validate_result(result, out, flow.tolerance.model_dump(), volume)


def record_history(out: Path) -> dict[str, int]:
    """Step 7: the run's per-hop, per-bucket rows into the history; a re-run replaces them."""
    from kafka_recon import history

    result = _read_json(out / "result.json", "reconcile")
    validation_path = out / "validation.json"
    docs = json.loads(validation_path.read_text()).get("data_docs") \
        if validation_path.exists() else None
    report_path = out / "report.html"
    return history.record(result, str(out), str(report_path) if report_path.exists() else None,
                          docs)


def report(out: Path) -> dict[str, str]:
    from kafka_recon.report import render_report

    result = _read_json(out / "result.json", "reconcile")
    validation_path = out / "validation.json"
    validation = json.loads(validation_path.read_text()) if validation_path.exists() else None
    return render_report(result, out, validation)


def notify(flow: Flow, out: Path, smtp_conn_id: str = "smtp_default") -> str:
    from kafka_recon.notify import send_report, subject

    result = _read_json(out / "result.json", "reconcile")
    for name in ("mail.html", "report.txt"):
        if not (out / name).exists():
            raise FileNotFoundError(f"{out / name} is missing: the 'report' step has not run")
    send_report(result, out, flow.owners, smtp_conn_id)
    return subject(result)


def load(flow_name: str, start: str, end: str, config: Path | None = None
         ) -> tuple[Flow, Window, Path]:
    """The flow, its window (with the flow's grace) and the run folder."""
    flow = load_flow(config or config_path(), flow_name)
    window = Window.parse(start, end, flow.grace)
    return flow, window, run_dir(flow_name, start, end)
