"""Checks what a rejoining kcat consumer group read after its committed offsets.

    check_resume.py BEFORE AFTER AGAIN SECOND_INPUT

BEFORE and AFTER hold `p|o|key|value` lines of the whole topic read by a plain consumer before
and after SECOND_INPUT's `key:value` lines were produced; AGAIN holds what the group read when it
rejoined. The group must read exactly the records produced after its commit — every one once,
nothing from before — and each partition in offset order. Prints a one-line summary, or the first
mismatch and exits 1.
"""

import sys


def parse(path):
    rows = []
    for line in open(path, encoding="utf-8"):
        p, o, key, value = line.rstrip("\n").split("|", 3)
        rows.append((int(p), int(o), key, value))
    return rows


def main():
    before, after, again = (parse(path) for path in sys.argv[1:4])
    second = sorted(tuple(line.rstrip("\n").split(":", 1)) for line in open(sys.argv[4], encoding="utf-8"))
    new = sorted(set(after) - set(before))
    if sorted((k, v) for _, _, k, v in new) != second:
        print(f"the plain consumer saw {len(new)} new records, {len(second)} were produced after the commit")
        sys.exit(1)
    ends = {}
    for p, o, _, _ in before:
        ends[p] = max(ends.get(p, 0), o + 1)
    early = [r for r in again if r[1] < ends.get(r[0], 0)]
    if early:
        print(f"{len(early)} records before the committed offsets were redelivered, e.g. {early[:2]}")
        sys.exit(1)
    if sorted(again) != new:
        missing = sorted(set(new) - set(again))[:2]
        extra = sorted(set(again) - set(new))[:2]
        print(f"the group read {len(again)} records, {len(new)} were produced after the commit; "
              f"missing {missing}, unexpected {extra}")
        sys.exit(1)
    for p in {r[0] for r in again}:
        offsets = [r[1] for r in again if r[0] == p]
        if offsets != sorted(offsets):
            print(f"partition {p} read out of order: {offsets[:10]}")
            sys.exit(1)
    print(f"read exactly the {len(new)} records produced after the commit, from offsets {dict(sorted(ends.items()))}")


main()
