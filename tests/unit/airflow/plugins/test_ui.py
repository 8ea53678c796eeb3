"""The Reconciliation page's routes: only run artefacts are served, errors are JSON.

Airflow's login is replaced by a stand-in user here (FastAPI's dependency override), and its
auth manager by one that lets each user read the DAGs it is given; the login and a real auth
manager with per-DAG permissions are tested against Airflow's api-server in the integration
tier (test_permissions.py).
"""

from __future__ import annotations

import html
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
    config = tmp_path / "flows.yaml"
    config.write_text(FLOWS)
    monkeypatch.setenv("KAFKA_RECON_CONFIG", str(config))
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


FLOWS = """
flows:
""" + "".join(f"""
  {name}:
    owners: [{name}-team@example.com]
    record: {{id: "$.id", event_time: "$.ts"}}
    tiers:
      - {{name: {name}_topic, type: kafka, bootstrap: "127.0.0.1:9092", topic: {name}}}
      - {{name: lake, type: sql, conn: "sqlite:///x.db",
         ids: "SELECT id, ts AS event_time FROM t WHERE ts >= :start AND ts < :end"}}
""" for name in ("orders", "clicks"))


class _User:
    def __init__(self, name: str, dags: set[str] | None, triggers: bool = True) -> None:
        self.name, self.dags = name, dags  # None: every DAG
        self.triggers = triggers  # may start runs of the DAGs it may read

    def get_name(self) -> str:
        return self.name


class _DagsAuthManager:
    """A stand-in for Airflow's auth manager: a user may read the DAGs it was given."""

    def filter_authorized_dag_ids(self, *, dag_ids: set[str], user: _User, method: str = "GET"
                                  ) -> set[str]:
        assert method == "GET"
        return set(dag_ids) if user.dags is None else dag_ids & user.dags

    def is_authorized_dag(self, *, method: str, user: _User, access_entity: Any = None,
                          details: Any = None) -> bool:
        assert method == "POST"
        return user.triggers and (user.dags is None or details.id in user.dags)


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
        # a person gets a page that says so, a program JSON
        assert r.headers["content-type"].startswith("text/html")
        assert "you may not read flow 'orders'" in html.unescape(r.text)
        assert "you may not read flow 'orders'" in as_clicks_reader.get(path).json()["detail"]
    # the flow they may read is theirs to see
    assert as_clicks_reader.get("/charts/clicks.png").status_code == 200


def test_a_user_sees_no_trace_of_a_flow_they_may_not_read(as_clicks_reader: Any) -> None:
    assert [r["flow"] for r in as_clicks_reader.get("/api/latest").json()] == ["clicks"]
    page = as_clicks_reader.get("/").text
    assert "clicks" in page and "orders" not in page


def test_a_flow_whose_config_is_wrong_is_listed_apart_with_its_field_and_the_rest_shown(
        client: Any, tmp_path: Path) -> None:
    config = tmp_path / "flows.yaml"
    config.write_text(FLOWS + """
  payments:
    owners: [p@example.com]
    tolerance: {loss: "150%"}
    record: {id: "$.id", event_time: "$.ts"}
    tiers:
      - {name: topic, type: kafka, bootstrap: "127.0.0.1:9092", topic: payments}
      - {name: lake, type: sql, conn: "sqlite:///x.db",
         ids: "SELECT id, ts AS event_time FROM t WHERE ts >= :start AND ts < :end"}
""")
    os.utime(config, (1, 1))  # a new modification time: the page reads the config again
    grid = client.get("/api/grid").json()
    assert grid["problem"] is None
    assert sorted(f["flow"] for f in grid["flows"]) == ["clicks", "orders"]
    [bad] = grid["invalid"]
    assert bad["flow"] == "payments"
    [(field, message)] = bad["fields"]
    assert field == "tolerance.loss" and "150%" in message
    page = client.get("/").text
    invalid = page[page.index('id="invalid"'):page.index("</section>")]
    assert "Not watched: 1 flow whose config is wrong" in invalid
    assert "<b>payments</b>" in invalid and "<code>tolerance.loss</code>" in invalid
    assert str(config) in invalid
    assert 'data-flow="orders"' in page and 'data-flow="clicks"' in page
    # a user who may not read the bad flow's DAG does not see it either
    USER[0] = _User("web", {"recon__clicks"})
    try:
        assert client.get("/api/grid").json()["invalid"] == []
    finally:
        USER[0] = ADMIN


def test_a_user_allowed_both_dags_sees_both_flows(client: Any) -> None:
    assert [r["flow"] for r in client.get("/api/latest").json()] == ["clicks", "orders"]
    assert client.get(f"/runs/{W}/report.html").status_code == 200


@pytest.fixture
def window(client: Any, tmp_path: Path) -> str:
    """The orders window's run folder with a real result: 250 ids lost on the consume side,
    a validation that failed, and the day before recorded too."""
    from kafka_recon.config import Tolerance
    from kafka_recon.outputs import history
    from kafka_recon.outputs.validate import validate_result
    from kafka_recon.runfolder import RunFolder
    from tests.factories import finding, hop, replay, result, tier

    folder = RunFolder(tmp_path / "runs" / W)
    lost = [f"o-{i:04d}" for i in range(250)]
    (folder.path / "missing" / "topic__lake.csv").write_text("id\n" + "\n".join(lost) + "\n")
    r = result("orders", tiers=[tier("orders_topic", 1000), tier("lake", 750)],
               hops=[hop("orders_topic", "lake", "consume", 1000, 750, missing=250,
                         missing_ids="missing/topic__lake.csv")],
               replays=[replay("g1", 1000), replay("g2", 1000)],
               findings=[finding("loss", "consume", "orders_topic->lake", 250,
                                 ids="missing/topic__lake.csv")])
    folder.write(r)
    folder.write(validate_result(r, folder, Tolerance()))
    history.record(r, str(folder.path))
    return f"/windows/{W}"


