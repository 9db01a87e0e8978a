#!/usr/bin/env python3
"""bench/report.py - the table and the chart of a bench/run.sh run.

    report.py RESULTS.tsv [--chart FILE.png] [--venv DIR]

Reads the tab-separated results run.sh wrote, prints a Markdown table (the
one docs/performance.md shows, kstreams next to Kafka Streams and Quix
Streams), what the count and window runs' outputs check found, the targets
of issue 9, the re-key and join rows (issues 17, 18, 19) with their checked
outputs, and draws the throughput chart with matplotlib (this python's,
else /usr/bin/python3's). Without matplotlib it installs it into a
virtualenv (DIR) from PyPI; failing that it tries gnuplot; failing that it
says so and draws nothing.
"""
import argparse
import os
import shutil
import subprocess
import sys

SCENARIOS = [
    ("stateless", "stateless filter/map (orders route)"),
    ("stateless-yaml", "stateless filter/map/branch in YAML (ops)"),
    ("count", "count by key (%s keys)"),
    ("window", "windowed count (tumbling 60 s)"),
]
GUARANTEES = [("eos", "exactly-once"), ("alo", "at-least-once")]
SYSTEMS = [("kstreams", "kstreams"), ("java", "Kafka Streams 4.1.1"),
           ("quix", "Quix Streams"), ("ceiling", "ceiling (librdkafka loop)")]
SYSNAME = dict(SYSTEMS)
PEERS = [("java", "Kafka Streams"), ("quix", "Quix Streams")]  # the ratio rows
# kstreams and Kafka Streams: the only systems of restore and re-key/join runs
JVM_PAIR = SYSTEMS[:2]
CEILING2 = "ceiling, 2 writes per record (output + changelog-like)"
# the rows of run.sh's run_until: exactly-once, kstreams and Kafka Streams
UNTIL = [
    ("rekey", "issue 17", "re-key + count (%(keys)s users -> %(keys)s customer ids from the "
     "JSON value)", "all customers' latest counts add up to"),
    ("join", "issue 18", "stream-table join (%(table_keys)s customers, then orders by customer "
     "id; inner)", "joined orders:"),
    ("sjoin", "issue 19", "windowed stream-stream join (orders + payments, window "
     "±%(join_window_s)s s, grace %(join_grace_s)s s; inner)", "joined pairs:"),
    ("fk", "issue 19", "foreign-key table-table join (%(table_keys)s customers, then orders "
     "keyed by order id; inner)", "orders with a joined result:"),
]


def read_tsv(path):
    """The data lines of a results file, split on tabs, and the meta data
    its "# key=value ..." comment lines carry (also "machine" from the
    "# nproc=" line and each "# load_...=" line whole)."""
    lines, meta = [], {}
    for line in open(path):
        line = line.rstrip("\n")
        if not line:
            continue
        if line.startswith("#"):
            for word in line[1:].split("# ")[-1].split(" "):
                if "=" in word:
                    k, v = word.split("=", 1)
                    meta[k] = v
            if line.startswith("# nproc="):
                meta["machine"] = line[2:]
            if line.startswith("# load_"):
                k, v = line[2:].split("=", 1)
                meta[k] = v
            continue
        lines.append(line.split("\t"))
    return lines, meta


def load(path):
    rows = {}
    lines, meta = read_tsv(path)
    for f in lines:
        key = (f[0], f[1], f[2])
        r = {"status": f[3]}
        if f[0] == "restore" and f[3] == "ok":
            r["records"], r["secs"] = int(f[4]), float(f[5])
        elif f[3] in ("ok", "extra"):
            names = ["records", "wall", "first", "cpu", "rss_kb", "lat_n", "p50", "p99", "max",
                     "gap", "prep", "expect", "out", "keys", "sum", "extra"]
            for n, v in zip(names, f[4:]):
                try:
                    r[n] = float(v)
                except ValueError:
                    r[n] = None
        rows[key] = r
    return rows, meta


def fmt_int(x):
    return "—" if x is None else f"{x:,.0f}"


def rate(r):
    return r["records"] / r["wall"] if r.get("wall") else None


