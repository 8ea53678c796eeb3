"""The Reconciliation page's routes: only run artefacts are served, errors are JSON.

Airflow's login is replaced by a stand-in user here (FastAPI's dependency override), and its
auth manager by one that lets each user read the DAGs it is given; the login and a real auth
manager with per-DAG permissions are tested against Airflow's api-server in the integration
tier (test_permissions.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.unit


@pytest.fixture
def client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    from kafka_recon.airflow.plugins.ui import create_app

    root = tmp_path / "runs"
    run = root / "orders" / "2026-11-20T000000Z_2026-11-21T000000Z"
    (run / "missing").mkdir(parents=True)
    (run / "report.html").write_text("<h1>report</h1>")
    (run / "missing" / "a__b.csv").write_text("id\n7\n")
    (run / "result.json").write_text("{}")
    (root / "history.db").write_text("not for browsers")
    (root / "flume.db").write_text("not for browsers")
    (tmp_path / "outside.txt").write_text("not for browsers")
    os.symlink(tmp_path / "outside.txt", run / "missing" / "linked.csv")
    os.symlink(tmp_path, root / "escape")
    monkeypatch.setenv("KAFKA_RECON_OUT", str(root))
    monkeypatch.setenv("KAFKA_RECON_STORE", f"sqlite:///{tmp_path / 'h.db'}")
    import airflow.api_fastapi.app as airflow_app

    monkeypatch.setattr(airflow_app, "get_auth_manager", lambda: _DagsAuthManager())
    from kafka_recon.outputs import history
    from tests.unit.outputs.test_history import DAY, result

    eng = history.engine(f"sqlite:///{tmp_path / 'h.db'}")
    for flow in ("orders", "clicks"):
        history.record(result(DAY, 10, flow=flow), str(root / flow), eng=eng)
    app = create_app()
    app.dependency_overrides[get_user] = lambda: USER[0]
    return TestClient(app)


class _User:
    def __init__(self, name: str, dags: set[str] | None) -> None:
        self.name, self.dags = name, dags  # None: every DAG

    def get_name(self) -> str:
        return self.name


class _DagsAuthManager:
    """A stand-in for Airflow's auth manager: a user may read the DAGs it was given."""

    def filter_authorized_dag_ids(self, *, dag_ids: set[str], user: _User, method: str = "GET"
                                  ) -> set[str]:
        assert method == "GET"
        return set(dag_ids) if user.dags is None else dag_ids & user.dags


ADMIN = _User("admin", None)
USER = [ADMIN]  # who the next request is made as


@pytest.fixture
def as_clicks_reader(client: Any) -> Any:
    USER[0] = _User("web", {"recon__clicks"})
    yield client
    USER[0] = ADMIN


W = "orders/2026-11-20T000000Z_2026-11-21T000000Z"


def test_reports_and_id_files_are_served(client: Any) -> None:
    assert client.get(f"/runs/{W}/report.html").text == "<h1>report</h1>"
    assert client.get(f"/runs/{W}/missing/a__b.csv").text == "id\n7\n"


@pytest.mark.parametrize("path", [
    "history.db", "flume.db", f"{W}/result.json", "orders/history.db",
    f"{W}/../../history.db", f"{W}/..%2F..%2Fflume.db", f"{W}/missing/linked.csv",
    "escape/outside.txt/x", "escape/x/outside.txt", f"{W}/missing",
])
def test_nothing_but_run_artefacts_is_served(client: Any, path: str) -> None:
    r = client.get(f"/runs/{path}")
    assert r.status_code == 404, (path, r.text)
    assert "not for browsers" not in r.text


def test_an_error_body_is_json_whatever_the_flow_name_holds(client: Any) -> None:
    r = client.get('/charts/or"ders\\.png')
    assert r.status_code == 404
    assert json.loads(r.text) == {"detail": "no recorded run of flow 'or\"ders\\'"}


def test_a_user_who_may_not_read_a_flows_dag_gets_403_for_every_file_of_it(
        as_clicks_reader: Any) -> None:
    for path in (f"/runs/{W}/report.html", f"/runs/{W}/missing/a__b.csv",
                 f"/runs/{W}/gx/index.html", "/charts/orders.png"):
        r = as_clicks_reader.get(path, headers={"Accept": "text/html"})
        assert r.status_code == 403, (path, r.status_code)
        assert "you may not read flow 'orders'" in r.text
    # the flow they may read is theirs to see
    assert as_clicks_reader.get("/charts/clicks.png").status_code == 200


def test_a_user_sees_no_trace_of_a_flow_they_may_not_read(as_clicks_reader: Any) -> None:
    assert [r["flow"] for r in as_clicks_reader.get("/api/latest").json()] == ["clicks"]
    page = as_clicks_reader.get("/").text
    assert "clicks" in page and "orders" not in page


def test_a_user_allowed_both_dags_sees_both_flows(client: Any) -> None:
    assert [r["flow"] for r in client.get("/api/latest").json()] == ["clicks", "orders"]
    assert client.get(f"/runs/{W}/report.html").status_code == 200
