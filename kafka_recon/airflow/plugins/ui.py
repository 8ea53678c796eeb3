"""The "Reconciliation" page of the Airflow UI: a FastAPI app the plugin mounts
(kafka_recon.airflow.plugins.reconciliation).

Airflow 3 serves plugin FastAPI apps from its api-server, under a prefix (/recon), and shows an
external view of it in its navigation. Every route requires Airflow's own login: the JWT the UI
keeps in its cookie, or a bearer token from POST /auth/token. A browser without one is sent to
Airflow's login page and back.

    /recon/                          the grid: flows by windows, each cell its verdict
    /recon/windows/<flow>/<window>   a window: hop diagram, findings, ids paged and searched,
                                     re-run and repair actions for those who may trigger
    /recon/windows/<flow>/<window>/validation   its validation, rendered here (offline)
    /recon/charts/<flow>.png         a flow's history chart
    /recon/api/latest                each flow's newest window as JSON, with links
    /recon/api/grid                  the grid as JSON
    /recon/runs/<flow>/<window>/...  a run's artefacts: report, id files, gx Data Docs
    /recon/metrics                   Prometheus metrics (kafka_recon.outputs.metrics)

A person's browser gets pages, errors included; a program gets JSON.

/recon/metrics also answers a scraper that presents `Authorization: Bearer <token>` with the
token set in KAFKA_RECON_METRICS_TOKEN (Prometheus cannot log in to Airflow); without that
setting it needs Airflow's login like every other route.

Only run artefacts are served (`RunFolder.servable`): never the history database, the Flume
snapshot store, a run's JSON files, nor anything reached through a link.

Every route answers only about the flows the user may read: Airflow's auth manager (whichever
the deployment configures) is asked whether the user may read each flow's DAG
(`recon__<flow>`). A flow the user may not read is left out of the page, the JSON and the
metrics as if it did not exist, and its chart and every file of its runs (reports, id files
that may hold whole record values, Data Docs) answer 403. A scraper with the metrics token sees
every flow.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import HTTPException

from kafka_recon.airflow.links import PREFIX

if TYPE_CHECKING:
    from upath import UPath



def _relative_link(path: str | None, root: Path | UPath) -> str | None:
    """A run file's address under /recon/runs, or None when it is not inside the runs root."""
    if not path:
        return None
    if not isinstance(root, Path):  # an object store's: by name (a listing asks no store)
        base = str(root).rstrip("/") + "/"
        return "runs/" + path[len(base):] if path.startswith(base) else None
    p = Path(path).resolve()
    if not p.is_relative_to(root.resolve()) or not p.exists():
        return None
    return "runs/" + p.relative_to(root.resolve()).as_posix()


def page_rows(rows: list[dict[str, Any]], root: Path | UPath) -> list[dict[str, Any]]:
    """History rows as the page and its JSON give them: links under /recon, never the
    server's paths (run folder, report, Data Docs)."""
    out = []
    for r in rows:
        row = {k: v for k, v in r.items() if k not in ("run_dir", "report", "data_docs")}
        report = _relative_link(r.get("report"), root)
        row["report_link"] = f"{PREFIX}/{report}" if report else None
        docs = _relative_link(r.get("data_docs"), root)
        row["docs_link"] = f"{PREFIX}/{docs}" if docs else None
        window = _window_link(r)
        row["window_link"] = window
        out.append(row)
    return out


def _window_link(r: dict[str, Any]) -> str | None:
    """A history row's window page (`links.window_path`), or None for a row without one."""
    from kafka_recon.airflow.links import window_path

    try:
        return window_path(r["flow"], r["window_start"], r["window_end"])
    except (KeyError, ValueError):
        return None


def readable_flows(user: Any, flows: set[str]) -> set[str]:
    """The flows among `flows` whose DAG Airflow's auth manager lets `user` read."""
    from airflow.api_fastapi.app import get_auth_manager

    from kafka_recon.airflow.names import flow_dag_id

    dags = {flow_dag_id(f): f for f in flows}
    allowed = get_auth_manager().filter_authorized_dag_ids(dag_ids=set(dags), user=user,
                                                           method="GET")
    return {dags[d] for d in allowed if d in dags}


class Forbidden(HTTPException):
    """Logged in, but not allowed to read this flow: no login page helps."""

    def __init__(self, flow: str) -> None:
        super().__init__(403, f"you may not read flow '{flow}' (its DAG)")


