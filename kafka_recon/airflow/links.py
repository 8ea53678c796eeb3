"""The link from a run's tasks to its window's page: "Reconciliation window" among a task's
extra links in Airflow's UI, so a red run is one click from the lost ids.

Airflow 3 computes a task's extra links on the worker when the task ends, whatever its state,
and keeps them in XCom; the plugin registers the link so the UI shows it."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperatorLink

PREFIX = "/recon"  # where the plugin's pages are under Airflow's address


def window_of_task(task: Any) -> tuple[str, str, str] | None:
    """(flow, start, end) as the task was given them, rendered: a Spark step's command line
    arguments, or a TaskFlow task's keyword arguments."""
    args = list(getattr(task, "application_args", None) or [])
    if "--flow" in args and "--start" in args and "--end" in args:
        def value(flag: str) -> str:
            return str(args[args.index(flag) + 1])

        return value("--flow"), value("--start"), value("--end")
    kwargs = getattr(task, "op_kwargs", None) or {}
    if all(k in kwargs for k in ("flow", "start", "end")):
        return str(kwargs["flow"]), str(kwargs["start"]), str(kwargs["end"])
    return None


def window_path(flow: str, start: str, end: str) -> str:
    """The window's page under Airflow's address: /recon/windows/<flow>/<run folder name>."""
    from urllib.parse import quote

    from kafka_recon.runfolder import window_folder_name
    from kafka_recon.window import Window

    return (f"{PREFIX}/windows/{quote(flow, safe='')}/"
            f"{window_folder_name(Window.parse(start, end))}")


def window_page(flow: str, start: str, end: str) -> str:
    """The window's page: at Airflow's own address where it is known, else its path."""
    from kafka_recon.settings import ui_url

    return (ui_url() or "").rstrip("/") + window_path(flow, start, end)


class WindowPageLink(BaseOperatorLink):
    """The window's page on the Reconciliation page."""

    name = "Reconciliation window"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        window = window_of_task(operator)
        return window_page(*window) if window else ""
