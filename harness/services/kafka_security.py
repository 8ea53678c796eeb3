"""A secured Kafka the way production runs it: SASL_SSL (SCRAM, PLAIN), mTLS, and ACLs.

`Security(folder).make()` writes a CA, a broker certificate for 127.0.0.1 and a client
certificate (CN `recon-tls`, the principal `User:recon-tls`) with Debian's `openssl`, all keys
PKCS#8 PEM. A cluster started with it has, besides PLAINTEXT:

- `SASL_SSL`: SCRAM-SHA-512 and SCRAM-SHA-256 users (made at format time with
  `StorageTool format --add-scram`) and PLAIN users (in the listener's JAAS);
- `SSL` with `ssl.client.auth=required`: a client certificate is the principal;
- `StandardAuthorizer` with `allow.everyone.if.no.acl.found=false`.

PLAINTEXT and the controller listener stay, as the platform's own internal listeners: their
principal `User:ANONYMOUS` is a super user, which the harness (topics, ACLs, the drill's
applications under test) uses. kafka-recon's principals get only the ACLs a test grants.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# SCRAM users: (name, password); the same names are PLAIN users on the SASL_SSL listener
USERS = {"recon": "recon-secret-7f3a", "admin": "admin-secret-91c2",
         "limited": "limited-secret-4d0e"}
CLIENT_CN = "recon-tls"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


def _openssl(*args: str, cwd: Path) -> None:
    proc = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed: {proc.stderr.strip()}")


@dataclass
class Security:
    folder: Path
    users: dict[str, str] = field(default_factory=lambda: dict(USERS))

    @property
    def ca(self) -> Path:
        return self.folder / "ca.pem"

    @property
    def client_cert(self) -> Path:
        return self.folder / "client.pem"

    @property
    def client_key(self) -> Path:
        return self.folder / "client.key"

    def make(self) -> Security:
        """The CA, the broker's and the client's certificates (once per folder)."""
        d = self.folder
        d.mkdir(parents=True, exist_ok=True)
        if (d / "broker-keystore.pem").exists():
            return self
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30",
                 "-subj", "/CN=kafka-recon-test-ca", "-keyout", "ca.key", "-out", "ca.pem",
                 cwd=d)
        for name, subject, ext in (
                ("broker", "/CN=localhost", "subjectAltName=IP:127.0.0.1,DNS:localhost"),
                ("client", f"/CN={CLIENT_CN}", "extendedKeyUsage=clientAuth")):
            _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", subject,
                     "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=d)
            (d / f"{name}.ext").write_text(ext + "\n")
            _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                     "-CAcreateserial", "-days", "30", "-extfile", f"{name}.ext",
                     "-out", f"{name}.pem", cwd=d)
        # the broker's PEM keystore: its key and certificate in one file
        (d / "broker-keystore.pem").write_text((d / "broker.key").read_text()
                                               + (d / "broker.pem").read_text())
        return self

    def broker_config(self) -> dict[str, str]:
        """server.properties of a node's SASL_SSL and SSL listeners and its authorizer."""
        plain = " ".join(f'user_{u}="{p}"' for u, p in self.users.items())
        return {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.folder / "broker-keystore.pem"),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca),
            "listener.name.ssl.ssl.client.auth": "required",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM,
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": SCRAM,
            "listener.name.sasl_ssl.plain.sasl.jaas.config":
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain};",
            "ssl.principal.mapping.rules": "RULE:^CN=([^,]*).*$/$1/,DEFAULT",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "false",
            "super.users": "User:ANONYMOUS;User:admin",
        }

    def scram_args(self) -> list[str]:
        out = []
        for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
            for user, password in self.users.items():
                out += ["--add-scram", f"{mechanism}=[name={user},password={password}]"]
        return out

    # ------------------------------------------------------------ client settings (librdkafka)
    def sasl(self, bootstrap: str, mechanism: str = "SCRAM-SHA-512", user: str = "recon",
             password: str | None = None) -> dict[str, Any]:
        return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL",
                "sasl.mechanism": mechanism, "sasl.username": user,
                "sasl.password": self.users[user] if password is None else password,
                "ssl.ca.location": str(self.ca)}

    def mtls(self, bootstrap: str, with_certificate: bool = True) -> dict[str, Any]:
        conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "security.protocol": "SSL",
                                "ssl.ca.location": str(self.ca)}
        if with_certificate:
            conf.update({"ssl.certificate.location": str(self.client_cert),
                         "ssl.key.location": str(self.client_key)})
        return conf


def grant(plaintext_bootstrap: str, principal: str, acls: list[tuple[str, str, str, str]]
          ) -> None:
    """ACLs for `principal`, through the super user's PLAINTEXT listener: each
    (resource type, name, pattern type, operation), e.g. ("TOPIC", "orders", "LITERAL",
    "READ")."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": plaintext_bootstrap})
    # confluent-kafka names the cluster resource BROKER
    bindings = [AclBinding(ResourceType["BROKER" if rtype == "CLUSTER" else rtype], name,
                           ResourcePatternType[pattern],
                           f"User:{principal}", "*", AclOperation[op], AclPermissionType.ALLOW)
                for rtype, name, pattern, op in acls]
    for fut in admin.create_acls(bindings).values():
        fut.result(30)


def reader_acls(topic: str, groups: list[str]) -> list[tuple[str, str, str, str]]:
    """The least-privilege set docs/cluster.md lists for kafka-recon's principal."""
    return [("TOPIC", topic, "LITERAL", "READ"), ("TOPIC", topic, "LITERAL", "DESCRIBE"),
            ("TOPIC", topic, "LITERAL", "DESCRIBE_CONFIGS"),
            ("GROUP", "kafka-recon-", "PREFIXED", "READ"),
            ("CLUSTER", "kafka-cluster", "LITERAL", "DESCRIBE_CONFIGS"),
            *[("GROUP", g, "LITERAL", "DESCRIBE") for g in groups]]
