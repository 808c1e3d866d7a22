#!/usr/bin/env bash
# kcat (librdkafka) against a running broker: `kcat.sh HOST:PORT`.
#  1. produce keyed messages to a topic that does not exist yet (auto-created by the produce),
#     consume them back and compare keys, values, partitions and offsets exactly;
#  2. a consumer group (`-G`) reads every message of a 3-partition topic, per partition in
#     produce order; after more records are produced, a second run of the same group resumes at
#     its committed offsets and reads exactly the new records;
#  3. `-L` metadata lists both topics with their partition counts.
# Prints one PASS or FAIL line per check and exits non-zero on any failure. Every kcat call is
# bounded by `timeout`; on failure kcat's stderr is shown (rerun with KCAT_DEBUG=protocol,broker
# for the wire exchange).
set -uo pipefail
bootstrap="$1"
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d "${WEIR_INTEROP_SCRATCH:-/tmp}/kcat.XXXXXX")"
run_id="$(date +%s)-$$"
n=60
failures=0
debug=()
[ -n "${KCAT_DEBUG:-}" ] && debug=(-d "$KCAT_DEBUG")

pass() { echo "kcat: PASS: $*"; }
fail() {
  echo "kcat: FAIL: $1"
  shift
  for f in "$@"; do
    [ -s "$f" ] && { echo "  --- $(basename "$f") (last 40 lines) ---"; tail -n 40 "$f" | sed 's/^/  /'; }
  done
  failures=$((failures + 1))
}
k() { timeout 30 kcat -b "$bootstrap" -q "${debug[@]}" "$@"; }

# Messages: keys repeat (the same key must always land in the same partition); values carry
# spaces and UTF-8 so that bytes are compared, not just counts. ':' separates key from value.
# They go to kcat -P on stdin, one per line: a file named on the command line would be sent as
# one message.
make_input() {
  local i
  for i in $(seq 0 $((n - 1))); do
    printf 'key-%d:value %d of %s — héllo wörld\n' $((i % 7)) "$i" "$1"
  done
}

# ---- 1. produce to a new topic (auto-created), consume back, compare exactly -------------------
t1="kcat-auto-$run_id"
make_input "$t1" >"$work/t1.in"
if ! k -P -t "$t1" -K: -X socket.timeout.ms=10000 -X message.timeout.ms=15000 \
  <"$work/t1.in" 2>"$work/t1.produce.err"; then
  fail "produce $n keyed messages to auto-created topic $t1: kcat exited non-zero" "$work/t1.produce.err"
else
  # An auto-created topic has the broker's default partition count (1): offsets are 0..n-1 in
  # produce order.
  awk -F: '{ v = substr($0, length($1) + 2); printf "0|%d|%s|%s\n", NR - 1, $1, v }' \
    "$work/t1.in" >"$work/t1.expected"
  k -C -t "$t1" -o beginning -e -f '%p|%o|%k|%s\n' >"$work/t1.got" 2>"$work/t1.consume.err"
  status=$?
  if [ $status -ne 0 ]; then
    fail "consume $t1: kcat exited $status" "$work/t1.consume.err"
  elif ! diff -u "$work/t1.expected" "$work/t1.got" >"$work/t1.diff"; then
    fail "consume $t1: records differ from what was produced (partition|offset|key|value)" \
      "$work/t1.diff" "$work/t1.consume.err"
  else
    pass "produce + consume $n keyed messages on auto-created $t1 (keys, values, offsets exact)"
  fi
fi

# ---- 2. consumer group on a 3-partition topic --------------------------------------------------
t2="kcat-group-$run_id"
group="kcat-group-$run_id"
# kcat cannot create topics; the Python admin client (installed with the other drivers) does.
if ! timeout 30 python3 - "$bootstrap" "$t2" >"$work/t2.create.err" 2>&1 <<'PY'
import sys
from confluent_kafka.admin import AdminClient, NewTopic
admin = AdminClient({"bootstrap.servers": sys.argv[1]})
for topic, future in admin.create_topics([NewTopic(sys.argv[2], num_partitions=3, replication_factor=1)], request_timeout=15).items():
    future.result(timeout=20)
