"""End to end through Airflow's own servers: the api-server, scheduler (LocalExecutor),
dag-processor and triggerer on loopback; the ad-hoc DAG triggered through the REST API v2; the
mail at the local SMTP server; the history; the plugin page behind login; screenshots."""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest

from harness.demo.__main__ import FLOW, demo_env, latest_closed_day, make_data
from harness.services.airflow import AirflowServers
from harness.services.kafka import KafkaCluster
from harness.services.smtp import MailCatcher, read_maildir

pytestmark = pytest.mark.integration

CHROMIUM = "/usr/bin/chromium"
METRICS_TOKEN = "scrape-me-7f3a"


@dataclass
class Stack:
    workdir: Path
    airflow: AirflowServers
    mail: Path
    truth: dict[str, Any]
    start: str
    end: str


# the repo's DAGs, and the test's downstream DAGs (tests/integration/dags) as a bundle of
# their own: they are not shipped
BUNDLES = [{"name": "dags-folder", "kwargs": {},
            "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle"},
           {"name": "downstream", "kwargs": {"path": str(Path(__file__).parent / "dags")},
            "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle"}]
HOURLY = "demo_hourly"


def _with_hourly_flow(workdir: Path) -> Path:
    """The shipped flow config plus the demo flow reconciled hourly (`window: 1h`)."""
    import yaml

    from kafka_recon.settings import REPO_ROOT

    doc = yaml.safe_load((REPO_ROOT / "config" / "flows.yaml").read_text())
    doc["flows"][HOURLY] = {**doc["flows"][FLOW], "window": "1h", "grace": "1m"}
    out = workdir / "flows.yaml"
    out.write_text(yaml.safe_dump(doc))
    return out


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, postgres: Any) -> Iterator[Stack]:
    workdir = tmp_path_factory.mktemp("e2e")
    # the latest closed day, whatever the hour the test runs at
    end = latest_closed_day()
    start = end - timedelta(days=1)
    kafka = KafkaCluster(workdir / "kafka", size=1).start()
    mail = MailCatcher(workdir / "mail").start()
    servers = None
    try:
        truth = make_data(workdir, kafka.bootstrap, start, end, 300, 1)
        servers = AirflowServers(workdir / "airflow",
                                 {**demo_env(workdir, kafka.bootstrap, mail.port),
                                  "KAFKA_RECON_METRICS_TOKEN": METRICS_TOKEN,
                                  "KAFKA_RECON_CONFIG": str(_with_hourly_flow(workdir)),
                                  "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST":
                                      json.dumps(BUNDLES)},
                                 database_url=postgres.create_database("airflow_e2e")).start()
        # the daily DAG stays paused: its first run would reconcile the same window at once
        servers.unpause("recon_adhoc")
        yield Stack(workdir, servers, workdir / "mail", truth,
                    start.strftime("%Y-%m-%dT%H:%M:%SZ"), end.strftime("%Y-%m-%dT%H:%M:%SZ"))
    finally:
        if servers:
            servers.stop()
        mail.stop()
        kafka.stop()


def _trigger(s: Stack, conf: dict[str, Any]) -> tuple[int, Any]:
    return s.airflow.api("POST", "/dags/recon_adhoc/dagRuns",
                         {"logical_date": None, "conf": conf})


def _wait_run(s: Stack, run_id: str, timeout: float = 600) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code, run = s.airflow.api("GET", f"/dags/recon_adhoc/dagRuns/{run_id}")
        assert code == 200, run
        if run["state"] in ("success", "failed"):
            return dict(run)
        time.sleep(3)
    raise AssertionError(f"run {run_id} did not finish within {timeout}s; logs in "
                         f"{s.airflow.home / 'logs'}")


def _task_states(s: Stack, run_id: str) -> dict[str, Any]:
    code, body = s.airflow.api("GET", f"/dags/recon_adhoc/dagRuns/{run_id}/taskInstances")
    assert code == 200, body
    states: dict[str, Any] = {}
    for ti in body["task_instances"]:
        states.setdefault(ti["task_id"], []).append(ti["state"])
    return {k: v[0] if len(v) == 1 else sorted(v) for k, v in states.items()}