def _require(user: Any, flow: str) -> None:
    if flow not in readable_flows(user, {flow}):
        raise Forbidden(flow)


def _readable_rows(user: Any, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    allowed = readable_flows(user, {r["flow"] for r in rows})
    return [r for r in rows if r["flow"] in allowed]


def _root() -> UPath:
    from kafka_recon.stores.objects import runs_root

    return runs_root()


def create_app() -> Any:
    """The page's FastAPI app: the page and its API, the metrics, the run files; every route
    behind Airflow's login and each flow behind its DAG's permission."""
    from fastapi import FastAPI

    app = FastAPI(title="kafka-recon", docs_url=None, redoc_url=None, openapi_url=None)
    _login_first(app)
    _page_routes(app)
    _window_routes(app)
    _actions_route(app)
    _metrics_route(app)
    _run_file_route(app)
    return app


def _env() -> Any:
    from jinja2 import Environment, PackageLoader, select_autoescape

    return Environment(loader=PackageLoader("kafka_recon", "templates"),
                       autoescape=select_autoescape(default=True),
                       finalize=lambda v: "" if v is None else v)


HEADINGS = {403: "You may not see this", 404: "Not found", 400: "Not a request this page takes"}


def _login_first(app: Any) -> None:
    from fastapi import Request
    from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

    env = _env()

    @app.exception_handler(HTTPException)
    async def login_first(request: Request, exc: HTTPException) -> Response:
        # a person (a browser asking for HTML) goes to the login page or gets a page saying
        # what is wrong; a program gets the code and JSON
        person = "text/html" in request.headers.get("accept", "")
        if exc.status_code in (401, 403) and not isinstance(exc, Forbidden) and person:
            from urllib.parse import quote

            return RedirectResponse(f"/auth/login/?next={quote(str(request.url))}", 303)
        if person:
            return HTMLResponse(env.get_template("error.html.j2").render(
                base=PREFIX, code=exc.status_code, detail=exc.detail,
                heading=HEADINGS.get(exc.status_code, "Something went wrong")),
                status_code=exc.status_code)
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code)


# the flow config as last read, by its path and modification time: validating 200 flows took
# 0.2-0.3 s of every page (bench.grid)
_read: dict[str, tuple[float, Configured]] = {}


@dataclass(frozen=True)
class Invalid:
    """A flow of the config that is not watched: its config is wrong (the page lists it apart;
    every other flow runs)."""

    flow: str
    fields: list[tuple[str, str]]   # (field, what is wrong with it and what it expects)
    error: str                      # the whole text, as `check` prints it


@dataclass(frozen=True)
class Configured:
    """The flow config as the page reads it: the valid flows, the invalid ones, and what is
    wrong when the file cannot be read at all (the page then shows no flow and says why)."""

    flows: dict[str, Any]
    invalid: list[Invalid]
    problem: str | None = None


def _flows() -> Configured:
    from kafka_recon.config import load_flows_partial
    from kafka_recon.errors import FlowInvalid
    from kafka_recon.settings import config_path

    path = config_path()
    try:
        stamp = path.stat().st_mtime
    except OSError as exc:
        return Configured({}, [], f"the flow config cannot be read: {path}: {exc.strerror}")
    if path.as_posix() not in _read or _read[path.as_posix()][0] != stamp:
        flows, errors = load_flows_partial(path)
        problem = f"the flow config cannot be read: {errors.pop('(file)')}" \
            if "(file)" in errors else None
        # pydantic's "Value error, " is its own word for a validator's message: not shown
        invalid = [Invalid(name, [(f, m.removeprefix("Value error, ")) for f, m in e.fields]
                           if isinstance(e, FlowInvalid) else [("(flow)", str(e))], str(e))
                   for name, e in sorted(errors.items())]
        _read[path.as_posix()] = (stamp, Configured(flows, invalid, problem))
    return _read[path.as_posix()][1]


def _user_name(user: Any) -> str:
    return str(getattr(user, "get_name", lambda: "")() or "")


