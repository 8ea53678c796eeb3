"""Run in a fresh interpreter by test_dags.py: parse the DAG folder, render every task.

Prints one JSON line: import errors, the DAGs with their policy fields, the modules parsing
imported, every task's rendered template fields and the spark-submit command of the Spark tasks.
Rendering uses a hand-made context (dates, params, and a `ti` whose xcom_pull answers the run
folder): the templates are Airflow's own, only the metadata database is left out.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime

from airflow.dag_processing.dagbag import DagBag
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

bag = DagBag(dag_folder=sys.argv[1])
heavy = [m for m in ("pyspark", "pandas", "great_expectations") if m in sys.modules]
RUN_DIR = "/runs/FLOW/WINDOW"


PLAN = {"digest": "d" * 64, "body": "- **topic->sink** (consume side): 3 of 3 lost record(s)"}


class _TI:
    map_index = -1
    def xcom_pull(self, task_ids: str | None = None, **_: object) -> object:
        return PLAN if task_ids == "repair_summary" else RUN_DIR


def render(dag, task):  # type: ignore[no-untyped-def]
    params = {k: v.value if hasattr(v, "value") else v for k, v in dag.params.items()}
    if dag.dag_id in ("recon_adhoc", "recon_repair"):
        params.update(flow="orders", start="2026-11-20T00:00:00Z", end="2026-11-20T06:00:00Z")
    ctx = {"data_interval_start": datetime(2026, 11, 20, tzinfo=UTC),
           "data_interval_end": datetime(2026, 11, 21, tzinfo=UTC),
           "params": params, "ti": _TI(), "ds": "2026-11-20",
           **(dag.user_defined_macros or {})}
    env = dag.get_template_env()
    if hasattr(task, "expand_input"):
        # a mapped task's expanded argument exists only at run time: render its fixed ones
        fixed = task.partial_kwargs.get("op_kwargs", {})
        return {"partial_op_kwargs": {k: task.render_template(v, ctx, env)
                                      for k, v in fixed.items()}}
    task.render_template_fields(ctx, jinja_env=env)
    out = {f: getattr(task, f) for f in task.template_fields}
    if isinstance(task, SparkSubmitOperator):
        task.conf = task.submit_conf()  # what execute sets, on this host
        task.jars = task.submit_jars()
        out["spark_submit"] = task._get_hook()._build_spark_submit_command(task.job_file())
    return out


def cron(timetable):  # type: ignore[no-untyped-def]
    return getattr(timetable, "_expression", None) or getattr(timetable, "expression", "")


dags = {}
for d in bag.dags.values():
    rendered = {}
    for t in d.tasks:
        try:
            rendered[t.task_id] = render(d, t)
        except Exception as exc:  # the test names the task that cannot render
            rendered[t.task_id] = {"render_error": f"{type(exc).__name__}: {exc}"}
    dags[d.dag_id] = {
        "tasks": sorted(t.task_id for t in d.tasks),
        "owners": sorted({t.owner for t in d.tasks}),
        "retries": sorted({t.retries for t in d.tasks}),
        "retry_backoff": sorted({bool(t.retry_exponential_backoff) for t in d.tasks}),
        "catchup": d.catchup, "tags": sorted(d.tags), "max_active_runs": d.max_active_runs,
        "schedule": f"{type(d.timetable).__name__} {cron(d.timetable)}",
        "params": sorted(d.params),
        "params_enum": {k: (d.params.get_param(k).schema or {}).get("enum")
                        for k in d.params},
        "downstream": {t.task_id: sorted(t.downstream_task_ids) for t in d.tasks},
        "upstream": {t.task_id: sorted(t.upstream_task_ids) for t in d.tasks},
        "trigger_rules": {t.task_id: getattr(t.trigger_rule, "value", t.trigger_rule)
                          for t in d.tasks},
        "rendered": rendered,
        "pools": {t.task_id: t.pool for t in d.tasks},
        # tasks that wait in the triggerer rather than in a worker slot
        # (a deferring operator resumes in a method of its own; the live-scheduler test sees
        # the task deferred)
        "deferrable": {t.task_id: True for t in d.tasks if hasattr(t, "execute_complete")},
        "outlets": {t.task_id: [f"{type(o).__name__} {o.name} {getattr(o, 'uri', '')}".strip()
                                for o in t.outlets] for t in d.tasks if t.outlets},
    }
print(json.dumps({"errors": {k: str(v) for k, v in bag.import_errors.items()},
                  "dags": dags, "heavy": heavy}, default=str))