def per_cpu(r):
    return r["records"] / r["cpu"] if r.get("cpu") else None


def cpu_per_m(r):
    return r["cpu"] / r["records"] * 1e6 if r.get("records") else None


def rss_mib(r):
    return r["rss_kb"] / 1024 if r.get("rss_kb") else None


def table(rows, meta):
    keys = meta.get("keys", "100000")
    out = []
    out.append("| scenario | guarantee | system | records/s | startup s | CPU s / 1M records "
               "| records / CPU-s | peak RSS MiB | latency p50 / p99 ms |")
    out.append("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for sc, sc_name in SCENARIOS:
        sc_name = sc_name % f"{int(keys):,}" if "%s" in sc_name else sc_name
        for g, g_name in GUARANTEES:
            present = [(s, n) for s, n in SYSTEMS if (sc, g, s) in rows]
            if sc != "count":  # the ceiling runs once, on the count input
                present = [(s, n) for s, n in present if s != "ceiling"]
                if ("count", g, "ceiling") in rows and present:
                    present.append(("ceiling", SYSNAME["ceiling"]))
            if not present:
                continue
            first = True
            for s, name in present:
                r = rows.get((sc, g, s)) or rows.get(("count", g, s))
                label = f"{sc_name}" if first else ""
                glabel = g_name if first else ""
                first = False
                if r["status"] != "ok":
                    out.append(f"| {label} | {glabel} | {name} | {r['status']} | | | | | |")
                    continue
                lat = "—"
                if r.get("p50") is not None and r.get("p99") is not None:
                    lat = f"{r['p50']:.0f} / {r['p99']:.0f}"
                out.append(f"| {label} | {glabel} | {name} | {fmt_int(rate(r))} | "
                           f"{r['first']:.1f} | {cpu_per_m(r):.2f} | {fmt_int(per_cpu(r))} | "
                           f"{rss_mib(r):.0f} | {lat} |")
            k = rows.get((sc, g, "kstreams"))
            c = rows.get(("count", g, "ceiling"))
            for p, pname in PEERS:
                j = rows.get((sc, g, p))
                if ok(k) and ok(j):
                    out.append(f"| | | **kstreams ÷ {pname}** | **{rate(k) / rate(j):.2f}×** | | "
                               f"{cpu_per_m(k) / cpu_per_m(j):.2f}× | "
                               f"**{per_cpu(k) / per_cpu(j):.2f}×** | {rss_mib(k) / rss_mib(j):.2f}× | |")
            if ok(k) and ok(c):
                out.append(f"| | | **kstreams % of ceiling** | **{100 * rate(k) / rate(c):.0f}%** | | "
                           f"| {100 * per_cpu(k) / per_cpu(c):.0f}% | | |")
            c2 = rows.get((sc, g, "ceiling2"))
            if ok(c2):
                r = c2
                lat = f"{r['p50']:.0f} / {r['p99']:.0f}" if r.get("p99") is not None else "—"
                out.append(f"| | | {CEILING2} | {fmt_int(rate(r))} | {r['first']:.1f} | "
                           f"{cpu_per_m(r):.2f} | {fmt_int(per_cpu(r))} | {rss_mib(r):.0f} | {lat} |")
                if ok(k):
                    out.append(f"| | | **kstreams % of it** | **{100 * rate(k) / rate(r):.0f}%** | | "
                               f"| {100 * per_cpu(k) / per_cpu(r):.0f}% | | |")
    return "\n".join(out)


def checks(rows):
    """What run.sh's outputs check found for the count and window runs: the
    latest count of every key (and window) against the input records."""
    out = []
    for (sc, g, s), r in rows.items():
        if sc not in ("count", "window") or r.get("status") != "ok" or r.get("expect") is None:
            continue
        name = f"{sc} {dict(GUARANTEES)[g]} {SYSNAME.get(s, s)}"
        if r.get("sum") is None:
            out.append(f"- {name}: **outputs incomplete** (fewer counted than "
                       f"{fmt_int(r['expect'])} input records)")
            continue
        verdict = ("as expected" if r["sum"] == r["expect"] else
                   f"**{fmt_int(r['sum'] - r['expect'])} off**")
        what = "keys" if sc == "count" else "key + window pairs"
        out.append(f"- {name}: latest counts add up to {fmt_int(r['sum'])} of "
                   f"{fmt_int(r['expect'])} input records ({fmt_int(r.get('keys'))} {what}, "
                   f"{fmt_int(r.get('out'))} output records) — {verdict}")
    return "\n".join(["Outputs checked (read_committed, from the beginning, before the latency "
                      "phase):"] + out) if out else ""


def ok(r):
    return r is not None and r.get("status") == "ok" and r.get("wall")


def restore_table(rows):
    out = ["| restore (count store, changelog -> empty state dir) | records | seconds | records/s |",
           "|---|---:|---:|---:|"]
    any_row = False
    for s, name in JVM_PAIR:
        r = rows.get(("restore", "eos", s))
        if r and r["status"] == "ok":
            any_row = True
            rs = r["records"] / r["secs"] if r["secs"] else None
            out.append(f"| {name} | {r['records']:,} | {r['secs']:.2f} | {fmt_int(rs)} |")
    return "\n".join(out) if any_row else ""


def swap_line(rows):
    s = rows.get(("swap", "eos", "kstreams"))
    if not s:
        return "Hot-swap pause: not run."
    if s["status"] == "pending":
        return "Hot-swap pause: pending (no plugin reload in this build)."
    if s["status"] != "ok" or s.get("gap") is None:
        return "Hot-swap pause: the swap run failed (see its process.log)."
    base = rows.get(("count", "eos", "kstreams"))
    line = (f"Hot-swap pause (count, exactly-once, {s['lat_n']:.0f} records at a steady rate, one "
            f"swap of the count plugin): longest gap between committed outputs {s['gap']:.0f} ms")
    if ok(base) and base.get("gap") is not None:
        line += f" (the same run without a swap: {base['gap']:.0f} ms)"
    if s.get("prep") is not None:
        line += f"; the engine prepared the new build on every task in {s['prep']:.0f} ms"
    return line + (f"; latency p50 / p99 / max with the swap {s['p50']:.0f} / {s['p99']:.0f} / "
                   f"{s['max']:.0f} ms.")


def until_table(rows, meta):
    """The re-key and join rows: one table, a ratio row per scenario, and what
    was checked of the outputs."""
    m = {"keys": f"{int(meta.get('keys', 100000)):,}",
         "table_keys": f"{int(meta.get('table_keys', 100000)):,}",
         "join_window_s": meta.get("join_window_s", "300"),
         "join_grace_s": meta.get("join_grace_s", "60")}
    out = ["| scenario | system | input records | records/s | first output s | "
           "CPU s / 1M records | records / CPU-s | peak RSS MiB | outputs checked |",
           "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    any_row = False
    for sc, issue, name, what in UNTIL:
        present = [(s, n) for s, n in JVM_PAIR if (sc, "eos", s) in rows]
        if not present:
            continue
        any_row = True
        first = True
        for s, sname in present:
            r = rows[(sc, "eos", s)]
            label = f"{name % m} ({issue}), exactly-once" if first else ""
            first = False
            if r["status"] not in ("ok", "extra"):
                out.append(f"| {label} | {sname} | {r['status']} | | | | | | |")
                continue
            check = f"{what} {fmt_int(r.get('sum') if sc in ('rekey', 'fk') else r.get('out'))}"
            if sc in ("rekey", "fk"):
                check += f" ({fmt_int(r.get('keys'))} keys, {fmt_int(r.get('out'))} records)"
            check += " — as expected" if r["status"] == "ok" else \
                f" — **{fmt_int(r.get('extra'))} more than expected**"
            out.append(f"| {label} | {sname} | {fmt_int(r['records'])} | {fmt_int(rate(r))} | "
                       f"{r['first']:.1f} | {cpu_per_m(r):.2f} | {fmt_int(per_cpu(r))} | "
                       f"{rss_mib(r):.0f} | {check} |")
        k, j = rows.get((sc, "eos", "kstreams")), rows.get((sc, "eos", "java"))
        if ok(k) and ok(j):
            out.append(f"| | **kstreams ÷ Kafka Streams** | | **{rate(k) / rate(j):.2f}×** | | "
                       f"{cpu_per_m(k) / cpu_per_m(j):.2f}× | **{per_cpu(k) / per_cpu(j):.2f}×** | "
                       f"{rss_mib(k) / rss_mib(j):.2f}× | |")
    return "\n".join(out) if any_row else ""


def until_targets(rows):
    res = []
    for sc, issue, label, goal in (
            ("rekey", "issue 17", "re-key + count EOS, records per CPU-second vs Kafka Streams",
             3.0),
            ("join", "issue 18", "stream-table join EOS, records per CPU-second vs Kafka Streams",
             3.0),
            ("sjoin", "issue 19",
             "windowed stream-stream join EOS, records per CPU-second vs Kafka Streams", None),
            ("fk", "issue 19",
             "foreign-key join EOS, records per CPU-second vs Kafka Streams", None)):
        k, j = rows.get((sc, "eos", "kstreams")), rows.get((sc, "eos", "java"))
        if (sc, "eos", "kstreams") not in rows and (sc, "eos", "java") not in rows:
            continue
        g = f"≥ {goal:.0f}×" if goal else "(no figure set)"
        if ok(k) and ok(j):
            x = per_cpu(k) / per_cpu(j)
            v = "" if not goal else ("met" if x >= goal else
                                     f"**missed** ({100 * (1 - x / goal):.0f}% short)")
            res.append((f"{label} ({issue})", g, f"{x:.2f}×", v))
        else:
            res.append((f"{label} ({issue})", g, "not measured", ""))
    if not res:
        return ""
    out = ["| target | goal | measured | |", "|---|---|---|---|"]
    out += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in res]
    return "\n".join(out)


def targets(rows, meta):
    commit = float(meta.get("commit_ms", 100))
    res = []

    def add(name, goal, value, met):
        res.append((name, goal, value, "met" if met else ("**missed**" if met is False else "")))

    cache = meta.get("cache_bytes", "default")
    caches = ("both record caches at their defaults (kstreams 1 MiB, Kafka Streams 10 MiB)"
              if cache == "default" else
              "both record caches off" if cache == "0" else f"both record caches {cache}")
    name = f"count EOS, records per CPU-second vs Kafka Streams; {caches}"
    k, j = rows.get(("count", "eos", "kstreams")), rows.get(("count", "eos", "java"))
    if ok(k) and ok(j):
        x = per_cpu(k) / per_cpu(j)
        add(name, "≥ 10×", f"{x:.2f}×", x >= 10)
    else:
        add(name, "≥ 10×", "not measured", None)
    c = rows.get(("count", "eos", "ceiling"))
    if ok(k) and ok(c):
        x = rate(k) / rate(c)
        add("count EOS throughput vs the ceiling (one write per input)", "", f"{100 * x:.0f}%",
            None)
    c2 = rows.get(("count", "eos", "ceiling2"))
    if ok(k) and ok(c2):
        x = rate(k) / rate(c2)
        add("count EOS throughput vs the ceiling that writes two records per input (output + "
            "changelog, as count without a cache)", "≥ 95%", f"{100 * x:.0f}%", x >= 0.95)
    s, c = rows.get(("stateless", "eos", "kstreams")), rows.get(("stateless", "eos", "ceiling"))
    if ok(s) and ok(c):
        x = rate(s) / rate(c)
        add("stateless route EOS throughput vs the ceiling", "≥ 60%", f"{100 * x:.0f}%",
            x >= 0.6)
    for g, gname in GUARANTEES:
        c, y = rows.get(("stateless", g, "kstreams")), rows.get(("stateless-yaml", g, "kstreams"))
        if ok(c) and ok(y):
            x = per_cpu(y) / per_cpu(c)
            add(f"stateless {gname}: YAML (ops) vs C plugin, records per CPU-second",
                "≥ 0.90×", f"{x:.2f}×", x >= 0.9)
    for sc in ("stateless", "stateless-yaml", "count", "window"):
        e, a = rows.get((sc, "eos", "kstreams")), rows.get((sc, "alo", "kstreams"))
        if ok(e) and ok(a):
            cost = 1 - rate(e) / rate(a)
            add(f"{sc}: exactly-once cost vs at-least-once (records/s)", "≤ 20%",
                f"{100 * cost:.0f}%", cost <= 0.2)
            cpu_cost = cpu_per_m(e) / cpu_per_m(a) - 1
            add(f"{sc}: exactly-once cost vs at-least-once (CPU per record; not a target, "
                f"a steadier view)", "", f"{100 * cpu_cost:+.0f}%", None)
    if ok(k) and ok(j):
        x = rss_mib(k) / rss_mib(j)
        add("count EOS peak RSS vs Kafka Streams", "≤ 1/5 (0.20×)", f"{x:.2f}×", x <= 0.2)
    r = rows.get(("restore", "eos", "kstreams"))
    if r and r["status"] == "ok" and r["secs"]:
        x = r["records"] / r["secs"]
        add("restore rate (kstreams)", "≥ 1,000,000 records/s", f"{x:,.0f}", x >= 1000000)
    for sc in ("stateless", "count", "window"):
        e = rows.get((sc, "eos", "kstreams"))
        if ok(e) and e.get("p99") is not None:
            c = rows.get(("count", "eos", "ceiling"))
            floor = (f" (ceiling in the same run: {c['p99']:.0f} ms)"
                     if ok(c) and c.get("p99") is not None else "")
            add(f"{sc} EOS p99 latency", f"≤ {commit + 50:.0f} ms", f"{e['p99']:.0f} ms{floor}",
                e["p99"] <= commit + 50)
    out = ["| target | goal | measured | |", "|---|---|---|---|"]
    out += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in res]
    return "\n".join(out)