def _grid(user: Any, span: str, owner: str, cluster: str, status: str, until: str = ""
          ) -> tuple[list[Any], dict[str, Any], str | None, str, list[Invalid]]:
    """The grid's rows as asked (span, filters), the flows the user may read, what is wrong
    with the config file, the span, and the invalid flows the user may read."""
    # the history store (SQLAlchemy) is read when the page is asked for: the plugin is
    # loaded by every Airflow component, most of which never serve it
    from datetime import UTC, datetime

    from kafka_recon.errors import WindowError
    from kafka_recon.outputs import grid, history
    from kafka_recon.stores.lease import held
    from kafka_recon.window import parse_instant

    configured = _flows()
    readable = readable_flows(user, {*configured.flows, *(i.flow for i in
                                                           configured.invalid)})
    flows = {k: v for k, v in configured.flows.items() if k in readable}
    invalid = [i for i in configured.invalid if i.flow in readable]
    span = span if span in grid.SPANS else grid.default_span(flows)
    # the span ends now, or where a review of an incident asks (`until`)
    try:
        now = min(parse_instant(until, "until"), datetime.now(UTC)) if until \
            else datetime.now(UTC)
    except WindowError as exc:
        raise HTTPException(400, str(exc)) from None
    recorded = history.windows_between(now - grid.SPANS[span], now, set(flows))
    rows = grid.build(flows, recorded, held(), grid.SPANS[span], now)
    return grid.keep(rows, owner, cluster, status), flows, configured.problem, span, invalid


def _page_routes(app: Any) -> None:
    """The grid, its JSON, each flow's newest window as JSON, each flow's history chart."""
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi import Depends
    from fastapi.responses import HTMLResponse, Response

    env = _env()

    @app.get("/", response_class=HTMLResponse)
    def index(span: str = "", owner: str = "", cluster: str = "", status: str = "",
              until: str = "", user: Any = Depends(get_user)) -> str:
        from kafka_recon.outputs import grid
        from kafka_recon.settings import config_path

        rows, flows, problem, span, invalid = _grid(user, span, owner, cluster, status, until)
        return env.get_template("ui.html.j2").render(
            base=PREFIX, rows=rows, user=_user_name(user), span=span, spans=list(grid.SPANS),
            letters=grid.VERDICT_OF,
            span_label={"24h": "24 hours", "7d": "7 days", "30d": "30 days"}[span],
            owner=owner, cluster=cluster, status=status, verdicts=grid.VERDICTS,
            statuses=[("red", "findings or inconclusive"),
                      *((k, v) for k, v in grid.VERDICTS.items()
                        if k not in ("not_closed", "running"))],
            clusters=sorted({f.cluster for f in flows.values()}), problem=problem,
            invalid=invalid, config=str(config_path()),
            filtered=bool(owner or cluster or status), until=until)

    @app.get("/api/grid")
    def api_grid(span: str = "", owner: str = "", cluster: str = "", status: str = "",
                 until: str = "", user: Any = Depends(get_user)) -> dict[str, Any]:
        from dataclasses import asdict

        from kafka_recon.outputs import grid

        rows, _, problem, span, invalid = _grid(user, span, owner, cluster, status, until)
        # a row's `codes`: a letter per window (`letters` says which verdict), oldest first;
        # `invalid`: the flows not watched because their config is wrong, each field named
        return {"span": span, "problem": problem, "letters": grid.VERDICT_OF,
                "flows": [asdict(r) for r in rows], "invalid": [asdict(i) for i in invalid]}

    @app.get("/api/latest")
    def api_latest(user: Any = Depends(get_user)) -> list[dict[str, Any]]:
        from kafka_recon.outputs import history

        return page_rows(_readable_rows(user, history.latest_per_flow()), _root())

    @app.get("/charts/{flow}.png")
    def chart(flow: str, user: Any = Depends(get_user)) -> Response:
        from kafka_recon.outputs import history
        from kafka_recon.outputs.chart import history_chart

        _require(user, flow)
        rows = history.flow_runs(flow, 60)
        if not rows:
            raise HTTPException(404, f"no recorded run of flow '{flow}'")
        return Response(history_chart(flow, rows), media_type="image/png")


