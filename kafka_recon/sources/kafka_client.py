"""How kafka-recon's Kafka clients reach a cluster: one endpoint, two clients' spellings.

A `kafka` tier names its cluster by `bootstrap`, by `conn` (an Airflow connection of the Kafka
provider's type, whose extra is a librdkafka config dict), or both (the tier's `bootstrap`
wins). The settings are kept once, in librdkafka's names, and translated here, key by key:

- for confluent-kafka (staging, offsets, committed offsets, the audit, the preflight), as they
  are, less the settings kafka-recon owns (a connection's `group.id` is never used: it may be
  a production group);
- for the replay's Java consumer (the window reader in Spark's tasks), into the Java
  client's names: `sasl.username` and `sasl.password` become a JAAS string, PEM files become
  inline PEM stores (read here, on the driver, so executors need no files), a PKCS#12
  keystore stays a file.

A security setting with no Java equivalent is a `ConfigError` naming it: a replay that silently
connected with fewer settings than staging did would read something else, or nothing.
The schema registry's settings (`schema.registry.url`, `basic.auth.user.info`, ...) may sit in
the same connection; they go to the registry client, never to Kafka.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_recon.errors import ConfigError, ConnectionUnusable, TopicError

if TYPE_CHECKING:
    from kafka_recon.config import KafkaTier

# settings kafka-recon sets on its own clients, whatever a connection says
OWNED = frozenset({
    "group.id", "group.instance.id", "enable.auto.commit", "enable.auto.offset.store",
    "auto.offset.reset", "isolation.level", "client.rack", "enable.partition.eof",
    "allow.auto.create.topics",
})
# A monitor never changes the cluster it watches: brokers create a topic a client merely asks
# about (`auto.create.topics.enable` is on by default), and librdkafka's admin client and
# producers, like the Java consumer, ask with creation allowed unless told otherwise. So every
# client kafka-recon opens says no; the only topics it creates are repair topics, explicitly
# (`sources.topic.ensure_topic`), after approval (docs/cluster.md, "What kafka-recon changes")
NO_AUTO_CREATE = {"allow.auto.create.topics": False}
# librdkafka settings that only tune confluent-kafka's own clients: no meaning for the replay
LIBRDKAFKA_ONLY = frozenset({
    "socket.timeout.ms", "socket.keepalive.enable", "debug", "log_level", "log.connection.close",
    "api.version.request", "broker.address.family", "topic.metadata.refresh.interval.ms",
    "metadata.max.age.ms", "reconnect.backoff.ms", "reconnect.backoff.max.ms",
    "statistics.interval.ms", "ssl.endpoint.identification.algorithm",
})
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# the client.id of every client kafka-recon opens (staging, audit, recorder, the replay's
# consumers), unless the connection names its own: one name a broker quota can cap at once
# (`kafka-configs --alter --entity-type clients --entity-name kafka-recon
# --add-config consumer_byte_rate=...`, docs/cluster.md)
CLIENT_ID = "kafka-recon"
MECHANISMS = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
REGISTRY_PREFIX = "schema.registry."
REGISTRY_KEYS = frozenset({"basic.auth.user.info", "basic.auth.credentials.source"})
# values that are secrets in any spelling: masked in Airflow's logs, never written anywhere
SECRET_KEYS = ("sasl.password", "ssl.key.password", "ssl.keystore.password", "ssl.key.pem",
               "sasl.oauthbearer.client.secret", "basic.auth.user.info",
               "schema.registry.basic.auth.user.info")


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _jaas_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True)
class KafkaEndpoint:
    """One cluster as kafka-recon's clients reach it: where, and with which settings."""

    bootstrap: str
    settings: tuple[tuple[str, str], ...] = ()   # librdkafka names, OWNED and registry removed
    registry: tuple[tuple[str, str], ...] = ()   # the schema registry client's names
    conn: str | None = None

    @property
    def where(self) -> str:
        """For messages: the cluster, and the connection it came from (never a secret)."""
        return f"kafka at {self.bootstrap}" + (f" (connection '{self.conn}')" if self.conn
                                               else "")

    @property
    def protocol(self) -> str:
        return dict(self.settings).get("security.protocol", "PLAINTEXT").upper()

    @property
    def mechanism(self) -> str | None:
        s = dict(self.settings)
        m = s.get("sasl.mechanism") or s.get("sasl.mechanisms")
        return m.upper() if m else None

    def librdkafka(self, own: dict[str, Any] | None = None,
                   diagnosis: Diagnosis | None = None) -> dict[str, Any]:
        """confluent-kafka's config: the endpoint's settings, then kafka-recon's own."""
        conf = {"client.id": CLIENT_ID, **dict(self.settings),
                "bootstrap.servers": self.bootstrap, "log_level": 2, **(own or {}),
                **NO_AUTO_CREATE}
        if diagnosis is not None:
            conf["error_cb"] = diagnosis
        return conf

    def java(self) -> dict[str, str]:
        """The same settings in the Java client's names (without the `kafka.` prefix)."""
        s = dict(self.settings)
        out = {"bootstrap.servers": self.bootstrap}
        protocol = self.protocol
        if protocol not in PROTOCOLS:
            raise ConfigError(f"{self.where}: security.protocol {protocol!r} is not one of "
                              f"{', '.join(PROTOCOLS)}")
        out["security.protocol"] = protocol
        handled = {"bootstrap.servers", "security.protocol", "sasl.mechanism", "sasl.mechanisms",
                   "sasl.username", "sasl.password", "client.id", "ssl.ca.location",
                   "ssl.ca.pem", "ssl.certificate.location", "ssl.certificate.pem",
                   "ssl.key.location", "ssl.key.pem", "ssl.key.password",
                   "ssl.keystore.location", "ssl.keystore.password",
                   "ssl.endpoint.identification.algorithm"}
        if "SASL" in protocol:
            out.update(self._sasl(s))
        if "SSL" in protocol:
            out.update(self._ssl(s))
        out["client.id"] = s.get("client.id", CLIENT_ID)
        out["allow.auto.create.topics"] = "false"
        for key in s:
            if key in handled or key in LIBRDKAFKA_ONLY:
                continue
            if key.startswith(("sasl.", "ssl.", "enable.ssl.")):
                raise ConfigError(f"{self.where}: setting {key!r} has no equivalent for the "
                                  "replay's Java consumer (it would connect differently from "
                                  "staging); use the settings docs/cluster.md lists")
        return out

    def spark_options(self) -> dict[str, str]:
        """The window reader's options: each Java setting prefixed with `kafka.` (the
        convention of Spark's Kafka source, which the reader keeps)."""
        return {f"kafka.{k}": v for k, v in self.java().items()}

    def _sasl(self, s: dict[str, str]) -> dict[str, str]:
        mechanism = self.mechanism or "GSSAPI"
        if mechanism not in MECHANISMS:
            raise ConfigError(f"{self.where}: sasl.mechanism {mechanism!r} is not supported "
                              f"(supported: {', '.join(MECHANISMS)})")
        user, password = s.get("sasl.username"), s.get("sasl.password")
        if user is None or password is None:
            raise ConfigError(f"{self.where}: {mechanism} needs sasl.username and sasl.password")
        return {"sasl.mechanism": mechanism,
                "sasl.jaas.config": f"{MECHANISMS[mechanism]} required "
                                    f"username={_jaas_quote(user)} "
                                    f"password={_jaas_quote(password)};"}

    def _ssl(self, s: dict[str, str]) -> dict[str, str]:
        out: dict[str, str] = {}
        ca = s.get("ssl.ca.pem") or _pem_file(s.get("ssl.ca.location"), "ssl.ca.location",
                                              self.where)
        if ca:
            out.update({"ssl.truststore.type": "PEM", "ssl.truststore.certificates": ca})
        cert = s.get("ssl.certificate.pem") or _pem_file(
            s.get("ssl.certificate.location"), "ssl.certificate.location", self.where)
        key = s.get("ssl.key.pem") or _pem_file(s.get("ssl.key.location"), "ssl.key.location",
                                                self.where)
        if bool(cert) != bool(key):
            raise ConfigError(f"{self.where}: a client certificate needs both the certificate "
                              "and its key (ssl.certificate.location and ssl.key.location)")
        if cert and key:
            if "BEGIN RSA PRIVATE KEY" in key or "BEGIN EC PRIVATE KEY" in key:
                raise ConfigError(
                    f"{self.where}: Spark's Java client reads PKCS#8 keys only, the key is "
                    "PKCS#1/SEC1: convert it with `openssl pkcs8 -topk8 -nocrypt -in key.pem "
                    "-out key.pk8.pem` (or -v2 aes256 and ssl.key.password)")
            out.update({"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": cert,
                        "ssl.keystore.key": key})
            if "ssl.key.password" in s:
                out["ssl.key.password"] = s["ssl.key.password"]
        elif "ssl.keystore.location" in s:
            out.update({"ssl.keystore.type": "PKCS12",
                        "ssl.keystore.location": s["ssl.keystore.location"],
                        "ssl.keystore.password": s.get("ssl.keystore.password", "")})
            out["ssl.key.password"] = s.get("ssl.key.password",
                                            s.get("ssl.keystore.password", ""))
        verify = s.get("ssl.endpoint.identification.algorithm", "https").lower()
        out["ssl.endpoint.identification.algorithm"] = "" if verify == "none" else verify
        return out

    def secrets(self) -> list[str]:
        """Every string a log or a file must never show: passwords, keys, the JAAS string."""
        s = {**dict(self.settings), **dict(self.registry)}
        found = [s[k] for k in SECRET_KEYS if s.get(k)]
        info = s.get("basic.auth.user.info", "")
        if ":" in info:
            found.append(info.split(":", 1)[1])
        # the JAAS string alone: a secret even when other settings are wrong
        with contextlib.suppress(ConfigError):
            found.append(self._sasl(dict(self.settings))["sasl.jaas.config"])
        return [x for x in dict.fromkeys(found) if x]

    def registry_conf(self, url: str | None) -> dict[str, str]:
        """The schema registry client's config: the tier's URL, else the connection's."""
        conf = dict(self.registry)
        if url:
            conf["url"] = url
        if not conf.get("url"):
            raise ConfigError(f"{self.where}: the record format needs a schema registry: set "
                              "`schema_registry` on the kafka tier or schema.registry.url in "
                              "its connection")
        return conf


