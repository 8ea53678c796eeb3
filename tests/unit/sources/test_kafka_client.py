"""One endpoint, two clients: librdkafka's settings translated for Spark's Java client, key by
key; Airflow Kafka connections resolved in each of their forms; secrets found in every
spelling."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafka_recon.config import KafkaTier
from kafka_recon.errors import ConfigError, SourceUnreadable
from kafka_recon.sources.connections import resolve_kafka, resolved_for_spark
from kafka_recon.sources.kafka_client import KafkaEndpoint, endpoint, split_settings

pytestmark = pytest.mark.unit

CA = "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n"
CERT = "-----BEGIN CERTIFICATE-----\nCLIENT\n-----END CERTIFICATE-----\n"
KEY = "-----BEGIN PRIVATE KEY-----\nKEY\n-----END PRIVATE KEY-----\n"


def ep(**settings: str) -> KafkaEndpoint:
    return KafkaEndpoint("b1:9093,b2:9093", tuple(sorted(settings.items())), conn="kafka_prod")


def test_plaintext_needs_nothing_but_the_bootstrap() -> None:
    assert KafkaEndpoint("b1:9092").java() == {"bootstrap.servers": "b1:9092",
                                               "security.protocol": "PLAINTEXT",
                                               "client.id": "kafka-recon",
                                               "allow.auto.create.topics": "false"}
    assert KafkaEndpoint("b1:9092").spark_options()["kafka.bootstrap.servers"] == "b1:9092"


def test_no_client_may_have_a_topic_created_by_asking_whatever_the_connection_says() -> None:
    # a broker auto-creates a topic a client asks about (auto.create.topics.enable defaults to
    # true): every client kafka-recon opens, in either spelling, refuses to let it
    asking = ep(**{"allow.auto.create.topics": "true"})
    assert asking.librdkafka()["allow.auto.create.topics"] is False
    assert asking.librdkafka({"allow.auto.create.topics": True})["allow.auto.create.topics"] \
        is False
    assert asking.java()["allow.auto.create.topics"] == "false"
    assert asking.spark_options()["kafka.allow.auto.create.topics"] == "false"
    # a connection's own value is kafka-recon's to set, never passed on
    assert "allow.auto.create.topics" not in split_settings(
        {"allow.auto.create.topics": True, "acks": "all"}, "conn")[0]


def test_every_client_is_named_kafka_recon_for_a_broker_quota_unless_the_connection_says() -> None:
    plain = KafkaEndpoint("b1:9092")
    assert plain.librdkafka()["client.id"] == "kafka-recon"
    assert plain.spark_options()["kafka.client.id"] == "kafka-recon"
    own = ep(**{"client.id": "recon-prod"})
    assert own.librdkafka()["client.id"] == "recon-prod"
    assert own.java()["client.id"] == "recon-prod"


@pytest.mark.parametrize(("mechanism", "module"), [
    ("SCRAM-SHA-512", "org.apache.kafka.common.security.scram.ScramLoginModule"),
    ("SCRAM-SHA-256", "org.apache.kafka.common.security.scram.ScramLoginModule"),
    ("PLAIN", "org.apache.kafka.common.security.plain.PlainLoginModule"),
])
def test_sasl_user_and_password_become_a_jaas_string(mechanism: str, module: str) -> None:
    java = ep(**{"security.protocol": "sasl_ssl", "sasl.mechanism": mechanism,
                 "sasl.username": "recon", "sasl.password": 'p"w\\d'}).java()
    assert java["security.protocol"] == "SASL_SSL"
    assert java["sasl.mechanism"] == mechanism
    # quotes and backslashes in a password are escaped inside the JAAS string
    assert java["sasl.jaas.config"] == f'{module} required username="recon" password="p\\"w\\\\d";'
    assert "sasl.username" not in java and "sasl.password" not in java


def test_librdkafkas_plural_sasl_mechanisms_is_read_too() -> None:
    java = ep(**{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
                 "sasl.username": "u", "sasl.password": "p"}).java()
    assert java["sasl.mechanism"] == "PLAIN" and "ssl.truststore.type" not in java


def test_pem_files_become_inline_pem_stores_so_executors_need_no_files(tmp_path: Path) -> None:
    for name, text in (("ca.pem", CA), ("cert.pem", CERT), ("key.pem", KEY)):
        (tmp_path / name).write_text(text)
    java = ep(**{"security.protocol": "SSL", "ssl.ca.location": str(tmp_path / "ca.pem"),
                 "ssl.certificate.location": str(tmp_path / "cert.pem"),
                 "ssl.key.location": str(tmp_path / "key.pem"),
                 "ssl.key.password": "kp"}).java()
    assert java["ssl.truststore.type"] == "PEM" and java["ssl.truststore.certificates"] == CA
    assert java["ssl.keystore.type"] == "PEM"
    assert java["ssl.keystore.certificate.chain"] == CERT and java["ssl.keystore.key"] == KEY
    assert java["ssl.key.password"] == "kp"
    assert java["ssl.endpoint.identification.algorithm"] == "https"


def test_inline_pem_settings_are_used_as_they_are() -> None:
    java = ep(**{"security.protocol": "SSL", "ssl.ca.pem": CA, "ssl.certificate.pem": CERT,
                 "ssl.key.pem": KEY}).java()
    assert java["ssl.truststore.certificates"] == CA and java["ssl.keystore.key"] == KEY


def test_a_pkcs12_keystore_stays_a_file() -> None:
    java = ep(**{"security.protocol": "SSL", "ssl.keystore.location": "/etc/k/client.p12",
                 "ssl.keystore.password": "ksp"}).java()
    assert java["ssl.keystore.type"] == "PKCS12"
    assert java["ssl.keystore.location"] == "/etc/k/client.p12"
    assert java["ssl.keystore.password"] == "ksp" and java["ssl.key.password"] == "ksp"


def test_hostname_verification_off_is_the_empty_algorithm_in_java() -> None:
    java = ep(**{"security.protocol": "SSL",
                 "ssl.endpoint.identification.algorithm": "none"}).java()
    assert java["ssl.endpoint.identification.algorithm"] == ""


def test_a_pkcs1_key_is_refused_with_the_command_that_converts_it(tmp_path: Path) -> None:
    rsa = "-----BEGIN RSA PRIVATE KEY-----\nK\n-----END RSA PRIVATE KEY-----\n"
    with pytest.raises(ConfigError, match="openssl pkcs8 -topk8"):
        ep(**{"security.protocol": "SSL", "ssl.certificate.pem": CERT,
              "ssl.key.pem": rsa}).java()


@pytest.mark.parametrize(("settings", "message"), [
    ({"security.protocol": "SSL", "ssl.certificate.pem": CERT}, "both the certificate"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"}, "not supported"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, "needs sasl.username"),
    ({"security.protocol": "SSL", "enable.ssl.certificate.verification": "false"},
     "no equivalent for the replay's Java consumer"),
    ({"security.protocol": "TLS"}, "is not one of"),
])
def test_settings_spark_could_not_honour_are_errors_naming_them(
        settings: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ep(**settings).java()


def test_an_unreadable_ca_file_names_the_setting_and_the_path(tmp_path: Path) -> None:
    with pytest.raises(SourceUnreadable, match="ssl.ca.location .*missing.pem"):
        ep(**{"security.protocol": "SSL", "ssl.ca.location": str(tmp_path / "missing.pem")}
           ).java()


def test_librdkafka_config_keeps_the_settings_and_kafka_recons_own_win() -> None:
    conf = ep(**{"security.protocol": "SSL"}).librdkafka({"group.id": "kafka-recon-x"})
    assert conf["bootstrap.servers"] == "b1:9093,b2:9093"
    assert conf["security.protocol"] == "SSL" and conf["group.id"] == "kafka-recon-x"


def test_a_connections_group_id_is_never_used_and_registry_keys_go_to_the_registry() -> None:
    kafka, registry = split_settings({
        "bootstrap.servers": "b:1", "group.id": "orders-loader", "enable.auto.commit": True,
        "error_cb": "my.module.cb", "security.protocol": "SSL",
        "schema.registry.url": "https://sr:8081", "basic.auth.user.info": "sr:secret",
        "socket.timeout.ms": 5000}, "here")
    assert kafka == {"bootstrap.servers": "b:1", "security.protocol": "SSL",
                     "socket.timeout.ms": "5000"}
    assert registry == {"url": "https://sr:8081", "basic.auth.user.info": "sr:secret"}


def test_secrets_cover_every_spelling_of_every_secret() -> None:
    e = KafkaEndpoint("b:1", (("sasl.mechanism", "SCRAM-SHA-512"), ("sasl.password", "pw"),
                              ("sasl.username", "u"), ("security.protocol", "SASL_SSL"),
                              ("ssl.key.pem", KEY)),
                      (("basic.auth.user.info", "sr-user:sr-pass"),))
    found = e.secrets()
    assert {"pw", KEY, "sr-user:sr-pass", "sr-pass"} <= set(found)
    assert any(s.startswith("org.apache.kafka.common.security.scram") for s in found)
    assert "u" not in found


def tier(**kw: str) -> KafkaTier:
    return KafkaTier(name="topic", type="kafka", topic="orders", **kw)  # type: ignore[arg-type]


EXTRA = {"bootstrap.servers": "k1:9093", "security.protocol": "SASL_SSL",
         "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "recon", "sasl.password": "pw"}


def test_a_connection_in_airflows_json_form(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_PROD",
                       json.dumps({"conn_type": "kafka", "extra": EXTRA}))
    e = endpoint(tier(conn="kafka_prod"))
    assert e.bootstrap == "k1:9093" and dict(e.settings)["sasl.username"] == "recon"
    assert "bootstrap.servers" not in dict(e.settings)


def test_a_connection_whose_extra_is_a_json_string(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_PROD",
                       json.dumps({"conn_type": "kafka", "extra": json.dumps(EXTRA)}))
    assert resolve_kafka("kafka_prod") == EXTRA


def test_a_connection_in_airflows_uri_form(monkeypatch: pytest.MonkeyPatch) -> None:
    from urllib.parse import quote

    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_PROD",
                       "kafka://?__extra__=" + quote(json.dumps(EXTRA)))
    assert resolve_kafka("kafka_prod") == EXTRA
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_PROD",
                       "kafka://k2:9093?security.protocol=SSL&ssl.ca.location=%2Fca.pem")
    assert resolve_kafka("kafka_prod") == {"security.protocol": "SSL",
                                           "ssl.ca.location": "/ca.pem",
                                           "bootstrap.servers": "k2:9093"}


def test_the_tiers_bootstrap_wins_over_the_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_PROD", json.dumps({"conn_type": "kafka",
                                                              "extra": EXTRA}))
    assert endpoint(tier(conn="kafka_prod", bootstrap="other:9093")).bootstrap == "other:9093"


@pytest.mark.parametrize(("value", "message"), [
    (json.dumps({"conn_type": "postgres", "host": "db"}), "not a Kafka connection"),
    (json.dumps({"conn_type": "kafka", "extra": "{not json"}), "extra is not valid JSON"),
    (json.dumps({"conn_type": "kafka", "extra": {"security.protocol": "SSL"}}),
     "no bootstrap.servers"),
    (json.dumps({"conn_type": "kafka", "extra": {"bootstrap.servers": "b", "x": {"y": 1}}}),
     "must be a text"),
])
def test_a_bad_kafka_connection_is_a_source_error_naming_it(
        monkeypatch: pytest.MonkeyPatch, value: str, message: str) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_PROD", value)
    with pytest.raises(SourceUnreadable, match=message):
        endpoint(tier(conn="kafka_prod"))


def test_an_unknown_kafka_connection_says_where_it_was_looked_for() -> None:
    with pytest.raises(SourceUnreadable, match="AIRFLOW_CONN_NOWHERE_TO_BE_FOUND"):
        endpoint(tier(conn="nowhere_to_be_found"))


def test_an_airflow_task_hands_its_spark_job_the_kafka_settings_as_json(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_PROD", json.dumps({"conn_type": "kafka",
                                                              "extra": EXTRA}))
    handed = resolved_for_spark([], ["kafka_prod"])
    assert json.loads(handed["KAFKA_RECON_CONN_KAFKA_PROD"]) == EXTRA
    # the Spark job reads the handed settings first, even with no AIRFLOW_CONN_ left
    monkeypatch.delenv("AIRFLOW_CONN_KAFKA_PROD")
    monkeypatch.setenv("KAFKA_RECON_CONN_KAFKA_PROD", handed["KAFKA_RECON_CONN_KAFKA_PROD"])
    assert endpoint(tier(conn="kafka_prod")).bootstrap == "k1:9093"


def test_a_kafka_tier_needs_a_bootstrap_or_a_connection() -> None:
    with pytest.raises(ValueError, match="'bootstrap', 'conn'"):
        tier()


def test_a_setting_librdkafka_refuses_is_named_not_a_traceback() -> None:
    from kafka_recon.sources.topic import open_client

    with pytest.raises(SourceUnreadable, match="client settings are refused: .*sasl.mechansim"):
        open_client(ep(**{"sasl.mechansim": "PLAIN"}), {"group.id": "kafka-recon-x"})
