#!/usr/bin/env python3
"""Chart of the delivery-load results: bench/results.csv -> bench/chart.svg.

Reads ``bench/results.csv`` (``--csv PATH`` to change), one row per measured
configuration, with exactly these columns (header row required):

    date,commit,label,store,system,delivered_per_s,accepted_per_s,cpu_ms_per_msg

- ``label``: the state measured (``before`` / ``after``, ``baseline`` or a short
  change name). Rows with the same ``date`` + ``label`` are one measured state;
  states appear on the chart in the order they first appear in the file.
- ``store``: ``sled``, ``postgres``, or ``-`` (for Postfix).
- ``system``: ``Tidings`` or ``Postfix``.
- the three figures are plain decimals (an empty cell means "not measured").

Writes one SVG, 900 x 420 px, no external resources (``bench/chart.svg``,
``--out PATH`` to change): two panels, "delivered/s (higher is better)" and
"CPU ms per message (lower is better)", each with one group of bars per series
(Tidings sled, Tidings PostgreSQL, Postfix) and one bar per state inside a group,
plus an optional dashed goal line per panel (``--goal-delivered N``,
``--goal-cpu X``). Missing combinations are left out. Prints a Markdown table of
the same rows to stdout (for bench/README.md); messages go to stderr.

Standard library only (Python 3.11). Run from anywhere, e.g. at the repository root:

    python3 bench/chart.py --goal-delivered 3000 --goal-cpu 0.5

Default paths are relative to this script's directory, not the current one.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from dataclasses import dataclass
from html import escape
from pathlib import Path

HERE = Path(__file__).resolve().parent

COLUMNS = [
    "date",
    "commit",
    "label",
    "store",
    "system",
    "delivered_per_s",
    "accepted_per_s",
    "cpu_ms_per_msg",
]
NUMERIC = ["delivered_per_s", "accepted_per_s", "cpu_ms_per_msg"]

# Series shown in this order when present; any other (system, store) pair follows
# in order of first appearance.
KNOWN_SERIES = [("Tidings", "sled"), ("Tidings", "postgres"), ("Postfix", "-")]
STORE_NAMES = {"sled": "sled", "postgres": "PostgreSQL", "-": ""}

# Tableau 10: distinct, readable on white, tolerable for colour-blind readers.
PALETTE = [
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#e15759",
    "#76b7b2",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
]

WIDTH, HEIGHT = 900, 420
FONT = "sans-serif"
TEXT = "#222"
MUTED = "#666"
GRID = "#ddd"
AXIS = "#888"


@dataclass
class Row:
    line: int
    date: str
    commit: str
    label: str
    store: str
    system: str
    values: dict[str, float | None]

    @property
    def state(self) -> tuple[str, str]:
        return (self.date, self.label)

    @property
    def series(self) -> tuple[str, str]:
        return (self.system, self.store)


def fail(msg: str) -> None:
    print(f"chart.py: {msg}", file=sys.stderr)
    sys.exit(1)


def read_rows(path: Path) -> list[Row]:
    try:
        f = path.open(newline="", encoding="utf-8")
    except OSError as e:
        fail(f"cannot read {path}: {e}")
    with f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None:
            fail(f"{path}: empty file, expected the header {','.join(COLUMNS)}")
        header = [h.strip() for h in header]
        if sorted(header) != sorted(COLUMNS) or len(set(header)) != len(header):
            fail(
                f"{path}:1: header must have exactly the columns {','.join(COLUMNS)}; "
                f"found {','.join(header)}"
            )
        rows: list[Row] = []
        for line, cells in enumerate(reader, start=2):
            if not cells or all(not c.strip() for c in cells):
                continue
            if len(cells) != len(header):
                fail(f"{path}:{line}: {len(cells)} cells, expected {len(header)}")
            rec = {h: c.strip() for h, c in zip(header, cells)}
            values: dict[str, float | None] = {}
            for col in NUMERIC:
                text = rec[col]
                if text == "":
                    values[col] = None
                    continue
                try:
                    v = float(text)
                except ValueError:
                    fail(f"{path}:{line}: {col} = {text!r} is not a number")
                if not math.isfinite(v) or v < 0:
                    fail(f"{path}:{line}: {col} = {text!r} must be a finite number >= 0")
                values[col] = v
            for col in ("date", "label", "store", "system"):
                if not rec[col]:
                    fail(f"{path}:{line}: {col} is empty")
            rows.append(
                Row(
                    line=line,
                    date=rec["date"],
                    commit=rec["commit"],
                    label=rec["label"],
                    store=rec["store"],
                    system=rec["system"],
                    values=values,
                )
            )
    if not rows:
        fail(f"{path}: no data rows")
    return rows


def series_name(series: tuple[str, str]) -> str:
    system, store = series
    store_name = STORE_NAMES.get(store, store)
    return f"{system} {store_name}".strip()


def ordered_unique(items):
    seen: dict = {}
    for it in items:
        seen.setdefault(it, None)
    return list(seen)


# ---------------------------------------------------------------- formatting


def fmt_int(v: float) -> str:
    return f"{round(v):,}"


def fmt_ms(v: float) -> str:
    return f"{v:.2f}"


def decimals_for(step: float) -> int:
    d = 0
    while d < 6 and abs(step * 10**d - round(step * 10**d)) > 1e-9:
        d += 1
    return d


def fmt_tick(v: float, decimals: int) -> str:
    return f"{v:,.{decimals}f}"


def text_width(text: str, size: float) -> float:
    """Rough width of `text` in a sans-serif font (DejaVu Sans is on the wide side)."""
    w = 0.0
    for ch in text:
        if ch in " .,:;|!il'()[]":
            w += 0.34
        elif ch.isupper() or ch in "mwMW%":
            w += 0.75
        else:
            w += 0.62
    return w * size


def nice_axis(needed: float, max_ticks: int = 6) -> tuple[float, float]:
    """(top, step): top >= needed, top = k * step, k <= max_ticks, step in {1, 2, 2.5, 5} x 10^n."""
    if needed <= 0:
        return 1.0, 0.2
    exp = math.floor(math.log10(needed / max_ticks))
    for e in (exp, exp + 1):
        for m in (1, 2, 2.5, 5, 10):
            step = m * 10**e
            k = math.ceil(needed / step - 1e-9)
            if k <= max_ticks:
                return k * step, step
    step = 10 ** (exp + 2)
    return math.ceil(needed / step) * step, step


# ---------------------------------------------------------------- SVG


class Svg:
    def __init__(self) -> None:
        self.parts: list[str] = []

    def add(self, s: str) -> None:
        self.parts.append(s)

    def text(
        self,
        x: float,
        y: float,
        s: str,
        size: float = 12,
        anchor: str = "start",
        fill: str = TEXT,
        weight: str | None = None,
        extra: str = "",
    ) -> None:
        w = f' font-weight="{weight}"' if weight else ""
        self.add(
            f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
            f'fill="{fill}"{w}{extra}>{escape(s)}</text>'
        )

    def line(self, x1, y1, x2, y2, stroke, width=1.0, extra="") -> None:
        self.add(
            f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" '
            f'stroke="{stroke}" stroke-width="{width}"{extra}/>'
        )

    def rect(self, x, y, w, h, fill, extra="") -> None:
        self.add(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" fill="{fill}"{extra}/>'
        )


@dataclass
class State:
    key: tuple[str, str]
    name: str
    commits: list[str]
    colour: str


def build_states(rows: list[Row]) -> list[State]:
    keys = ordered_unique(r.state for r in rows)
    label_dates: dict[str, set[str]] = {}
    for date, label in keys:
        label_dates.setdefault(label, set()).add(date)
    states = []
    for i, (date, label) in enumerate(keys):
        name = label if len(label_dates[label]) == 1 else f"{label} ({date})"
        commits = ordered_unique(
            r.commit for r in rows if r.state == (date, label) and r.commit and r.commit != "-"
        )
        states.append(State((date, label), name, commits, PALETTE[i % len(PALETTE)]))
    return states


def collect(rows: list[Row], column: str) -> dict[tuple, dict[tuple, float]]:
    """series -> state -> value (mean of duplicate rows, with a warning)."""
    acc: dict[tuple, dict[tuple, list[float]]] = {}
    for r in rows:
        v = r.values[column]
        if v is None:
            continue
        acc.setdefault(r.series, {}).setdefault(r.state, []).append(v)
    out: dict[tuple, dict[tuple, float]] = {}
    for series, by_state in acc.items():
        for state, vs in by_state.items():
            if len(vs) > 1:
                print(
                    f"chart.py: {len(vs)} rows for {series_name(series)} / "
                    f"{state[1]} ({state[0]}) {column}: charting their mean",
                    file=sys.stderr,
                )
            out.setdefault(series, {})[state] = sum(vs) / len(vs)
    return out


def wrap_label(s: str, max_width: float, size: float) -> list[str]:
    if text_width(s, size) <= max_width or " " not in s:
        return [s]
    words = s.split(" ")
    # Best split into two lines: the one with the narrowest wider line.
    best = min(
        range(1, len(words)),
        key=lambda i: max(
            text_width(" ".join(words[:i]), size), text_width(" ".join(words[i:]), size)
        ),
    )
    return [" ".join(words[:best]), " ".join(words[best:])]


def draw_panel(
    svg: Svg,
    x0: float,
    x1: float,
    top: float,
    bottom: float,
    title: str,
    data: dict[tuple, dict[tuple, float]],
    series_order: list[tuple],
    states: list[State],
    fmt_value,
    goal: float | None,
) -> None:
    plot_w = x1 - x0
    plot_h = bottom - top
    svg.text((x0 + x1) / 2, top - 12, title, size=13, anchor="middle", weight="bold")

    groups = [s for s in series_order if s in data]
    if not groups:
        svg.line(x0, bottom, x1, bottom, AXIS)
        svg.text((x0 + x1) / 2, (top + bottom) / 2, "no data", size=12, anchor="middle", fill=MUTED)
        return

    # Bar geometry: same bar width in every group, sized for the fullest group.
    max_bars = max(len(data[s]) for s in groups)
    slot = plot_w / len(groups)
    inner = slot * 0.78
    pitch = min(inner / max_bars, 64.0)  # bar + gap
    bar_w = pitch * 0.86

    # Value labels: horizontal at 11 px, else 10 px, else rotated to run up from the bar.
    labels = [fmt_value(v) for s in groups for v in data[s].values()]
    value_size = 11
    if max(text_width(t, value_size) for t in labels) > pitch - 2:
        value_size = 10
    longest = max(text_width(t, value_size) for t in labels)
    rotate = longest > pitch - 2
    if rotate:
        value_size = 11
        longest = max(text_width(t, value_size) for t in labels)
    label_room = (longest + 8) if rotate else (value_size + 7)

    vmax = max(v for s in groups for v in data[s].values())
    # Leave room above the tallest bar for its value label.
    needed = vmax * plot_h / max(plot_h - label_room, plot_h * 0.4)
    if goal is not None:
        needed = max(needed, goal * 1.02)
    axis_top, step = nice_axis(needed)
    decimals = decimals_for(step)

    def y_of(v: float) -> float:
        return bottom - v / axis_top * plot_h

    # Gridlines and tick labels (from 0).
    k = 0
    while k * step <= axis_top + step * 1e-6:
        v = k * step
        y = y_of(v)
        if k > 0:
            svg.line(x0, y, x1, y, GRID)
        svg.text(x0 - 6, y + 4, fmt_tick(v, decimals), size=11, anchor="end", fill=MUTED)
        k += 1
    svg.line(x0, top, x0, bottom, AXIS)
    svg.line(x0, bottom, x1, bottom, AXIS)

    state_index = {st.key: st for st in states}
    value_labels: list[tuple[float, float, str]] = []
    for gi, series in enumerate(groups):
        cx = x0 + slot * (gi + 0.5)
        present = [st.key for st in states if st.key in data[series]]
        start = cx - pitch * len(present) / 2
        for bi, key in enumerate(present):
            v = data[series][key]
            bx = start + pitch * bi + (pitch - bar_w) / 2
            by = y_of(v)
            h = bottom - by
            st = state_index[key]
            svg.add(
                f'<rect x="{bx:.1f}" y="{by:.1f}" width="{bar_w:.1f}" height="{h:.1f}" '
                f'fill="{st.colour}"><title>{escape(series_name(series))}, '
                f"{escape(st.name)}: {escape(fmt_value(v))}</title></rect>"
            )
            value_labels.append((bx + bar_w / 2, by, fmt_value(v)))
        # Group label under the axis, wrapped onto two lines if too wide.
        lines = wrap_label(series_name(series), slot - 6, 12)
        for li, s in enumerate(lines):
            svg.text(cx, bottom + 17 + 14 * li, s, size=12, anchor="middle")

    if goal is not None:
        gy = y_of(goal)
        svg.line(x0, gy, x1, gy, "#c0392b", width=1.5, extra=' stroke-dasharray="6 4"')
        svg.text(x1 + 4, gy - 2, "goal", size=11, fill="#c0392b", weight="bold")
        svg.text(x1 + 4, gy + 11, fmt_value(goal), size=10, fill="#c0392b")

    # Value labels last, with a white halo, so a goal line never hides them.
    halo = ' stroke="#fff" stroke-width="3" stroke-linejoin="round" paint-order="stroke"'
    for lx, by, s in value_labels:
        if rotate:
            tx = lx + value_size * 0.35
            svg.text(tx, by - 5, s, size=value_size,
                     extra=f'{halo} transform="rotate(-90 {tx:.1f} {by - 5:.1f})"')
        else:
            svg.text(lx, by - 5, s, size=value_size, anchor="middle", extra=halo)


def render(
    rows: list[Row],
    goal_delivered: float | None,
    goal_cpu: float | None,
    title_prefix: str = "delivery-load",
    rate_label: str = "delivered/s",
) -> str:
    states = build_states(rows)
    series_order = [s for s in KNOWN_SERIES if any(r.series == s for r in rows)]
    series_order += [s for s in ordered_unique(r.series for r in rows) if s not in series_order]

    svg = Svg()
    svg.add(
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="{FONT}">'
    )
    svg.rect(0, 0, WIDTH, HEIGHT, "#fff")

    dates = sorted(set(r.date for r in rows))
    if len(dates) <= 3:
        when = ", ".join(dates)
    else:
        when = f"{dates[0]} to {dates[-1]} ({len(dates)} dates)"
    title = f"{title_prefix}: Tidings vs Postfix, {when}"
    svg.add(f"<title>{escape(title)}</title>")
    svg.text(WIDTH / 2, 24, title, size=15, anchor="middle", weight="bold")

    # Legend: one entry per state, centred, wrapped onto more rows if needed.
    size = 12
    entries = []
    for st in states:
        note = f" ({', '.join(st.commits)})" if st.commits else ""
        w = 14 + 5 + text_width(st.name, size) + text_width(note, 11)
        entries.append((st, note, w))
    gap = 22
    legend_rows: list[list] = [[]]
    row_w = 0.0
    for e in entries:
        if legend_rows[-1] and row_w + gap + e[2] > WIDTH - 40:
            legend_rows.append([])
            row_w = 0.0
        row_w += (gap if legend_rows[-1] else 0) + e[2]
        legend_rows[-1].append(e)
    y = 48
    for lr in legend_rows:
        total = sum(e[2] for e in lr) + gap * (len(lr) - 1)
        x = (WIDTH - total) / 2
        for st, note, w in lr:
            svg.rect(x, y - 11, 14, 14, st.colour)
            svg.add(
                f'<text x="{x + 19:.1f}" y="{y:.1f}" font-size="{size}" fill="{TEXT}">'
                f"{escape(st.name)}"
                + (f'<tspan fill="{MUTED}" font-size="11">{escape(note)}</tspan>' if note else "")
                + "</text>"
            )
            x += w + gap
        y += 20

    top = y + 32  # room for the panel titles
    bottom = HEIGHT - 42  # room for two-line group labels
    panels = [
        (f"{rate_label} (higher is better)", "delivered_per_s", fmt_int, goal_delivered),
        ("CPU ms per message (lower is better)", "cpu_ms_per_msg", fmt_ms, goal_cpu),
    ]
    half = WIDTH / 2
    for i, (ptitle, column, fmt, goal) in enumerate(panels):
        px = half * i
        draw_panel(
            svg,
            x0=px + 56,
            x1=px + half - 44,
            top=top,
            bottom=bottom,
            title=ptitle,
            data=collect(rows, column),
            series_order=series_order,
            states=states,
            fmt_value=fmt,
            goal=goal,
        )
    svg.add("</svg>")
    return "\n".join(svg.parts) + "\n"


def markdown(rows: list[Row]) -> str:
    def cell(s: str) -> str:
        return s.replace("|", "\\|") if s else "–"

    def num(v: float | None, fmt) -> str:
        return "–" if v is None else fmt(v)

    out = [
        "| date | commit | label | system | store | delivered/s | accepted/s | CPU ms per message |",
        "|---|---|---|---|---|---:|---:|---:|",
    ]
    for r in rows:
        store = STORE_NAMES.get(r.store, r.store)
        commit = f"`{r.commit}`" if r.commit and r.commit != "-" else "–"
        out.append(
            f"| {cell(r.date)} | {commit} | {cell(r.label)} | {cell(r.system)} | {cell(store)} "
            f"| {num(r.values['delivered_per_s'], fmt_int)} "
            f"| {num(r.values['accepted_per_s'], fmt_int)} "
            f"| {num(r.values['cpu_ms_per_msg'], fmt_ms)} |"
        )
    return "\n".join(out)


def positive(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number")
    if not math.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be > 0")
    return v


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description="Chart bench/results.csv (delivery-load figures) as an SVG; "
        "print the rows as a Markdown table."
    )
    p.add_argument("--csv", type=Path, default=HERE / "results.csv",
                   help="input CSV (default: results.csv next to this script)")
    p.add_argument("--out", type=Path, default=HERE / "chart.svg",
                   help="output SVG (default: chart.svg next to this script)")
    p.add_argument("--goal-delivered", type=positive, metavar="N",
                   help="draw a dashed goal line at N delivered/s")
    p.add_argument("--goal-cpu", type=positive, metavar="X",
                   help="draw a dashed goal line at X CPU ms per message")
    p.add_argument("--title", default="delivery-load", metavar="TEXT",
                   help="the chart's title before \": Tidings vs Postfix\" (default: delivery-load)")
    p.add_argument("--rate-label", default="delivered/s", metavar="TEXT",
                   help="what the delivered_per_s column is, for its panel (default: delivered/s)")
    args = p.parse_args(argv)

    rows = read_rows(args.csv)
    svg = render(rows, args.goal_delivered, args.goal_cpu, args.title, args.rate_label)
    try:
        args.out.write_text(svg, encoding="utf-8")
    except OSError as e:
        fail(f"cannot write {args.out}: {e}")
    print(markdown(rows))
    print(f"chart.py: wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