PY
then
  fail "create 3-partition topic $t2 (confluent-kafka AdminClient)" "$work/t2.create.err"
else
  make_input "$t2" >"$work/t2.in"
  if ! k -P -t "$t2" -K: -X message.timeout.ms=15000 <"$work/t2.in" 2>"$work/t2.produce.err"; then
    fail "produce $n keyed messages to $t2" "$work/t2.produce.err"
  else
    # The whole topic as a plain (non-group) consumer sees it, for reference.
    k -C -t "$t2" -o beginning -e -f '%p|%o|%k|%s\n' >"$work/t2.all" 2>"$work/t2.all.err" \
      || fail "consume all of $t2 without a group" "$work/t2.all.err"
    k -G "$group" -X auto.offset.reset=earliest -e -f '%p|%o|%k|%s\n' "$t2" \
      >"$work/t2.group" 2>"$work/t2.group.err"
    status=$?
    if [ $status -ne 0 ]; then
      fail "consumer group $group on $t2: kcat -G exited $status" "$work/t2.group.err"
    elif ! out=$(python3 "$here/check_partitioned.py" "$work/t2.in" "$work/t2.all" "$work/t2.group" 3 2>&1); then
      fail "consumer group $group on $t2: $out" "$work/t2.group.err"
    else
      pass "consumer group (-G) read all $n messages of 3-partition $t2 once each, per partition in produce order ($out)"
      # More records, then the same group again: it must resume at the offsets committed on
      # close, reading exactly the new records and nothing from before.
      make_input "$t2-second" | head -n 20 >"$work/t2.second.in"
      if ! k -P -t "$t2" -K: -X message.timeout.ms=15000 <"$work/t2.second.in" 2>"$work/t2.second.err"; then
        fail "produce 20 more keyed messages to $t2" "$work/t2.second.err"
      else
        k -C -t "$t2" -o beginning -e -f '%p|%o|%k|%s\n' >"$work/t2.all2" 2>"$work/t2.all2.err" \
          || fail "consume all of $t2 without a group (second time)" "$work/t2.all2.err"
        k -G "$group" -X auto.offset.reset=earliest -e -f '%p|%o|%k|%s\n' "$t2" \
          >"$work/t2.again" 2>"$work/t2.again.err"
        status=$?
        if [ $status -ne 0 ]; then
          fail "consumer group $group rejoin: kcat -G exited $status" "$work/t2.again.err"
        elif ! out=$(python3 "$here/check_resume.py" "$work/t2.all" "$work/t2.all2" "$work/t2.again" "$work/t2.second.in" 2>&1); then
          fail "consumer group $group rejoin: $out" "$work/t2.again" "$work/t2.again.err"
        else
          pass "consumer group $group rejoined at its committed offsets: $out"
        fi
      fi
    fi
  fi
fi

# ---- 3. metadata --------------------------------------------------------------------------------
if ! k -L >"$work/meta" 2>"$work/meta.err"; then
  fail "list metadata (-L): kcat exited non-zero" "$work/meta.err"
else
  missing=""
  grep -qF "topic \"$t1\" with 1 partitions:" "$work/meta" || missing+=" $t1(1 partition)"
  grep -qF "topic \"$t2\" with 3 partitions:" "$work/meta" || missing+=" $t2(3 partitions)"
  grep -qE '^ +1 brokers?:' "$work/meta" || missing+=" one-broker"
  if [ -n "$missing" ]; then
    fail "metadata (-L) lacks:$missing" "$work/meta"
  else
    pass "metadata (-L) lists 1 broker, $t1 with 1 partition and $t2 with 3 partitions"
  fi
fi

if [ $failures -gt 0 ]; then
  echo "kcat: FAIL ($failures checks failed)"
  exit 1
fi
echo "kcat: PASS"