def test_the_grid_shows_each_flow_by_its_windows_with_the_verdict_and_counts_on_hover(
        client: Any, window: str) -> None:
    # the span ends a few days after the recorded window, whatever day the test runs
    until = "&until=2026-11-25T00:00:00Z"
    page = client.get(f"/?span=30d{until}").text
    assert 'data-flow="orders"' in page and 'data-flow="clicks"' in page
    grid = client.get(f"/api/grid?span=30d{until}").json()
    orders = next(f for f in grid["flows"] if f["flow"] == "orders")
    assert len(orders["codes"]) == 30 and set(orders["codes"]) >= {"f", "n"}
    # the window with findings: its slot, and its verdict line for the hover
    slot = orders["codes"].index("f")
    assert orders["first"] + slot * orders["step"] == 1795132800  # 2026-11-20T00:00:00Z
    assert orders["said"][str(slot)].startswith("orders 2026-11-20T00:00:00Z..")
    assert f"data-codes=\"{orders['codes']}\"" in page
    assert client.get("/api/grid?until=yesterday").status_code == 400
    only = client.get(f"/api/grid?span=30d&owner=clicks-team{until}").json()["flows"]
    assert [f["flow"] for f in only] == ["clicks"]


def test_a_windows_page_shows_its_hops_findings_and_ids_a_page_at_a_time(
        client: Any, window: str) -> None:
    page = html.unescape(client.get(window).text)
    assert "orders_topic" in page and "250 missing" in page
    assert "250 records lost on the consume side between orders_topic and lake" in page
    assert "recon_hops: orders_topic->lake: 250 records missing, 0 allowed" in page
    assert "<code>o-0000</code>" in page and "<code>o-0099</code>" in page
    assert "<code>o-0100</code>" not in page  # a hundred a page
    second = html.unescape(client.get(f"{window}?file=missing/topic__lake.csv&page=3").text)
    assert "<code>o-0200</code>" in second and "<code>o-0249</code>" in second
    assert "next 100" not in second
    found = html.unescape(client.get(f"{window}?file=missing/topic__lake.csv&q=o-0173").text)
    assert "1 id(s) containing" in found and "<code>o-0173</code>" in found
    assert "<code>o-0000</code>" not in found
    assert client.get(f"/runs/{W}/missing/topic__lake.csv").text.count("\n") == 251
    # no chart in the run folder: none shown, never a broken image
    assert 'id="buckets"' not in page
    # the validation, rendered here: no Data Docs, no internet
    v = html.unescape(client.get(f"{window}/validation").text)
    assert "orders_topic->lake: 250 records missing, 0 allowed" in v


def test_actions_are_offered_only_to_those_who_may_trigger_and_name_their_run(
        client: Any, window: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import airflow.api.common.trigger_dag as airflow_trigger

    asked: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(airflow_trigger, "trigger_dag",
                        lambda dag_id, **kw: asked.append((dag_id, kw)))
    page = client.get(window).text
    assert "Re-run this window" in page and "Repair this window" in page
    r = client.post(f"{window}/rerun", follow_redirects=False)
    assert r.status_code == 303
    [(dag_id, kw)] = asked
    assert dag_id == "recon_adhoc" and kw["conf"]["flow"] == "orders"
    assert kw["conf"]["start"] == "2026-11-20T00:00:00Z"
    assert kw["run_id"].startswith(f"rerun__orders__{W.split('/')[1]}__")
    assert r.headers["location"] == f"/dags/recon_adhoc/runs/{kw['run_id']}"
    # another site's form is refused
    assert client.post(f"{window}/repair", headers={"Origin": "http://evil.example"},
                       follow_redirects=False).status_code == 403
    USER[0] = _User("reader", None, triggers=False)
    try:
        assert "Re-run this window" not in client.get(window).text
        assert client.post(f"{window}/rerun").status_code == 403
    finally:
        USER[0] = ADMIN
    assert len(asked) == 1


def test_the_json_carries_links_not_server_paths(client: Any, window: str) -> None:
    rows = client.get("/api/latest").json()
    orders = next(r for r in rows if r["flow"] == "orders")
    assert not {"run_dir", "report", "data_docs"} & set(orders)
    assert orders["window_link"] == f"/recon{window}"
    assert "/tmp" not in json.dumps(rows) and str(Path.home()) not in json.dumps(rows)


def test_a_person_asking_for_a_missing_window_gets_a_page_a_program_json(
        client: Any) -> None:
    missing = "/windows/orders/2026-01-01T000000Z_2026-01-02T000000Z"
    page = client.get(missing, headers={"Accept": "text/html"})
    assert page.status_code == 404 and "<h1>Not found</h1>" in page.text
    assert client.get(missing).json()["detail"].startswith("window 2026-01-01T000000Z")
    assert client.get("/windows/orders/..").status_code == 404


def test_a_windows_page_shows_its_own_chart_when_the_run_drew_one(
        client: Any, window: str, tmp_path: Path) -> None:
    from kafka_recon.outputs.chart import run_chart
    from kafka_recon.result.model import Result
    from kafka_recon.runfolder import RunFolder

    folder = RunFolder(tmp_path / "runs" / W)
    drawn = Result.load(folder.result).as_json()
    drawn["tiers"][0]["buckets"] = {"2026-11-20T00:00:00Z": 1000}
    folder.file("chart").write_bytes(run_chart(drawn))
    page = client.get(window).text
    assert f'id="buckets" class="chart" src="/recon/runs/{W}/chart.png"' in page
    assert client.get(f"/runs/{W}/chart.png").content.startswith(b"\x89PNG")
