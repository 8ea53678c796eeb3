"""Each audit rule: silent on the safe configuration, firing on its one unsafe change.

Removing a rule from RULES makes its test fail: the test looks the rule up by id.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from kafka_recon.cluster.audit import RULES, Facts, client_settings, evaluate, read_properties
from kafka_recon.cluster.transactions import OpenTransaction
from kafka_recon.errors import ConfigError

pytestmark = pytest.mark.unit

SAFE = Facts(
    topic="orders",
    partitions=[{"id": i, "leader": 1 + i % 3, "replicas": [1, 2, 3], "isr": [1, 2, 3]}
                for i in range(3)],
    topic_config={"min.insync.replicas": "2", "unclean.leader.election.enable": "false",
                  "max.message.bytes": "1048588", "retention.ms": "604800000",
                  "cleanup.policy": "delete"},
    broker_config={"message.max.bytes": "1048588", "replica.fetch.max.bytes": "1048576"},
    groups={"loader": {"lag": 10, "oldest_unconsumed_age_ms": 60_000}},
    producer={"acks": "all", "enable.idempotence": "true", "retries": "2147483647",
              "max.in.flight.requests.per.connection": "5", "retry.backoff.ms": "1000",
              "max.request.size": "1048576"},
    consumer={"enable.auto.commit": "false", "max.partition.fetch.bytes": "2097152"},
)


def fired(facts: Facts) -> set[str]:
    return {f.rule for f in evaluate(facts)}


def changed(**kw: Any) -> Facts:
    f = copy.deepcopy(SAFE)
    for key, value in kw.items():
        target = getattr(f, key.split("__")[0])
        if "__" in key:
            target[key.split("__")[1]] = value
        else:
            setattr(f, key, value)
    return f


def test_the_safe_configuration_fires_no_rule() -> None:
    assert fired(SAFE) == set()


def test_client_rules_are_not_guessed_when_no_client_settings_are_declared() -> None:
    assert fired(changed(producer=None, consumer=None)) == set()


NOW_MS = 1_800_000_000_000
# open 20 minutes with a 10-minute timeout: the broker should have aborted it long ago
HANGING = OpenTransaction(partition=2, producer_id=7, producer_epoch=0, first_offset=400,
                          last_timestamp_ms=NOW_MS - 1_190_000, transactional_id="etl-1",
                          state="Ongoing", timeout_ms=600_000, started_ms=NOW_MS - 1_200_000)


def test_a_transaction_is_hanging_only_past_its_own_timeout_or_the_brokers_longest() -> None:
    young = dataclasses.replace(HANGING, started_ms=NOW_MS - 300_000)
    assert "H4-hanging-transaction" not in fired(changed(transactions=[young], now_ms=NOW_MS))
    [hit] = [f for f in evaluate(changed(transactions=[HANGING], now_ms=NOW_MS))
             if f.rule == "H4-hanging-transaction"]
    assert hit.where == "partition 2" and "transactional id 'etl-1'" in hit.observed
    assert "open 1200 s" in hit.observed and "from offset 400" in hit.observed
    assert not hit.blocking  # the run's own check names one that holds back its window
    # a timeout that could not be read: the broker's longest default, 15 minutes
    unknown = dataclasses.replace(HANGING, transactional_id=None, timeout_ms=None,
                                  started_ms=None, last_timestamp_ms=NOW_MS - 600_000)
    assert "H4-hanging-transaction" not in fired(changed(transactions=[unknown],
                                                         now_ms=NOW_MS))
    old = dataclasses.replace(unknown, last_timestamp_ms=NOW_MS - 1_000_000)
    assert "H4-hanging-transaction" in fired(changed(transactions=[old], now_ms=NOW_MS))


@pytest.mark.parametrize(("rule", "facts"), [
    ("P1-acks", lambda: changed(producer={**SAFE.producer, "acks": "1"})),  # type: ignore[dict-item]
    ("P2-idempotence", lambda: changed(producer={**SAFE.producer, "enable.idempotence": "false",  # type: ignore[dict-item]
                                                  "max.in.flight.requests.per.connection": "1"})),
    ("P3-in-flight", lambda: changed(producer={**SAFE.producer,  # type: ignore[dict-item]
                                               "max.in.flight.requests.per.connection": "6"})),
    ("P4-retries", lambda: changed(producer={**SAFE.producer, "retries": "0"})),  # type: ignore[dict-item]
    ("P5-retry-backoff", lambda: changed(producer={**SAFE.producer, "retry.backoff.ms": "100"})),  # type: ignore[dict-item]
    ("T1-replication", lambda: changed(partitions=[
        {"id": 0, "leader": 1, "replicas": [1, 2], "isr": [1, 2]}],
        topic_config={**SAFE.topic_config, "min.insync.replicas": "1"})),
    ("T2-min-isr", lambda: changed(topic_config={**SAFE.topic_config,
                                                 "min.insync.replicas": "1"})),
    ("T3-min-isr-equals-rf", lambda: changed(topic_config={**SAFE.topic_config,
                                                           "min.insync.replicas": "3"})),
    ("T4-unclean-election", lambda: changed(topic_config={
        **SAFE.topic_config, "unclean.leader.election.enable": "true"})),
    ("C1-auto-commit", lambda: changed(consumer={**SAFE.consumer,  # type: ignore[dict-item]
                                                 "enable.auto.commit": "true"})),
    ("S1-size-chain", lambda: changed(producer={**SAFE.producer,  # type: ignore[dict-item]
                                                "max.request.size": "5000000"})),
    ("R1-retention-vs-lag", lambda: changed(groups={"loader": {
        "lag": 10, "oldest_unconsumed_age_ms": 604_000_000}})),
    ("H1-under-replicated", lambda: changed(partitions=[
        {"id": 0, "leader": 1, "replicas": [1, 2, 3], "isr": [1, 3]}])),
    ("H2-below-min-isr", lambda: changed(partitions=[
        {"id": 0, "leader": 1, "replicas": [1, 2, 3], "isr": [1]}])),
    ("H3-no-leader", lambda: changed(partitions=[
        {"id": 0, "leader": None, "replicas": [1, 2, 3], "isr": [1, 2, 3]}])),
    ("A1-audit-incomplete", lambda: changed(
        skipped=["DESCRIBE_CONFIGS on Cluster:kafka-cluster"], broker_config=None)),
    ("H4-hanging-transaction", lambda: changed(transactions=[HANGING], now_ms=NOW_MS)),
])
def test_each_rule_fires_on_its_unsafe_setting(rule: str, facts: Any) -> None:
    found = [f for f in evaluate(facts()) if f.rule == rule]
    assert found, f"{rule} did not fire"
    f = found[0]
    assert {f.kind, f.severity} <= {"config_risk", "health", "high", "medium", "low"}
    assert f.seed and f.why and f.fix and f.observed and f.recommended


def test_every_rule_has_a_case_above() -> None:
    params = [m.args[1] for m in test_each_rule_fires_on_its_unsafe_setting.pytestmark
              if m.name == "parametrize"][0]
    assert sorted(r for r, _ in params) == sorted(rule.id for rule in RULES)


def test_a_group_whose_unread_records_retention_already_deleted_is_named_by_the_retention_rule(
        ) -> None:
    # the broker's retention check ran before the audit: nothing unread is left to date, but
    # the group's committed offsets lie behind the log's start
    f = changed(groups={"loader": {"lag": 0, "oldest_unconsumed_age_ms": None,
                                   "deleted_unread": 4}})
    (hit,) = [x for x in evaluate(f) if x.rule == "R1-retention-vs-lag"]
    assert hit.where == "loader" and "deleted 4 records" in hit.observed
    assert "R1-retention-vs-lag" not in fired(changed(groups={"loader": {
        "lag": 0, "oldest_unconsumed_age_ms": None, "deleted_unread": 0}}))


def test_size_chain_names_each_hop_that_cannot_carry() -> None:
    f = changed(consumer={**SAFE.consumer, "max.partition.fetch.bytes": "1000"},  # type: ignore[dict-item]
                broker_config={"message.max.bytes": "2000000",
                               "replica.fetch.max.bytes": "1048576"})
    wheres = {x.where for x in evaluate(f) if x.rule == "S1-size-chain"}
    assert wheres == {"consumer", "broker"}


def test_findings_are_ordered_by_severity() -> None:
    f = changed(producer={**SAFE.producer, "retry.backoff.ms": "10", "acks": "1"})  # type: ignore[dict-item]
    assert [x.severity for x in evaluate(f)] == ["high", "low"]


def test_properties_files_and_declared_settings_merge(tmp_path: Path) -> None:
    (tmp_path / "consumer.properties").write_text(
        "# the app's own file\nenable.auto.commit = true\nmax.partition.fetch.bytes: 2097152\n")
    merged = client_settings({"enable.auto.commit": False}, "consumer.properties", tmp_path)
    assert merged == {"enable.auto.commit": "false", "max.partition.fetch.bytes": "2097152"}
    assert read_properties(tmp_path / "consumer.properties")["enable.auto.commit"] == "true"


def test_a_malformed_properties_line_is_named(tmp_path: Path) -> None:
    (tmp_path / "p.properties").write_text("acks=all\njust words\n")
    with pytest.raises(ConfigError, match=r"p.properties, line 2: expected key=value"):
        read_properties(tmp_path / "p.properties")


def test_a_topic_config_the_principal_may_not_read_is_not_guessed_at() -> None:
    # unknown is not min.insync.replicas=1: the topic's rules are skipped and A1 names the ACL
    facts = changed(topic_config=None, skipped=["DESCRIBE_CONFIGS on Topic:orders"],
                    partitions=[{"id": 0, "leader": 1, "replicas": [1, 2, 3], "isr": [1]}])
    found = evaluate(facts)
    assert {f.rule for f in found} == {"A1-audit-incomplete", "H1-under-replicated"}
    a1 = next(f for f in found if f.rule == "A1-audit-incomplete")
    assert a1.observed == "missing ACL: DESCRIBE_CONFIGS on Topic:orders"
    assert "topic's own settings" in a1.where
