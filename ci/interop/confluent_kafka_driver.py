"""confluent-kafka (librdkafka) against a running broker: `confluent_kafka_driver.py HOST:PORT`.

Checks, each printed as PASS or FAIL with what mismatched:
  1. AdminClient.create_topics: validate_only creates nothing; an invalid config is refused with
     INVALID_CONFIG; a 3-partition topic with configs is created and appears in metadata;
  2. an idempotent producer (enable.idempotence=true, acks=all) gets every delivery acked,
     offsets dense per partition, a key always in one partition;
  3. a group of two consumers (same group.id, subscribe) splits the partitions between them and
     together reads every message exactly once, each from the member that owns its partition,
     with no rebalance while reading; they commit synchronously and committed() shows the ends;
  4. a fresh consumer in the same group resumes after the committed offsets: it gets exactly
     the messages produced after the commit;
  5. describe_configs returns the topic's settings with their sources;
  6. delete_records moves partition 0's earliest offset to the one asked for, answering it as
     the low watermark, and a second call past the high watermark is refused;
  7. elect_leaders (preferred, and unclean) answers ELECTION_NOT_NEEDED for the topic's
     partitions, each already led by its only (preferred) replica, and UNKNOWN_TOPIC_OR_PART for
     a partition that does not exist; asked for every partition, it elects none;
  8. incremental_alter_configs deletes the replication throttles from the broker and the topic,
     as kafka-reassign-partitions does once a plan's moves are done (Weir never holds them, so
     that changes nothing), while setting a broker setting is refused with INVALID_REQUEST;
  9. describe_user_scram_credentials gives no users, and a user named RESOURCE_NOT_FOUND;
     describe_acls gives no ACLs (Weir has no authorizer);
 10. delete_topics removes the topic from metadata.
WEIR_INTEROP_DEBUG=1 turns on librdkafka's protocol, broker and consumer-group debug log.
"""

import os
import sys
import time
import uuid

from confluent_kafka import ElectionType, KafkaError, KafkaException, Consumer, Producer, TopicPartition
from confluent_kafka.admin import (AclBindingFilter, AclOperation, AclPermissionType, AdminClient, AlterConfigOpType,
                                  ConfigEntry, ConfigResource, ConfigSource, NewTopic, ResourcePatternType, ResourceType)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import Checks, Mismatch, expect, until  # noqa: E402

BOOTSTRAP = sys.argv[1]
RUN = uuid.uuid4().hex[:8]
TOPIC = f"ck-{RUN}"
GROUP = f"ck-group-{RUN}"
PARTITIONS = 3
N_FIRST = 90
N_SECOND = 30
TOPIC_CONFIG = {"retention.ms": "3600000", "cleanup.policy": "delete", "max.message.bytes": "2097152"}
TIMEOUT_S = 20

COMMON = {"bootstrap.servers": BOOTSTRAP, "socket.timeout.ms": 10000}
if os.environ.get("WEIR_INTEROP_DEBUG"):
    COMMON["debug"] = "protocol,broker,cgrp,topic,msg"

admin = AdminClient(dict(COMMON))


def topic_metadata(name):
    return admin.list_topics(timeout=10).topics.get(name)


def create_topics():
    # validate_only: accepted, nothing created.
    probe = f"ck-validate-{RUN}"
    futures = admin.create_topics([NewTopic(probe, num_partitions=2, replication_factor=1, config=TOPIC_CONFIG)],
                                  validate_only=True, request_timeout=15)
    futures[probe].result(timeout=TIMEOUT_S)
    expect(topic_metadata(probe) is None, f"validate_only create_topics created {probe}")
    # An invalid config value is refused.
    bad = f"ck-bad-{RUN}"
    futures = admin.create_topics([NewTopic(bad, num_partitions=1, replication_factor=1,
                                            config={"retention.ms": "soon"})], request_timeout=15)
    try:
        futures[bad].result(timeout=TIMEOUT_S)
        raise Mismatch("create_topics with retention.ms=soon succeeded; expected INVALID_CONFIG")
    except KafkaException as e:
        code = e.args[0].code()
        expect(code == KafkaError.INVALID_CONFIG, f"retention.ms=soon refused with {e.args[0]}, expected INVALID_CONFIG")
    # The real topic.
    futures = admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1,
                                            config=TOPIC_CONFIG)], request_timeout=15)
    futures[TOPIC].result(timeout=TIMEOUT_S)
    meta = until(10, f"{TOPIC} in metadata", lambda: topic_metadata(TOPIC))
    expect(meta.error is None, f"metadata error for {TOPIC}: {meta.error}")
    expect(sorted(meta.partitions) == list(range(PARTITIONS)),
           f"{TOPIC} has partitions {sorted(meta.partitions)}, expected 0..{PARTITIONS - 1}")
    for p in meta.partitions.values():
        expect(p.leader >= 0 and p.isrs, f"{TOPIC}[{p.id}] leader {p.leader} isr {p.isrs}")
    # Creating it again is refused with TOPIC_ALREADY_EXISTS.
    futures = admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)],
                                  request_timeout=15)
    try:
        futures[TOPIC].result(timeout=TIMEOUT_S)
        raise Mismatch("creating an existing topic succeeded; expected TOPIC_ALREADY_EXISTS")
    except KafkaException as e:
        expect(e.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS,
               f"re-create refused with {e.args[0]}, expected TOPIC_ALREADY_EXISTS")
    return f"validate_only, INVALID_CONFIG, {PARTITIONS} partitions with {len(TOPIC_CONFIG)} configs, TOPIC_ALREADY_EXISTS"


