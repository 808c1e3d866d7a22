"""kafka-python against a running broker: `kafka_python_driver.py HOST:PORT`.

kafka-python infers the broker's Kafka version from ApiVersions and enables idempotence by
default (only if that inferred version is 0.11 or later). Checks, each PASS or FAIL:
  1. KafkaAdminClient.create_topics makes a 2-partition topic (visible in metadata);
  2. KafkaProducer with its defaults is idempotent (a producer id was assigned) and every send is
     acked with dense per-partition offsets;
  3. a KafkaConsumer in a group reads back exactly what was acked (partition, offset, key,
     value), commits synchronously, and committed() equals the partitions' end offsets;
  4. a new consumer in the same group receives only messages produced after the commit;
  5. list_topics (admin) and topics() (consumer) include the topic;
  6. describe_log_dirs lists the topic's partitions in the broker's data folder, with sizes that
     hold what was acked (and nothing for a topic not named).
  7. the listings of what Weir holds none of answer as Kafka's do with none: list_transactions
     gives each broker an empty list; describe_user_scram_credentials gives no users, and a user
     named gets "does not exist"; describe_acls raises SecurityDisabledError (no authorizer);
     and describe_metadata_quorum names this broker as the quorum's leader and only voter.
WEIR_INTEROP_DEBUG=1 logs kafka-python's wire traffic at DEBUG level.
"""

import logging
import os
import sys
import time
import uuid

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka import errors as Errors
from kafka.admin import (ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePatternFilter,
                         ResourceType)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import Checks, Mismatch, expect, until  # noqa: E402

BOOTSTRAP = sys.argv[1]
RUN = uuid.uuid4().hex[:8]
TOPIC = f"kp-{RUN}"
GROUP = f"kp-group-{RUN}"
PARTITIONS = 2
N_FIRST = 60
N_SECOND = 10

logging.basicConfig(stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s",
                    level=logging.DEBUG if os.environ.get("WEIR_INTEROP_DEBUG") else logging.ERROR)

COMMON = {"bootstrap_servers": BOOTSTRAP, "request_timeout_ms": 15000, "client_id": f"kp-{RUN}"}


def create_topic(state):
    admin = KafkaAdminClient(**COMMON)
    state["admin"] = admin
    admin.create_topics({TOPIC: {"num_partitions": PARTITIONS, "replication_factor": 1}},
                        timeout_ms=10000, wait_for_metadata=True)
    described = admin.describe_topics([TOPIC])
    expect(len(described) == 1 and described[0]["name"] == TOPIC, f"describe_topics({TOPIC}) = {described}")
    partitions = sorted(p["partition_index"] for p in described[0]["partitions"])
    expect(partitions == list(range(PARTITIONS)), f"{TOPIC} has partitions {partitions}")
    return f"{TOPIC} with {PARTITIONS} partitions; broker version inferred as {admin._manager.broker_version}"


def produce(count, tag):
    producer = KafkaProducer(**COMMON, acks="all", max_block_ms=15000, linger_ms=5)
    try:
        expect(producer.config["enable_idempotence"],
               "kafka-python disabled idempotence (it does so when the broker looks older than 0.11)")
        futures = []
        for i in range(count):
            key = f"k{i % 5}".encode()
            value = f"{tag} {i} \u00fc\u00df".encode("utf-8") + bytes([0, 255, i % 256])
            futures.append((key, value, producer.send(TOPIC, key=key, value=value)))
        producer.flush(timeout=15)
        records = []
        for key, value, future in futures:
            meta = future.get(timeout=15)
            records.append((meta.partition, meta.offset, key, value))
        pid = producer._transaction_manager.producer_id_and_epoch.producer_id
        expect(pid >= 0, f"idempotent producer has no producer id ({pid})")
    finally:
        producer.close(timeout=5)
    for p in range(PARTITIONS):
        offsets = [o for q, o, _, _ in records if q == p]
        if offsets:
            expect(offsets == list(range(offsets[0], offsets[0] + len(offsets))),
                   f"partition {p} acked offsets {offsets[:8]}... not dense in send order")
    return records, pid


def first_produce(state):
    state["first"], pid = produce(N_FIRST, "first")
    spread = {p: sum(1 for r in state["first"] if r[0] == p) for p in range(PARTITIONS)}
    return f"idempotent (producer id {pid}), {N_FIRST} acked, per partition {spread}"


def new_consumer():
    return KafkaConsumer(TOPIC, **COMMON, group_id=GROUP, auto_offset_reset="earliest",
                         enable_auto_commit=False, session_timeout_ms=10000, heartbeat_interval_ms=1000)


def read(consumer, want_count, deadline_s=30):
    got = []

    def step():
        for tp, msgs in consumer.poll(timeout_ms=200).items():
            got.extend((m.partition, m.offset, m.key, m.value) for m in msgs)
        return len(got) >= want_count
    until(deadline_s, f"{want_count} records (have {len(got)})", step)
    # Anything more (a duplicate, a stray) would show up now.
    end = time.monotonic() + 0.5
    while time.monotonic() < end:
        for tp, msgs in consumer.poll(timeout_ms=100).items():
            got.extend((m.partition, m.offset, m.key, m.value) for m in msgs)
    return got


