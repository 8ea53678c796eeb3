"""A Kafka Connect distributed worker on loopback: Kafka's own runtime, with Debezium's
PostgreSQL source connector and the harness's SQL sink connector as plugins.

It runs `org.apache.kafka.connect.cli.ConnectDistributed` (the class behind
`connect-distributed.sh`) from `connect-runtime` 4.2.1 on Maven Central (`jvm/pom.xml`, profile
`connect`); its config, offset and status topics live on the cluster it is given. Debezium's
connector (`io.debezium:debezium-connector-postgres` 3.6.1.Final, profile `debezium`) is a
plugin of its own folder. Maven Central serves no JDBC sink connector that runs here, so the
sink is the harness's own (`harness/connect/src`, compiled by javac at start against the
worker's jars): what the tests exercise around it, error tolerance, dead-letter queues, offset
commits, restarts, is Connect's.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from harness.services.base import Service, ServiceError, java_binary, kill_now, terminate
from harness.services.ports import HOST, free_port, wait_open

SINK_CLASS = "kafkarecon.harness.SqlSinkConnector"
DEBEZIUM_POSTGRES = "io.debezium.connector.postgresql.PostgresConnector"
_SOURCES = Path(__file__).resolve().parents[1] / "connect" / "src"

LOG4J = """\
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
logger.kafka.name = org.apache.kafka
logger.kafka.level = WARN
logger.connect.name = org.apache.kafka.connect
logger.connect.level = INFO
logger.reflections.name = org.reflections
logger.reflections.level = ERROR
"""


def sink_plugin(plugins: Path) -> Path:
    """The harness's sink connector compiled into `plugins/harness-sql-sink/` (once per
    source: a folder stamped with the sources' digest is reused)."""
    from kafka_recon.settings import connect_classpath

    sources = sorted(_SOURCES.rglob("*.java"))
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:16]
    folder = plugins / "harness-sql-sink"
    jar = folder / f"harness-sql-sink-{digest}.jar"
    if jar.exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    classes = folder / "classes"
    classes.mkdir(parents=True)
    javac = Path(java_binary()).with_name("javac")
    for cmd in ([str(javac), "--release", "17", "-cp", connect_classpath(), "-d", str(classes),
                 *map(str, sources)],
                [str(javac.with_name("jar")), "cf", str(jar), "-C", str(classes), "."]):
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=300)
        if done.returncode:
            raise ServiceError(f"building the harness sink connector failed: "
                               f"{(done.stderr or done.stdout).strip()[:2000]}")
    shutil.rmtree(classes)
    return folder


