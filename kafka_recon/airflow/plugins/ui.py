"""The "Reconciliation" page of the Airflow UI: a FastAPI app the plugin mounts
(kafka_recon.airflow.plugins.reconciliation).

Airflow 3 serves plugin FastAPI apps from its api-server, under a prefix (/recon), and shows an
external view of it in its navigation. Every route requires Airflow's own login: the JWT the UI
keeps in its cookie, or a bearer token from POST /auth/token. A browser without one is sent to
Airflow's login page and back.

    /recon/                          latest status per flow, a history chart per flow, links
    /recon/charts/<flow>.png         the history chart
    /recon/api/latest                the same as JSON
    /recon/runs/<flow>/<window>/...  a run's artefacts: report, id files, gx Data Docs
    /recon/metrics                   Prometheus metrics (kafka_recon.outputs.metrics)

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

from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import HTTPException

if TYPE_CHECKING:
    from upath import UPath

PREFIX = "/recon"


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
    out = []
    for r in rows:
        out.append({**r, "report_link": _relative_link(r.get("report"), root),
                    "docs_link": _relative_link(r.get("data_docs"), root)})
    return out


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
    _metrics_route(app)
    _run_file_route(app)
    return app


def _login_first(app: Any) -> None:
    from fastapi import Request
    from fastapi.responses import JSONResponse, RedirectResponse, Response

    @app.exception_handler(HTTPException)
    async def login_first(request: Request, exc: HTTPException) -> Response:
        # a person (a browser asking for HTML) goes to the login page, a program gets the code
        if exc.status_code in (401, 403) and not isinstance(exc, Forbidden) \
                and "text/html" in request.headers.get("accept", ""):
            from urllib.parse import quote

            return RedirectResponse(f"/auth/login/?next={quote(str(request.url))}", 303)
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code)


def _page_routes(app: Any) -> None:
    """The page, its rows as JSON, and each flow's history chart."""
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi import Depends
    from fastapi.responses import HTMLResponse, Response
    from jinja2 import Environment, PackageLoader, select_autoescape

    env = Environment(loader=PackageLoader("kafka_recon", "templates"),
                      autoescape=select_autoescape(default=True))

    @app.get("/", response_class=HTMLResponse)
    def index(user: Any = Depends(get_user)) -> str:
        # the history store (SQLAlchemy) is read when the page is asked for: the plugin is
        # loaded by every Airflow component, most of which never serve it
        from kafka_recon.outputs import history

        eng = history.engine()
        root = _root()
        latest = page_rows(_readable_rows(user, history.latest_per_flow(eng)), root)
        recent = {r["flow"]: page_rows(history.flow_runs(r["flow"], 14, eng), root)
                  for r in latest}
        return env.get_template("ui.html.j2").render(
            latest=latest, recent=recent, user=getattr(user, "get_name", lambda: "")())

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

        # from the object store: a report, an id file or a page of Data Docs, read whole
        kind = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        return Response(path.read_bytes(), media_type=kind)