def _window_routes(app: Any) -> None:
    """A window's page and its validation, rendered here."""
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi import Depends
    from fastapi.responses import HTMLResponse

    env = _env()

    @app.get("/windows/{flow}/{window}", response_class=HTMLResponse)
    def window_page(flow: str, window: str, file: str = "", q: str = "", page: int = 1,
                    user: Any = Depends(get_user)) -> str:
        from kafka_recon.airflow.names import flow_dag_id
        from kafka_recon.outputs import grid, history
        from kafka_recon.outputs.window_view import PAGE, id_page, view

        folder, result = _window(user, flow, window)
        v = view(result, folder)
        files = v["id_files"]
        chosen = next((f for f in files if f["path"] == file), files[0] if files else None)
        ids = id_page(folder, chosen["path"], q.strip(), page) if chosen else None
        before, after = history.neighbours(flow, result.window.start)
        verdict = "tolerated" if result.status == "ok" and any(
            f.words.failure for f in result.record_findings) else result.status
        here = f"{PREFIX}/windows/{flow}/{window}"
        return env.get_template("window.html.j2").render(
            base=PREFIX, user=_user_name(user), **v, verdict=verdict,
            verdict_label=grid.VERDICTS[verdict], summary=result.verdict(), here=here,
            prev=_window_link({**before, "flow": flow}) if before else None,
            next=_window_link({**after, "flow": flow}) if after else None,
            report=f"{PREFIX}/runs/{flow}/{window}/{folder.report.name}",
            # the window's own chart: each tier per bucket over its usual range
            chart=f"{PREFIX}/runs/{flow}/{window}/{folder.file('chart').name}"
            if folder.file("chart").exists() else None,
            airflow_runs=f"/dags/{flow_dag_id(flow)}/runs", page=ids, selected=chosen,
            size=PAGE, download=(f"{PREFIX}/runs/{flow}/{window}/{chosen['path']}"
                                 if chosen else None),
            can_trigger=may_trigger(user, "recon_adhoc"),
            repairable=any(f.kind == "loss" and f.ids for f in result.findings)
            and may_trigger(user, "recon_repair"))

    @app.get("/windows/{flow}/{window}/validation", response_class=HTMLResponse)
    def validation_page(flow: str, window: str, user: Any = Depends(get_user)) -> str:
        from kafka_recon.runfiles.outcomes import Validation

        folder, result = _window(user, flow, window)
        validation = folder.read_if(Validation)
        if validation is None:
            raise HTTPException(404, f"window {result.window.start} of flow '{flow}' has no "
                                     "validation")
        docs = folder.relative(validation.data_docs) if validation.data_docs else None
        return env.get_template("validation.html.j2").render(
            base=PREFIX, user=_user_name(user), flow=flow, v=validation,
            window=f"{result.window.start} – {result.window.end}",
            back=f"{PREFIX}/windows/{flow}/{window}",
            docs=f"{PREFIX}/runs/{flow}/{window}/{docs}" if docs else None)


def may_trigger(user: Any, dag_id: str) -> bool:
    """Whether Airflow's auth manager lets `user` start a run of `dag_id`."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import (
        DagAccessEntity,
        DagDetails,
    )

    return bool(get_auth_manager().is_authorized_dag(
        method="POST", access_entity=DagAccessEntity.RUN, details=DagDetails(id=dag_id),
        user=user))


def _window(user: Any, flow: str, window: str) -> tuple[Any, Any]:
    """The run folder and result of a window the user may read, or an error page's reason."""
    from kafka_recon.errors import ResultError
    from kafka_recon.result.model import Result
    from kafka_recon.runfolder import RunFolder, window_of_folder

    if window_of_folder(window) is None or Path(flow).name != flow or flow in ("", ".", ".."):
        raise HTTPException(404, f"no window '{window}' of flow '{flow}'")
    _require(user, flow)
    folder = RunFolder(_root() / flow / window)
    try:
        result = folder.read_if(Result)
    except ResultError as exc:
        raise HTTPException(404, f"this window's result cannot be read: {exc}") from None
    if result is None:
        raise HTTPException(404, f"window {window} of flow '{flow}' has no result (yet)")
    return folder, result