@pytest.mark.parametrize(("conf", "field"), [
    ({"flow": "no_such_flow"}, "flow"),
    ({"replays": 0}, "replays"),
    ({"start": "yesterday"}, "start"),
    ({"email": "perhaps"}, "email"),
])
def test_invalid_params_are_refused_at_trigger_time_with_the_field_named(
        stack: Stack, conf: dict[str, Any], field: str) -> None:
    code, body = _trigger(stack, {"flow": FLOW, "start": stack.start, "end": stack.end,
                                  "replays": 2, "email": False, **conf})
    assert code == 400, body
    detail = str(body["detail"] if isinstance(body, dict) else body)
    assert f"'{field}'" in detail or field in detail, detail
    assert str(next(iter(conf.values()))) in detail, detail


def test_a_window_that_ends_before_it_starts_fails_its_check_task_with_the_reason(stack: Stack
                                                                                ) -> None:
    code, run = _trigger(stack, {"flow": FLOW, "start": stack.end, "end": stack.start,
                                 "replays": 1, "email": False})
    assert code == 200, run
    done = _wait_run(stack, run["dag_run_id"], timeout=240)
    assert done["state"] == "failed"
    states = _task_states(stack, run["dag_run_id"])
    assert states["check"] == "failed"
    assert states["replay_reconcile"] == "upstream_failed"
    code, log = stack.airflow.api(
        "GET", f"/dags/recon_adhoc/dagRuns/{run['dag_run_id']}/taskInstances/check/logs/1")
    assert code == 200, log
    assert "trigger form: window end" in str(log) and "is not after its start" in str(log)


