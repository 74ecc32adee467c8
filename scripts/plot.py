#!/usr/bin/python3
"""Plots from sparsp sweep output and traces (Debian python3-matplotlib; no other dependency).

  plot.py speedup RESULTS.csv|.jsonl --x AXIS [--y speedup] [--by policy] [--facet COL] -o OUT
      one line per policy (or --by column) of a metric against a sweep axis
  plot.py volume  RESULTS.csv|.jsonl [--x sparsity] [--y volume_bytes] -o OUT
      communication volume (GB) against sparsity, one line per policy
  plot.py line    RESULTS.csv|.jsonl --x AXIS --y METRIC [--facet COL] -o OUT
      any metric against an axis, one line per policy
  plot.py bars    RESULTS.csv|.jsonl --x AXIS [--y e2e_time_s] -o OUT
      grouped bars (policies side by side) for a categorical axis
  plot.py gantt   TRACE.json [--links 4] [--layer-only] -o OUT
      Gantt chart of one simulated layer from a Chrome/Perfetto trace (`simulate --trace`):
      one lane per GPU track (compute streams, copy engines), and the busiest link counters

Common options: --where COL=VALUE / COL~TEXT (repeatable row filters), --facet COL (one panel
per value), --by COL (line grouping), --logx, --title, --ylabel.
OUT is a path without extension: OUT.png and OUT.svg are written. A column name that is not in
the results (--x, --y, --by, --facet, --where, or their defaults) is an error (exit 2) listing the
columns; so is an unreadable or malformed input file (one line "plot: FILE: what", exit 2). Rows with status != "ok" are left out (and counted on stderr). Rows are grouped by `--by` (default: the first of
policy / name / scheme present); several rows for the same (group, x) are averaged and said so.
"""
import argparse
import csv
import io
import json
import math
import os
import sys
from collections import OrderedDict, defaultdict

try:
    import matplotlib
except ImportError:
    print(f"plot: needs matplotlib (Debian: apt-get install python3-matplotlib; then run it with "
          f"/usr/bin/python3); {sys.executable} has none", file=sys.stderr)
    sys.exit(2)

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# Deterministic SVG output (no random ids, no date).
matplotlib.rcParams["svg.hashsalt"] = "sparsp"
matplotlib.rcParams["svg.fonttype"] = "none"
METADATA = {"svg": {"Date": None}, "png": {"Software": None}}


class InputError(Exception):
    """Bad input: main prints "plot: <message>" on stderr and exits 2."""


def fail(message):
    raise InputError(message)


def apply_where(rows, wheres):
    """--where COL=VALUE (equal, as printed) or COL~TEXT (contains); all must hold."""
    for w in wheres or []:
        if "~" in w:
            col, text = w.split("~", 1)
            rows = [r for r in rows if text in label(r.get(col))]
        elif "=" in w:
            col, val = w.split("=", 1)
            rows = [r for r in rows if label(r.get(col)) == val]
        else:
            fail(f"--where {w}: expected COL=VALUE or COL~TEXT")
        if not rows:
            fail(f"--where {w}: no rows left")
    return rows


def read_rows(path):
    """(rows with status ok, column names in file order)."""
    rows, columns = [], []
    if path.endswith(".csv"):
        with open(path, newline="") as f:
            text = f.read()
        if text and not text.endswith("\n"):
            fail(f"{path}:{text.count(chr(10)) + 1}: the last row is cut off (no newline at the "
                 "end; is the sweep still writing it?)")
        table = list(csv.reader(io.StringIO(text, newline="")))
        columns = table[0] if table else []
        for number, fields in enumerate(table[1:], 2):
            if len(fields) != len(columns):
                fail(f"{path}:{number}: {len(fields)} fields, but the header has {len(columns)}")
            rows.append(dict(zip(columns, fields)))
        if not table:
            fail(f"{path}: empty file (no header)")
    else:
        with open(path) as f:
            for number, line in enumerate(f, 1):
                if line.endswith("\n"):
                    try:
                        row = json.loads(line)
                    except ValueError as e:
                        fail(f"{path}:{number}: not a JSON Lines row ({e})")
                    if not isinstance(row, dict):
                        fail(f"{path}:{number}: not a JSON object")
                    rows.append(row)
        columns = list(OrderedDict.fromkeys(k for r in rows for k in r))
    ok = [r for r in rows if r.get("status", "ok") == "ok"]
    if len(ok) != len(rows):
        print(f"plot: {path}: {len(rows) - len(ok)} skipped rows left out", file=sys.stderr)
    return ok, columns