def chart_data(rows, metric=rate):
    labels, series = [], {s: [] for s, _ in SYSTEMS}
    for sc, _ in SCENARIOS:
        for g, gname in GUARANTEES:
            if not any(ok(rows.get((sc, g, s))) for s in ("kstreams", "java", "quix")):
                continue
            labels.append(f"{sc}\n{gname}")
            for s, _ in SYSTEMS:
                r = rows.get((sc, g, s)) if s != "ceiling" else rows.get(("count", g, s))
                series[s].append(metric(r) / 1000 if ok(r) and metric(r) else 0)
    return labels, series


def rows_scenarios(rows):
    return {k[0] for k in rows}


def have_matplotlib(python):
    return subprocess.run([python, "-c", "import matplotlib"], capture_output=True).returncode == 0


def find_python(venv):
    # the running python, then the system's (Debian's python3-matplotlib
    # when python3 is another install, such as pyenv's)
    for py in (sys.executable, "/usr/bin/python3"):
        if os.path.exists(py) and have_matplotlib(py):
            return py
    vpy = os.path.join(venv, "bin", "python3")
    if os.path.exists(vpy) and have_matplotlib(vpy):
        return vpy
    print("report: installing matplotlib into " + venv, file=sys.stderr)
    try:
        subprocess.run([sys.executable, "-m", "venv", venv], check=True, capture_output=True)
        subprocess.run([vpy, "-m", "pip", "install", "-q", "matplotlib"], check=True,
                       capture_output=True)
        return vpy if have_matplotlib(vpy) else None
    except (subprocess.CalledProcessError, OSError) as e:
        print(f"report: cannot install matplotlib: {e}", file=sys.stderr)
        return None


