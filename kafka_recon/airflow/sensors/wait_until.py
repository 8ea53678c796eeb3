"""A wait until a time, in the triggerer: `begin` (a window's closing time, its end
plus the flow's grace and disorder margin) and a repair's `settle`."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.providers.standard.sensors.date_time import DateTimeSensorAsync

# a time nearer than this is waited for in the task itself (see WaitUntilSensor)
NEAR = timedelta(seconds=20)


class WaitUntilSensor(DateTimeSensorAsync):
    """Waits, deferred, until `target_time`; passes at once when it has passed, and waits the
    last seconds in the task.

    Airflow's own `DateTimeSensorAsync` defers even for a time already past. Its trigger then
    fires at once, and on Airflow 3.2 and 3.3 the worker's late report of the deferring
    attempt can reach the scheduler after the resumed attempt has started: the scheduler takes
    it for a task killed from outside and retries it, again and again (apache/airflow#72716,
    #71580). That happened to the windows of a loaded fleet, whose tasks started after their
    closing time, and left them inconclusive. So only a time more than `NEAR` away is
    deferred for: by the time its trigger fires, the deferral was reported long before.
    (`end_from_trigger` would spare the resumed attempt, but Airflow refuses it wherever a
    listener such as OpenLineage's is installed.)"""

    def execute(self, context: Any) -> None:  # type: ignore[override]
        left = (self._target() - datetime.now(UTC)).total_seconds()
        if left > NEAR.total_seconds():
            super().execute(context)  # raises TaskDeferred
        if left > 0:
            self.log.info("%s is %.0f s away: waited for here", self.target_time, left)
            time.sleep(left)

    def _target(self) -> datetime:
        moment = datetime.fromisoformat(str(self.target_time).replace("Z", "+00:00"))
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
