"""Draws what happened in `make demo` as an SVG timeline (target/demo/timeline.svg).

`render(events, marks)` takes the workers' `@` events as demo/run.py received them —
(worker, kind, fields with `t` in Unix ms) — and the run's own marks — (t, label), e.g. the
SIGKILL of the leader — and returns the SVG text: one lane per worker, a bar for each
leadership (from `leading` to `resigned`, the kill, or the worker's last event) and for each
semaphore slot held (`slot state=acquired` to `state=releasing`), the kill and SIGTERM marks,
and the failover gap (from the kill to the next `leading`) shaded and labelled. Plain SVG, no
script, no external font: it shows in a browser, the book and GitHub alike.
"""

from html import escape

LANE_H = 34
LEFT = 90
WIDTH = 900
TOP = 64
LEADER = "#3b6fb6"
SLOT = "#2e9e6a"
GAP = "#e8a33d"
MARK = "#c0392b"


def spans(events, marks):
    """(lanes, leader spans, slot spans, t0, t1): spans are (worker, start, end, label)."""
    lanes, leading, slots = [], [], []
    open_lead, open_slot, last = {}, {}, {}
    kills = [t for t, label in marks if label.startswith("SIGKILL")]
    # a SIGKILL mark ends the leadership of the worker it names (a restarted worker keeps its name)
    stream = [(ev["t"], 1, name, kind, ev) for name, kind, ev in events] + \
        [(t, 0, label.split(" ", 1)[1], "killed", {"t": t}) for t, label in marks if label.startswith("SIGKILL ")]
    for t, _order, name, kind, ev in sorted(stream, key=lambda e: (e[0], e[1])):
        if kind == "killed":
            if name in open_lead:
                start, token = open_lead.pop(name)
                leading.append((name, start, t, f"token {token}"))
            continue
        if name not in lanes:
            lanes.append(name)
        last[name] = t
        if kind == "leading":
            open_lead[name] = (t, ev.get("token", ""))
        elif kind in ("resigned", "lost", "stopped") and name in open_lead:
            start, token = open_lead.pop(name)
            leading.append((name, start, t, f"token {token}"))
        elif kind == "slot" and ev.get("state") == "acquired":
            open_slot[name] = t
        elif kind == "slot" and name in open_slot:
            slots.append((name, open_slot.pop(name), t, ""))
    for name, (start, token) in open_lead.items():
        # a leader that never said it stopped was killed: its bar ends at the kill
        end = next((k for k in kills if k >= start), last.get(name, start))
        leading.append((name, start, end, f"token {token}"))
    times = [ev["t"] for _n, _k, ev in events] + [t for t, _l in marks]
    t0, t1 = (min(times), max(times)) if times else (0, 1)
    return lanes, leading, slots, t0, max(t1, t0 + 1)


def render(events, marks, title="make demo"):
    lanes, leading, slots, t0, t1 = spans(events, marks)
    height = TOP + LANE_H * max(len(lanes), 1) + 70
    scale = (WIDTH - LEFT - 20) / (t1 - t0)

    def x(t):
        return LEFT + (t - t0) * scale

    def y(name):
        return TOP + LANE_H * lanes.index(name)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">',
           f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
           f'<text x="{LEFT}" y="20" font-size="14" font-weight="bold">{escape(title)}: who led, '
           f'who held a semaphore slot, and the failover gap</text>']
    for name in lanes:
        out.append(f'<text x="{LEFT - 8}" y="{y(name) + 21}" text-anchor="end">{escape(name)}</text>')
        out.append(f'<line x1="{LEFT}" x2="{WIDTH - 20}" y1="{y(name) + LANE_H - 2}" '
                   f'y2="{y(name) + LANE_H - 2}" stroke="#ddd"/>')
    # the failover gap: from each kill to the next leadership
    for t, label in marks:
        if label.startswith("SIGKILL"):
            nxt = min((s for _n, s, _e, _l in leading if s >= t), default=None)
            if nxt is not None:
                out.append(f'<rect x="{x(t):.1f}" y="{TOP - 6}" width="{max(x(nxt) - x(t), 1):.1f}" '
                           f'height="{LANE_H * len(lanes) + 4}" fill="{GAP}" opacity="0.25"/>')
                out.append(f'<text x="{(x(t) + x(nxt)) / 2:.1f}" y="{TOP + LANE_H * len(lanes) + 14}" '
                           f'text-anchor="middle" fill="#a0661a">failover gap {(nxt - t) / 1000:.2f} s</text>')
    for spans_, colour, kind in ((leading, LEADER, "leader"), (slots, SLOT, "slot")):
        for name, start, end, label in spans_:
            w = max(x(end) - x(start), 2)
            out.append(f'<rect x="{x(start):.1f}" y="{y(name) + 6}" width="{w:.1f}" height="{LANE_H - 14}" '
                       f'rx="3" fill="{colour}"><title>{escape(name)} {kind} '
                       f'{(start - t0) / 1000:.2f}–{(end - t0) / 1000:.2f} s {escape(label)}</title></rect>')
            if kind == "leader" and w > 70:
                out.append(f'<text x="{x(start) + 4:.1f}" y="{y(name) + 21}" fill="white">leader, {escape(label)}</text>')
    for i, (t, label) in enumerate(sorted(marks)):
        out.append(f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{TOP - 10 - 14 * (i % 2)}" '
                   f'y2="{TOP + LANE_H * len(lanes)}" stroke="{MARK}" stroke-dasharray="4 3"/>')
        out.append(f'<text x="{x(t) + 3:.1f}" y="{TOP - 12 - 14 * (i % 2)}" fill="{MARK}">{escape(label)}</text>')
    # the time axis, one tick a second
    axis_y = TOP + LANE_H * len(lanes) + 30
    out.append(f'<line x1="{LEFT}" x2="{WIDTH - 20}" y1="{axis_y}" y2="{axis_y}" stroke="#555"/>')
    for s in range(0, int((t1 - t0) / 1000) + 1):
        tx = x(t0 + s * 1000)
        out.append(f'<line x1="{tx:.1f}" x2="{tx:.1f}" y1="{axis_y}" y2="{axis_y + 4}" stroke="#555"/>')
        out.append(f'<text x="{tx:.1f}" y="{axis_y + 16}" text-anchor="middle">{s} s</text>')
    legend_y = axis_y + 32
    for i, (colour, text) in enumerate(((LEADER, "leader"), (SLOT, "semaphore slot held"), (GAP, "failover gap"))):
        lx = LEFT + i * 180
        out.append(f'<rect x="{lx}" y="{legend_y - 10}" width="14" height="10" fill="{colour}"/>')
        out.append(f'<text x="{lx + 20}" y="{legend_y}">{text}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