class ConnectWorker(Service):
    """One distributed worker of a Connect cluster (`group`), its REST API at `url`."""

    def __init__(self, folder: Path, bootstrap: str, group: str = "kafka-recon-connect",
                 settings: dict[str, Any] | None = None, port: int | None = None) -> None:
        self.folder = folder.resolve()
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.group = group
        self.plugins = self.folder / "plugins"
        props: dict[str, Any] = {
            "bootstrap.servers": bootstrap, "group.id": group,
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "key.converter.schemas.enable": "false", "value.converter.schemas.enable": "false",
            "config.storage.topic": f"{group}-configs",
            "offset.storage.topic": f"{group}-offsets",
            "status.storage.topic": f"{group}-status",
            "config.storage.replication.factor": 1, "offset.storage.replication.factor": 1,
            "status.storage.replication.factor": 1, "offset.storage.partitions": 1,
            "status.storage.partitions": 1,
            "listeners": f"http://{HOST}:{self.port}", "rest.advertised.host.name": HOST,
            "plugin.path": str(self.plugins),
            # source offsets and sink commits every 2 s: a test waits seconds, not a minute
            "offset.flush.interval.ms": 2000,
            # a rebalance after a worker dies waits this long for it to come back
            "scheduled.rebalance.max.delay.ms": 5000,
            **(settings or {})}
        self.properties = self.folder / "worker.properties"
        self.properties.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.folder / "log4j2.properties").write_text(LOG4J)
        self.pid: int | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self, timeout: float = 180) -> ConnectWorker:
        from kafka_recon.settings import connect_classpath, connect_plugins

        self.plugins.mkdir(exist_ok=True)
        for plugin in connect_plugins().iterdir():
            link = self.plugins / plugin.name
            if plugin.is_dir() and not link.exists():
                link.symlink_to(plugin, target_is_directory=True)
        sink_plugin(self.plugins)
        cmd = [java_binary(), "-Xmx512m", "-XX:+UseSerialGC",
               f"-Dlog4j2.configurationFile={self.folder / 'log4j2.properties'}",
               "-cp", connect_classpath(), "org.apache.kafka.connect.cli.ConnectDistributed",
               str(self.properties)]
        log = open(self.folder / f"connect-{self.starts}.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=self.folder,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        self.pid, self.starts = proc.pid, self.starts + 1
        try:
            wait_open(self.port, timeout, "kafka connect")
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:  # the REST API answers before the herder
                if proc.poll() is not None:
                    raise ServiceError(f"Kafka Connect exited {proc.returncode}")
                try:
                    plugins = self.get("/connector-plugins")
                    if any(p["class"] == SINK_CLASS for p in plugins):
                        return self
                except (OSError, ServiceError):
                    pass
                time.sleep(1)
            raise ServiceError(f"Kafka Connect at {self.url} did not list its plugins in "
                               f"{timeout:.0f}s")
        except ServiceError as exc:
            self.stop()
            raise ServiceError(f"{exc}; its log ends:\n{self.log_tail()}") from None

    def log_tail(self, lines: int = 30) -> str:
        path = self.folder / f"connect-{max(0, self.starts - 1)}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) \
            if path.exists() else "(no log)"

    # ------------------------------------------------------------------ REST
    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json",
                                              "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:  # noqa: S310 - loopback
                text = resp.read().decode()
        except urllib.error.HTTPError as e:
            raise ServiceError(f"{method} {path}: {e.code} {e.read().decode()[:500]}") from None
        return json.loads(text) if text else None

    def get(self, path: str) -> Any:
        return self.call("GET", path)

    def put_connector(self, name: str, config: dict[str, Any]) -> None:
        self.call("PUT", f"/connectors/{name}/config", {k: str(v) for k, v in config.items()})

    def _status(self, name: str) -> dict[str, Any] | None:
        try:
            return dict(self.get(f"/connectors/{name}/status"))
        except ServiceError:
            return None  # not yet created, or the worker is rebalancing

    def _wait(self, name: str, what: str, done: Any, timeout: float) -> dict[str, Any]:
        deadline, status = time.monotonic() + timeout, None
        while time.monotonic() < deadline:
            status = self._status(name)
            if status and done(status):
                return status
            time.sleep(1)
        raise ServiceError(f"connector {name} not {what} after {timeout:.0f}s: {status}")

    def wait_running(self, name: str, timeout: float = 120) -> dict[str, Any]:
        """Wait until the connector and every task of it run; a FAILED task is an error."""
        def running(status: dict[str, Any]) -> bool:
            failed = [t for t in status.get("tasks", []) if t["state"] == "FAILED"]
            if failed:
                raise ServiceError(f"connector {name}: task FAILED: "
                                   f"{failed[0].get('trace', '')[:1500]}")
            return bool(status["connector"]["state"] == "RUNNING" and status["tasks"] and all(
                t["state"] == "RUNNING" for t in status["tasks"]))

        return self._wait(name, "RUNNING", running, timeout)

    def wait_state(self, name: str, task_state: str, timeout: float = 120) -> dict[str, Any]:
        """Wait until a task of the connector is in `task_state` (FAILED, ...)."""
        return self._wait(name, f"with a task {task_state}", lambda status: any(
            t["state"] == task_state for t in status.get("tasks", [])), timeout)

    # ------------------------------------------------------------------ lifecycle
    def kill(self) -> None:
        """SIGKILL: what its sinks wrote but had not committed they will write again."""
        kill_now(self.pid)
        self.pid = None

    def stop(self) -> None:
        terminate(self.pid)
        self.pid = None


def debezium_postgres(server: Any, database: str, prefix: str, tables: str,
                      slot: str = "kafka_recon", **more: Any) -> dict[str, Any]:
    """A Debezium PostgreSQL source's config for a harness PostgresServer (`pgoutput`, its own
    replication slot and publication)."""
    return {"connector.class": DEBEZIUM_POSTGRES, "tasks.max": 1,
            "database.hostname": server.host, "database.port": server.port,
            "database.user": server.user, "database.password": "unused",
            "database.dbname": database, "topic.prefix": prefix,
            "table.include.list": tables, "plugin.name": "pgoutput",
            "slot.name": slot, "publication.name": f"{slot}_pub",
            "publication.autocreate.mode": "filtered", **more}


def sql_sink(jdbc_url: str, table: str, topics: str, columns: str, **more: Any
             ) -> dict[str, Any]:
    """The harness sink's config: a topic's values into `table`'s `columns`."""
    return {"connector.class": SINK_CLASS, "tasks.max": 1, "topics": topics,
            "connection.url": jdbc_url, "table": table, "columns": columns, **more}