PLOT = r'''
import json, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
d = json.load(sys.stdin)
labels, names, title = d["labels"], d["names"], d["title"]
colors = {"kstreams": "#1f77b4", "java": "#ff7f0e", "quix": "#2ca02c", "ceiling": "#7f7f7f"}
fig, axes = plt.subplots(2, 1, figsize=(10, 8.5), dpi=110)
panels = [(d["series"], "thousand input records / s\n(start -> last output committed)"),
          (d["per_cpu"], "thousand input records\nper CPU-second of the process")]
names = [(s, n) for s, n in names if any(v > 0 for v in d["series"][s])]
w = 0.8 / len(names)
for ax, (series, ylabel) in zip(axes, panels):
    for i, (s, name) in enumerate(names):
        xs = [x + (i - (len(names) - 1) / 2) * w for x in range(len(labels))]
        vals = series[s]
        bars = ax.bar(xs, vals, w, label=name, color=colors[s])
        for b, v in zip(bars, vals):
            if v > 0:
                ax.annotate(f"{v:.0f}k", (b.get_x() + b.get_width() / 2, v), ha="center",
                            va="bottom", fontsize=7)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_ylabel(ylabel, fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
axes[0].set_title(title, fontsize=10)
fig.tight_layout()
fig.savefig(d["out"])
'''


