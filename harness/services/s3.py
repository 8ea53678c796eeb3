"""An S3-compatible server on loopback: s3proxy (org.gaul:s3proxy from Maven Central, `make jars`)
with its filesystem backend, so the bucket is a folder a test can look into.

It speaks real S3 (SigV4, multipart uploads, listings): s3fs on the Python side and Hadoop's S3A
connector in Spark talk to it as they would to AWS.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Self

from harness.services.base import Service, ServiceError, java_binary, kill_now, terminate
from harness.services.ports import HOST, free_port, is_open
from kafka_recon.settings import jars_dir


class S3Server(Service):
    ACCESS_KEY = "recon-access"
    SECRET_KEY = "recon-secret-key"

    def __init__(self, folder: Path, host: str = HOST) -> None:
        self.folder = folder.resolve()
        self.host = host
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def data(self) -> Path:
        """The backend's folder: one sub-folder per bucket."""
        return self.folder / "data"

    def connection(self, conn_type: str = "aws") -> str:
        """The server as an Airflow connection in JSON form (an `AIRFLOW_CONN_*` value)."""
        return json.dumps({"conn_type": conn_type, "login": self.ACCESS_KEY,
                           "password": self.SECRET_KEY,
                           "extra": {"endpoint_url": self.endpoint, "region_name": "us-east-1"}})

    def make_bucket(self, name: str) -> None:
        # the filesystem backend's bucket is a folder (made here, the server lists it at once)
        (self.data / name).mkdir(parents=True, exist_ok=True)

    def start(self, timeout: float = 60) -> Self:
        self.data.mkdir(parents=True, exist_ok=True)
        props = self.folder / "s3proxy.conf"
        props.write_text("\n".join([
            f"s3proxy.endpoint=http://{self.host}:{self.port}",
            "s3proxy.authorization=aws-v2-or-v4",
            f"s3proxy.identity={self.ACCESS_KEY}",
            f"s3proxy.credential={self.SECRET_KEY}",
            "jclouds.provider=filesystem",
            f"jclouds.filesystem.basedir={self.data}",
        ]) + "\n")
        classpath = os.pathsep.join(str(j) for j in sorted((jars_dir() / "s3proxy").glob("*.jar")))
        if not classpath:
            raise ServiceError(f"no s3proxy jars in {jars_dir() / 's3proxy'}: run `make jars`")
        log = (self.folder / "s3proxy.log").open("ab")
        self.proc = subprocess.Popen(
            [java_binary(), "-Xmx256m", "-cp", classpath, "org.gaul.s3proxy.Main",
             "--properties", str(props)],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while not is_open(self.port, self.host):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = (self.folder / "s3proxy.log").read_text(errors="replace")[-600:]
                raise ServiceError(f"s3proxy did not start on {self.endpoint}: {tail}")
            time.sleep(0.2)
        return self

    def kill(self) -> None:
        """Gone at once, as a crashed server or a cut network is."""
        if self.proc is not None:
            kill_now(self.proc.pid)

    def stop(self) -> None:
        if self.proc is not None:
            terminate(self.proc.pid)
            self.proc = None