def consume_commit(state):
    consumer = new_consumer()
    try:
        got = read(consumer, N_FIRST)
        want = state["first"]
        expect(sorted(got) == sorted(want),
               f"read {len(got)} records, {len(want)} acked; missing {sorted(set(want) - set(got))[:2]}, "
               f"unexpected {sorted(set(got) - set(want))[:2]}")
        for p in range(PARTITIONS):
            expect([r for r in got if r[0] == p] == sorted(r for r in want if r[0] == p),
                   f"partition {p} read out of order")
        consumer.commit()
        tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        ends = consumer.end_offsets(tps)
        for tp in tps:
            acked_end = max([r[1] for r in want if r[0] == tp.partition], default=-1) + 1
            expect(ends[tp] == acked_end, f"end_offsets {tp.partition} = {ends[tp]}, expected {acked_end}")
            committed = consumer.committed(tp)
            if acked_end > 0:
                expect(committed == acked_end, f"committed({tp.partition}) = {committed}, expected {acked_end}")
        topics = consumer.topics()
        expect(TOPIC in topics, f"consumer.topics() lacks {TOPIC}: {sorted(topics)[:10]}")
    finally:
        consumer.close(autocommit=False)
    state["ends"] = {tp.partition: ends[tp] for tp in ends}
    return f"read {len(got)} exactly; committed() = end offsets {state['ends']}"


def resume(state):
    second, _ = produce(N_SECOND, "second")
    consumer = new_consumer()
    try:
        got = read(consumer, N_SECOND)
    finally:
        consumer.close(autocommit=False)
    early = [r for r in got if r[1] < state["ends"][r[0]]]
    expect(not early, f"{len(early)} records before the committed offsets were redelivered, e.g. {early[:2]}")
    expect(sorted(got) == sorted(second), f"read {len(got)} records, expected the {N_SECOND} produced after the commit")
    return f"read exactly the {N_SECOND} messages produced after the commit"


def list_topics(state):
    topics = state["admin"].list_topics()
    expect(TOPIC in topics, f"list_topics() lacks {TOPIC}: {sorted(topics)[:10]}")
    return f"{len(topics)} topics, {TOPIC} among them"


def log_dirs(state):
    answers = state["admin"].describe_log_dirs({TOPIC: list(range(PARTITIONS))})
    expect(len(answers) == 1, f"describe_log_dirs asked one broker, answered {answers}")
    dirs = answers[0]["log_dirs"]
    expect(len(dirs) == 1 and dirs[0]["error_code"] == 0, f"one data folder, no error: {dirs}")
    topics = {t["name"]: t["partitions"] for t in dirs[0]["topics"]}
    expect(list(topics) == [TOPIC], f"only {TOPIC} was named, listed {sorted(topics)}")
    sizes = {p["partition_index"]: p["partition_size"] for p in topics[TOPIC]}
    expect(sorted(sizes) == list(range(PARTITIONS)), f"partitions listed: {sorted(sizes)}")
    expect(sum(sizes.values()) > (N_FIRST + N_SECOND) * 10, f"sizes {sizes} too small for what was acked")
    return f"{dirs[0]['log_dir']}: {TOPIC} partitions {sizes} bytes"


def empty_listings(state):
    admin = state["admin"]
    transactions = admin.list_transactions()
    expect(len(transactions) == 1 and all(v == [] for v in transactions.values()),
           f"list_transactions() = {transactions}")
    every = admin.describe_user_scram_credentials()
    expect(every == {}, f"describe_user_scram_credentials() = {every}")
    named = admin.describe_user_scram_credentials(["alice"])
    error = named.get("alice", {}).get("error") or ""
    expect(list(named) == ["alice"] and "does not exist" in error and named["alice"]["credential_infos"] == [],
           f"describe_user_scram_credentials(['alice']) = {named}")
    try:
        acls = admin.describe_acls(ACLFilter(principal=None, host="*", operation=ACLOperation.ANY,
                                             permission_type=ACLPermissionType.ANY,
                                             resource_pattern=ResourcePatternFilter(ResourceType.ANY, None,
                                                                                    ACLResourcePatternType.ANY)))
        raise Mismatch(f"describe_acls answered {acls} with no authorizer")
    except Errors.SecurityDisabledError:
        pass
    quorum = admin.describe_metadata_quorum()
    broker_id = min(b.node_id for b in admin._manager.cluster.brokers())
    try:
        partition = quorum["topics"][0]["partitions"][0]
        leader, voters = partition["leader_id"], [v["replica_id"] for v in partition["current_voters"]]
    except (KeyError, IndexError, TypeError):
        raise Mismatch(f"describe_metadata_quorum() = {quorum!r:.600}")
    expect(leader == broker_id and voters == [broker_id],
           f"quorum leader {leader}, voters {voters}; this broker is {broker_id}")
    return (f"no transactions, no SCRAM users ('alice': {error!r}), ACLs: SecurityDisabledError, "
            f"quorum leader {leader}, voters {voters}")


def main():
    checks = Checks("kafka-python")
    state = {}
    if checks.run("KafkaAdminClient.create_topics", create_topic, state):
        ok = checks.run("KafkaProducer (default: idempotent, acks=all)", first_produce, state)
        ok = ok and checks.run("KafkaConsumer in a group reads exactly what was acked, commits, committed()",
                               consume_commit, state)
        ok and checks.run("new group member resumes after the committed offsets", resume, state)
        checks.run("KafkaAdminClient.list_topics", list_topics, state)
        checks.run("KafkaAdminClient.describe_log_dirs", log_dirs, state)
        checks.run("KafkaAdminClient listings of what Weir holds none of", empty_listings, state)
        state["admin"].close()
    checks.finish()


main()