class Diagnosis:
    """Collects what librdkafka says through its error callback, to say why a client failed.

    A client that cannot authenticate or finish a TLS handshake only times out; the reason
    reaches the error callback, served when the client is polled.
    """

    def __init__(self) -> None:
        self.errors: list[Any] = []

    def __call__(self, err: Any) -> None:
        self.errors.append(err)

    def fatal(self, ep: KafkaEndpoint) -> str | None:
        """A one-line reason when the errors show the connection can never work."""
        from confluent_kafka import KafkaError

        for err in self.errors:
            text = err.str()
            if err.code() == KafkaError._AUTHENTICATION or "SASL authentication" in text:
                user = dict(ep.settings).get("sasl.username", "?")
                return (f"{ep.where}: authentication failed for user '{user}' with "
                        f"{ep.mechanism}: wrong user name or password (broker: {text})")
            if err.code() == KafkaError._SSL or "SSL handshake failed" in text \
                    or "certificate" in text.lower():
                return (f"{ep.where}: TLS handshake failed ({text}): check the broker's CA "
                        "(ssl.ca.location) and, where the broker requires client "
                        "certificates, ssl.certificate.location and ssl.key.location")
            if "security.protocol" in text:
                return (f"{ep.where}: security.protocol {ep.protocol} does not match the "
                        f"broker's listener ({text})")
        return None

    def last(self) -> str:
        return self.errors[-1].str() if self.errors else ""


