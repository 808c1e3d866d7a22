// kafkajs against a broker whose disk holds a damaged batch: `node damaged_kafkajs.js HOST:PORT`
// (see damaged.py, which prepares the topic and damages it). kafkajs takes CORRUPT_MESSAGE for a
// retriable error: its consumer retries the fetch, then crashes once its retries are spent
// (KafkaJSNumberOfRetriesExceeded, caused by the broker's error). Checks, each printed PASS or FAIL:
//   1. a consumer from the beginning gets the records before the damaged batch, in order, then
//      crashes with CORRUPT_MESSAGE, having handed out nothing of the damaged batch or past it;
//   2. a consumer that seeks past the damaged batch reads the rest of the log as written.
'use strict';

const crypto = require('crypto');
const path = require('path');
const { Kafka, logLevel } = require(path.join(__dirname, 'node_modules', 'kafkajs'));
const { expect, check, finish } = require(path.join(__dirname, 'kafkajs_checks.js'));

const bootstrap = process.argv[2];
const topic = 'damaged';
const records = 9;
const damaged = 4;
const readWaitMs = 60000;

const kafka = new Kafka({
  clientId: `kjs-damaged-${crypto.randomBytes(4).toString('hex')}`,
  brokers: [bootstrap],
  connectionTimeout: 5000,
  requestTimeout: 15000,
  logLevel: process.env.WEIR_INTEROP_DEBUG ? logLevel.DEBUG : logLevel.NOTHING,
});

const value = i => `record-${i}`;
const range = (from, to) => Array.from({ length: to - from }, (_, k) => [from + k, value(from + k)]);
const before = range(0, damaged);
const after = range(damaged + 1, records);

const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

// A consumer in a new group, reading `topic` from `offset` (the beginning if null); resolves
// with what it read when `done(read)` holds or it crashed, rejects after readWaitMs.
async function read(offset, done) {
  const consumer = kafka.consumer({
    groupId: `kjs-damaged-${crypto.randomBytes(4).toString('hex')}`,
    retry: { retries: 2, initialRetryTime: 100, restartOnFailure: async () => false },
  });
  const got = [];
  let crash = null;
  let settle;
  const settled = new Promise(resolve => {
    settle = resolve;
  });
  consumer.on(consumer.events.CRASH, event => {
    crash = event.payload.error;
    settle();
  });
  try {
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({
      eachMessage: async ({ message }) => {
        got.push([Number(message.offset), message.value.toString()]);
        if (done(got)) settle();
      },
    });
    if (offset !== null) consumer.seek({ topic, partition: 0, offset: String(offset) });
    const timer = setTimeout(settle, readWaitMs);
    await settled;
    clearTimeout(timer);
    return { got, crash };
  } finally {
    await consumer.disconnect().catch(() => {});
  }
}

async function main() {
  await check('a fetch of the damaged batch is an error the application sees', async () => {
    const { got, crash } = await read(null, () => false);
    expect(same(got, before), `read ${JSON.stringify(got)}, not ${JSON.stringify(before)}`);
    expect(crash !== null, `no crash within ${readWaitMs / 1000}s`);
    // The crash is KafkaJSNumberOfRetriesExceeded, caused by the broker's error.
    const cause = crash.cause || crash;
    expect(cause.type === 'CORRUPT_MESSAGE', `crashed with ${crash.name}: ${crash.message} [${cause.type}]`);
    return `${got.length} records, then the consumer crashed: ${crash.name} caused by ${cause.name} [${cause.type}]`;
  });
  await check('the records after the damaged batch are read as written', async () => {
    const { got, crash } = await read(damaged + 1, read => read.length >= after.length);
    expect(crash === null, `crashed: ${crash && crash.message} [${crash && crash.type}]`);
    expect(same(got, after), `read ${JSON.stringify(got)} past the damaged batch, not ${JSON.stringify(after)}`);
    return `offsets ${damaged + 1}..${records - 1}`;
  });
  finish();
}

main().catch(e => {
  console.log(`kafkajs: FAIL: ${e.stack}`);
  process.exit(1);
});
