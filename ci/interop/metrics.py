"""The broker's metrics listener, scraped as Prometheus scrapes it: `metrics.py HOST:PORT`.

Run after the drivers: the answer is Prometheus' text format; the clients' Produce, Fetch and
Metadata requests were counted, and Produce and Fetch timed (each histogram's buckets cumulative
up to its count, which is at most the requests read); one node, the active controller, leads
every partition it hosts, none under-replicated or offline; each partition's log end is at or past its high watermark,
which is at or past its log start; the clients' consumer groups are reported, each with its
members, and each committed offset is at or below its partition's high watermark (no negative
lag); a path that is not /metrics is 404. Prints PASS or FAIL.
"""

import re
import sys
import urllib.error
import urllib.request

ADDR = sys.argv[1]


def fail(why):
    print(f"metrics: FAIL: {why}")
    sys.exit(1)


def main():
    with urllib.request.urlopen(f"http://{ADDR}/metrics", timeout=10) as answer:
        content_type = answer.headers.get("Content-Type", "")
        body = answer.read().decode()
    if not content_type.startswith("text/plain; version=0.0.4"):
        fail(f"Content-Type {content_type!r}")
    series = {}
    typed = {}
    # Lines end at line feeds only: a label value may hold any other line-breaking character.
    for line in body.split("\n"):
        if line.startswith("# TYPE "):
            words = line.split(" ")
            if len(words) != 4:
                fail(f"the TYPE line {line!r}")
            family, kind = words[2:4]
            if family in typed:
                fail(f"TYPE of {family} given twice")
            typed[family] = kind
        elif line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            if name in series:
                fail(f"{name} given twice")
            family = name.split("{")[0]
            # A histogram's series are its name with _bucket, _sum or _count.
            bases = [family[: -len(s)] for s in ("_bucket", "_sum", "_count") if family.endswith(s)]
            if family not in typed and not any(typed.get(b) == "histogram" for b in bases):
                fail(f"{name} before its family's TYPE")
            series[name] = float(value)
    for api in ("Produce", "Fetch"):
        count = series.get(f'weir_request_duration_seconds_count{{api="{api}"}}', 0)
        read = series.get(f'weir_requests_total{{api="{api}"}}', 0)
        if not 1 <= count <= read:
            fail(f"{api}: {count} answers timed, {read} requests read")
        prefix = f'weir_request_duration_seconds_bucket{{api="{api}",le="'
        buckets = [(k[len(prefix):-2], v) for k, v in series.items() if k.startswith(prefix)]
        counts = [v for _, v in buckets]
        if counts != sorted(counts) or buckets[-1] != ("+Inf", count):
            fail(f"{api}: buckets {buckets} for a count of {count}")
    for api in ("Produce", "Fetch", "Metadata"):
        count = series.get(f'weir_requests_total{{api="{api}"}}', 0)
        if count < 1:
            fail(f"{api} requests counted: {count}")
    wanted = {"weir_active_controller": 1, "weir_under_replicated_partitions": 0,
              "weir_under_min_isr_partitions": 0, "weir_offline_partitions": 0, "weir_fenced": 0}
    for name, value in wanted.items():
        if series.get(name) != value:
            fail(f"{name} = {series.get(name)}, expected {value}")
    hosted = series.get("weir_partitions", 0)
    if hosted < 1 or series.get("weir_leader_partitions") != hosted:
        fail(f"{hosted} partitions hosted, {series.get('weir_leader_partitions')} led")
    ends = {k[len("weir_log_end_offset"):]: v
            for k, v in series.items() if k.startswith("weir_log_end_offset{")}
    if len(ends) != hosted:
        fail(f"{len(ends)} log ends for {hosted} partitions")
    for labels, end in ends.items():
        high = series.get("weir_high_watermark" + labels)
        start = series.get("weir_log_start_offset" + labels)
        if high is None or start is None or not start <= high <= end:
            fail(f"{labels}: log start {start}, high watermark {high}, log end {end}")
    groups = {k[len('weir_group_members{group="'):-2]
              for k in series if k.startswith("weir_group_members{")}
    counted = sum(v for k, v in series.items() if k.startswith("weir_groups{"))
    if not groups or counted != len(groups):
        fail(f"{counted} groups counted by state, members reported of {sorted(groups)}")
    committed = 0
    for name, offset in series.items():
        if not name.startswith("weir_group_committed_offset{"):
            continue
        at = re.fullmatch(r'weir_group_committed_offset\{group=".*",'
                          r'(topic="[^"]*",partition="\d+")\}', name)
        if at is None:
            fail(f"bad series {name}")
        high = series.get("weir_high_watermark{" + at.group(1) + "}")
        # A deleted topic's offsets may be listed until the group's offsets are next cleaned.
        if high is None:
            continue
        committed += 1
        if not 0 <= offset <= high:
            fail(f"{name} = {offset}, high watermark {high}")
    if committed == 0:
        fail("no committed offsets of a partition hosted here reported")
    try:
        urllib.request.urlopen(f"http://{ADDR}/", timeout=10)
        fail("/ was answered")
    except urllib.error.HTTPError as e:
        if e.code != 404:
            fail(f"/ answered {e.code}")
    written = sum(1 for v in ends.values() if v > 0)
    produces = int(series['weir_requests_total{api="Produce"}'])
    print(f"metrics: PASS ({len(series)} series; {int(hosted)} partitions, {written} written; "
          f"{produces} produce requests; {len(groups)} groups, {committed} committed offsets)")


main()
