"""A damaged batch on the broker's disk, as real clients meet it.

    damaged.py prepare HOST:PORT      creates the topic and writes one batch per record
    damaged.py flip DATA_DIR          flips one bit of a stored batch (the broker must be down)
    damaged.py read CLIENT HOST:PORT  CLIENT: confluent-kafka or kafka-python
    damaged.py check-kcat OUT ERR STATUS AFTER_OUT   what kcat printed (see ci/interop/run)

`run` prepares, stops the broker cleanly (so the whole log is checkpointed and recovery does not
rescan it), flips a bit in the last byte of the batch at offset DAMAGED (a record's value, under
the batch's CRC: a latent sector error), and starts the broker again on the same data. Then each
client reads the partition from the beginning: it must get the records before the damaged batch,
in order, then the fetch error CORRUPT_MESSAGE as an error the application sees, and never a
record of the damaged batch or past it; a read from the offset after the damaged batch must get
the rest of the log as written. Prints PASS or FAIL lines like the drivers.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import Checks, expect, until  # noqa: E402

TOPIC = "damaged"
RECORDS = 9
DAMAGED = 4
# RecordBatch v2: base offset (8 bytes), then the length of the rest (4 bytes).
BATCH_PREFIX_BYTES = 12
READ_WAIT_S = 30
# After the error, the client is polled this long more: it must hand out nothing of the damage.
STAY_S = 3


def value(i):
    return f"record-{i}"


BEFORE = [(i, value(i)) for i in range(DAMAGED)]
AFTER = [(i, value(i)) for i in range(DAMAGED + 1, RECORDS)]


def prepare(bootstrap):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(TOPIC, num_partitions=1, replication_factor=1, config={"retention.ms": "-1"})
    for future in admin.create_topics([topic], request_timeout=15).values():
        future.result(timeout=15)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    offsets = []
    for i in range(RECORDS):
        # One record at a time, each acknowledged before the next: one batch each.
        delivered = []
        producer.produce(TOPIC, key=b"k", value=value(i).encode(), partition=0,
                         on_delivery=lambda err, msg: delivered.append((err, msg)))
        producer.flush(15)
        expect(len(delivered) == 1 and delivered[0][0] is None, f"record {i} not acknowledged: {delivered}")
        offsets.append(delivered[0][1].offset())
    expect(offsets == list(range(RECORDS)), f"acknowledged at offsets {offsets}")
    print(f"damaged: wrote {RECORDS} records, one batch each, to {TOPIC}-0", flush=True)


def flip(data_dir):
    segment = os.path.join(data_dir, f"{TOPIC}-0", f"{0:020}.log")
    with open(segment, "r+b") as f:
        data = f.read()
        at = 0
        while at + BATCH_PREFIX_BYTES <= len(data):
            base = int.from_bytes(data[at:at + 8], "big", signed=True)
            end = at + BATCH_PREFIX_BYTES + int.from_bytes(data[at + 8:at + 12], "big", signed=True)
            if base == DAMAGED:
                f.seek(end - 1)
                f.write(bytes([data[end - 1] ^ 0x10]))
                print(f"damaged: flipped a bit of the batch at offset {DAMAGED} (file byte {end - 1})",
                      flush=True)
                return
            at = end
    sys.exit(f"damaged: no batch at offset {DAMAGED} in {segment}")


def from_beginning(open_consumer, poll, corrupt):
    """Reads from offset 0: the records before the damaged batch, then the client's error for
    CORRUPT_MESSAGE (`corrupt(error)`), then nothing more while polled for STAY_S."""
    c = open_consumer(0)
    read, error = [], None
    deadline = time.monotonic() + READ_WAIT_S
    while error is None and time.monotonic() < deadline:
        got, error = poll(c)
        read.extend(got)
    expect(read == BEFORE, f"read {read} before the error, not {BEFORE}")
    expect(error is not None and corrupt(error), f"the application was told {error!r}, not CORRUPT_MESSAGE")
    deadline = time.monotonic() + STAY_S
    while time.monotonic() < deadline:
        got, _ = poll(c)
        expect(not got, f"handed out offset {got[0][0] if got else None} past the damage")
    c.close()
    return f"{len(read)} records, then {error}; nothing more in {STAY_S}s"


def past_the_damage(open_consumer, poll):
    """Reads from the offset after the damaged batch: the rest of the log, as written."""
    c = open_consumer(DAMAGED + 1)
    read = []

    def step():
        got, error = poll(c)
        expect(error is None, f"reading past the damaged batch: {error}")
        read.extend(got)
        return len(read) >= len(AFTER)

    until(READ_WAIT_S, f"{len(AFTER)} records after the damaged batch", step)
    c.close()
    expect(read == AFTER, f"read {read} past the damaged batch, not {AFTER}")
    return f"offsets {DAMAGED + 1}..{RECORDS - 1}"


def read_with(checks, open_consumer, poll, corrupt):
    checks.run("a fetch of the damaged batch is an error the application sees", from_beginning,
               open_consumer, poll, corrupt)
    checks.run("the records after the damaged batch are read as written", past_the_damage,
               open_consumer, poll)


def read_confluent(bootstrap, checks):
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    def open_consumer(start):
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "damaged-ck", "enable.auto.commit": False,
                      "check.crcs": True, "fetch.error.backoff.ms": 50})
        c.assign([TopicPartition(TOPIC, 0, start)])
        return c

    def poll(c):
        """The records one poll returned, and the error it returned instead."""
        m = c.poll(0.2)
        if m is None:
            return [], None
        if m.error():
            return [], m.error()
        return [(m.offset(), m.value().decode())], None

    read_with(checks, open_consumer, poll, lambda error: error.code() == KafkaError.INVALID_MSG)


def read_kafka_python(bootstrap, checks):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import CorruptRecordError, KafkaError

    tp = TopicPartition(TOPIC, 0)

    def open_consumer(start):
        c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                          request_timeout_ms=15000)
        c.assign([tp])
        c.seek(tp, start)
        return c

    def poll(c):
        """The records one poll returned, and the error it raised instead."""
        try:
            polled = c.poll(timeout_ms=200)
        except KafkaError as e:
            return [], e
        return [(r.offset, r.value.decode()) for batch in polled.values() for r in batch], None

    read_with(checks, open_consumer, poll, lambda error: isinstance(error, CorruptRecordError))


def check_kcat(before_out, before_err, before_status, after_out):
    checks = Checks("kcat")

    def rows(path):
        out = []
        for line in open(path, encoding="utf-8"):
            offset, text = line.rstrip("\n").split("|", 1)
            out.append((int(offset), text))
        return out

    def from_beginning():
        read = rows(before_out)
        expect(read == BEFORE, f"printed {read} before the error, not {BEFORE}")
        # librdkafka's name for Kafka's error 2, CORRUPT_MESSAGE.
        said = [line for line in open(before_err, encoding="utf-8") if "Broker: Invalid message" in line]
        expect(said, f"kcat did not report the damage; it said: {open(before_err).read().strip()[-300:]}")
        expect(before_status != "0", "kcat exited 0 after the error")
        return f"{len(read)} records, then (exit {before_status}): {said[0].strip()}"

    def past_the_damage():
        read = rows(after_out)
        expect(read == AFTER, f"printed {read} past the damaged batch, not {AFTER}")
        return f"offsets {DAMAGED + 1}..{RECORDS - 1}"

    checks.run("a fetch of the damaged batch is an error the application sees", from_beginning)
    checks.run("the records after the damaged batch are read as written", past_the_damage)
    checks.finish()


def main():
    command = sys.argv[1]
    if command == "prepare":
        prepare(sys.argv[2])
    elif command == "flip":
        flip(sys.argv[2])
    elif command == "read":
        client, bootstrap = sys.argv[2], sys.argv[3]
        checks = Checks(client)
        {"confluent-kafka": read_confluent, "kafka-python": read_kafka_python}[client](bootstrap, checks)
        checks.finish()
    elif command == "check-kcat":
        check_kcat(*sys.argv[2:6])
    else:
        sys.exit(f"damaged.py: unknown command {command}")


main()
