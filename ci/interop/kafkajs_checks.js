// Shared by the kafkajs drivers: named checks that print PASS or FAIL with what mismatched.
'use strict';

// What a client got back differs from what was expected.
class Mismatch extends Error {}

function expect(condition, message) {
  if (!condition) throw new Mismatch(message);
}

// The names of the checks that failed so far.
const failed = [];

// Runs `fn`, which resolves to a detail string on success and throws on a mismatch; prints
// PASS or FAIL (with a client error's cause) and resolves to whether it passed.
async function check(name, fn) {
  const start = Date.now();
  try {
    const detail = await fn();
    console.log(`kafkajs: PASS: ${name}${detail ? ` (${detail})` : ''} [${((Date.now() - start) / 1000).toFixed(1)}s]`);
    return true;
  } catch (e) {
    failed.push(name);
    const what = e instanceof Mismatch ? e.message : `${e.name}: ${e.message}${e.type ? ` [${e.type}]` : ''}`;
    console.log(`kafkajs: FAIL: ${name}: ${what}`);
    if (!(e instanceof Mismatch) && e.stack) console.log(e.stack.split('\n').slice(1, 5).join('\n'));
    return false;
  }
}

// Prints the verdict and exits: 1 if any check failed.
function finish() {
  if (failed.length) {
    console.log(`kafkajs: FAIL (${failed.length} failed: ${failed.join('; ')})`);
    process.exit(1);
  }
  console.log('kafkajs: PASS');
  process.exit(0);
}

module.exports = { Mismatch, expect, check, finish };
