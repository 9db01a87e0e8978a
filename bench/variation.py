#!/usr/bin/env python3
"""bench/variation.py - how the headline figures of several bench/run.sh
runs vary.

    variation.py RESULTS.tsv RESULTS.tsv ...

Reads the results files of runs made with the same settings (run.sh keeps
each run's as bench-out/results-RUN.tsv) and prints one Markdown row per
figure: its value in each run, in the order given, then the smallest, the
median and the largest. The figures are the ones the round-two goals are
about: kstreams' records per CPU-second against Kafka Streams' and Quix
Streams', its throughput against the ceiling loops', the restore rate, the
p99 latencies, peak RSS against Kafka Streams', and the re-key and join
ratios. A figure a run did not measure shows as "—" and is left out of
the smallest, median and largest.
"""
import statistics
import sys

from report import load, ok, per_cpu, rate, rss_mib


def ratio(a, b, f):
    return f(a) / f(b) if ok(a) and ok(b) and f(a) and f(b) else None


def restore_rate(rows, system):
    r = rows.get(("restore", "eos", system))
    return r["records"] / r["secs"] if r and r["status"] == "ok" and r.get("secs") else None


def p99(rows, sc):
    r = rows.get((sc, "eos", "kstreams"))
    return r["p99"] if ok(r) and r.get("p99") is not None else None


def figures(rows):
    """(name, format, value) of each headline figure of one run."""
    k = lambda sc, s="kstreams", g="eos": rows.get((sc, g, s))  # noqa: E731
    out = []
    for g, gname in (("eos", "exactly-once"), ("alo", "at-least-once")):
        out.append((f"count {gname}: kstreams ÷ Kafka Streams, records / CPU-s", "x",
                    ratio(k("count", g=g), k("count", "java", g), per_cpu)))
    out.append(("count exactly-once: kstreams ÷ Quix Streams, records / CPU-s", "x",
                ratio(k("count"), k("count", "quix"), per_cpu)))
    out.append(("window exactly-once: kstreams ÷ Kafka Streams, records / CPU-s", "x",
                ratio(k("window"), k("window", "java"), per_cpu)))
    out.append(("count exactly-once: kstreams records/s", "n", rate(k("count")) if ok(k("count"))
                else None))
    out.append(("count exactly-once: % of the ceiling (one write per input)", "%",
                ratio(k("count"), rows.get(("count", "eos", "ceiling")), rate)))
    out.append(("count exactly-once: % of the ceiling that writes two records per input", "%",
                ratio(k("count"), rows.get(("count", "eos", "ceiling2")), rate)))
    for sc in ("stateless", "stateless-yaml"):
        out.append((f"{sc} exactly-once: % of the ceiling", "%",
                    ratio(k(sc), rows.get(("count", "eos", "ceiling")), rate)))
    out.append(("restore, kstreams, records/s", "n", restore_rate(rows, "kstreams")))
    out.append(("restore, Kafka Streams, records/s", "n", restore_rate(rows, "java")))
    for sc in ("count", "window", "stateless"):
        out.append((f"{sc} exactly-once p99 latency, ms", "n", p99(rows, sc)))
    out.append(("count exactly-once peak RSS: kstreams ÷ Kafka Streams", "x",
                ratio(k("count"), k("count", "java"), rss_mib)))
    for sc, name in (("rekey", "re-key + count"), ("join", "stream-table join"),
                     ("sjoin", "stream-stream join"), ("fk", "foreign-key join")):
        out.append((f"{name}: kstreams ÷ Kafka Streams, records / CPU-s", "x",
                    ratio(k(sc), k(sc, "java"), per_cpu)))
    return out


def started(path):
    """The start time of a run ("2026-12-04 18:32") from its file's first
    line ("# run ID 2026-12-04T18:32:10Z"), or None."""
    words = open(path).readline().split()
    if len(words) >= 4 and words[1] == "run" and "T" in words[3]:
        return words[3].replace("T", " ")[:16]
    return None


def fmt(kind, v):
    if v is None:
        return "—"
    return {"x": f"{v:.2f}×", "%": f"{100 * v:.0f}%", "n": f"{v:,.0f}"}[kind]


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: variation.py RESULTS.tsv RESULTS.tsv ...")
    runs = [load(p) for p in sys.argv[1:]]
    names = [started(p) or str(i + 1) for i, p in enumerate(sys.argv[1:])]
    per_run = [figures(rows) for rows, _ in runs]
    print("| figure | " + " | ".join(f"run {n}" for n in names) + " | smallest | median | largest |")
    print("|---|" + "---:|" * (len(runs) + 3))
    for i, (name, kind, _) in enumerate(per_run[0]):
        vals = [f[i][2] for f in per_run]
        have = [v for v in vals if v is not None]
        if not have:
            continue
        stats = [min(have), statistics.median(have), max(have)]
        print(f"| {name} | " + " | ".join(fmt(kind, v) for v in vals + stats) + " |")


if __name__ == "__main__":
    main()
