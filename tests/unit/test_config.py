from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from kafka_recon.config import ConfigError, load_flow, load_flows, load_flows_partial
from kafka_recon.errors import FlowInvalid

pytestmark = pytest.mark.unit

GOOD = """
flows:
  orders:
    owners: [a@example.com]
    bucket: 30m
    grace: 5m
    record: {id: "$.order_id", event_time: "$.created_at"}
    tiers:
      - {name: db, type: sql, conn: "sqlite:///x.db",
         ids: "SELECT id, t AS event_time FROM o WHERE t >= :start AND t < :end"}
      - {name: topic, type: kafka, bootstrap: "${BOOT:-127.0.0.1:9092}", topic: orders}
      - {name: sink, type: sql, conn: sink_db,
         ids: "SELECT id, t AS event_time FROM c WHERE t >= :start AND t < :end"}
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "flows.yaml"
    p.write_text(text)
    return p


def test_valid_flow_parses_durations_defaults_and_sides(tmp_path: Path) -> None:
    flow = load_flow(write(tmp_path, GOOD), "orders")
    assert flow.bucket == timedelta(minutes=30) and flow.grace == timedelta(minutes=5)
    assert flow.replays == 2 and flow.tolerance.loss == 0
    assert flow.topic_tier.bootstrap == "127.0.0.1:9092"
    assert (flow.side_of("db"), flow.side_of("topic")) == ("write", "consume")


def test_environment_variables_fill_placeholders(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOOT", "127.0.0.1:1234")
    assert load_flow(write(tmp_path, GOOD), "orders").topic_tier.bootstrap == "127.0.0.1:1234"


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda s: s.replace("owners: [a@example.com]", "owners: [a@example.com]\n    colour: red"),
         "field 'colour': Extra inputs are not permitted"),
        (lambda s: s.replace("    owners: [a@example.com]\n", ""),
         "field 'owners': Field required"),
        (lambda s: s.replace("bucket: 30m", "bucket: half an hour"),
         "field 'bucket': Value error, expected a duration like 30s"),
        (lambda s: s.replace("t >= :start AND t < :end\"}\n      - {name: topic",
                             "t >= 1\"}\n      - {name: topic"),
         "must use both :start and :end"),
        (lambda s: s.replace("type: kafka", "type: kafak"), "field 'tiers.1'"),
        (lambda s: s.replace('"$.order_id"', '"order_id"'), "field 'record.id'"),
        (lambda s: s.replace("name: sink", "name: db"), "tier names must be unique, repeated: db"),
        (lambda s: s.replace("${BOOT:-127.0.0.1:9092}", "${NOT_SET_ANYWHERE}"),
         "environment variable NOT_SET_ANYWHERE is not set"),
        (lambda s: s.replace("conn: sink_db,", "conn: sink_db, slices: 0,"),
         "field 'tiers.2.sql.slices': Input should be greater than or equal to 1"),
        (lambda s: s.replace('conn: sink_db,\n         ids: "SELECT id, t AS event_time',
                             'conn: sink_db, slices: 4,\n'
                             '         counts: "SELECT b AS bucket, n AS count'),
         "'slices' splits the 'ids' query: a 'counts' tier is not sliced"),
    ],
    ids=["unknown-key", "missing-field", "bad-duration", "query-without-window",
         "unknown-tier-type", "bad-jsonpath", "repeated-tier", "unset-env", "no-slices",
         "counts-sliced"],
)
def test_bad_config_names_file_flow_and_field(tmp_path: Path, mutate, expected: str) -> None:
    path = write(tmp_path, mutate(GOOD))
    with pytest.raises(ConfigError) as err:
        load_flows(path)
    assert str(path) in str(err.value)
    assert "orders" in str(err.value)
    assert expected in str(err.value)


def test_two_flows_with_one_name_are_rejected_with_both_lines(tmp_path: Path) -> None:
    body = GOOD.split("flows:\n", 1)[1]
    expected = r"line 13: key 'orders' appears twice \(first on line 2\)"
    with pytest.raises(ConfigError, match=expected):
        load_flows(write(tmp_path, "flows:\n" + body + body))


def test_malformed_yaml_is_reported_with_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "flows:\n  orders: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_flows(path)


def test_unknown_flow_lists_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no flow named 'payments' \(flows: orders\)"):
        load_flow(write(tmp_path, GOOD), "payments")


@pytest.mark.parametrize(("window", "bucket", "schedule"), [
    (None, timedelta(minutes=30), "0 0 * * *"), ("1h", timedelta(minutes=30), "0 * * * *"),
    ("6h", timedelta(minutes=30), "0 */6 * * *"), ("10m", timedelta(minutes=10), "*/10 * * * *")])
def test_a_flows_window_gives_its_schedule_and_a_short_one_is_its_own_bucket(
        tmp_path: Path, window: str | None, bucket: timedelta, schedule: str) -> None:
    from kafka_recon.config import schedule_of

    text = GOOD if window is None else GOOD.replace("    bucket: 30m\n", f"    window: {window}\n"
                                                    if window == "10m" else
                                                    f"    bucket: 30m\n    window: {window}\n")
    flow = load_flow(write(tmp_path, text), "orders")
    assert flow.bucket == bucket and schedule_of(flow.window) == schedule


@pytest.mark.parametrize(("extra", "error"), [
    ("    window: 7m\n", "field 'window': .*expected 1d, whole hours dividing a day .* got 7m"),
    ("    window: 2d\n", "got 2d"),
    ("    window: 5h\n", "got 5h"),
    ("    window: 10m\n", "bucket 30m is longer than the window 10m"),
])
def test_a_window_no_schedule_can_follow_is_a_config_error(tmp_path: Path, extra: str,
                                                          error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        load_flow(write(tmp_path, GOOD.replace("    grace: 5m\n", "    grace: 5m\n" + extra)),
                  "orders")


@pytest.mark.parametrize(("given", "kept", "allowed_of_20000"), [
    (3, 3, 3), ("0.01%", "0.01%", 2), (" 5 % ", "5%", 1000), ("100%", "100%", 20000), ("7", 7, 7),
])
def test_a_tolerance_is_a_count_or_a_percentage_of_the_expected_records(
        tmp_path: Path, given: object, kept: object, allowed_of_20000: int) -> None:
    text = GOOD + f"    tolerance: {{loss: {given!r}, unexpected: 1}}\n"
    flow = load_flow(write(tmp_path, text), "orders")
    assert flow.tolerance.loss == kept and flow.tolerance.unexpected == 1
    assert flow.tolerance.allowed("loss", 20000) == allowed_of_20000
    assert flow.tolerance.allowed("duplicate", 20000) == 0


@pytest.mark.parametrize("given", ["-1", "'101%'", "'ten'", "'1.5'", "true", "'-2%'"])
def test_a_tolerance_that_is_neither_a_count_nor_a_percentage_names_its_field(
        tmp_path: Path, given: str) -> None:
    path = write(tmp_path, GOOD + f"    tolerance: {{duplicate: {given}}}\n")
    with pytest.raises(ConfigError) as err:
        load_flows(path)
    assert "field 'tolerance.duplicate'" in str(err.value)
    assert "percentage" in str(err.value) or "negative" in str(err.value)


def test_a_flows_closing_time_is_its_longest_grace_plus_the_disorder_margin(
        tmp_path: Path) -> None:
    text = GOOD.replace("grace: 5m", "grace: 5m\n    disorder: 30s").replace(
        "topic: orders}", "topic: orders, grace: 8m}")
    flow = load_flow(write(tmp_path, text), "orders")
    assert flow.closing == timedelta(minutes=8, seconds=30)


def test_a_flows_repair_settings_read_with_their_defaults(tmp_path: Path) -> None:
    flow = load_flow(write(tmp_path, GOOD), "orders")
    assert (flow.repair.write_side, flow.repair.topics, flow.repair.counted,
            flow.repair.settle) == ("export", {}, True, timedelta(minutes=10))
    text = GOOD.replace("    grace: 5m\n", "    grace: 5m\n    repair: {write_side: publish, "
                        "topics: {topic: orders.fixes}, fields: {'$.customer.id': cust}, "
                        "settle: 2m}\n")
    flow = load_flow(write(tmp_path, text), "orders")
    assert flow.repair.topics == {"topic": "orders.fixes"}
    assert flow.repair.settle == timedelta(minutes=2)


@pytest.mark.parametrize(
    ("repair", "expected"),
    [("{topics: {sink: x}}", "repair.topics names 'sink', which is not a topic tier"),
     ("{fields: {'$.a': a}}",
      "repair.fields shape published records: set repair.write_side: publish"),
     ("{write_side: publish, fields: {'a.b': a}}", "expected a JSON path of plain names"),
     ("{write_side: csv}", "field 'repair.write_side'"),
     ("{to: topic, topics: {topic: x}}", "repair.topics names repair topics, but repair.to: "
                                         "topic puts records back onto the flow's own topics"),
     ("{to: sink}", "field 'repair.to'")],
    ids=["topics-of-a-sql-tier", "fields-without-json", "bad-path", "unknown-write-side",
         "own-topic-and-repair-topics", "unknown-target"])
def test_bad_repair_settings_name_what_is_wrong(tmp_path: Path, repair: str,
                                                expected: str) -> None:
    path = write(tmp_path, GOOD.replace("    grace: 5m\n",
                                        f"    grace: 5m\n    repair: {repair}\n"))
    with pytest.raises(ConfigError, match="orders") as err:
        load_flows(path)
    assert expected in str(err.value)


def test_published_repairs_need_a_flow_whose_records_are_not_change_events(
        tmp_path: Path) -> None:
    avro = GOOD.replace('event_time: "$.created_at"}',
                        'event_time: "$.created_at", format: avro}').replace(
        "    grace: 5m\n", "    grace: 5m\n    repair: {write_side: publish}\n")
    assert load_flow(write(tmp_path, avro), "orders").repair.write_side == "publish"
    cdc = avro.replace("format: avro}", "envelope: debezium}")
    with pytest.raises(ConfigError, match="write_side publish writes plain records; the first "
                                          "topic's records are debezium change events"):
        load_flows(write(tmp_path, cdc))


def test_records_go_back_onto_their_own_topic_only_when_their_event_time_is_in_the_record(
        tmp_path: Path) -> None:
    text = GOOD.replace("    grace: 5m\n", "    grace: 5m\n    repair: {to: topic}\n")
    assert load_flow(write(tmp_path, text), "orders").repair.to == "topic"
    stamped = text.replace('event_time: "$.created_at"}', 'event_time: kafka_timestamp}')
    with pytest.raises(ConfigError, match="repair.to: topic: tier 'topic' reads its event time "
                                          "from the Kafka timestamp"):
        load_flows(write(tmp_path, stamped))


# another flow in the same file, whose tolerance is mistyped
BAD_SIBLING = GOOD + """
  payments:
    owners: [p@example.com]
    tolerance: {loss: "150%"}
    record: {id: "$.id", event_time: "$.t"}
    tiers:
      - {name: topic, type: kafka, bootstrap: "127.0.0.1:9092", topic: payments}
      - {name: sink, type: sql, conn: sink_db,
         ids: "SELECT id, t AS event_time FROM p WHERE t >= :start AND t < :end"}
