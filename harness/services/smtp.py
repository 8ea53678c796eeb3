"""An SMTP server on loopback that keeps every message it receives as a `.eml` file.

Used in place of a real mail relay by the demo and the tests: Airflow's SMTP provider sends to
it over real SMTP, and the test reads back exactly what an owner's mailbox would get.
"""

from __future__ import annotations

import argparse
import email
import email.policy
import json
import signal
import threading
import time
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from harness.services.base import Service
from harness.services.ports import HOST, ensure_free, free_port


class _KeepHandler:
    def __init__(self, maildir: Path) -> None:
        self.maildir = maildir
        self._lock = threading.Lock()
        self._n = 0

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        with self._lock:
            self._n += 1
            n = self._n
        stem = f"{time.strftime('%Y%m%dT%H%M%S')}-{time.time_ns() % 10**9:09d}-{n:04d}"
        body = envelope.original_content or envelope.content
        tmp = self.maildir / f".{stem}.tmp"
        tmp.write_bytes(body if isinstance(body, bytes) else body.encode())
        # the envelope says who it was really delivered to (Bcc included)
        (self.maildir / f"{stem}.json").write_text(
            json.dumps({"mail_from": envelope.mail_from, "rcpt_tos": envelope.rcpt_tos})
        )
        tmp.rename(self.maildir / f"{stem}.eml")  # atomic: readers never see half a message
        return "250 Message accepted for delivery"


class MailCatcher(Service):
    """`with MailCatcher(dir) as m:` serves SMTP on `m.port` until the block ends."""

    def __init__(self, maildir: Path | str, port: int | None = None, host: str = HOST) -> None:
        self.maildir, self.host = Path(maildir), host
        self.port = ensure_free(port, "smtp") if port else free_port()
        self._controller: Any = None

    def start(self) -> MailCatcher:
        from aiosmtpd.controller import Controller

        self.maildir.mkdir(parents=True, exist_ok=True)
        self._controller = Controller(_KeepHandler(self.maildir), hostname=self.host,
                                      port=self.port)
        self._controller.start()
        return self

    def stop(self) -> None:
        if self._controller is not None:
            self._controller.stop()
            self._controller = None


    def messages(self) -> list[EmailMessage]:
        return read_maildir(self.maildir)


def read_maildir(maildir: Path | str) -> list[EmailMessage]:
    """Every kept message, oldest first, parsed."""
    out: list[EmailMessage] = []
    for path in sorted(Path(maildir).glob("*.eml")):
        msg = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
        assert isinstance(msg, EmailMessage)
        out.append(msg)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Keep every SMTP message received as a file.")
    parser.add_argument("--dir", required=True, type=Path, help="folder the .eml files go to")
    parser.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (free if unset)")
    args = parser.parse_args(argv)
    catcher = MailCatcher(args.dir, args.port).start()
    print(json.dumps({"host": HOST, "port": catcher.port, "dir": str(args.dir)}), flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    catcher.stop()


if __name__ == "__main__":
    main()
