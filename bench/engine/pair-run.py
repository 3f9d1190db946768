"""Our engine against one peer (or another build of itself), forward by forward (not a test): int8-bench --paced runs
in a child process and this process runs the peer; their forwards alternate (ours, peer, peer, ours, ... so neither
always goes first), each timed by its own process's CPU clock, one thread each. A pair is two adjacent forwards, one
of each, and its ratio (ours / peer) is taken inside the pair, so a machine whose speed drifts minute to minute (the
Zen 3 VM read the same binary at 1213-1611 ms within one run) moves both sides of a ratio alike. Prints one JSON
line: the median ratio with the 95 % confidence interval of that median (order statistics, no distribution assumed),
the median CPU ms of each side, each side's top-100 overlap with the fp32 golden, and every forward's CPU ms.
usage: $PEERS_DIR/venv/bin/python bench/engine/pair-run.py PRECISION [PAIRS] [--against INT8_BENCH]
       python3 bench/engine/pair-run.py threads fp32|int8|bf16 [PAIRS]
  PRECISION: fp32 (OpenVINO fp32 forced), bf16 (OpenVINO's default: bf16 where the CPU has it), int8 (OpenVINO int8
  with its default float parts), ort-int8 (ONNX Runtime int8, upstream's recipe); PAIRS default 30.
  --against INT8_BENCH: the other side is that int8-bench binary (another build of the engine, e.g. main's) at the
  same precision instead of a peer: an A/B of two engine builds, forward by forward (any python3 runs it then).
  threads: the engine on 1 thread against itself on 2 threads (two int8-bench children at that precision); a pair's
  ratio is the 1-thread forward's wall ms over the 2-thread one's, i.e. 2-thread / 1-thread in forwards per second.
  env: WEIGHTS (default sidecar/build/test-weights/seed-0x1), PEERS_DIR, PEERS_SRC (as precision-run.sh),
  RFDETR_CPU_ISA (caps our kernels)."""
import json, math, os, statistics, subprocess, sys, time

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.normpath(os.path.join(here, "..", ".."))
args = sys.argv[1:]
against = None
if "--against" in args:
    i = args.index("--against")
    against = args[i + 1] if i + 1 < len(args) else sys.exit("pair-run.py: --against needs an int8-bench path")
    del args[i:i + 2]
PEER = {"fp32": ("openvino fp32 (forced)", "fp32", lambda: P.ov_runner(P.fp32_onnx, True)[0]),
        "bf16": ("openvino default", "bf16", lambda: B.ov_default(P.fp32_onnx)[0]),
        "int8": ("openvino int8, default float parts", "int8", lambda: (P.build_ov(), B.ov_default(P.ov_int8)[0])[1]),
        "ort-int8": ("onnxruntime int8", "int8", lambda: (P.build_ort(), P.ort_runner(P.ort_int8)[0])[1])}
scaling = bool(args) and args[0] == "threads"
if scaling:
    del args[0]
if not against and not scaling:
    sys.path.insert(0, os.environ.get("PEERS_SRC", os.path.join(root, "..", "shared", "peers")))
    sys.argv = sys.argv[:1] + ["1"]  # the peer scripts read their thread count from argv[1]
    import numpy as np
    import int8_peers as P
    import bf16_peers as B


def median_ci(xs):
    """The median and the 95 % interval between the order statistics that bracket it (binomial, p = 1/2)."""
    s, n = sorted(xs), len(xs)
    k = max(0, int(math.floor(n / 2 - 0.98 * math.sqrt(n))))  # 1.96 * sqrt(n) / 2 either side of n / 2
    return statistics.median(s), s[k], s[n - 1 - k]


