#!/usr/bin/env python3
"""bench/scaling_report.py - the table and the charts of a bench/scaling.sh run.

    scaling_report.py SCALING.tsv --out DIR [--docs DIR] [--venv DIR]

Reads the tab-separated rows scaling.sh wrote (sweep, keys, partitions,
processes, status, records, wall_s, first_s, cpu_s, rss_kb, store_kb, load1,
run), prints a Markdown table and draws one chart per sweep,
DIR/scaling-SWEEP.png (also copied to the --docs directory): records/s, CPU s
per 1M records, peak RSS (summed over processes) and the LMDB store size on
disk against the sweep's variable. With several runs each figure is the
median over the runs that succeeded, records/s and CPU also with their range
(the table) or error bars (the charts). matplotlib as bench/report.py finds it (the system's, else
a virtualenv).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import find_python, read_tsv  # noqa: E402  (the same lookup and reader)

SWEEPS = [("keys", "distinct keys", "scaling-keys.png"),
          ("partitions", "input partitions", "scaling-partitions.png"),
          ("processes", "kstreams processes", "scaling-processes.png")]
COLS = ["status", "records", "wall", "first", "cpu", "rss_kb", "store_kb", "load1", "run"]
METRICS = ["rate", "cpu", "per_cpu", "rss", "store"]


def load(path):
    rows = []
    lines, meta = read_tsv(path)
    for f in lines:
        r = {"sweep": f[0], "keys": int(f[1]), "partitions": int(f[2]), "processes": int(f[3])}
        for n, v in zip(COLS, f[4:]):
            try:
                r[n] = float(v) if n != "status" else v
            except ValueError:
                r[n] = None
        rows.append(r)
    return rows, meta


def short(n):
    for div, suffix in ((1000000, "M"), (1000, "k")):
        if n >= div and n % div == 0:
            return f"{n // div}{suffix}"
    return str(n)


def ok(r):
    return r.get("status") == "ok" and r.get("wall") and r.get("records")


def figures(r):
    """rate: records/s, cpu: CPU s per 1M records, per_cpu: records per CPU-s,
    rss: peak RSS MiB, store: MiB on disk"""
    if not ok(r):
        return None
    cpu = r["cpu"] or 0
    return {"rate": r["records"] / r["wall"], "cpu": cpu / r["records"] * 1e6,
            "per_cpu": r["records"] / cpu if cpu else None, "rss": (r["rss_kb"] or 0) / 1024,
            "store": (r["store_kb"] or 0) / 1024}


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return None if not n else (xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2)


def points(rows, sweep):
    """the sweep's points in run order, each: its rows' medians, ranges, loads"""
    groups = {}
    for r in rows:
        if r["sweep"] == sweep:
            groups.setdefault((r["keys"], r["partitions"], r["processes"]), []).append(r)
    out = []
    for (k, p, n), rs in groups.items():
        figs = [f for f in map(figures, rs) if f]
        pt = {"keys": k, "partitions": p, "processes": n, "runs": len(rs), "ok": len(figs),
              "loads": [r["load1"] for r in rs if r.get("load1") is not None],
              "status": ", ".join(sorted({r["status"] for r in rs if r["status"] != "ok"}))}
        for m in METRICS:
            vals = [f[m] for f in figs if f[m] is not None]
            pt[m] = median(vals)
            pt[m + "_range"] = (min(vals), max(vals)) if vals else None
        out.append(pt)
    return out


def with_range(pt, m, fmt):
    v, rg = pt[m], pt[m + "_range"]
    if v is None:
        return "—"
    s = format(v, fmt)
    if pt["ok"] > 1 and rg:
        s += f" ({format(rg[0], fmt)}–{format(rg[1], fmt)})"
    return s


def table(rows):
    out = ["| sweep | keys | partitions | processes | records/s | CPU s / 1M records | "
           "records / CPU-s | peak RSS MiB (sum) | LMDB on disk MiB | load (1 min) at start |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for sweep, _, _ in SWEEPS:
        first = True
        for pt in points(rows, sweep):
            label = sweep if first else ""
            first = False
            head = f"| {label} | {pt['keys']:,} | {pt['partitions']} | {pt['processes']} |"
            ls = pt["loads"]
            load = "—" if not ls else (f"{ls[0]:.1f}" if len(ls) == 1 else
                                       f"{min(ls):.1f}–{max(ls):.1f}")
            if not pt["ok"]:
                out.append(f"{head} {pt['status']} | | | | | {load} |")
                continue
            note = "" if pt["ok"] == pt["runs"] else f" ({pt['runs'] - pt['ok']} run(s) {pt['status']})"
            out.append(f"{head} {with_range(pt, 'rate', ',.0f')}{note} | "
                       f"{with_range(pt, 'cpu', '.2f')} | {pt['per_cpu']:,.0f} | "
                       f"{pt['rss']:.0f} | {pt['store']:.1f} | {load} |")
    return "\n".join(out)


PLOT = r'''
import json, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
d = json.load(sys.stdin)
fig, axes = plt.subplots(2, 2, figsize=(10, 7), dpi=100)
panels = [("rate", "thousand records / s", 1e-3, "#1f77b4"),
          ("cpu", "CPU s per 1M records (all processes)", 1, "#d62728"),
          ("rss", "peak RSS MiB (sum over processes)", 1, "#2ca02c"),
          ("store", "LMDB store on disk MiB (du)", 1, "#9467bd")]
xs = list(range(len(d["labels"])))
for ax, (key, ylabel, scale, color) in zip(axes.flat, panels):
    ys = [None if v is None else v * scale for v in d[key]]
    px = [x for x, y in zip(xs, ys) if y is not None]
    py = [y for y in ys if y is not None]
    ax.plot(px, py, marker="o", color=color)
    top = list(py)
    for x, y, rg in zip(xs, ys, d[key + "_range"]):
        if y is not None and rg:
            lo, hi = rg[0] * scale, rg[1] * scale
            ax.errorbar([x], [y], yerr=[[y - lo], [hi - y]], color=color, capsize=4)
            top.append(hi)
    for x, y in zip(px, py):
        ax.annotate(f"{y:,.1f}" if y < 100 else f"{y:,.0f}", (x, y), textcoords="offset points",
                    xytext=(7, 5), ha="left", fontsize=8)
    ax.set_xticks(xs)
    ax.set_xticklabels(d["labels"])
    ax.set_xlabel(d["xlabel"], fontsize=9)
    ax.set_ylabel(ylabel, fontsize=9)
    ax.set_ylim(bottom=0, top=max(top) * 1.25 if top else 1)
    ax.grid(alpha=0.3)
fig.suptitle(d["title"], fontsize=10)
fig.tight_layout()
fig.savefig(d["out"])
'''


def draw(rows, meta, sweep, xlabel, path, python):
    pts = points(rows, sweep)
    if not pts or not python:
        return False
    data = {"labels": [short(pt[sweep]) for pt in pts], "xlabel": xlabel, "out": path}
    for m in ("rate", "cpu", "rss", "store"):
        data[m] = [pt[m] for pt in pts]
        data[m + "_range"] = [pt[m + "_range"] if pt["ok"] > 1 else None for pt in pts]
    loads = [x for pt in pts for x in pt["loads"]]
    base = pts[0]
    other = ", ".join(f"{k} {short(base[k])}" for k in ("keys", "partitions", "processes")
                      if k != sweep)
    runs = int(meta.get("runs", 1))
    load = f"load average {min(loads):.1f}–{max(loads):.1f}" if loads else ""
    data["title"] = (f"count, exactly-once: {short(int(meta.get('records', 0)))} records per point, "
                     f"{other}; {meta.get('nproc', '?')} cores, {load}"
                     + (f"\nmedian of {runs} runs, bars: min–max" if runs > 1 else "")
                     + (" (quick sweep)" if meta.get("quick") == "1" else ""))
    return subprocess.run([python, "-c", PLOT], input=json.dumps(data).encode()).returncode == 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--out", required=True)
    ap.add_argument("--docs")
    ap.add_argument("--venv", default="/tmp/kstreams-bench-venv")
    a = ap.parse_args()
    rows, meta = load(a.results)
    quick = " (quick sweep)" if meta.get("quick") == "1" else ""
    print(f"Scaling{quick}: count, exactly-once, {int(meta.get('records', 0)):,} records per point, "
          f"{meta.get('value_bytes', '?')}-byte values, uniform keys (skew {meta.get('skew', '?')}), "
          f"commit interval {meta.get('commit_ms', '?')} ms, record cache "
          f"{meta.get('cache_bytes', 'default')}.")
    print(f"Machine: {meta.get('machine', '?')}; load average before {meta.get('load_before', '?')}, "
          f"after {meta.get('load_after', '?')}.")
    print()
    print(table(rows))
    python = find_python(a.venv)
    print()
    for sweep, xlabel, name in SWEEPS:
        path = os.path.join(a.out, name)
        if draw(rows, meta, sweep, xlabel, path, python):
            if a.docs:
                shutil.copy(path, os.path.join(a.docs, name))
            print(f"Chart: {path}" + (f" (and {os.path.join(a.docs, name)})" if a.docs else ""))
        elif any(r["sweep"] == sweep for r in rows):
            print(f"Chart {name}: not drawn (no matplotlib)")


if __name__ == "__main__":
    main()
