"""The Reconciliation page respects Airflow's permissions, against a real api-server.

Airflow's FAB auth manager (the one whose roles grant single DAGs) with two users: one may
read `recon__orders` only, the other `recon__clicks` only. Each sees only their flow on the
page, in the JSON and in the metrics; every file of the other flow (report, id file, Data
Docs, chart) answers 403, and a user with no grant at all sees nothing.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from harness.services.airflow import AirflowServers, airflow_env
from kafka_recon.settings import REPO_ROOT

pytestmark = pytest.mark.integration

FAB = "airflow.providers.fab.auth_manager.fab_auth_manager.FabAuthManager"
PASSWORD = "kafka-recon-perm"
WINDOW = "2026-11-20T000000Z_2026-11-21T000000Z"
READERS = {"orders_reader": "orders", "clicks_reader": "clicks"}


def _user(name: str, role: str) -> list[str]:
    return ["users", "create", "--username", name, "--password", PASSWORD, "--role", role,
            "--email", f"{name}@example.com", "--firstname", name, "--lastname", "test"]


@pytest.fixture(scope="module")
def server(postgres: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AirflowServers]:
    from kafka_recon.outputs import history
    from tests.unit.outputs.test_history import DAY, result

    work = tmp_path_factory.mktemp("perm")
    runs = work / "runs"
    for flow in READERS.values():  # a run folder each, with what a run serves
        run = runs / flow / WINDOW
        (run / "missing").mkdir(parents=True)
        (run / "report.html").write_text(f"<h1>report of {flow}</h1>")
        (run / "missing" / "t__s.csv").write_text("id,value\n7,{\"card\": \"4111\"}\n")
        docs = run / "gx" / "uncommitted" / "data_docs" / "local_site"
        docs.mkdir(parents=True)
        (docs / "index.html").write_text("docs")
    eng = history.engine(f"sqlite:///{work / 'history.db'}")
    for flow in READERS.values():
        found = result(DAY, 10, missing=2, status="findings", flow=flow)
        (runs / flow / WINDOW / "result.json").write_text(found.dumps())
        history.record(found, str(runs / flow / WINDOW),
                       str(runs / flow / WINDOW / "report.html"), eng=eng)
    # the DAGs' permissions exist once the DAGs are serialized and FAB has synced them
    setup = [["dags", "reserialize"], ["sync-perm", "--include-dags"],
             _user("admin", "Admin"), _user("nobody", "Public")]
    for name, flow in READERS.items():
        setup += [["roles", "create", f"{flow}_role"],
                  ["roles", "add-perms", f"{flow}_role", "--resource", f"DAG:recon__{flow}",
                   "--action", "can_read"],
                  _user(name, f"{flow}_role")]
    env = airflow_env(work / "airflow", smtp_port=2525, extra={
        "AIRFLOW__CORE__AUTH_MANAGER": FAB,
        "KAFKA_RECON_CONFIG": str(REPO_ROOT / "tests" / "data" / "flows.yaml"),
        "KAFKA_RECON_OUT": str(runs),
        "KAFKA_RECON_STORE": f"sqlite:///{work / 'history.db'}"})
    servers = AirflowServers(work / "airflow", env, password=PASSWORD,
                             database_url=postgres.create_database("airflow_perm"),
                             setup=setup)
    servers.start()
    try:
        yield servers
    finally:
        servers.stop()


def _get(server: AirflowServers, user: str, path: str) -> tuple[int, str]:
    token = server.token(user, PASSWORD)
    req = urllib.request.Request(f"{server.url}/recon/{path}",
                                 headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


@pytest.mark.parametrize(("user", "flow", "other"), [
    ("orders_reader", "orders", "clicks"), ("clicks_reader", "clicks", "orders")])
def test_each_user_sees_and_reads_only_the_flow_whose_dag_they_may_read(
        server: AirflowServers, user: str, flow: str, other: str) -> None:
    code, latest = _get(server, user, "api/latest")
    assert code == 200, latest
    assert [r["flow"] for r in json.loads(latest)] == [flow]
    code, page = _get(server, user, "?span=30d&until=2026-11-25T00:00:00Z")
    assert code == 200 and f'data-flow="{flow}"' in page
    assert json.loads(latest)[0]["window_link"] == f"/recon/windows/{flow}/{WINDOW}"
    # no trace of the other flow: neither its row nor its windows nor its name as a flow
    # (the tiers of both flows here are called clicks_topic and lake)
    assert f'data-flow="{other}"' not in page and f"windows/{other}/" not in page
    assert f"#flow-{other}" not in page
    # its window's page, and not the other's; a reader may not trigger: no action offered
    code, window = _get(server, user, f"windows/{flow}/{WINDOW}")
    assert code == 200 and "Re-run this window" not in window, window
    assert _get(server, user, f"windows/{other}/{WINDOW}")[0] == 403
    code, metrics = _get(server, user, "metrics")
    assert code == 200 and f'flow="{flow}"' in metrics and f'flow="{other}"' not in metrics
    for path in ("report.html", "missing/t__s.csv",
                 "gx/uncommitted/data_docs/local_site/index.html"):
        code, body = _get(server, user, f"runs/{flow}/{WINDOW}/{path}")
        assert code == 200, (path, body)
        code, body = _get(server, user, f"runs/{other}/{WINDOW}/{path}")
        assert code == 403, (path, code, body)
        assert "4111" not in body
    assert _get(server, user, f"charts/{flow}.png")[0] == 200
    assert _get(server, user, f"charts/{other}.png")[0] == 403


def test_a_user_allowed_no_dag_sees_no_flow_and_the_admin_sees_both(
        server: AirflowServers) -> None:
    code, latest = _get(server, "nobody", "api/latest")
    assert (code, json.loads(latest)) == (200, [])
    assert _get(server, "nobody", f"runs/orders/{WINDOW}/report.html")[0] == 403
    code, latest = _get(server, "admin", "api/latest")
    assert sorted(r["flow"] for r in json.loads(latest)) == ["clicks", "orders"]
    # the admin may trigger the ad-hoc DAG: the action is offered
    code, window = _get(server, "admin", f"windows/orders/{WINDOW}")
    assert code == 200 and "Re-run this window" in window, window