def _pem_file(path: str | None, key: str, where: str) -> str | None:
    if not path:
        return None
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise TopicError(f"{where}: {key} {path}: cannot read it ({exc})") from None
    if "-----BEGIN" not in text:
        raise TopicError(f"{where}: {key} {path} is not a PEM file")
    return text


def split_settings(raw: dict[str, Any], where: str) -> tuple[dict[str, str], dict[str, str]]:
    """A connection's extra to (Kafka settings, registry settings); kafka-recon's own dropped.

    Callbacks given as dotted paths (the provider's `error_cb` etc.) are not used: kafka-recon
    installs its own error callback to say why a connection failed.
    """
    kafka: dict[str, str] = {}
    registry: dict[str, str] = {}
    for key, value in raw.items():
        if not isinstance(key, str) or isinstance(value, dict | list) or value is None:
            raise TopicError(f"{where}: setting {key!r} must be a text, number or boolean")
        if key.startswith(REGISTRY_PREFIX):
            registry[key[len(REGISTRY_PREFIX):]] = _text(value)
        elif key in REGISTRY_KEYS:
            registry[key] = _text(value)
        elif key in OWNED or key.endswith("_cb"):
            continue
        else:
            kafka[key] = _text(value)
    return kafka, registry


def endpoint(tier: KafkaTier) -> KafkaEndpoint:
    """The tier's endpoint: its `conn` resolved (see connections), its `bootstrap` on top."""
    from kafka_recon.sources.connections import resolve_kafka

    settings: dict[str, str] = {}
    registry: dict[str, str] = {}
    if tier.conn:
        where = f"kafka tier '{tier.name}' (connection '{tier.conn}')"
        settings, registry = split_settings(resolve_kafka(tier.conn), where)
    bootstrap = tier.bootstrap or settings.pop("bootstrap.servers", None) \
        or settings.pop("metadata.broker.list", None)
    settings.pop("bootstrap.servers", None)
    if not bootstrap:
        raise ConnectionUnusable(f"kafka tier '{tier.name}': connection '{tier.conn}' has no "
                          "bootstrap.servers and the tier gives no bootstrap")
    bootstrap = re.sub(r"\s+", "", bootstrap)
    ep = KafkaEndpoint(bootstrap, tuple(sorted(settings.items())),
                       tuple(sorted(registry.items())), tier.conn)
    _mask_in_airflow(ep.secrets())
    return ep


def _mask_in_airflow(secrets: list[str]) -> None:
    """Airflow masks `sasl.password` by its key but not a JAAS string, a key or
    `basic.auth.user.info`: every secret is registered with its masker by value."""
    from kafka_recon.sources.connections import in_airflow_task

    if secrets and in_airflow_task():
        from airflow.sdk.log import mask_secret

        for secret in secrets:
            mask_secret(secret)
