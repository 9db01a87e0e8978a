#!/usr/bin/env python3
"""join_timeline.py - draws docs/join-timeline.svg, the picture of the
stream-stream join in docs/tables-and-joins.md: which records of the
example join, which one is late, when the unmatched order comes out.

It replays the records in arrival order with the rules of
plugins/join_streams.c (window before/after, grace, late records, expiry
at t + before + after + grace < stream time) and draws what that gives,
so the picture cannot say something else than the rules. Standard library
only:  python3 docs/join_timeline.py > docs/join-timeline.svg
"""

BEFORE, AFTER, GRACE = 0, 10, 1  # minutes, as in the example's window:

# (name, side, minute) in arrival order; p3 arrives after o3
RECORDS = [("o1", "L", 0), ("p1", "R", 3), ("o2", "L", 5), ("p2", "R", 12),
           ("o3", "L", 30), ("p3", "R", 14), ("o9", "L", 45)]


def replay():
    """The left join of RECORDS: pairs, late records, unmatched (name, when)."""
    st, buf, pairs, late, unmatched = None, [], [], [], []
    for name, side, t in RECORDS:
        st = t if st is None else max(st, t)
        if t + (AFTER if side == "L" else BEFORE) + GRACE < st:
            late.append(name)
            continue
        rec = {"name": name, "side": side, "t": t, "joined": False}
        for b in buf:
            if b["side"] == side:
                continue
            left, right = (rec, b) if side == "L" else (b, rec)
            if left["t"] - BEFORE <= right["t"] <= left["t"] + AFTER:
                pairs.append((left["name"], right["name"], max(left["t"], right["t"])))
                b["joined"] = rec["joined"] = True
        buf.append(rec)
        for b in [b for b in buf if b["t"] + BEFORE + AFTER + GRACE < st]:
            buf.remove(b)
            if b["side"] == "L" and not b["joined"]:
                unmatched.append((b["name"], st))
    return pairs, late, unmatched


def svg():
    pairs, late, unmatched = replay()
    x0, scale, yl, yr = 70, 14, 70, 150
    x = lambda m: x0 + m * scale
    when = {n: t for n, _, t in RECORDS}
    side = {n: s for n, s, _ in RECORDS}
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="760" height="250" '
           'font-family="sans-serif" font-size="12">',
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="10" y="20" font-size="13">join.streams, kind: left, window: '
           f'before {BEFORE}m, after {AFTER}m, grace {GRACE}m (event time in minutes; '
           f'p3 arrives after o3)</text>',
           f'<text x="10" y="{yl + 4}">orders</text>',
           f'<text x="10" y="{yr + 4}">payments</text>']
    for n, s, t in RECORDS:  # each order's window on the payments' line
        if s == "L" and n != "o9":
            out.append(f'<rect x="{x(t - BEFORE)}" y="{yr - 12}" '
                       f'width="{(BEFORE + AFTER) * scale}" height="24" fill="#dde8f7"/>')
    out.append(f'<line x1="{x0}" y1="210" x2="{x(48)}" y2="210" stroke="black"/>')
    for m in range(0, 48, 5):
        out.append(f'<line x1="{x(m)}" y1="206" x2="{x(m)}" y2="214" stroke="black"/>'
                   f'<text x="{x(m) - 6}" y="228">{m}</text>')
    for left, right, t in pairs:
        out.append(f'<line x1="{x(when[left])}" y1="{yl}" x2="{x(when[right])}" '
                   f'y2="{yr}" stroke="green" stroke-width="2"/>')
    for n, s, t in RECORDS:
        y, colour = (yl, "#1f4e9c") if s == "L" else (yr, "#9c5a1f")
        colour = "red" if n in late else colour
        out.append(f'<circle cx="{x(t)}" cy="{y}" r="6" fill="{colour}"/>'
                   f'<text x="{x(t) - 8}" y="{y - 12 if s == "L" else y + 26}">{n}</text>')
        if n in late:
            out.append(f'<text x="{x(t) + 10}" y="{y + 26}" fill="red">late: dropped</text>')
    for n, st in unmatched:
        out.append(f'<line x1="{x(when[n])}" y1="{yl}" x2="{x(st)}" y2="{yl - 30}" '
                   f'stroke="gray" stroke-dasharray="4"/>'
                   f'<text x="{x(st) - 330}" y="{yl - 34}" fill="gray">{n} never joined: '
                   f'{{"left":{n},"right":null}} once stream time passes '
                   f'{when[n] + BEFORE + AFTER + GRACE} (here at {st})</text>')
    legend = ", ".join(f"{l}+{r}@{t}" for l, r, t in pairs)
    out.append(f'<text x="10" y="245" fill="green">joined: {legend}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(svg(), end="")
