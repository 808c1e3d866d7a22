// kafkajs against a running broker: `node kafkajs_driver.js HOST:PORT`.
// kafkajs uses only non-flexible API versions and refuses to work when an API it needs is not
// advertised. Checks, each printed PASS or FAIL:
//   1. admin.createTopics makes a 2-partition topic; admin.listTopics includes it;
//   2. producer.send (acks=all) gets every message acked with dense offsets per partition;
//   3. a consumer group reads back exactly what was acked (partition, offset, key, value),
//      per partition in order, and commits; admin.fetchOffsets equals the end offsets;
//   4. a new consumer in the same group resumes at the committed offsets: it reads exactly the
//      messages produced after the commit;
//   5. admin.alterPartitionReassignments onto the replica a partition already has is answered
//      without error, and listPartitionReassignments lists no move in progress; one onto a
//      broker that does not exist fails with INVALID_REPLICA_ASSIGNMENT for that partition.
// WEIR_INTEROP_DEBUG=1 sets kafkajs's log level to DEBUG.
'use strict';

const crypto = require('crypto');
const path = require('path');
const { Kafka, logLevel } = require(path.join(__dirname, 'node_modules', 'kafkajs'));
const { Mismatch, expect, check, finish } = require(path.join(__dirname, 'kafkajs_checks.js'));

const bootstrap = process.argv[2];
const run = crypto.randomBytes(4).toString('hex');
const topic = `kjs-${run}`;
const groupId = `kjs-group-${run}`;
const partitions = 2;
const count = 50;
const countSecond = 15;

const kafka = new Kafka({
  clientId: `kjs-${run}`,
  brokers: [bootstrap],
  connectionTimeout: 5000,
  requestTimeout: 15000,
  retry: { retries: 3, initialRetryTime: 200 },
  logLevel: process.env.WEIR_INTEROP_DEBUG ? logLevel.DEBUG : logLevel.NOTHING,
});

