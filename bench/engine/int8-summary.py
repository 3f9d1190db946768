"""Summarises int8-results.jsonl (int8-run.sh) as a Markdown table: per configuration the median CPU ms per
forward over the rounds [range], RSS, the error against the fp32 golden, and the per-round ratios the issue's
targets are written in (int8 / our fp32, int8 / the faster peer int8).   usage: python3 int8-summary.py [FILE]"""
import json, statistics, sys
from collections import defaultdict

rows = [json.loads(l) for l in open(sys.argv[1] if len(sys.argv) > 1 else "int8-results.jsonl") if l.strip()]
def key(r):
    if r["peer"] == "engine":
        return f"engine {r['precision']} ({r['kernels']}{', RFDETR_CPU_ISA=' + r['isa_cap'] if r['isa_cap'] else ''})"
    return f"{r['peer']} {r['precision']}"
by = defaultdict(dict)
for r in rows: by[key(r)][r["round"]] = r
rounds = sorted({r["round"] for r in rows})
loads = [r["load1"] for r in rows]
print(f"{len(rounds)} rounds, 1 thread, CPU ms per forward; 1-minute load {min(loads):.1f}-{max(loads):.1f} on 2 cores\n")
print("| configuration | CPU ms/forward, median [range] | RSS MiB | top-100 overlap | logits max-abs | boxes max-abs |")
print("|---|---|---|---|---|---|")
for k, rs in by.items():
    v = [r["cpu_ms_per_forward"] for r in rs.values()]; r0 = next(iter(rs.values()))
    print(f"| {k} | {statistics.median(v):.0f} [{min(v):.0f}-{max(v):.0f}] | {r0.get('rss_mib_after_warmup', '–')} | "
          f"{r0['top100_overlap']} | {r0['maxabs_logits']:.3g} | {r0['maxabs_pred_boxes']:.3g} |")
def ratio(a, b):
    x = []
    for n in rounds:
        try: x.append(by[a][n]["cpu_ms_per_forward"] / b(n))
        except (KeyError, ValueError): pass  # the round lacks one side
    return f"{statistics.median(x):.2f} [{min(x):.2f}-{max(x):.2f}]" if x else "–"
fast = lambda n: min(by[p][n]["cpu_ms_per_forward"] for p in ("onnxruntime int8", "openvino int8") if n in by.get(p, {}))
# The fp32 row an int8 row is compared with: the one running the same float kernel (the part before "+").
f32_of = {}
for k, rs in by.items():
    r0 = next(iter(rs.values()))
    if r0["peer"] == "engine" and r0["precision"] == "fp32": f32_of.setdefault(r0["kernels"], k)
int8_rows = [k for k in by if k.startswith("engine int8")]
print("\n| per-round ratio | median [range] |\n|---|---|")
for k in int8_rows:
    f32 = f32_of.get(next(iter(by[k].values()))["kernels"].split("+")[0])
    if f32:
        print(f"| {k} / {f32} | {ratio(k, lambda n: by[f32][n]['cpu_ms_per_forward'])} |")
    if "onnxruntime int8" in by:
        print(f"| {k} / the faster peer int8 of the round | {ratio(k, fast)} |")
for k in int8_rows:  # the other int8 kernels against the first (the CPU's best) in the same round
    if k != int8_rows[0]:
        print(f"| {int8_rows[0]} / {k} | {ratio(int8_rows[0], lambda n: by[k][n]['cpu_ms_per_forward'])} |")
