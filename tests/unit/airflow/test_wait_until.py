"""The wait until a time (`begin`'s, a repair's `settle`): it defers only for a time
well ahead, so that its trigger never fires at once (apache/airflow#72716)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from kafka_recon.airflow.sensors.wait_until import WaitUntilSensor

pytestmark = pytest.mark.unit


def test_a_time_already_past_passes_at_once_without_deferring() -> None:
    past = (datetime.now(UTC) - timedelta(seconds=5)).isoformat()
    began = time.monotonic()
    assert WaitUntilSensor(task_id="w", target_time=past).execute({}) is None
    assert time.monotonic() - began < 1


def test_a_time_seconds_away_is_waited_for_in_the_task() -> None:
    soon = (datetime.now(UTC) + timedelta(seconds=2)).isoformat()
    WaitUntilSensor(task_id="w", target_time=soon).execute({})
    assert datetime.now(UTC) >= datetime.fromisoformat(soon)


def test_a_time_well_ahead_defers_to_a_trigger_at_that_time() -> None:
    from airflow.sdk.exceptions import TaskDeferred

    later = (datetime.now(UTC) + timedelta(minutes=5)).isoformat()
    with pytest.raises(TaskDeferred) as deferred:
        WaitUntilSensor(task_id="w", target_time=later).execute({})
    classpath, kwargs = deferred.value.trigger.serialize()
    assert classpath.endswith("DateTimeTrigger")
    assert abs((kwargs["moment"] - datetime.fromisoformat(later)).total_seconds()) < 1