def produce(count, tag):
    """Produces `count` keyed messages; returns [(partition, offset, key, value)] in send order."""
    producer = Producer({**COMMON, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                         "message.timeout.ms": 15000})
    sent, errors, acked = [], [], {}

    def report(err, msg):
        if err is not None:
            errors.append(f"{msg.key()!r}: {err}")
        else:
            acked[(msg.key(), msg.value())] = (msg.partition(), msg.offset())

    for i in range(count):
        key = f"key-{i % 11}".encode()
        value = f"{tag} message {i} \u00e9\u00e8 \x00\xff".encode("utf-8")
        sent.append((key, value))
        producer.produce(TOPIC, key=key, value=value, on_delivery=report)
        producer.poll(0)
    left = producer.flush(TIMEOUT_S)
    expect(left == 0, f"{left} messages not delivered within {TIMEOUT_S}s")
    expect(not errors, f"{len(errors)} delivery errors, first: {errors[:3]}")
    expect(len(acked) == count, f"{len(acked)} acks for {count} messages")
    records = [(*acked[kv], *kv) for kv in sent]
    key_partition = {}
    for p, _, key, _ in records:
        expect(key_partition.setdefault(key, p) == p, f"key {key!r} acked in partitions {key_partition[key]} and {p}")
    for p in range(PARTITIONS):
        offsets = [o for q, o, _, _ in records if q == p]  # send order
        if offsets:
            start = offsets[0]
            expect(offsets == list(range(start, start + len(offsets))),
                   f"partition {p} acked offsets {offsets[:8]}... are not dense and in send order")
    return records


def first_produce(state):
    state["first"] = produce(N_FIRST, "first")
    spread = {p: sum(1 for r in state["first"] if r[0] == p) for p in range(PARTITIONS)}
    return f"{N_FIRST} acked, per partition {spread}"


def consumer(name, events):
    def on_assign(c, partitions):
        events.append((name, "assign", sorted(tp.partition for tp in partitions)))

    def on_revoke(c, partitions):
        events.append((name, "revoke", sorted(tp.partition for tp in partitions)))

    c = Consumer({**COMMON, "group.id": GROUP, "client.id": f"ck-{name}", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000})
    c.subscribe([TOPIC], on_assign=on_assign, on_revoke=on_revoke)
    return c


def group_of_two(state):
    events = []
    members = {"a": consumer("a", events), "b": consumer("b", events)}
    try:
        return read_as_two(state, members, events)
    finally:
        for c in members.values():
            c.close()


