"""kafka-recon on a secured broker: SASL_SSL (SCRAM), mTLS, least-privilege ACLs.

The session's broker has SASL_SSL and SSL (client certificates required) listeners and
StandardAuthorizer with allow.everyone.if.no.acl.found=false. kafka-recon's principals get
exactly the ACLs each test grants; the flows name an Airflow Kafka connection (AIRFLOW_CONN_*,
JSON form), as a user outside Airflow would.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from harness.services.kafka import KafkaCluster
from harness.services.kafka_security import USERS, grant, reader_acls
from kafka_recon import orchestrate
from kafka_recon.runfiles.audit import Audit
from tests.integration.engine_harness import END, START, Scenario, commit_offset, findings

pytestmark = pytest.mark.integration


def connect(monkeypatch: pytest.MonkeyPatch, conf: dict[str, Any]) -> str:
    conn = f"kafka_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn.upper()}",
                       json.dumps({"conn_type": "kafka", "extra": conf}))
    return conn


def scenario(tmp_path: Path, kafka: KafkaCluster, monkeypatch: pytest.MonkeyPatch,
             conf: dict[str, Any]) -> Scenario:
    return Scenario(tmp_path, kafka.bootstrap, groups=["loader"],
                    kafka_conn=connect(monkeypatch, conf))


def every_file_and_output(folder: Path, captured: str) -> str:
    texts = [captured]
    for f in folder.rglob("*"):
        if f.is_file():
            texts.append(f.read_bytes().decode("utf-8", "replace"))
    return "\n".join(texts)


def lost_on_the_consume_side(scn: Scenario, kafka: KafkaCluster, spark: Any,
                             principal: str) -> dict[str, Any]:
    grant(kafka.bootstrap, principal, reader_acls(scn.topic, ["loader"]))
    scn.flow_through(40, sink_lacks={5, 17, 33})
    commit_offset(kafka.bootstrap, "loader", scn.topic, 0, 1)
    return scn.reconcile(spark)


def test_a_flow_over_sasl_ssl_reconciles_exactly_names_causes_and_shows_no_secret(
        tmp_path: Path, kafka: KafkaCluster, spark: Any, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    from kafka_recon.outputs.report import sentences
    from kafka_recon.result.model import Result

    assert kafka.security is not None
    scn = Scenario(tmp_path, kafka.bootstrap, partitions=1, groups=["loader"],
                   kafka_conn=connect(monkeypatch, kafka.security.sasl(kafka.sasl_bootstrap)))
    grant(kafka.bootstrap, "recon", reader_acls(scn.topic, ["loader"]))
    rows = scn.flow_through(120, sink_lacks=set(range(31, 51)))  # ids 1..120: offsets 0..119
    scn.sink([(i, rows[i]) for i in range(61, 71)])  # 61..70 written twice
    commit_offset(kafka.bootstrap, "loader", scn.topic, 0, 120)  # the group moved past all
    t0 = time.monotonic()
    result = scn.reconcile(spark)
    print(f"SASL_SSL run: {time.monotonic() - t0:.1f}s")
    assert result["status"] == "findings", result["reasons"]
    assert findings(result) == [("duplicate", "consume", "topic->sink", 10),
                                ("loss", "consume", "topic->sink", 20)]
    by_kind = {f["kind"]: f for f in result["findings"]}
    assert scn.ids(by_kind["loss"]["ids"]) == set(range(31, 51))
    # why: the lost batch sits below the group's commit, the doubled one is a re-delivery
    lost_cause, dup_cause = by_kind["loss"]["cause"], by_kind["duplicate"]["cause"]
    assert (lost_cause["code"], lost_cause["confidence"]) == ("commit_ahead_of_processing",
                                                              "likely")
    assert "partition 0, offsets 30-49 (20 record(s))" in lost_cause["evidence"][0]
    assert (dup_cause["code"], dup_cause["confidence"]) == ("redelivery_after_crash", "likely")
    assert "partition 0, offsets 60-69 (10 record(s))" in dup_cause["evidence"][0]
    said = sentences(Result.load(scn.out / "result.json"))
    assert any("records lost on the consume side" in s and "Most likely because the consumer "
               "committed offsets before writing the records" in s for s in said)
    # the password, and the JAAS string that carries it, nowhere: not in a file of the run,
    # not in what the clients and Spark printed
    seen = every_file_and_output(scn.out, "".join(capfd.readouterr()))
    assert USERS["recon"] not in seen


def test_a_flow_over_mtls_reconciles_exactly(tmp_path: Path, kafka: KafkaCluster, spark: Any,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    assert kafka.security is not None
    scn = scenario(tmp_path, kafka, monkeypatch, kafka.security.mtls(kafka.ssl_bootstrap))
    t0 = time.monotonic()
    result = lost_on_the_consume_side(scn, kafka, spark, "recon-tls")
    print(f"mTLS run: {time.monotonic() - t0:.1f}s")
    assert findings(result) == [("loss", "consume", "topic->sink", 3)]
    loss = next(f for f in result["findings"] if f["kind"] == "loss")
    assert scn.ids(loss["ids"]) == {5, 17, 33}


def stage(scn: Scenario) -> Any:
    run = orchestrate.load("f", START.isoformat(), END.isoformat(), scn.config, tmp := scn.tmp
                           / "run")
    scn.out = tmp
    return run


def inconclusive_reason(scn: Scenario, spark: Any) -> str:
    """Why the run could not count: the step raises, and the result it leaves says why."""
    from kafka_recon.errors import SourceUnreadable
    from kafka_recon.result.model import Result

    with pytest.raises(SourceUnreadable) as raised:
        scn.reconcile(spark)
    result = Result.load(scn.out / "result.json")
    assert result.status == "inconclusive"
    reason = " ".join(result.reasons)
    assert str(raised.value) in reason
    return reason


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"])
def test_each_sasl_mechanism_connects_with_the_right_password(
        tmp_path: Path, kafka: KafkaCluster, monkeypatch: pytest.MonkeyPatch,
        mechanism: str) -> None:
    from kafka_recon.cluster import preflight
    from kafka_recon.config import load_flow
    from kafka_recon.sources.kafka_client import endpoint

    assert kafka.security is not None
    conf = kafka.security.sasl(kafka.sasl_bootstrap, mechanism)
    scn = scenario(tmp_path, kafka, monkeypatch, conf)
    scn.flow_through(3)
    grant(kafka.bootstrap, "recon", reader_acls(scn.topic, ["loader"]))
    ep = endpoint(load_flow(scn.config, "f").topic_tier)
    assert preflight.gaps(ep, scn.topic, ["loader"]) == []


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"])
def test_a_wrong_password_is_named_as_such_for_each_mechanism(
        tmp_path: Path, kafka: KafkaCluster, spark: Any, monkeypatch: pytest.MonkeyPatch,
        mechanism: str) -> None:
    assert kafka.security is not None
    conf = kafka.security.sasl(kafka.sasl_bootstrap, mechanism, password="not-the-password")
    scn = scenario(tmp_path, kafka, monkeypatch, conf)
    reason = inconclusive_reason(scn, spark)
    assert f"authentication failed for user 'recon' with {mechanism}" in reason
    assert "cannot be reached" not in reason


def test_a_missing_client_certificate_is_named_as_a_tls_failure(
        tmp_path: Path, kafka: KafkaCluster, spark: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert kafka.security is not None
    conf = kafka.security.mtls(kafka.ssl_bootstrap, with_certificate=False)
    reason = inconclusive_reason(scenario(tmp_path, kafka, monkeypatch, conf), spark)
    assert "TLS handshake failed" in reason and "ssl.certificate.location" in reason


def test_the_preflight_names_every_missing_acl_and_what_it_costs(
        tmp_path: Path, kafka: KafkaCluster, spark: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert kafka.security is not None
    conf = kafka.security.sasl(kafka.sasl_bootstrap, user="limited")
    scn = scenario(tmp_path, kafka, monkeypatch, conf)
    scn.flow_through(5)
    # no ACL at all: the topic cannot even be described
    assert "DESCRIBE on Topic:" + scn.topic in inconclusive_reason(scn, spark)
    grant(kafka.bootstrap, "limited", [("TOPIC", scn.topic, "LITERAL", "DESCRIBE")])
    reason = inconclusive_reason(scn, spark)
    assert "lacks 3 ACL(s)" in reason
    for acl in (f"READ on Topic:{scn.topic} (the replay cannot read records)",
                "READ on Group:kafka-recon- (prefixed)",
                "DESCRIBE on Group:loader (without its committed offsets the run is "
                "inconclusive)"):
        assert acl in reason


def test_without_describe_configs_the_audit_says_what_it_skipped(
        tmp_path: Path, kafka: KafkaCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    assert kafka.security is not None
    conf = kafka.security.sasl(kafka.sasl_bootstrap, user="limited")
    scn = scenario(tmp_path, kafka, monkeypatch, conf)
    scn.flow_through(5)
    grant(kafka.bootstrap, "limited", [a for a in reader_acls(scn.topic, ["loader"])
                                       if a[3] != "DESCRIBE_CONFIGS"])
    run = stage(scn)
    orchestrate.begin(run)
    orchestrate.stage(run)
    audit = run.folder.read(Audit, "stage").risks
    skipped = {a.observed for a in audit if a.rule == "A1-audit-incomplete"}
    assert skipped == {f"missing ACL: DESCRIBE_CONFIGS on Topic:{scn.topic}",
                       "missing ACL: DESCRIBE_CONFIGS on Cluster:kafka-cluster"}
    # the topic's settings are unknown, not guessed: no rule reads them
    assert not {a.rule for a in audit} & {"T2-min-isr", "T4-unclean-election"}


def test_a_repair_names_the_acls_it_lacks_before_it_publishes_anything(
        tmp_path: Path, kafka: KafkaCluster, spark: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    from kafka_recon.errors import TopicError

    assert kafka.security is not None
    conf = kafka.security.sasl(kafka.sasl_bootstrap, user="limited")
    scn = scenario(tmp_path, kafka, monkeypatch, conf)
    result = lost_on_the_consume_side(scn, kafka, spark, "limited")
    assert findings(result) == [("loss", "consume", "topic->sink", 3)]
    run = orchestrate.load("f", START.isoformat(), END.isoformat(), scn.config, scn.out)
    plan = orchestrate.plan_repair(run, spark)
    target = f"{scn.topic}.kafka-recon-repair"
    # the repair topic made by an administrator: the reader may not create topics
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic(target, 3, 1)])[target].result(30)

    with pytest.raises(TopicError) as refused:
        orchestrate.deliver_repair(run, spark, plan.digest)
    said = str(refused.value)
    assert "lacks 3 ACL(s)" in said and "nothing was published" in said, said
    for acl in (f"READ on Topic:{target}", f"WRITE on Topic:{target}",
                "WRITE on TransactionalId:kafka-recon-repair- (prefixed)"):
        assert acl in said, said
    assert not (scn.out / "repair" / "delivery.json").exists()

    grant(kafka.bootstrap, "limited", [
        ("TOPIC", target, "LITERAL", "READ"), ("TOPIC", target, "LITERAL", "WRITE"),
        ("TOPIC", target, "LITERAL", "DESCRIBE"),
        ("TRANSACTIONAL_ID", "kafka-recon-repair-", "PREFIXED", "WRITE"),
        ("TRANSACTIONAL_ID", "kafka-recon-repair-", "PREFIXED", "DESCRIBE")])
    delivery = orchestrate.deliver_repair(run, spark, plan.digest)
    assert [(d.target, d.sent) for d in delivery.hops] == [(target, 3)]