def gnuplot_chart(labels, series, out, title):
    if not shutil.which("gnuplot"):
        return False
    data = "\n".join(f'"{l.replace(chr(10), " ")}" {series["kstreams"][i]} {series["java"][i]} '
                     f'{series["ceiling"][i]} {series["quix"][i]}' for i, l in enumerate(labels))
    script = f'''set terminal png size 1100,550
set output "{out}"
set title "{title}"
set style data histograms
set style fill solid
set ylabel "thousand records/s"
set xtics rotate by -20
plot "-" using 2:xtic(1) title "kstreams", "-" using 3 title "Kafka Streams", "-" using 4 title "ceiling", "-" using 5 title "Quix Streams"
{data}
e
{data}
e
{data}
e
{data}
e
'''
    return subprocess.run(["gnuplot"], input=script.encode()).returncode == 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--chart")
    ap.add_argument("--venv", default="/tmp/kstreams-bench-venv")
    a = ap.parse_args()
    rows, meta = load(a.results)
    if meta.get("quix_version"):
        SYSNAME["quix"] = f"Quix Streams {meta['quix_version']}"
        SYSTEMS[2] = ("quix", SYSNAME["quix"])
    print(f"Run: {meta.get('records', '?')} records, {meta.get('keys', '?')} keys, "
          f"{meta.get('value_bytes', '?')}-byte values, skew {meta.get('skew', '?')}, "
          f"{meta.get('partitions', '?')} partitions, commit interval {meta.get('commit_ms', '?')} ms; "
          f"latency at {meta.get('latency_rate', '?')} records/s.")
    print(f"Machine: {meta.get('machine', '?')}; load average before {meta.get('load_before', '?')}, "
          f"after {meta.get('load_after', '?')}.")
    print()
    main_rows = any(k[0] in ("stateless", "count", "window") for k in rows)
    if main_rows:
        print(table(rows, meta))
        print()
        ch = checks(rows)
        if ch:
            print(ch)
            print()
    rt = restore_table(rows)
    if rt:
        print(rt)
        print()
    pending = [f"{k[0]} {k[1]} {k[2]}" for k, r in rows.items() if r["status"] == "pending"]
    if pending:
        print("Pending (the feature is not in this build): " + ", ".join(pending))
        print()
    ut = until_table(rows, meta)
    if ut:
        print(ut)
        print()
        print(until_targets(rows))
        print()
    if any(sc in rows_scenarios(rows) for sc in ("stateless", "count", "window", "swap")):
        print(swap_line(rows))
        print()
        print(targets(rows, meta))
    if a.chart:
        labels, series = chart_data(rows)
        lb = (meta.get("load_before") or "?").split(" ")[0]
        la = (meta.get("load_after") or "?").split(" ")[0]
        title = (f"{meta.get('records', '?')} records, {meta.get('partitions', '?')} partitions, "
                 f"commit {meta.get('commit_ms', '?')} ms, one thread each; {meta.get('nproc', '?')} "
                 f"cores, load average {lb} before, {la} after")
        py = find_python(a.venv) if labels else None
        import json
        done = False
        if py and labels:
            cpu_series = chart_data(rows, per_cpu)[1]
            d = {"labels": labels, "series": series, "per_cpu": cpu_series, "names": SYSTEMS,
                 "out": a.chart, "title": title}
            done = subprocess.run([py, "-c", PLOT], input=json.dumps(d).encode()).returncode == 0
        if not done and labels:
            done = gnuplot_chart(labels, series, a.chart, title)
        print()
        print(f"Chart: {a.chart}" if done else "Chart: not drawn (no matplotlib, no gnuplot)")


if __name__ == "__main__":
    main()