def where_column(w):
    """The column of a --where COL=VALUE / COL~TEXT filter (None if malformed)."""
    if "~" in w:
        return w.split("~", 1)[0]
    if "=" in w:
        return w.split("=", 1)[0]
    return None


def read_checked(args, y):
    """Rows of args.results after --where; every column an option names (--x, --y, --by,
    --facet, --where, including their defaults) must exist, else exit 2 listing the columns."""
    rows, columns = read_rows(args.results)
    named = [("--x", args.x), ("--y", y), ("--by", args.by), ("--facet", args.facet)]
    named += [("--where", where_column(w)) for w in args.where or [] if where_column(w)]
    for opt, col in named:
        if col is not None and col not in columns:
            print(f"plot: {args.results}: {opt} {col}: no such column (columns: "
                  f"{', '.join(columns) or 'none'})", file=sys.stderr)
            sys.exit(2)
    return apply_where(rows, args.where)


def num(v):
    if v is None or v == "":
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def label(v):
    if isinstance(v, (dict, list)):
        return json.dumps(v, separators=(",", ":"))
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def pick_group_col(rows, wanted):
    if wanted:
        return wanted
    for c in ("policy", "name", "scheme"):
        if rows and c in rows[0]:
            return c
    return None


def series(rows, x, y, by, facet_value=None, facet=None, source="input"):
    """{group: [(x, mean y)]} in first-appearance order of groups, x sorted numerically if numeric."""
    acc = OrderedDict()
    for r in rows:
        if facet and label(r.get(facet)) != facet_value:
            continue
        yv = num(r.get(y))
        if yv is None:
            continue
        g = label(r.get(by)) if by else y
        acc.setdefault(g, defaultdict(list))[label(r.get(x))].append(yv)
    out = OrderedDict()
    averaged = False
    for g, d in acc.items():
        pts = []
        for xv, ys in d.items():
            averaged |= len(ys) > 1
            pts.append((xv, sum(ys) / len(ys)))
        if all(num(p[0]) is not None for p in pts):
            pts.sort(key=lambda p: num(p[0]))
        out[g] = pts
    if not out:
        if not rows:
            fail(f"{source}: no rows to plot (only a header, or every row skipped or filtered out)")
        fail(f"{source}: no numeric values of column '{y}' (columns: {', '.join(rows[0].keys())})")
    if averaged:
        print(f"plot: several rows per ({by}, {x}): {y} averaged", file=sys.stderr)
    return out


def save(fig, out):
    d = os.path.dirname(out)
    if not os.path.basename(out):
        fail(f"{out}: -o takes a path without extension (e.g. plots/speedup), not a folder")
    if d and not os.path.isdir(d):
        fail(f"{out}: folder {d} does not exist")
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(f"{out}.{ext}", dpi=130, metadata=METADATA[ext])
    plt.close(fig)
    print(f"plot: wrote {out}.png, {out}.svg", file=sys.stderr)


def line_plot(args, y_default, y_scale=1.0, y_label=None):
    y = args.y or y_default
    rows = read_checked(args, y)
    by = pick_group_col(rows, args.by)
    facets = [None]
    if args.facet:
        facets = list(OrderedDict.fromkeys(label(r.get(args.facet)) for r in rows))
    fig, axes = plt.subplots(1, len(facets), figsize=(5.2 * len(facets), 3.8), squeeze=False,
                             sharey=True)
    for ax, fv in zip(axes[0], facets):
        data = series(rows, args.x, y, by, fv, args.facet, args.results)
        numeric = all(num(x) is not None for pts in data.values() for x, _ in pts)
        cats = list(OrderedDict.fromkeys(x for pts in data.values() for x, _ in pts))
        for g, pts in data.items():
            xs = [num(x) if numeric else cats.index(x) for x, _ in pts]
            ax.plot(xs, [v * y_scale for _, v in pts], marker="o", label=g)
        if not numeric:
            ax.set_xticks(range(len(cats)))
            ax.set_xticklabels(cats, rotation=20, ha="right")
        if args.logx:
            ax.set_xscale("log", base=2)
        if y == "speedup":
            ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_xlabel(args.x)
        ax.set_ylabel(y_label or y)
        if fv is not None:
            ax.set_title(f"{args.facet} = {fv}")
        ax.grid(alpha=0.3)
    if args.title:
        fig.suptitle(args.title)
    axes[0][-1].legend(fontsize=7, loc="best")
    save(fig, args.output)