"""


def test_a_flow_is_read_alone_so_another_flows_mistake_is_never_its_error(
        tmp_path: Path) -> None:
    path = write(tmp_path, BAD_SIBLING)
    assert load_flow(path, "orders").name == "orders"
    with pytest.raises(FlowInvalid) as err:
        load_flow(path, "payments")
    assert err.value.flow == "payments"
    [(field, message)] = err.value.fields
    assert field == "tolerance.loss" and "between 0% and 100%" in message and "150%" in message
    assert f"{path}: flow 'payments', field 'tolerance.loss'" in str(err.value)
    flows, errors = load_flows_partial(path)
    assert list(flows) == ["orders"] and list(errors) == ["payments"]


def test_a_file_that_cannot_be_parsed_still_fails_every_flow(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD + "  broken: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_flow(path, "orders")


def test_an_unset_variable_names_its_flow_and_field(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("${BOOT:-127.0.0.1:9092}", "${NOT_SET_ANYWHERE}"))
    with pytest.raises(FlowInvalid) as err:
        load_flow(path, "orders")
    assert err.value.fields == (("tiers.1.bootstrap", "environment variable NOT_SET_ANYWHERE "
                                                      "is not set and has no default"),)


def test_the_closing_time_macro_reads_its_own_flow_beside_a_bad_one(tmp_path: Path) -> None:
    from kafka_recon.airflow.macros import closing_time

    path = write(tmp_path, BAD_SIBLING)
    flow = load_flow(path, "orders")
    assert closing_time("orders", "2026-11-20T00:00:00Z", str(path)) == \
        f"2026-11-20T00:{flow.closing.seconds // 60:02d}:00Z"