def paced(bench, precision, threads=1, measure="cpu_ms"):
    """int8-bench --paced, loaded and warmed up; one_forward() runs a forward in it and returns its CPU ms (or, with
    measure="wall_ms", its wall ms)."""
    weights = os.environ.get("WEIGHTS", os.path.join(root, "sidecar", "build", "test-weights", "seed-0x1"))
    golden = os.path.join(root, "test", "fixtures", "rfdetr-synth", "case-1", "golden.safetensors")
    proc = subprocess.Popen([bench, "--weights", weights, "--golden", golden, "--precision", precision,
                             "--threads", str(threads), "--paced"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    if proc.stdout.readline().strip() != "ready":  # a refusal (bf16 on a CPU without it) is on the child's stderr
        proc.wait()
        sys.exit(f"pair-run.py: {bench} --precision {precision} did not start (exit {proc.returncode})")

    def one_forward():
        proc.stdin.write("go\n"); proc.stdin.flush()
        return json.loads(proc.stdout.readline())[measure]

    def finish():  # the summary line int8-bench prints at the end of its input
        proc.stdin.close()
        line = json.loads(proc.stdout.read().strip().splitlines()[-1])
        proc.wait()
        return line
    return one_forward, finish


def alternate(a_once, b_once, pairs):
    """pairs forwards of each, a first in even pairs and b first in odd ones; the two lists of their times."""
    a, b = [], []
    for i in range(pairs):
        if i % 2 == 0: a.append(a_once()); b.append(b_once())
        else: b.append(b_once()); a.append(a_once())
    return a, b


def threads_main():
    """2 threads against 1 on the same binary and precision, forward by forward, by wall clock."""
    if not args or args[0] not in ("fp32", "int8", "bf16"):
        sys.exit("usage: pair-run.py threads fp32|int8|bf16 [PAIRS]")
    precision, pairs = args[0], max(1, int(args[1])) if len(args) > 1 else 30
    bench = os.path.join(here, "build", "int8-bench")
    one_once, one_finish = paced(bench, precision, 1, "wall_ms")
    two_once, two_finish = paced(bench, precision, 2, "wall_ms")
    w1, w2 = alternate(one_once, two_once, pairs)
    one, two = one_finish(), two_finish()
    speedup, lo, hi = median_ci([a / b for a, b in zip(w1, w2)])
    print(json.dumps({"threads": "2 / 1", "precision": precision, "pairs": pairs, "kernels": one["kernels"],
                      "speedup_median": round(speedup, 4), "speedup_ci95": [round(lo, 4), round(hi, 4)],
                      "wall_ms_median_1t": round(statistics.median(w1), 1),
                      "wall_ms_median_2t": round(statistics.median(w2), 1),
                      "cpu_ms_per_forward_1t": one["cpu_ms_per_forward"],
                      "cpu_ms_per_forward_2t": two["cpu_ms_per_forward"],
                      "load1": float(open("/proc/loadavg").read().split()[0]),
                      "wall_ms_1t": [round(v, 1) for v in w1], "wall_ms_2t": [round(v, 1) for v in w2]}), flush=True)


def main():
    if scaling:
        return threads_main()
    if not args or args[0] not in PEER:
        sys.exit(f"usage: pair-run.py {'|'.join(PEER)} [PAIRS] [--against INT8_BENCH]")
    what, ours_precision, make = PEER[args[0]]
    pairs = max(1, int(args[1])) if len(args) > 1 else 30
    ours_once, ours_finish = paced(os.path.join(here, "build", "int8-bench"), ours_precision)
    if against:
        what = f"{against} --precision {ours_precision}"
        peer_once, peer_finish = paced(against, ours_precision)
    else:
        run = make()
        x = P.g["pixel_values"]
        for _ in range(3): out = run(x)

        def peer_once():
            nonlocal out
            c = time.process_time(); out = run(x)
            return (time.process_time() - c) * 1e3

        def peer_finish():
            top = lambda a: set(np.argsort(-np.asarray(a).reshape(-1))[:100].tolist())
            return {"top100_overlap": len(top(out[0]) & top(P.g["logits"]))}

    o, p = alternate(ours_once, peer_once, pairs)
    summary, peer_summary = ours_finish(), peer_finish()
    ratio, lo, hi = median_ci([a / b for a, b in zip(o, p)])
    print(json.dumps({"precision": args[0], "peer": what, "pairs": pairs, "kernels": summary["kernels"],
                      "ratio_median": round(ratio, 4), "ratio_ci95": [round(lo, 4), round(hi, 4)],
                      "ours_cpu_ms_median": round(statistics.median(o), 1),
                      "peer_cpu_ms_median": round(statistics.median(p), 1),
                      "ours_cpu_ms_range": [round(min(o), 1), round(max(o), 1)],
                      "peer_cpu_ms_range": [round(min(p), 1), round(max(p), 1)],
                      "ours_top100": summary["top100_overlap"], "peer_top100": peer_summary["top100_overlap"],
                      "load1": float(open("/proc/loadavg").read().split()[0]),
                      "ours_cpu_ms": [round(v, 1) for v in o], "peer_cpu_ms": [round(v, 1) for v in p]}), flush=True)


if __name__ == "__main__":
    main()