def read_as_two(state, members, events):
    got = {name: [] for name in members}
    errors = []

    def poll_all():
        for name, c in members.items():
            msg = c.poll(0.05)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() != KafkaError._PARTITION_EOF:
                    errors.append(f"{name}: {msg.error()}")
                continue
            got[name].append((msg.partition(), msg.offset(), msg.key(), msg.value()))

    def assigned():
        poll_all()
        expect(not errors, f"consumer errors: {errors[:3]}")
        a, b = ({tp.partition for tp in c.assignment()} for c in members.values())
        return a and b and not (a & b) and (a | b) == set(range(PARTITIONS)) and (a, b)

    # The group must settle with both members sharing the partitions before reading; the records
    # were produced already, so reading starts at offset 0 (auto.offset.reset=earliest).
    a, b = until(30, "both members to be assigned disjoint partitions covering the topic", assigned)
    stable_events = len(events)
    want = sorted(state["first"])
    until(30, f"{len(want)} messages across both members",
          lambda: (poll_all(), sum(map(len, got.values())) >= len(want))[1])
    deadline = time.monotonic() + 1.0  # anything more (a duplicate) would show up now
    while time.monotonic() < deadline:
        poll_all()
    expect(not errors, f"consumer errors: {errors[:3]}")
    expect(len(events) == stable_events, f"rebalance while reading: {events[stable_events:]}")
    union = sorted(got["a"] + got["b"])
    dupes = len(union) - len(set(union))
    expect(dupes == 0, f"{dupes} messages consumed twice in one generation")
    expect(union == want, f"the members read {len(union)} records, {len(want)} were produced; "
                          f"missing {sorted(set(want) - set(union))[:3]}, unexpected {sorted(set(union) - set(want))[:3]}")
    for name, owned in (("a", a), ("b", b)):
        stray = [r for r in got[name] if r[0] not in owned]
        expect(not stray, f"member {name} read {stray[:2]} from partitions it does not own {sorted(owned)}")
        for p in owned:
            offsets = [r[1] for r in got[name] if r[0] == p]
            expect(offsets == sorted(offsets), f"member {name} read partition {p} out of order")
    # Commit what was read, synchronously, and read the commits back.
    ends = {p: max([r[1] for r in want if r[0] == p], default=-1) + 1 for p in range(PARTITIONS)}
    for name, owned in (("a", a), ("b", b)):
        c = members[name]
        try:
            committed = c.commit(asynchronous=False)
        except KafkaException as e:
            expect(e.args[0].code() == KafkaError._NO_OFFSET and all(ends[p] == 0 for p in owned),
                   f"member {name} commit failed: {e.args[0]}")
            committed = []
        bad = [tp for tp in committed if tp.error]
        expect(not bad, f"member {name} commit errors: {bad}")
        back = c.committed([TopicPartition(TOPIC, p) for p in sorted(owned)], timeout=10)
        for tp in back:
            expect(tp.error is None, f"member {name}: committed() error for partition {tp.partition}: {tp.error}")
            want_offset = ends[tp.partition]
            expect(tp.offset == want_offset or (want_offset == 0 and tp.offset < 0),
                   f"member {name}: committed() offset of partition {tp.partition} is {tp.offset}, expected {want_offset}")
    state["ends"] = ends
    return f"member a owns {sorted(a)}, b owns {sorted(b)}; read {len(got['a'])}+{len(got['b'])}, committed {ends}"


def resume_after_commit(state):
    second = produce(N_SECOND, "second")
    events = []
    c = consumer("c", events)
    got, eof = [], set()
    try:
        def step():
            msg = c.poll(0.1)
            if msg is None:
                return False
            if msg.error():
                expect(msg.error().code() == KafkaError._PARTITION_EOF, f"consumer error: {msg.error()}")
                eof.add(msg.partition())
            else:
                got.append((msg.partition(), msg.offset(), msg.key(), msg.value()))
                eof.discard(msg.partition())
            return len(got) >= N_SECOND and eof == set(range(PARTITIONS))
        until(30, f"{N_SECOND} new messages and the end of every partition", step)
    finally:
        c.close()
    early = [r for r in got if r[1] < state["ends"][r[0]]]
    expect(not early, f"{len(early)} records before the committed offsets were redelivered, e.g. {early[:2]}")
    expect(sorted(got) == sorted(second), f"read {len(got)} records after the commit, expected the {len(second)} "
                                          f"produced after it; missing {sorted(set(second) - set(got))[:2]}")
    return f"read exactly the {N_SECOND} messages produced after the commit"


def describe_configs():
    resource = ConfigResource(ResourceType.TOPIC, TOPIC)
    configs = admin.describe_configs([resource], request_timeout=15)[resource].result(timeout=TIMEOUT_S)
    for name, value in TOPIC_CONFIG.items():
        expect(name in configs, f"{name} missing from describe_configs ({len(configs)} entries)")
        entry = configs[name]
        expect(entry.value == value, f"{name} = {entry.value!r}, created with {value!r}")
        expect(entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
               f"{name} source {entry.source}, expected DYNAMIC_TOPIC_CONFIG")
    expect("segment.bytes" in configs, "segment.bytes missing from describe_configs")
    seg = configs["segment.bytes"]
    expect(seg.source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value and seg.value == "1073741824",
           f"segment.bytes (not set on the topic) = {seg.value!r} source {seg.source}")
    return f"{len(configs)} entries; the {len(TOPIC_CONFIG)} set at creation have source DYNAMIC_TOPIC_CONFIG"


