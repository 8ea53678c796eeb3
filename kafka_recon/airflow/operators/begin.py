"""`begin`, a run's first task after the form's checks: it waits for the window's closing time
(deferred, as `WaitUntilSensor`: no worker slot is held), then holds the window's run folder
for this DAG run and clears its previous outputs.

One task, not a wait followed by a task of its own: on a loaded scheduler each task start
costs seconds (9 to 16 s each in a fleet of eight flows), and every window paid one more before
its Spark step."""

from __future__ import annotations

from typing import Any

from kafka_recon.airflow.ownership import run_owner
from kafka_recon.airflow.sensors.wait_until import WaitUntilSensor


class BeginOperator(WaitUntilSensor):
    """Waits until `target_time` (the window's closing), then begins the run: holds the window
    (a second run of it, daily or ad-hoc, is refused naming the first) and clears every
    step's outputs. Its XCom is the run folder."""

    template_fields = (*WaitUntilSensor.template_fields, "flow", "start", "end")

    def __init__(self, *, flow: str, start: str, end: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.flow, self.start, self.end = flow, start, end

    def execute(self, context: Any) -> str:  # type: ignore[override]
        super().execute(context)  # raises TaskDeferred for a closing time well ahead
        return self._begin(context)

    def execute_complete(self, context: Any, event: Any = None) -> str:  # type: ignore[override]
        return self._begin(context)

    def _begin(self, context: Any) -> str:
        from kafka_recon import orchestrate

        run = orchestrate.load(self.flow, self.start, self.end)
        owner = run_owner(context)
        orchestrate.begin(run, owner)
        orchestrate.lease(run).keep_alive(owner)
        return str(run.out)