def _actions_route(app: Any) -> None:
    """Re-run or repair a window: a run of recon_adhoc or recon_repair, triggered for the
    user who may trigger it, named by its flow and window; the repair still waits for an
    owner's approval in Airflow's Required Actions."""
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi import Depends, Request
    from fastapi.responses import RedirectResponse

    def act(flow: str, window: str, action: str, request: Request,
            user: Any = Depends(get_user)) -> RedirectResponse:
        from datetime import UTC, datetime
        from urllib.parse import quote, urlsplit

        from airflow.api.common.trigger_dag import trigger_dag
        from airflow.utils.types import DagRunTriggeredByType

        dag_id = {"rerun": "recon_adhoc", "repair": "recon_repair"}.get(action)
        if dag_id is None:
            raise HTTPException(404, f"no action '{action}'")
        # a form of this page, not another site's (the login is a cookie)
        origin = request.headers.get("origin") or request.headers.get("referer") or ""
        if origin and urlsplit(origin).netloc != request.url.netloc:
            raise HTTPException(403, "an action is taken from kafka-recon's own page only")
        _folder, result = _window(user, flow, window)
        if not may_trigger(user, dag_id):
            raise HTTPException(403, f"you may not trigger {dag_id}")
        conf: dict[str, Any] = {"flow": flow, "start": result.window.start,
                                "end": result.window.end}
        if action == "rerun":
            conf.update(replays=2, email=True)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        run_id = f"{action}__{flow}__{window}__{stamp}"
        trigger_dag(dag_id, run_id=run_id, conf=conf,
                    triggered_by=DagRunTriggeredByType.UI,
                    triggering_user_name=_user_name(user) or None,
                    note=f"{action} of {flow} {result.window.start} – {result.window.end}, "
                         "from the Reconciliation page")
        return RedirectResponse(f"/dags/{dag_id}/runs/{quote(run_id, safe='')}", 303)

    # FastAPI reads the request parameter off its annotation, a string under postponed
    # evaluation that names a class imported in this function only
    act.__annotations__ = {**act.__annotations__, "request": Request,
                           "return": RedirectResponse}
    app.post("/windows/{flow}/{window}/{action}", response_model=None)(act)


def _metrics_route(app: Any) -> None:
    """Prometheus metrics: every flow for a scraper holding the metrics token, the flows a
    logged-in user may read for anyone else."""
    from fastapi import Depends, Request
    from fastapi.responses import Response

    async def scraper(request: Request) -> Any:
        """None for a scraper holding the metrics token (it sees every flow); else the
        logged-in user, who sees the flows they may read."""
        import hmac

        from airflow.api_fastapi.core_api.security import get_user
        from fastapi.security import HTTPAuthorizationCredentials

        from kafka_recon.settings import metrics_token

        scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
        token = metrics_token()
        if token and scheme.lower() == "bearer" and hmac.compare_digest(
                credentials.encode(), token.encode()):
            return None
        bearer = HTTPAuthorizationCredentials(scheme=scheme, credentials=credentials) \
            if credentials else None
        return await get_user(request, None, bearer)

    # FastAPI reads the request parameter off its annotation, a string under postponed
    # evaluation that names a class imported in this function only
    scraper.__annotations__ = {"request": Request, "return": Any}

    @app.get("/metrics")
    def metrics(user: Any = Depends(scraper)) -> Response:
        from kafka_recon.outputs import history
        from kafka_recon.outputs.metrics import CONTENT_TYPE, exposition

        flows = None
        if user is not None:
            flows = readable_flows(user, {r["flow"] for r in history.latest_per_flow()})
        return Response(exposition(flows=flows), media_type=CONTENT_TYPE)


def _run_file_route(app: Any) -> None:
    """A run's report, id files and Data Docs, and nothing else of its folder."""
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi import Depends
    from fastapi.responses import FileResponse, Response

    @app.get("/runs/{flow}/{window}/{rest:path}")
    def run_file(flow: str, window: str, rest: str, user: Any = Depends(get_user)
                 ) -> Response:
        from kafka_recon.runfolder import RunFolder

        root = _root()
        folder = RunFolder(root / flow / window)
        # the flow and window name one folder directly under the root, not a way around it
        if (flow, window) != (Path(flow).name, Path(window).name) or flow in ("..", ".") \
                or window in ("..", ".") or (root / flow).is_symlink() \
                or folder.path.is_symlink():
            raise HTTPException(404, "not a run file")
        _require(user, flow)  # before anything says whether the file exists
        path = folder.servable(rest)
        if path is None:
            raise HTTPException(404, f"not a run artefact: {flow}/{window}/{rest}")
        if isinstance(path, Path):
            return FileResponse(path)
        import mimetypes

        # from the object store: a report, an id file or a page of Data Docs, streamed (an
        # id file may hold millions of rows: never read whole into the api-server)
        from fastapi.responses import StreamingResponse

        kind = mimetypes.guess_type(path.name)[0] or "application/octet-stream"

        def chunks() -> Any:
            with path.open("rb") as fh:
                while block := fh.read(1 << 20):
                    yield block

        return StreamingResponse(chunks(), media_type=kind)