def delete_records():
    tp = TopicPartition(TOPIC, 0)
    probe = Consumer(dict(COMMON, **{"group.id": f"ck-watermarks-{RUN}"}))
    try:
        low, high = probe.get_watermark_offsets(tp, timeout=10)
        expect(low == 0 and high >= 2, f"partition 0 holds [{low}, {high}) before delete_records")
        target = high // 2
        futures = admin.delete_records([TopicPartition(TOPIC, 0, target)], request_timeout=15,
                                       operation_timeout=15)
        deleted = list(futures.values())[0].result(timeout=TIMEOUT_S)
        expect(deleted.low_watermark == target, f"low watermark {deleted.low_watermark}, asked {target}")
        after = probe.get_watermark_offsets(tp, timeout=10)
        expect(after == (target, high), f"watermarks {after} after delete_records, expected {(target, high)}")
        futures = admin.delete_records([TopicPartition(TOPIC, 0, high + 1)], request_timeout=15,
                                       operation_timeout=15)
        try:
            refused = list(futures.values())[0].result(timeout=TIMEOUT_S)
            raise Mismatch(f"deleting below {high + 1} of {high} answered {refused.low_watermark}")
        except KafkaException as e:
            expect(e.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE, f"past the end refused with {e}")
        final = probe.get_watermark_offsets(tp, timeout=10)
        expect(final == (target, high), f"watermarks {final} after the refused call")
    finally:
        probe.close()
    return f"partition 0: earliest offset 0 -> {target} of {high}; past the end refused"


def elect_leaders():
    asked = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)] + [TopicPartition(f"ck-none-{RUN}", 0)]
    for election in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
        answered = admin.elect_leaders(election, asked).result(timeout=TIMEOUT_S)
        codes = {(tp.topic, tp.partition): (err.code() if err is not None else None)
                 for tp, err in answered.items()}
        wanted = {(TOPIC, p): KafkaError.ELECTION_NOT_NEEDED for p in range(PARTITIONS)}
        wanted[(f"ck-none-{RUN}", 0)] = KafkaError.UNKNOWN_TOPIC_OR_PART
        expect(codes == wanted, f"{election} election answered {codes}, expected {wanted}")
    every = admin.elect_leaders(ElectionType.PREFERRED, None).result(timeout=TIMEOUT_S)
    expect(every == {}, f"a preferred election of every partition answered {every}")
    return f"{PARTITIONS} partitions: ELECTION_NOT_NEEDED; an unknown one: UNKNOWN_TOPIC_OR_PART"


def clear_throttles():
    broker_id = str(min(admin.list_topics(timeout=10).brokers))

    def resource(kind, name, names, op=AlterConfigOpType.DELETE, value=None):
        entries = [ConfigEntry(n, value, incremental_operation=op) for n in names]
        return ConfigResource(kind, name, incremental_configs=entries)

    def alter(res):
        return admin.incremental_alter_configs([res], request_timeout=15)[res].result(timeout=TIMEOUT_S)

    rates = ["leader.replication.throttled.rate", "follower.replication.throttled.rate",
             "replica.alter.log.dirs.io.max.bytes.per.second"]
    alter(resource(ResourceType.BROKER, broker_id, rates))
    alter(resource(ResourceType.TOPIC, TOPIC,
                   ["leader.replication.throttled.replicas", "follower.replication.throttled.replicas"]))
    resource_config = ConfigResource(ResourceType.TOPIC, TOPIC)
    configs = admin.describe_configs([resource_config], request_timeout=15)[resource_config].result(timeout=TIMEOUT_S)
    for name, value in TOPIC_CONFIG.items():
        expect(configs[name].value == value, f"{name} = {configs[name].value!r} after the throttles' delete")
    try:
        alter(resource(ResourceType.BROKER, broker_id, ["leader.replication.throttled.rate"],
                       AlterConfigOpType.SET, "1000"))
        raise Mismatch("setting a broker setting was accepted")
    except KafkaException as e:
        expect(e.args[0].code() == KafkaError.INVALID_REQUEST, f"a broker setting set: refused with {e}")
    return f"throttles deleted from broker {broker_id} and {TOPIC}, topic settings kept; a SET refused"


