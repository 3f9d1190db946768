"""Summarises precision-results.jsonl (precision-run.sh) as Markdown: the CPU, per configuration the median over
the rounds [range] of CPU ms per forward (process CPU time; on 2 threads it counts both) and of the wall median,
and issue 34's Done-when table, each ratio taken within a round and then the median [range] over rounds:
  bf16 / OpenVINO default (<= 0.9), int8 / OpenVINO int8-default (<= 0.9), fp32 / OpenVINO fp32 (<= 1.0): CPU ms,
  1 thread; 2 threads against 1, per precision (>= 1.7): forwards per second from the wall medians; the top-100
  overlap with the fp32 golden against each peer's at the same precision (>= peer - 5). A precision the engine
  refused is its row, with the refusal.   usage: python3 precision-summary.py [FILE]"""
import json, statistics, sys
from collections import defaultdict

lines = [json.loads(l) for l in open(sys.argv[1] if len(sys.argv) > 1 else "precision-results.jsonl") if l.strip()]
head = next((l for l in lines if "cpu" in l), {})
rows = [l for l in lines if "peer" in l]
rounds = sorted({r["round"] for r in rows})
ov_default = next((l["openvino_default_inference_precision"] for l in lines if "openvino_default_inference_precision" in l), "?")


def key(r):
    return (r["peer"], r["precision"], r.get("threads", 1))


# OpenVINO fp32 is measured by both peer scripts each round: a configuration measured twice in a round counts
# as the mean of the two (numbers), the first (anything else).
runs = defaultdict(lambda: defaultdict(list))
for r in rows: runs[key(r)][r["round"]].append(r)
by = defaultdict(dict)
for k, rs in runs.items():
    for n, same in rs.items():
        by[k][n] = {f: (statistics.mean(x[f] for x in same) if isinstance(v, (int, float)) and not isinstance(v, bool) and all(f in x for x in same) else v)
                    for f, v in same[0].items()}
        by[k][n]["measured"] = len(same)
loads = [r["load1"] for r in rows]
print(f"CPU: {head.get('cpu', '?')} ({head.get('cores', '?')} cores; {head.get('cpu_flags', '?')}); commit {head.get('commit', '?')}, {head.get('date', '?')}")
print(f"{len(rounds)} rounds; 1-minute load {min(loads):.1f}-{max(loads):.1f} over the run; OpenVINO's default precision here: {ov_default}\n")


def med(v):
    return f"{statistics.median(v):.0f} [{min(v):.0f}-{max(v):.0f}]" if v else "–"


print("| configuration | threads | CPU ms/forward, median [range] | wall ms median | top-100 vs fp32 golden |")
print("|---|---|---|---|---|")
for k, rs in by.items():
    r0 = next(iter(rs.values()))
    name = f"{'ours' if k[0] == 'engine' else k[0]} {k[1]}" + (f" ({r0['kernels']})" if "kernels" in r0 else "")
    if "refused" in r0:
        print(f"| {name} | {k[2]} | refused: {r0['refused'].strip()} | | |")
        continue
    print(f"| {name} | {k[2]} | {med([r['cpu_ms_per_forward'] for r in rs.values()])} | "
          f"{med([r['median_ms'] for r in rs.values()])} | {sorted({r['top100_overlap'] for r in rs.values()})} |")


def ratio(a, b, field="cpu_ms_per_forward"):
    """Per round a[field] / b[field], both measured; None when no round has both."""
    x = [by[a][n][field] / by[b][n][field] for n in rounds
         if n in by.get(a, {}) and n in by.get(b, {}) and field in by[a][n] and field in by[b][n]]
    return x or None


def refusal(k):
    r = next(iter(by.get(k, {}).values()), None)
    return r.get("refused") if r else "not measured"


def row(what, x, gate, holds):
    if isinstance(x, str):
        print(f"| {what} | {x} | {gate} | – |")
    else:
        print(f"| {what} | {statistics.median(x):.2f} [{min(x):.2f}-{max(x):.2f}] | {gate} | {'yes' if holds(statistics.median(x)) else 'NO'} |")


print("\n| Done when (issue 34) | per-round ratio, median [range] | target | holds (median) |\n|---|---|---|---|")
for ours, peer, gate in (("bf16", ("openvino", "default", 1), 0.9), ("int8", ("openvino", "int8-default", 1), 0.9),
                         ("fp32", ("openvino", "fp32", 1), 1.0)):
    k = ("engine", ours, 1)
    x = ratio(k, peer)
    row(f"ours {ours} / {peer[0]} {peer[1]}, CPU ms, 1 thread", x if x else f"({refusal(k) or refusal(peer)})", f"<= {gate}", lambda v, g=gate: v <= g)
for p in ("fp32", "bf16", "int8"):
    x = ratio(("engine", p, 1), ("engine", p, 2), "median_ms")  # wall(1)/wall(2) = forwards/s(2)/forwards/s(1)
    row(f"ours {p}: 2 threads / 1 thread, forwards per second", x if x else f"({refusal(('engine', p, 2)) or refusal(('engine', p, 1))})", ">= 1.7", lambda v: v >= 1.7)

print("\n| top-100 overlap with the fp32 golden | ours | peer | ours - peer | target |\n|---|---|---|---|---|")
for ours, peers in (("fp32", (("openvino", "fp32"), ("onnxruntime", "fp32"))),
                    ("bf16", (("openvino", "default"),)),
                    ("int8", (("openvino", "int8-default"), ("openvino", "int8"), ("onnxruntime", "int8")))):
    o = next(iter(by.get(("engine", ours, 1), {}).values()), None)
    for peer in peers:
        pr = next(iter(by.get(peer + (1,), {}).values()), None)
        if o is None or pr is None or "refused" in o:
            print(f"| ours {ours} vs {peer[0]} {peer[1]} | {'refused' if o and 'refused' in o else '–'} | {pr['top100_overlap'] if pr else '–'} | – | >= -5 |")
            continue
        d = o["top100_overlap"] - pr["top100_overlap"]
        print(f"| ours {ours} vs {peer[0]} {peer[1]} | {o['top100_overlap']} | {pr['top100_overlap']} | {d:+d} | >= -5: {'yes' if d >= -5 else 'NO'} |")
