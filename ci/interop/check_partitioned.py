"""Checks what kcat read from a multi-partition topic against what it produced.

    check_partitioned.py INPUT ALL GROUP PARTITIONS

INPUT holds the produced `key:value` lines in send order; ALL and GROUP hold `p|o|key|value`
lines read by a plain consumer and by a consumer group. Both must contain every produced record
exactly once; in each partition offsets run densely from 0 and values follow send order; a key
always lands in one partition. Prints a one-line summary, or the first mismatch and exits 1.
"""

import sys


def parse(path):
    rows = []
    for line in open(path, encoding="utf-8"):
        p, o, key, value = line.rstrip("\n").split("|", 3)
        rows.append((int(p), int(o), key, value))
    return rows


def check(name, rows, sent, partitions):
    by_partition = {}
    for p, o, key, value in rows:
        by_partition.setdefault(p, []).append((o, key, value))
    if not set(by_partition) <= set(range(partitions)):
        return f"{name}: partitions {sorted(by_partition)} outside 0..{partitions - 1}"
    got = sorted((key, value) for _, _, key, value in rows)
    if got != sorted(sent):
        extra = sorted(set(got) - set(sent))[:3]
        lost = sorted(set(sent) - set(got))[:3]
        return f"{name}: {len(got)} records for {len(sent)} sent; unexpected {extra}, missing {lost}"
    order = {kv: i for i, kv in enumerate(sent)}
    key_partition = {}
    for p, records in sorted(by_partition.items()):
        offsets = [o for o, _, _ in records]
        if sorted(offsets) != list(range(len(records))):
            return f"{name}: partition {p} offsets {offsets[:10]}... are not 0..{len(records) - 1}"
        records.sort()
        ranks = [order[(key, value)] for _, key, value in records]
        if ranks != sorted(ranks):
            return f"{name}: partition {p} records out of send order"
        for _, key, _ in records:
            if key_partition.setdefault(key, p) != p:
                return f"{name}: key {key!r} in partitions {key_partition[key]} and {p}"
    return None


def main():
    input_path, all_path, group_path, partitions = sys.argv[1:5]
    sent = []
    for line in open(input_path, encoding="utf-8"):
        key, value = line.rstrip("\n").split(":", 1)
        sent.append((key, value))
    counts = {}
    for name, path in (("plain consumer", all_path), ("group consumer", group_path)):
        rows = parse(path)
        problem = check(name, rows, sent, int(partitions))
        if problem:
            print(problem)
            sys.exit(1)
        counts[name] = {p: sum(1 for r in rows if r[0] == p) for p in range(int(partitions))}
    if sorted(parse(all_path)) != sorted(parse(group_path)):
        print("group consumer and plain consumer disagree on partition|offset|key|value")
        sys.exit(1)
    print("per partition: " + ", ".join(f"p{p}={c}" for p, c in counts["group consumer"].items()))


main()
