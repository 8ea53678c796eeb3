"""Kafka Connect's REST API, read only: a connector's config, status and offsets
(docs/connect.md). kafka-recon needs `GET` on /connectors/<name>, /status, /config and
/offsets, nothing else; it never pauses, restarts or edits a connector."""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Literal

from kafka_recon.config import Connector, Flow
from kafka_recon.runfiles.connectors import Connectors, ConnectorSnapshot, TaskState, redacted

TIMEOUT_S = 20


class ConnectUnreachable(RuntimeError):
    """The Connect cluster did not answer, or refused: one line naming it."""


@dataclass(frozen=True)
class ConnectApi:
    base: str                       # http(s)://host:port, no trailing slash
    auth: str | None = None         # an Authorization header's value

    @property
    def shown(self) -> str:
        return self.base

    def get(self, path: str) -> Any:
        req = urllib.request.Request(self.base + path, headers={
            "Accept": "application/json", **({"Authorization": self.auth} if self.auth else {})})
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT_S,  # noqa: S310 - a configured URL
                                        context=ssl.create_default_context()
                                        if self.base.startswith("https") else None) as resp:
                return json.loads(resp.read().decode() or "null")
        except urllib.error.HTTPError as e:
            body = e.read().decode(errors="replace")
            try:
                said = json.loads(body).get("message", body)
            except ValueError:
                said = body
            raise ConnectUnreachable(f"Kafka Connect at {self.base}: GET {path} answered "
                                     f"{e.code}: {str(said).strip()[:300]}") from None
        except (OSError, ValueError) as e:
            reason = getattr(e, "reason", e)
            raise ConnectUnreachable(f"Kafka Connect at {self.base} did not answer GET {path}: "
                                     f"{reason}") from None


def api_of(c: Connector) -> ConnectApi:
    """The REST API a connector's cluster answers on: its `url` (user:password@ in it is basic
    auth), or its Airflow HTTP connection's host, port, schema and login."""
    if c.url:
        u = urllib.parse.urlsplit(c.url)
        auth = None
        if u.username:
            token = f"{urllib.parse.unquote(u.username)}:{urllib.parse.unquote(u.password or '')}"
            auth = "Basic " + base64.b64encode(token.encode()).decode()
        netloc = u.hostname + (f":{u.port}" if u.port else "") if u.hostname else u.netloc
        return ConnectApi(f"{u.scheme}://{netloc}{u.path.rstrip('/')}", auth)
    from kafka_recon.sources.connections import resolve_fields

    assert c.conn is not None
    f = resolve_fields(c.conn, "an HTTP connection to a Kafka Connect REST API")
    scheme = f.get("schema") or ("https" if f.get("port") == 443 else "http")
    host = str(f.get("host") or "")
    if "://" in host:  # a host given as a whole URL
        scheme, host = host.split("://", 1)
    base = f"{scheme}://{host.rstrip('/')}" + (f":{f['port']}" if f.get("port") else "")
    auth = None
    if f.get("login"):
        token = f"{f['login']}:{f.get('password') or ''}"
        auth = "Basic " + base64.b64encode(token.encode()).decode()
    return ConnectApi(base, auth)


def snapshot(c: Connector, tier: str, role: Literal["source", "sink"]) -> ConnectorSnapshot:
    """What the REST API shows of one connector; a cluster that does not answer is kept as the
    snapshot's `error`, never raised: the causes say it, the run goes on."""
    try:
        api = api_of(c)
    except Exception as exc:  # noqa: BLE001 - a connection that cannot be resolved
        return ConnectorSnapshot(tier=tier, name=c.name, cluster=c.url or f"connection "
                                 f"'{c.conn}'", role=role,
                                 dead_letter_topic=c.dead_letter_topic, error=str(exc))
    name = urllib.parse.quote(c.name, safe="")
    snap = ConnectorSnapshot(tier=tier, name=c.name, cluster=api.shown, role=role,
                             dead_letter_topic=c.dead_letter_topic)
    try:
        config = api.get(f"/connectors/{name}/config") or {}
        status = api.get(f"/connectors/{name}/status") or {}
    except ConnectUnreachable as exc:
        return snap.model_copy(update={"error": str(exc)})
    try:
        offsets = (api.get(f"/connectors/{name}/offsets") or {}).get("offsets", [])
    except ConnectUnreachable:
        offsets = []  # a Connect older than 3.5 has no offsets endpoint
    return snap.model_copy(update={
        "config": redacted(config), "offsets": offsets,
        "state": (status.get("connector") or {}).get("state"),
        "tasks": [TaskState(id=int(t.get("id", 0)), state=str(t.get("state")),
                            worker=t.get("worker_id"), trace=t.get("trace"))
                  for t in status.get("tasks", [])],
        "dead_letter_topic": config.get("errors.deadletterqueue.topic.name")
        or c.dead_letter_topic})


def snapshots(flow: Flow) -> Connectors:
    """Every connector the flow names, read now."""
    kafka = {t.name for t in flow.kafka_tiers}
    return Connectors(connectors=[snapshot(c, name, "source" if name in kafka else "sink")
                                  for name, c in flow.connectors.items()])