@pytest.fixture(scope="module")
def adhoc_run(stack: Stack) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ad-hoc DAG over the demo window, triggered once with a conf; (run, task states)."""
    code, run = _trigger(stack, {"flow": FLOW, "start": stack.start, "end": stack.end,
                                 "replays": 3, "email": True})
    assert code == 200, run
    done = _wait_run(stack, run["dag_run_id"])
    return done, _task_states(stack, run["dag_run_id"])


def test_adhoc_run_triggered_through_the_rest_api_mails_owners_and_records_history(
        stack: Stack, adhoc_run: tuple[dict[str, Any], dict[str, Any]],
        artifacts_dir: Path) -> None:
    lost = stack.truth["lost_consume_side"]
    assert lost, "the demo consumer must have lost records"
    done, states = adhoc_run
    # findings beyond tolerance: the run is red, and every step that tells people still ran
    assert done["state"] == "failed", states
    assert states == {"check": "success", "begin": "success", "stage": "success",
                      "replay_reconcile": "success",
                      "report": "failed", "notify": "success", "alert": "skipped",
                      "verdict": "failed"}
    # Airflow's list of runs says which flow and window the run reconciled
    code, listed = stack.airflow.api("GET", f"/dags/recon_adhoc/dagRuns/{done['dag_run_id']}")
    assert code == 200 and listed["note"] == f"{FLOW} {stack.start} – {stack.end}", listed
    # the red task links the window's page, and its log says the verdict in words
    folder = f"{stack.start}_{stack.end}".replace(":", "")
    for task_id in ("verdict", "replay_reconcile"):
        code, links = stack.airflow.api(
            "GET", f"/dags/recon_adhoc/dagRuns/{done['dag_run_id']}/taskInstances/{task_id}"
                   "/links")
        assert code == 200, links
        assert list(links["extra_links"]) == ["Reconciliation window"], links
        assert links["extra_links"]["Reconciliation window"] == \
            f"{stack.airflow.url}/recon/windows/{FLOW}/{folder}", links
    code, log = stack.airflow.api(
        "GET", f"/dags/recon_adhoc/dagRuns/{done['dag_run_id']}/taskInstances/verdict/logs/1")
    assert code == 200 and f"verdict: {FLOW} {stack.start}..{stack.end}: FINDINGS" in str(log)

    [mail_file] = sorted(stack.mail.glob("*.eml"))
    [mail] = read_maildir(stack.mail)
    assert mail["To"] == "orders-team@example.com"
    assert mail["Subject"] == f"FINDINGS {FLOW}: {len(lost)} lost, {stack.start[:10]}"
    html = mail.get_body(("html",))
    assert html is not None
    assert f"{len(lost)} records lost on the consume side between orders_topic and warehouse" \
        in html.get_content()
    assert isinstance(mail, EmailMessage)
    related = mail.get_body(("related",))
    assert related is not None
    assert [p["Content-ID"] for p in related.iter_parts()
            if p.get_content_type() == "image/png"] == ["<chart.png>"]
    [csv] = list(mail.iter_attachments())
    assert sorted(int(i) for i in csv.get_content().split()[1:]) == lost
    artifacts_dir.joinpath("e2e-mail.eml").write_bytes(mail_file.read_bytes())

    from kafka_recon.outputs import history

    eng = history.engine(f"sqlite:///{stack.workdir / 'runs' / 'history.db'}")
    [row] = history.flow_runs(FLOW, eng=eng)
    assert (row["status"], row["missing"], row["window_start"]) == (
        "findings", len(lost), stack.start)
    result_replays = __import__("json").loads(
        Path(row["run_dir"]).joinpath("result.json").read_text())["replays"]
    assert len(result_replays) == 3, "the form's replay count reached the Spark job"


def _get(url: str, headers: dict[str, str]) -> tuple[int, bytes, dict[str, str]]:
    class _NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *a: Any, **k: Any) -> None:
            return None

    try:
        r = urllib.request.build_opener(_NoRedirect).open(
            urllib.request.Request(url, headers=headers), timeout=30)
        return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), dict(exc.headers)


def test_plugin_page_answers_only_behind_airflow_login(
        stack: Stack, adhoc_run: tuple[dict[str, Any], dict[str, Any]]) -> None:
    page = f"{stack.airflow.url}/recon/"
    code, _, _ = _get(page, {})
    assert code == 401
    code, _, headers = _get(page, {"Accept": "text/html"})
    assert code == 303 and headers["location"].startswith("/auth/login/?next=")
    token = stack.airflow.token()
    code, body, _ = _get(page, {"Cookie": f"_token={token}", "Accept": "text/html"})
    assert code == 200
    text = body.decode()
    assert f'data-flow="{FLOW}"' in text
    auth = {"Authorization": f"Bearer {token}"}
    code, png, _ = _get(f"{page}charts/{FLOW}.png", auth)
    assert code == 200 and png.startswith(b"\x89PNG")
    code, body, _ = _get(f"{page}api/latest", auth)
    [row] = [r for r in json.loads(body) if r["flow"] == FLOW]
    assert row["status"] == "findings" and "run_dir" not in row
    code, window, _ = _get(f"{stack.airflow.url}{row['window_link']}", auth)
    assert code == 200 and b"records lost on the consume side" in window
    code, report, _ = _get(f"{stack.airflow.url}{row['report_link']}", auth)
    assert code == 200 and b"records lost on the consume side" in report
    code, _, _ = _get(f"{page}runs/..%2F..%2Fairflow%2Fpasswords.json",
                      {"Authorization": f"Bearer {token}"})
    assert code == 404, "the run-file route must not leave the runs folder"


def test_prometheus_scrapes_the_plugins_metrics_and_fires_the_readmes_alert(
        stack: Stack, adhoc_run: tuple[dict[str, Any], dict[str, Any]]) -> None:
    """Debian's Prometheus scrapes /recon/metrics from Airflow's api-server with the metrics
    token and evaluates the shipped rule file (docs/platform.md's example)."""
    from harness.services.prometheus import Prometheus
    from kafka_recon.settings import REPO_ROOT

    lost = len(stack.truth["lost_consume_side"])
    code, _, _ = _get(f"{stack.airflow.url}/recon/metrics", {})
    assert code == 401, "the metrics need the token or a login"
    address = stack.airflow.url.removeprefix("http://")
    with Prometheus(stack.workdir / "prometheus",
                    [{"job": "kafka-recon", "address": address, "path": "/recon/metrics",
                      "token": METRICS_TOKEN}],
                    [REPO_ROOT / "config" / "prometheus" / "kafka_recon_rules.yml"]) as prom:
        deadline = time.monotonic() + 60
        while not (missing := prom.query("kafka_recon_missing_records > 0")):
            assert time.monotonic() < deadline, prom.targets_health()
            time.sleep(1)
        assert prom.targets_health() == {"kafka-recon": "up"}
        assert [(m["metric"]["flow"], m["metric"]["hop"], m["metric"]["side"], m["value"])
                for m in missing] == [(FLOW, "orders_topic->warehouse", "consume", lost)]
        [status] = prom.query('kafka_recon_status == 1')
        assert (status["metric"]["flow"], status["metric"]["status"]) == (FLOW, "findings")
        [age] = prom.query("kafka_recon_window_age_seconds")
        assert 0 <= age["value"] < 2 * 86400
        [took] = prom.query("kafka_recon_run_duration_seconds")
        assert took["value"] > 0
        while not (firing := [a for a in prom.alerts() if a["state"] == "firing"]):
            assert time.monotonic() < deadline + 30, prom.alerts()
            time.sleep(1)
        assert [(a["labels"]["alertname"], a["labels"]["flow"]) for a in firing] == [
            ("KafkaReconMissingRecords", FLOW)]
        assert f"{lost} record(s) missing on orders_topic->warehouse" in \
            firing[0]["annotations"]["summary"]
        [(_, total)] = [(m["metric"]["flow"], m["value"]) for m in
                        prom.query("flow:kafka_recon_missing_records:sum")]
        assert total == lost


def _runs(s: Stack, dag_id: str, **query: str) -> list[dict[str, Any]]:
    from urllib.parse import urlencode

    code, body = s.airflow.api("GET", f"/dags/{dag_id}/dagRuns?{urlencode(query)}")
    assert code == 200, body
    return list(body["dag_runs"])


def _hours_without_demo_data(s: Stack) -> list[datetime]:
    """Three consecutive whole hours that have closed (the hourly flow's grace, 1m, and disorder
    margin, 5m, included), and
    hold none of the demo data (ok windows): the latest three, or the three before the demo's
    day when the latest reach back into it (a run in the first hours of a UTC day)."""
    data_start, data_end = (datetime.fromisoformat(t) for t in (s.start, s.end))
    newest_end = (datetime.now(UTC) - timedelta(minutes=6)).replace(
        minute=0, second=0, microsecond=0)
    first = newest_end - timedelta(hours=3)
    if first < data_end and newest_end > data_start:
        first = data_start - timedelta(hours=3)
    return [first + timedelta(hours=k) for k in range(3)]


def test_a_backfill_of_three_hourly_windows_reconciles_each_and_updates_the_flows_asset(
        stack: Stack, adhoc_run: tuple[dict[str, Any], dict[str, Any]]) -> None:
    """A flow with `window: 1h` gets an hourly DAG; three past hours backfilled through the
    REST API are each reconciled and recorded; each ok window updates the flow's Asset, which
    runs a downstream DAG, while the findings window of the ad-hoc run updated nothing."""
    from kafka_recon.outputs import history

    for dag in (f"after_{FLOW}", f"after_{HOURLY}"):
        stack.airflow.unpause(dag)
    iso = [w.strftime("%Y-%m-%dT%H:%M:%SZ") for w in _hours_without_demo_data(stack)]
    code, backfill = stack.airflow.api("POST", "/backfills", {
        "dag_id": f"recon__{HOURLY}", "from_date": iso[0], "to_date": iso[-1],
        "max_active_runs": 3, "reprocess_behavior": "none"})
    assert code == 200, backfill
    stack.airflow.unpause(f"recon__{HOURLY}")
    deadline = time.monotonic() + 600
    while True:
        runs = [r for r in _runs(stack, f"recon__{HOURLY}") if r["run_type"] == "backfill"]
        if len(runs) == 3 and all(r["state"] in ("success", "failed") for r in runs):
            break
        assert time.monotonic() < deadline, runs
        time.sleep(5)
    assert sorted((r["data_interval_start"][:19], r["state"]) for r in runs) == [
        (i[:19], "success") for i in iso], "each hour is its own window, reconciled ok"
    eng = history.engine(f"sqlite:///{stack.workdir / 'runs' / 'history.db'}")
    recorded = {r["window_start"]: r["status"] for r in history.flow_runs(HOURLY, eng=eng)}
    assert {i: recorded.get(i) for i in iso} == {i: "ok" for i in iso}
    # the ok windows ran the flow's downstream DAG, with the windows in the Asset's events.
    # Unpausing the hourly DAG also schedules its latest hour, which is not one of the
    # backfilled hours when those lie before the demo's day: an ok window too, so its event
    # is right; every event must be a window recorded ok, and the backfill's must arrive.
    while True:
        after = _runs(stack, f"after_{HOURLY}")
        events = []
        for run in after:
            code, body = stack.airflow.api(
                "GET", f"/dags/after_{HOURLY}/dagRuns/{run['dag_run_id']}/upstreamAssetEvents")
            assert code == 200, body
            events += [e["extra"]["window_start"] for e in body["asset_events"]]
        if set(events) & set(iso):
            break
        assert time.monotonic() < deadline, f"no downstream run for a backfilled hour: {events}"
        time.sleep(3)
    ok = {r["window_start"] for r in history.flow_runs(HOURLY, eng=eng) if r["status"] == "ok"}
    assert set(events) <= ok, (events, ok)
    _the_page_shows_each_hourly_window(stack, iso)
    assert {r["run_type"] for r in after} == {"asset_triggered"}
    # the findings window of the ad-hoc run reconciled nothing whole: no run downstream
    assert _runs(stack, f"after_{FLOW}") == []


def _point_columns(png: bytes, rgb: tuple[int, int, int], near: int = 0) -> list[int]:
    """The x positions of the markers drawn in `rgb` (each channel within `near`: a browser's
    colour management shifts it): a marker is taller than the line through it, so columns
    holding more than a line's height of the colour, clustered."""
    import io

    from PIL import Image

    img = Image.open(io.BytesIO(png)).convert("RGB")

    def close(p: Any) -> bool:
        return all(abs(a - b) <= near for a, b in zip(p, rgb, strict=True))

    cols = [x for x in range(img.width)
            if sum(close(img.getpixel((x, y))) for y in range(img.height)) >= 4]
    clusters: list[list[int]] = []
    for x in cols:
        if clusters and x - clusters[-1][-1] <= 4:  # antialiasing leaves gaps in a marker
            clusters[-1].append(x)
        else:
            clusters.append([x])
    return [c[len(c) // 2] for c in clusters]


def _the_page_shows_each_hourly_window(s: Stack, hours: list[str]) -> None:
    """The hourly flow's history on the page: a point per window and tier on its chart (the
    last tier drawn, matplotlib's third colour, sits on top), an ok cell per window in the
    grid, and each window's page with every tier's count, zero as zero."""
    token = s.airflow.token()
    auth = {"Authorization": f"Bearer {token}"}
    code, png, _ = _get(f"{s.airflow.url}/recon/charts/{HOURLY}.png", auth)
    assert code == 200
    # a marker per hourly window (three backfilled, perhaps the latest hour), and the legend's
    assert len(_point_columns(png, (44, 160, 44))) >= 4, "a marker per hourly window"
    code, body, _ = _get(f"{s.airflow.url}/recon/api/grid?span=7d", auth)
    assert code == 200
    [row] = [f for f in json.loads(body)["flows"] if f["flow"] == HOURLY]
    for hour in hours:
        start = datetime.fromisoformat(hour.replace("Z", "+00:00"))
        slot = (int(start.timestamp()) - row["first"]) // row["step"]
        assert row["codes"][slot] == "o", (hour, row["codes"])
        end = start + timedelta(seconds=row["step"])
        folder = f"{start:%Y-%m-%dT%H%M%SZ}_{end:%Y-%m-%dT%H%M%SZ}"
        code, page, _ = _get(f"{s.airflow.url}/recon/windows/{HOURLY}/{folder}", auth)
        assert code == 200
        assert page.decode().count('<span class="n">0</span>') == 3, "each tier's count: 0"


@pytest.mark.skipif(not Path(CHROMIUM).exists() and not os.environ.get(
    "KAFKA_RECON_REQUIRE_CHROMIUM"), reason="Debian's chromium is not installed (make test "
    "installs it and then requires it)")
def test_from_the_grid_to_a_lost_id_and_the_validation_offline_at_desk_and_phone_width(
        stack: Stack, adhoc_run: tuple[dict[str, Any], dict[str, Any]],
        artifacts_dir: Path) -> None:
    """What an on-call engineer does in a browser (Debian's Chromium), at 1440 and 390 px:
    the grid, a click on the red window, a search for an id the consumer lost, the download,
    the repair action (the admin may trigger it), the validation with every request off
    this host refused, and no console error on any page; the mail as a phone shows it; the
    trigger form starting on a window with nothing red."""
    import base64

    from playwright.sync_api import sync_playwright

    lost = sorted(stack.truth["lost_consume_side"])
    token = stack.airflow.token()
    base = stack.airflow.url
    shots: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            for width, height in ((1440, 1000), (390, 844)):
                ctx = browser.new_context(viewport={"width": width, "height": height},
                                          accept_downloads=True)
                ctx.add_cookies([{"name": "_token", "value": token, "url": base}])
                outside: list[str] = []  # no internet: a request off this host is refused

                def cut(route: Any, outside: list[str] = outside) -> None:
                    if route.request.url.startswith(base):
                        route.continue_()
                    else:
                        outside.append(route.request.url)
                        route.abort()

                ctx.route("**/*", cut)
                page = ctx.new_page()
                errors: list[str] = []

                def console(m: Any, errors: list[str] = errors) -> None:
                    if m.type == "error":
                        errors.append(m.text)

                page.on("console", console)
                page.goto(f"{base}/recon/?span=30d")
                cell = page.locator(f'.cells[data-flow="{FLOW}"] a.v-findings').first
                cell.wait_for(timeout=60_000)
                shot = f"grid-{width}.png"
                page.screenshot(path=str(artifacts_dir / shot), full_page=True)
                shots.append(shot)
                assert "findings" in str(cell.get_attribute("title"))
                cell.click()
                page.get_by_role("heading", name="Hops").wait_for(timeout=30_000)
                assert page.locator("#diagram .arrow.bad").count() == 1
                assert page.get_by_role("button", name="Repair this window").count() == 1
                page.wait_for_timeout(500)  # the history chart loads after the page
                shot = f"window-{width}.png"
                page.screenshot(path=str(artifacts_dir / shot), full_page=True)
                shots.append(shot)
                # a known lost id, searched: found, and the only one listed
                page.fill("#id-search input[name=q]", str(lost[-1]))
                page.click("#id-search button")
                page.locator("#ids").wait_for(timeout=30_000)
                listed = [c.strip() for c in page.locator("#ids td code").all_inner_texts()]
                assert listed == [str(i) for i in lost if str(lost[-1]) in str(i)], listed
                with page.expect_download() as got:
                    page.click("#download")
                ids = Path(got.value.path()).read_text().split()[1:]
                assert sorted(int(i) for i in ids) == lost
                page.click("#links >> text=validation")
                page.locator("#suites").wait_for(timeout=30_000)
                assert "records missing, 0 allowed" in page.inner_text("#suites")
                assert outside == [] and errors == [], (outside, errors)
                ctx.close()
            # the mail as a phone shows it: its HTML part, the chart inline (the hourly
            # flow's windows mailed their owners too)
            [mail] = [m for m in read_maildir(stack.mail)
                      if m["Subject"].startswith(f"FINDINGS {FLOW}:")]
            html_part, related = mail.get_body(("html",)), mail.get_body(("related",))
            assert html_part is not None and related is not None
            [chart] = [x for x in related.iter_parts() if x["Content-ID"] == "<chart.png>"]
            inline = "data:image/png;base64," + base64.b64encode(chart.get_content()).decode()
            phone = browser.new_context(viewport={"width": 390, "height": 844})
            page = phone.new_page()
            page.set_content(html_part.get_content().replace("cid:chart.png", inline))
            assert page.evaluate("document.documentElement.scrollWidth") <= 391, \
                "the mail fits a phone: nothing makes it scroll sideways"
            page.screenshot(path=str(artifacts_dir / "mail-390.png"), full_page=True)
            shots.append("mail-390.png")
            # the trigger form starts on a window: nothing red
            ctx = browser.new_context(viewport={"width": 1440, "height": 1000})
            ctx.add_cookies([{"name": "_token", "value": token, "url": base}])
            page = ctx.new_page()
            page.goto(f"{base}/dags/recon_adhoc")
            page.get_by_role("button", name="Trigger").first.click()
            page.get_by_text("Window start").first.wait_for(timeout=60_000)
            page.wait_for_timeout(500)
            page.screenshot(path=str(artifacts_dir / "trigger-form.png"), full_page=True)
            assert page.get_by_text("This field is required").count() == 0
            # the hourly flow's history chart, on one of its windows' pages
            page.goto(f"{base}/recon/?span=7d")
            page.locator(f'.cells[data-flow="{HOURLY}"] a').last.click()
            hourly = page.locator("img#history")
            hourly.wait_for(timeout=30_000)
            hourly.scroll_into_view_if_needed()
            page.wait_for_timeout(500)
            hourly.screenshot(path=str(artifacts_dir / "plugin-hourly-chart.png"))
        finally:
            browser.close()
    for name in (*shots, "trigger-form.png", "plugin-hourly-chart.png"):
        assert (artifacts_dir / name).read_bytes().startswith(b"\x89PNG")
    shown = (artifacts_dir / "plugin-hourly-chart.png").read_bytes()
    # the last tier's colour, as the browser rendered it: a marker per window and the legend's
    assert len(_point_columns(shown, (44, 160, 44), near=12)) >= 4
