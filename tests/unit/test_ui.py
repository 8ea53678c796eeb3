"""The Reconciliation page's routes: only run artefacts are served, errors are JSON.

Airflow's login is replaced by a stand-in user here (FastAPI's dependency override); the
login itself is tested end to end against Airflow's api-server in the integration tier.
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

    from kafka_recon.faces.ui import create_app

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
    monkeypatch.setenv("KAFKA_RECON_HISTORY", f"sqlite:///{tmp_path / 'h.db'}")
    app = create_app()
    app.dependency_overrides[get_user] = lambda: None
    return TestClient(app)


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