def cmd_bars(args):
    y = args.y or "e2e_time_s"
    rows = read_checked(args, y)
    by = pick_group_col(rows, args.by)
    data = series(rows, args.x, y, by, source=args.results)
    cats = list(OrderedDict.fromkeys(x for pts in data.values() for x, _ in pts))
    fig, ax = plt.subplots(figsize=(max(5.0, 1.2 * len(cats) * max(1, len(data)) / 3), 3.8))
    w = 0.8 / max(1, len(data))
    for i, (g, pts) in enumerate(data.items()):
        d = dict(pts)
        xs = [j + (i - (len(data) - 1) / 2) * w for j in range(len(cats))]
        ax.bar(xs, [d.get(c, math.nan) for c in cats], w, label=g)
    ax.set_xticks(range(len(cats)))
    ax.set_xticklabels(cats)
    ax.set_xlabel(args.x)
    ax.set_ylabel(y)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7)
    if args.title:
        ax.set_title(args.title)
    save(fig, args.output)


# ---- Gantt from a Chrome trace -------------------------------------------------------------------

def load_trace(path):
    with open(path) as f:
        try:
            doc = json.load(f)
        except ValueError as e:
            fail(f"{path}: not a JSON trace ({e})")
    try:
        return read_trace_events(doc)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        what = f"missing field {e}" if isinstance(e, KeyError) else str(e)
        fail(f"{path}: not a Chrome/Perfetto trace (an event: {what})")


def read_trace_events(doc):
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise TypeError("traceEvents is not a list")
    pnames, tnames = {}, {}
    spans, counters = [], defaultdict(list)
    for e in events:
        ph = e.get("ph")
        if ph == "M" and e.get("name") == "process_name":
            pnames[e["pid"]] = e["args"]["name"]
        elif ph == "M" and e.get("name") == "thread_name":
            tnames[(e["pid"], e["tid"])] = e["args"]["name"]
        elif ph == "X":
            # Fields the Gantt chart reads: a KeyError/ValueError here names a malformed event.
            e["pid"], e["tid"], float(e["ts"]), float(e.get("dur", 0))
            spans.append(e)
        elif ph == "C":
            for k, v in (e.get("args") or {}).items():
                name = e["name"] if len(e.get("args", {})) == 1 else f"{e['name']}.{k}"
                counters[name].append((float(e["ts"]), float(v)))
    return pnames, tnames, spans, counters


def kind_of(track, span):
    """Lane kind from the track (thread) name that `simulate --trace` writes: compute, ceN (copy
    engines), sm (SM-driven communication kernels), host (host-driven copies)."""
    t = str(track).lower()
    if t.startswith("ce") or "copy" in t:
        return "copy engine"
    if t.startswith("sm") or "nccl" in t:
        return "comm kernel (SMs)"
    if t.startswith("host") or "stag" in t:
        return "host copy"
    if t.startswith("compute") or span.get("cat") == "compute":
        return "compute"
    return span.get("cat") or "other"


