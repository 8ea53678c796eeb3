"""An HTTP server on loopback that records every request it receives, standing in for Slack
and PagerDuty, which cannot be reached from here.

It answers plain HTTP (a Slack webhook connection's endpoint can point at it), and it is also
an HTTPS proxy that terminates TLS (`CONNECT`) with a certificate for the requested host
signed by its own CA, so a client that talks to a fixed https address (PagerDuty's Events API
client) reaches it unchanged through `HTTPS_PROXY`, trusting that CA (`REQUESTS_CA_BUNDLE`).
Each request is kept with its host, path, headers and JSON body; the answer is chosen per
path (`answers`), else 200 "ok".
"""

from __future__ import annotations

import json
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self
from urllib.parse import urlsplit

from harness.services.base import Service, ServiceError
from harness.services.ports import HOST, free_port

# PagerDuty's Events API answers an accepted event so (its client reads the dedup_key back)
PAGERDUTY_ACCEPTED = (202, {"status": "success", "message": "Event processed",
                            "dedup_key": "from-the-recorder"})


class HttpRecorder(Service):
    def __init__(self, folder: Path, answers: dict[str, tuple[int, Any]] | None = None,
                 tls_hosts: tuple[str, ...] = ("events.pagerduty.com",)) -> None:
        """`answers`: path prefix -> (status, body: text or JSON-able), the longest prefix
        winning; `tls_hosts`: the hosts it holds certificates for as a proxy."""
        self.folder = folder.resolve()
        self.port = free_port()
        self.answers = answers or {}
        self.tls_hosts = tls_hosts
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._tls: ssl.SSLContext | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def ca(self) -> Path:
        """The CA a client must trust for the proxied hosts."""
        return self.folder / "ca.pem"

    def _certificates(self) -> ssl.SSLContext:
        f = self.folder

        def run(*args: str) -> None:
            done = subprocess.run(["openssl", *args], capture_output=True, text=True,
                                  cwd=f)
            if done.returncode:
                raise ServiceError(f"openssl {args[0]}: {done.stderr.strip()[-300:]}")

        run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
            "ca.pem", "-days", "2", "-subj", "/CN=kafka-recon test CA")
        run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "host.key", "-out", "host.csr",
            "-subj", f"/CN={self.tls_hosts[0]}")
        (f / "san.ext").write_text("subjectAltName=" + ",".join(
            f"DNS:{h}" for h in self.tls_hosts) + "\n")
        run("x509", "-req", "-in", "host.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "host.pem", "-days", "2", "-extfile", "san.ext")
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(f / "host.pem", f / "host.key")
        return ctx

    def answer(self, path: str) -> tuple[int, Any]:
        best = max((p for p in self.answers if path.startswith(p)), key=len, default=None)
        return self.answers[best] if best is not None else (200, "ok")

    def start(self) -> Self:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._tls = self._certificates()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            tunnel: str | None = None

            def log_message(self, *args: Any) -> None:  # quiet: the requests are the record
                pass

            def do_CONNECT(self) -> None:  # noqa: N802
                host = self.path.split(":", 1)[0]
                if host not in recorder.tls_hosts:
                    self.send_error(502, f"no certificate for {host}")
                    return
                self.send_response(200, "Connection established")
                self.end_headers()
                assert recorder._tls is not None
                tls = recorder._tls.wrap_socket(self.connection, server_side=True)
                self.connection, self.tunnel = tls, host
                self.rfile, self.wfile = tls.makefile("rb"), tls.makefile("wb")
                self.close_connection = False
                while not self.close_connection:
                    self.handle_one_request()

            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body: Any = json.loads(raw)
                except ValueError:
                    body = raw.decode(errors="replace")
                # a plain request sent through it as a proxy names the whole address
                where = urlsplit(self.path)
                path = (where.path or "/") + (f"?{where.query}" if where.query else "")
                with recorder._lock:
                    recorder.requests.append({
                        "host": self.tunnel or where.netloc or self.headers.get("Host", ""),
                        "tls": self.tunnel is not None, "method": self.command,
                        "path": path, "headers": dict(self.headers), "body": body})
                    with (recorder.folder / "requests.jsonl").open("a") as out:
                        out.write(json.dumps(recorder.requests[-1]) + "\n")
                status, answer = recorder.answer(path)
                data = answer.encode() if isinstance(answer, str) else json.dumps(
                    answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain" if isinstance(answer, str)
                                 else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                self.wfile.flush()

        self._server = ThreadingHTTPServer((HOST, self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