function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Mismatch(`timed out after ${ms / 1000}s waiting for ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

const key = (k) => (k === null ? null : k.toString('utf8'));
const rowKey = (r) => `${r.partition}|${r.offset}|${r.key}|${r.value}`;

// Sends one message per send, in order, so each ack gives that message's partition and offset.
async function produce(messages) {
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await withTimeout(producer.connect(), 15000, 'producer connect');
  const sent = [];
  try {
    for (const m of messages) {
      const [ack] = await withTimeout(producer.send({ topic, acks: -1, messages: [m] }), 15000, 'send');
      expect(ack.errorCode === 0, `send error code ${ack.errorCode}`);
      sent.push({ partition: ack.partition, offset: Number(ack.baseOffset), key: m.key, value: m.value });
    }
  } finally {
    await producer.disconnect();
  }
  return sent;
}

// Runs a group member until it has read `want` messages, then `settleMs` longer (a duplicate or
// a stray would show up then); `beforeDisconnect` runs while it is still a member.
async function consumeInGroup(want, settleMs, beforeDisconnect) {
  const consumer = kafka.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 1000, maxWaitTimeInMs: 500 });
  const got = [];
  let done;
  const all = new Promise((resolve) => { done = resolve; });
  try {
    await withTimeout(consumer.connect(), 15000, 'consumer connect');
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await consumer.run({
      autoCommit: true,
      eachMessage: async ({ partition, message }) => {
        got.push({ partition, offset: Number(message.offset), key: key(message.key), value: message.value.toString('utf8') });
        if (got.length >= want) done();
      },
    });
    await withTimeout(all, 30000, `${want} messages (have ${got.length})`);
    await new Promise((resolve) => setTimeout(resolve, settleMs));
    if (beforeDisconnect) await beforeDisconnect(consumer);
  } finally {
    await consumer.disconnect();
  }
  return got;
}

function expectSameRows(got, sent, what) {
  const want = sent.map(rowKey).sort();
  const have = got.map(rowKey).sort();
  const missing = want.filter((r) => !have.includes(r));
  const extra = have.filter((r) => !want.includes(r));
  expect(have.length === want.length && missing.length === 0 && extra.length === 0,
    `${what}: read ${have.length} records, ${want.length} expected; missing ${missing.slice(0, 2)}, unexpected ${extra.slice(0, 2)}`);
  for (let p = 0; p < partitions; p++) {
    const offsets = got.filter((r) => r.partition === p).map((r) => r.offset);
    const expected = sent.filter((r) => r.partition === p).map((r) => r.offset);
    expect(JSON.stringify(offsets) === JSON.stringify(expected),
      `${what}: partition ${p} read offsets ${offsets.slice(0, 8)} in this order, expected ${expected.slice(0, 8)}`);
  }
}

async function main() {
  const admin = kafka.admin();
  const state = {};
  await check('admin.createTopics + listTopics', async () => {
    await withTimeout(admin.connect(), 15000, 'admin connect');
    const created = await withTimeout(
      admin.createTopics({ topics: [{ topic, numPartitions: partitions, replicationFactor: 1 }], waitForLeaders: true }),
      20000, 'createTopics');
    expect(created === true, `createTopics returned ${created}`);
    const topics = await withTimeout(admin.listTopics(), 15000, 'listTopics');
    expect(topics.includes(topic), `listTopics lacks ${topic}: ${topics.slice(0, 10)}`);
    const meta = await withTimeout(admin.fetchTopicMetadata({ topics: [topic] }), 15000, 'fetchTopicMetadata');
    const ids = meta.topics[0].partitions.map((p) => p.partitionId).sort();
    expect(JSON.stringify(ids) === JSON.stringify([...Array(partitions).keys()]), `${topic} partitions ${ids}`);
    return `${topic} with ${partitions} partitions`;
  }) &&
    (await check('producer.send (acks=all)', async () => {
      const messages = [];
      for (let i = 0; i < count; i++) {
        messages.push({ key: `key-${i % 6}`, value: `kafkajs ${i} ñandú ${'x'.repeat(i)}` });
      }
      state.sent = await produce(messages);
      const keyPartition = new Map();
      for (let p = 0; p < partitions; p++) {
        const offsets = state.sent.filter((r) => r.partition === p).map((r) => r.offset);
        offsets.forEach((o, i) => expect(o === i, `partition ${p} acked offsets ${offsets.slice(0, 8)} not 0.. in order`));
      }
      for (const r of state.sent) {
        expect((keyPartition.get(r.key) ?? r.partition) === r.partition, `key ${r.key} in two partitions`);
        keyPartition.set(r.key, r.partition);
      }
      const spread = [...Array(partitions).keys()].map((p) => state.sent.filter((r) => r.partition === p).length);
      return `${count} acked, per partition ${spread}`;
    })) &&
    (await check('consumer group reads exactly what was acked, commits; admin.fetchOffsets', async () => {
      const got = await consumeInGroup(count, 500, (consumer) => consumer.commitOffsets(
        [...Array(partitions).keys()].map((p) => ({
          topic, partition: p, offset: String(state.sent.filter((r) => r.partition === p).length),
        })).filter((c) => c.offset !== '0')));
      expectSameRows(got, state.sent, 'first member');
      const [fetched] = await withTimeout(admin.fetchOffsets({ groupId, topics: [topic] }), 15000, 'fetchOffsets');
      const ends = await withTimeout(admin.fetchTopicOffsets(topic), 15000, 'fetchTopicOffsets');
      for (const { partition, high } of ends) {
        const committed = fetched.partitions.find((x) => x.partition === partition);
        const acked = state.sent.filter((r) => r.partition === partition).length;
        expect(Number(high) === acked, `high watermark of partition ${partition} is ${high}, ${acked} acked`);
        if (acked > 0) {
          expect(committed && Number(committed.offset) === acked,
            `committed offset of partition ${partition} is ${committed && committed.offset}, expected ${acked}`);
        }
      }
      return `read all ${count} exactly; committed = high watermarks ${ends.map((e) => e.high)}`;
    })) &&
    (await check('new group member resumes at the committed offsets', async () => {
      const messages = [];
      for (let i = 0; i < countSecond; i++) messages.push({ key: `key-${i % 6}`, value: `kafkajs second ${i}` });
      const second = await produce(messages);
      const got = await consumeInGroup(countSecond, 1000);
      const early = got.filter((r) => r.offset < state.sent.filter((s) => s.partition === r.partition).length);
      expect(early.length === 0, `${early.length} records before the committed offsets were redelivered, e.g. ${early.slice(0, 2).map(rowKey)}`);
      expectSameRows(got, second, 'second member');
      return `read exactly the ${countSecond} messages produced after the commit`;
    })) &&
    (await check('admin.alterPartitionReassignments + listPartitionReassignments', async () => {
      const meta = await withTimeout(admin.fetchTopicMetadata({ topics: [topic] }), 15000, 'fetchTopicMetadata');
      const replicas = meta.topics[0].partitions.find((p) => p.partitionId === 0).replicas;
      await withTimeout(admin.alterPartitionReassignments({
        topics: [{ topic, partitionAssignment: [{ partition: 0, replicas }] }],
      }), 15000, 'alterPartitionReassignments');
      const listed = await withTimeout(admin.listPartitionReassignments({}), 15000, 'listPartitionReassignments');
      expect(listed.topics.length === 0, `moves listed with none in progress: ${JSON.stringify(listed.topics)}`);
      let refused = null;
      try {
        await withTimeout(admin.alterPartitionReassignments({
          topics: [{ topic, partitionAssignment: [{ partition: 1, replicas: [replicas[0] + 100] }] }],
        }), 15000, 'alterPartitionReassignments onto no broker');
      } catch (e) {
        refused = e;
      }
      const errors = (refused && refused.errors) || [];
      expect(errors.length === 1 && errors[0].type === 'INVALID_REPLICA_ASSIGNMENT' && errors[0].partition === 1,
        `a move onto no broker answered ${refused ? refused.stack || refused : 'no error'}`);
      return `partition 0 onto ${replicas}: no move left in progress; onto broker ${replicas[0] + 100}: INVALID_REPLICA_ASSIGNMENT`;
    }));
  await admin.disconnect();
  finish();
}

main().catch((e) => {
  console.log(`kafkajs: FAIL: ${e.stack || e}`);
  process.exit(1);
});