def append_and_subtract():
    """APPEND and SUBTRACT on a list setting start from its value and keep every other setting;
    on a setting that is not a list they are refused."""
    def alter(op, name, value):
        entry = ConfigEntry(name, value, incremental_operation=op)
        res = ConfigResource(ResourceType.TOPIC, TOPIC, incremental_configs=[entry])
        return admin.incremental_alter_configs([res], request_timeout=15)[res].result(timeout=TIMEOUT_S)

    def described():
        res = ConfigResource(ResourceType.TOPIC, TOPIC)
        return admin.describe_configs([res], request_timeout=15)[res].result(timeout=TIMEOUT_S)

    alter(AlterConfigOpType.APPEND, "cleanup.policy", "compact")
    policy = described()["cleanup.policy"].value
    expect(policy == "delete,compact", f"cleanup.policy = {policy!r} after APPEND compact to delete")
    alter(AlterConfigOpType.APPEND, "cleanup.policy", "compact")
    policy = described()["cleanup.policy"].value
    expect(policy == "delete,compact", f"cleanup.policy = {policy!r} after appending compact again")
    alter(AlterConfigOpType.SUBTRACT, "cleanup.policy", "compact")
    configs = described()
    for name, value in TOPIC_CONFIG.items():
        expect(configs[name].value == value, f"{name} = {configs[name].value!r} after SUBTRACT compact")
    try:
        alter(AlterConfigOpType.APPEND, "retention.ms", "5")
        raise Mismatch("APPEND to retention.ms was accepted")
    except KafkaException as e:
        expect(e.args[0].code() == KafkaError.INVALID_CONFIG, f"APPEND to retention.ms: refused with {e}")
    retention = described()["retention.ms"].value
    expect(retention == TOPIC_CONFIG["retention.ms"], f"retention.ms = {retention!r} after a refused APPEND")
    return "cleanup.policy delete -> delete,compact (twice) -> delete; APPEND to retention.ms refused"


def nothing_held():
    every = admin.describe_user_scram_credentials().result(timeout=TIMEOUT_S)
    expect(every == {}, f"describe_user_scram_credentials() = {every}")
    named = admin.describe_user_scram_credentials(["alice"])
    expect(list(named) == ["alice"], f"describe_user_scram_credentials(['alice']) answered {list(named)}")
    try:
        found = named["alice"].result(timeout=TIMEOUT_S)
        raise Mismatch(f"credentials of alice found: {found}")
    except KafkaException as e:
        expect(e.args[0].code() == KafkaError.RESOURCE_NOT_FOUND, f"alice's credentials: {e}")
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                  AclPermissionType.ANY)
    acls = admin.describe_acls(everything, request_timeout=15).result(timeout=TIMEOUT_S)
    expect(acls == [], f"describe_acls(any) = {acls}")
    return "no SCRAM users, alice: RESOURCE_NOT_FOUND; no ACLs"


def delete_topic():
    admin.delete_topics([TOPIC], request_timeout=15)[TOPIC].result(timeout=TIMEOUT_S)
    until(10, f"{TOPIC} to disappear from metadata", lambda: (topic_metadata(TOPIC) is None) or time.sleep(0.2))
    return None


def main():
    checks = Checks("confluent-kafka")
    state = {}
    created = checks.run("AdminClient.create_topics (validate_only, invalid config, 3 partitions with configs)",
                         create_topics)
    if created:
        ok = checks.run("idempotent Producer (acks=all, enable.idempotence=true)", first_produce, state)
        ok = ok and checks.run("group of two consumers reads every message exactly once, commits", group_of_two, state)
        ok and checks.run("fresh group member resumes after the committed offsets", resume_after_commit, state)
        checks.run("AdminClient.describe_configs", describe_configs)
        checks.run("AdminClient.delete_records", delete_records)
        checks.run("AdminClient.elect_leaders", elect_leaders)
        checks.run("AdminClient.incremental_alter_configs clears replication throttles", clear_throttles)
        checks.run("AdminClient.incremental_alter_configs APPEND and SUBTRACT", append_and_subtract)
        checks.run("AdminClient.describe_user_scram_credentials and describe_acls: none held", nothing_held)
        checks.run("AdminClient.delete_topics", delete_topic)
    checks.finish()


main()