def cmd_gantt(args):
    pnames, tnames, spans, counters = load_trace(args.trace)
    if not spans:
        fail(f"{args.trace}: no complete ('X') events")
    tracks = OrderedDict()
    for s in sorted(spans, key=lambda s: (s["pid"], s["tid"], float(s["ts"]))):
        key = (s["pid"], s["tid"])
        tracks.setdefault(key, []).append(s)
    # Busiest links: counters ranked by time integral of their value.
    def integral(pts):
        pts = sorted(pts)
        return sum((b[0] - a[0]) * a[1] for a, b in zip(pts, pts[1:]))
    # Directional links only (the duplex "a<->b" and host memory counters repeat them).
    links = {k: v for k, v in counters.items() if "<->" not in k and not k.endswith(".mem")}
    busiest = sorted(links.items(), key=lambda kv: (-integral(kv[1]), kv[0]))[: args.links]
    t0 = min(float(s["ts"]) for s in spans)
    t1 = max(float(s["ts"]) + float(s.get("dur", 0)) for s in spans)
    colors = {"compute": "#4c72b0", "copy engine": "#dd8452", "comm kernel (SMs)": "#c44e52",
              "host copy": "#8172b3", "other": "#937860"}
    n = len(tracks)
    heights = [max(2.0, 0.28 * n)] + ([1.6] if busiest else [])
    fig, axes = plt.subplots(len(heights), 1, figsize=(10, sum(heights) + 0.6), sharex=True,
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    ax = axes[0][0]
    labels, seen = [], set()
    for i, (key, ss) in enumerate(tracks.items()):
        pid, tid = key
        labels.append(f"{pnames.get(pid, pid)} {tnames.get(key, tid)}")
        for s in ss:
            k = kind_of(str(tnames.get(key, tid)), s)
            c = colors.get(k, colors["other"])
            ax.barh(i, float(s.get("dur", 0)) / 1e3, left=(float(s["ts"]) - t0) / 1e3, height=0.7,
                    color=c, edgecolor="white", linewidth=0.3,
                    label=None if k in seen else k)
            seen.add(k)
    ax.set_yticks(range(n))
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.legend(fontsize=7, loc="upper right")
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(args.title or f"{os.path.basename(args.trace)}: one layer")
    if busiest:
        cax = axes[1][0]
        for name, pts in busiest:
            pts = sorted(pts)
            cax.step([(t - t0) / 1e3 for t, _ in pts], [v for _, v in pts], where="post",
                     label=name)
        cax.set_ylabel("GB/s (busiest links)", fontsize=8)
        cax.legend(fontsize=6, loc="upper right")
        cax.grid(alpha=0.3)
    axes[-1][0].set_xlabel("time (ms)")
    axes[-1][0].set_xlim(0, (t1 - t0) / 1e3 * 1.01)
    save(fig, args.output)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name, y_default in (("speedup", "speedup"), ("volume", "volume_bytes"), ("line", None),
                            ("bars", None)):
        p = sub.add_parser(name)
        p.add_argument("results")
        p.add_argument("--x", default="sparsity" if name == "volume" else None,
                       required=name != "volume")
        p.add_argument("--y", default=None)
        p.add_argument("--by", default=None, help="column naming the lines (default: policy)")
        p.add_argument("--facet", default=None, help="one panel per value of this column")
        p.add_argument("--logx", action="store_true")
        p.add_argument("--where", action="append", help="keep rows with COL=VALUE or COL~TEXT")
        p.add_argument("--ylabel", default=None)
        p.add_argument("--title", default=None)
        p.add_argument("-o", "--output", required=True, help="path without extension")
    g = sub.add_parser("gantt")
    g.add_argument("trace")
    g.add_argument("--links", type=int, default=4, help="busiest link counters shown")
    g.add_argument("--title", default=None)
    g.add_argument("-o", "--output", required=True)
    args = ap.parse_args(argv)
    try:
        run(args)
    except InputError as e:
        print(f"plot: {e}", file=sys.stderr)
        sys.exit(2)
    except OSError as e:
        print(f"plot: {e.filename or args.output}: {e.strerror or e}", file=sys.stderr)
        sys.exit(2)
    except UnicodeDecodeError as e:
        path = getattr(args, "results", None) or getattr(args, "trace", None)
        print(f"plot: {path}: not a text file ({e.reason})", file=sys.stderr)
        sys.exit(2)


def run(args):
    if args.cmd == "speedup":
        line_plot(args, "speedup", y_label=args.ylabel)
    elif args.cmd == "line":
        if not args.y:
            fail("line needs --y")
        line_plot(args, args.y, y_label=args.ylabel)
    elif args.cmd == "volume":
        if args.y in (None, "volume_bytes"):
            args.y = "volume_bytes"
            line_plot(args, "volume_bytes", 1e-9, "volume per step (GB)")
        else:
            line_plot(args, args.y)
    elif args.cmd == "bars":
        cmd_bars(args)
    else:
        cmd_gantt(args)


if __name__ == "__main__":
    main()
