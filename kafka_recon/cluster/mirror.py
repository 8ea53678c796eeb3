"""A MirrorMaker 2 replication, as its properties file and its offset store say.

The mirror's progress is what a consumer group's commit is for a consumer: MirrorMaker 2 (as
a dedicated cluster) keeps the source offsets it has copied in Kafka Connect's offset store,
the compacted topic `mm2-offsets.<source alias>.internal` on the target cluster, one record per
source partition (`["MirrorSourceConnector", {"cluster", "topic", "partition"}]` ->
`{"offset": last copied}`). Read here, it lets the run tell records retention deleted before
the mirror copied them from a loss on the way into the source topic.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from kafka_recon.errors import ConfigError
from kafka_recon.sources.topic import GROUP_PREFIX, TopicError

if TYPE_CHECKING:
    from kafka_recon.config import Flow, KafkaTier
    from kafka_recon.sources.kafka_client import KafkaEndpoint

MM2_FLOW = re.compile(r"^([^.\s]+)->([^.\s]+)\.enabled$")
TIMEOUT_S = 15.0


def replication(tier: KafkaTier, config_dir: Path | None = None
                ) -> tuple[dict[str, str], str, str]:
    """(the mirror's properties, source alias, target alias) of the replication feeding
    `tier`: the enabled one whose source alias prefixes the topic (`A.orders`: A), else the
    file's only enabled one."""
    assert tier.mirror_properties is not None
    path = Path(tier.mirror_properties)
    if not path.is_absolute() and config_dir is not None:
        path = config_dir / path
    if not path.exists():
        raise ConfigError(f"tier '{tier.name}': mirror_properties {path} does not exist")
    from kafka_recon.sources.properties import read_properties

    props = read_properties(path, "mirror properties file")
    flows = [(m.group(1), m.group(2)) for k, v in props.items()
             if (m := MM2_FLOW.match(k)) and v.strip().lower() == "true"]
    prefix = tier.topic.split(".", 1)[0] if "." in tier.topic else None
    mine = [f for f in flows if f[0] == prefix] or (flows if len(flows) == 1 else [])
    if len(mine) != 1:
        raise ConfigError(f"tier '{tier.name}': {path} has no single enabled replication "
                          f"feeding topic '{tier.topic}' (enabled: "
                          f"{', '.join(f'{a}->{b}' for a, b in flows) or 'none'})")
    return props, mine[0][0], mine[0][1]


def offsets_topic(props: dict[str, str], source: str) -> str:
    """Where a dedicated MirrorMaker 2 keeps its source offsets (Connect's offset store)."""
    return props.get("offset.storage.topic") or f"mm2-offsets.{source}.internal"


def mirror_group(source: str, target: str) -> str:
    """How the mirror's progress is named beside the production groups' commits."""
    return f"mirror {source}->{target}"


def progress(target: KafkaEndpoint, store: str, source: str, topic: str) -> dict[int, int]:
    """The next source offset the mirror would copy, per partition of `topic` (its last
    copied offset plus one), from its offset store on the target cluster, read whole with a
    fresh group that commits nothing. A partition it never committed is absent."""
    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    from kafka_recon.sources.topic import open_client

    consumer = open_client(target, {"group.id": f"{GROUP_PREFIX}mirror-{uuid.uuid4().hex[:12]}",
                                    "enable.auto.commit": False,
                                    "enable.partition.eof": True})
    try:
        try:
            md = consumer.list_topics(store, timeout=TIMEOUT_S).topics.get(store)
        except KafkaException as e:
            raise TopicError(f"the mirror's offset store '{store}' on {target.where}: "
                             f"{e.args[0].str()}") from None
        if md is None or md.error is not None:
            return {}  # the mirror has committed nothing yet
        assigned = []
        for p in md.partitions:
            try:
                low, high = consumer.get_watermark_offsets(TopicPartition(store, p),
                                                           timeout=TIMEOUT_S, cached=False)
            except KafkaException as e:  # e.g. a leader moving: the store could not be read
                raise TopicError(f"the mirror's offset store '{store}' on {target.where}, "
                                 f"partition {p}: {e.args[0].str()}") from None
            if high > low:
                assigned.append(TopicPartition(store, p, low))
        consumer.assign(assigned)
        pending = {tp.partition for tp in assigned}
        out: dict[int, int] = {}
        while pending:
            msg = consumer.poll(TIMEOUT_S)
            if msg is None:
                raise TopicError(f"the mirror's offset store '{store}' on {target.where} "
                                 "stopped answering while read")
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    pending.discard(msg.partition())
                    continue
                raise TopicError(f"reading the mirror's offset store '{store}': {msg.error()}")
            try:
                key = json.loads(msg.key() or b"null")
                value = json.loads(msg.value()) if msg.value() is not None else None
            except ValueError:
                continue  # not one of the source connector's records
            if not (isinstance(key, list) and len(key) == 2 and isinstance(key[1], dict)):
                continue
            part = key[1]
            if part.get("cluster") != source or part.get("topic") != topic:
                continue
            if value is None:  # a tombstone: the mirror forgot this partition
                out.pop(int(part["partition"]), None)
            else:
                out[int(part["partition"])] = int(value["offset"]) + 1
        return out
    finally:
        consumer.close()


def mirror_commits(flow: Flow, tier: KafkaTier) -> dict[str, dict[int, int]]:
    """The progress of the mirror that copies this topic into the next one, as a group's
    commit (`kafka_recon.cluster.mirror`): known when the next tier names the mirror's
    properties."""
    from kafka_recon.config import KafkaTier
    from kafka_recon.sources.kafka_client import endpoint

    at = flow.tiers.index(tier)
    after = flow.tiers[at + 1] if at + 1 < len(flow.tiers) else None
    if not (isinstance(after, KafkaTier) and after.via == "replication"
            and after.mirror_properties):
        return {}
    props, source, target = replication(after)
    return {mirror_group(source, target):
            progress(endpoint(after), offsets_topic(props, source), source,
                            tier.topic)}
