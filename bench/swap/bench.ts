// What a SIGHUP swap costs the traffic (a bench, not a test): `rfdetr serve --models FILE` with two models on the
// cpu engine (`swap`: a Base checkpoint, swapped at each run between seed 1 and seed 2; `other`: a Nano), closed-loop
// clients alternating between them; the round trips of the requests sent before the SIGHUP, between it and the
// swap's log line (the new sidecar loading and warming up beside the old ones), and after, per model: median,
// p90, max, and the during/before ratio of medians. "One forward" is the median `timing_ms.inference` of the
// swapped model before the swap. Also: SIGHUP → new sidecar ready / old one drained (the server's log), peak RSS
// (VmHWM) of the server and its sidecars, the 1-minute load average at the start and end of each run.
//   node --import tsx bench/swap/bench.ts [--runs 3] [--clients 4] [--phase-s 8] [--threads 1]
//     [--out bench/swap/results.json] [--label NAME] [--serve-arg ARG ...]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { packageRoot, testFixturesDir } from '../../src/config/paths.ts';
import { startServe } from '../../test/helpers/serve-child.ts';
import { synthVariantWeights, synthWeights, tempDir } from '../../test/helpers/synth-weights.ts';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '3' },
    clients: { type: 'string', default: '4' },
    'phase-s': { type: 'string', default: '8' },
    threads: { type: 'string', default: '1' },
    out: { type: 'string', default: path.join(packageRoot, 'bench', 'swap', 'results.json') },
    label: { type: 'string', default: 'default' },
    'serve-arg': { type: 'string', multiple: true, default: [] },
  },
});
const runs = Number(values.runs);
const clients = Number(values.clients);
const phaseMs = Number(values['phase-s']) * 1000;

interface Sample { phase: 'before' | 'during' | 'after'; model: string; ms: number; inferenceMs: number; status: number }

const pct = (xs: number[], p: number) => {
  const v = [...xs].sort((a, b) => a - b);
  return v.length ? v[Math.min(v.length - 1, Math.floor(p * v.length))]! : NaN;
};
const vmHwmKb = (pid: number) => {
  try {
    return Number(/VmHWM:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
  } catch {
    return 0;
  }
};
const childrenOf = (pid: number): number[] => {
  const out = new Set<number>();
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    for (const c of fs.readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim().split(/\s+/)) if (c) out.add(Number(c));
  }
  return [...out];
};
const untilTrue = async (what: string, f: () => boolean, ms: number) => {
  const end = performance.now() + ms;
  while (!f()) {
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
};

async function oneRun(run: number, weights: { base1: string; base2: string; nano: string }, root: string) {
  const file = path.join(root, 'models.json');
  const [from, to] = run % 2 === 0 ? [weights.base1, weights.base2] : [weights.base2, weights.base1];
  const write = (w: string) => fs.writeFileSync(file, JSON.stringify({ models: [{ id: 'swap', weights: w }, { id: 'other', weights: weights.nano }] }));
  write(from);
  const cleanups: Array<() => void> = [];
  const load0 = os.loadavg()[0]!;
  try {
    const { child, base } = await startServe({ after: (fn) => cleanups.push(fn) }, ['--models', file, '--threads', values.threads!, '--deadline-ms', '300000', ...values['serve-arg']!]);
    let log = '';
    child.stderr.on('data', (d) => (log += d));
    const image = { swap: fs.readFileSync(path.join(testFixturesDir, 'rfdetr-synth', 'case-1', 'input.png')).toString('base64') };
    const samples: Sample[] = [];
    let hupAt = Infinity;
    let loggedAt = Infinity;
    let stop = false;
    const client = async (k: number) => {
      for (let i = k; !stop; i++) {
        const model = i % 2 === 0 ? 'swap' : 'other';
        const sent = performance.now();
        // A connection the server closed counts as a failed request (status 0), not as the bench's end.
        const r = await fetch(`${base}/predict`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ image: image.swap, model }) })
          .then(async (x) => ({ status: x.status, body: (await x.json()) as { timing_ms?: { inference?: number } } }), () => ({ status: 0, body: {} as { timing_ms?: { inference?: number } } }));
        samples.push({ phase: sent < hupAt ? 'before' : sent < loggedAt ? 'during' : 'after', model, ms: performance.now() - sent, inferenceMs: r.body.timing_ms?.inference ?? NaN, status: r.status });
      }
    };
    const loops = Array.from({ length: clients }, (_, k) => client(k));
    await new Promise((r) => setTimeout(r, phaseMs));
    write(to);
    hupAt = performance.now();
    child.kill('SIGHUP');
    await untilTrue('the swap logged', () => /"event":"model_swapped"/.test(log), 300_000);
    loggedAt = performance.now();
    await new Promise((r) => setTimeout(r, phaseMs));
    const peakMb = [child.pid!, ...childrenOf(child.pid!)].reduce((n, p) => n + vmHwmKb(p), 0) / 1024;
    stop = true;
    await Promise.all(loops);
    const ev = JSON.parse(/^.*"event":"model_swapped".*$/m.exec(log)![0]) as { ready_ms: number; drained_ms: number };
    const forwardMs = pct(samples.filter((s) => s.phase === 'before' && s.model === 'swap').map((s) => s.inferenceMs), 0.5);
    const phases: Record<string, Record<string, { n: number; median: number; p90: number; max: number }>> = {};
    for (const phase of ['before', 'during', 'after'] as const) {
      phases[phase] = {};
      for (const model of ['swap', 'other']) {
        const xs = samples.filter((s) => s.phase === phase && s.model === model).map((s) => s.ms);
        phases[phase]![model] = { n: xs.length, median: pct(xs, 0.5), p90: pct(xs, 0.9), max: Math.max(...xs) };
      }
    }
    const failed = samples.filter((s) => s.status !== 200).length;
    // The swapped-in sidecar's READY: whether its load and warm-up ran at --swap-nice (load_nice), and its nice after.
    const ready = [...log.matchAll(/^.*"msg":"sidecar READY".*$/gm)].map((m) => JSON.parse(m[0]) as { model?: string; load_nice?: unknown; nice?: unknown }).filter((r) => r.model === 'swap').at(-1);
    return { run, new_sidecar: { load_nice: ready?.load_nice ?? null, nice: ready?.nice ?? null }, load1_start: load0, load1_end: os.loadavg()[0]!, ready_ms: ev.ready_ms, drained_ms: ev.drained_ms, swap_logged_ms: loggedAt - hupAt, forward_ms: forwardMs, peak_rss_mb: peakMb, failed, phases };
  } finally {
    for (const c of cleanups) c();
  }
}

const root = tempDir('rfdetr-swap-bench-');
try {
  const weights = { base1: await synthWeights(1n), base2: await synthWeights(2n), nano: await synthVariantWeights('nano') };
  const results = [];
  for (let run = 0; run < runs; run++) {
    const r = await oneRun(run, weights, root);
    results.push(r);
    const f = (x: number) => x.toFixed(0);
    console.log(`  the new sidecar: load_nice ${JSON.stringify(r.new_sidecar.load_nice)}, nice ${JSON.stringify(r.new_sidecar.nice)}`);
    console.log(`run ${run + 1}/${runs}: load ${r.load1_start.toFixed(1)} → ${r.load1_end.toFixed(1)}; one forward (swap, before) ${f(r.forward_ms)} ms; SIGHUP → ready ${f(r.ready_ms)} ms, → drained ${f(r.drained_ms)} ms; peak RSS ${f(r.peak_rss_mb)} MB; failed ${r.failed}`);
    for (const model of ['swap', 'other']) {
      const p = (ph: string) => r.phases[ph]![model]!;
      console.log(`  ${model.padEnd(5)} round trip median (p90) ms: before ${f(p('before').median)} (${f(p('before').p90)}) n=${p('before').n}; during ${f(p('during').median)} (${f(p('during').p90)}) n=${p('during').n}; after ${f(p('after').median)} (${f(p('after').p90)}) n=${p('after').n}; during/before ${(p('during').median / p('before').median).toFixed(2)}x, +${f(p('during').median - p('before').median)} ms = ${((p('during').median - p('before').median) / r.forward_ms).toFixed(2)} forwards`);
    }
  }
  const med = (xs: number[]) => pct(xs, 0.5);
  const summary: Record<string, unknown> = {};
  for (const model of ['swap', 'other']) {
    summary[model] = {
      before_median_ms: med(results.map((r) => r.phases.before![model]!.median)),
      during_median_ms: med(results.map((r) => r.phases.during![model]!.median)),
      after_median_ms: med(results.map((r) => r.phases.after![model]!.median)),
      excess_forwards_median: med(results.map((r) => (r.phases.during![model]!.median - r.phases.before![model]!.median) / r.forward_ms)),
    };
  }
  console.log(`medians over ${runs} runs: ${JSON.stringify(summary)}`);
  const out = { label: values.label, clients, phase_s: phaseMs / 1000, threads: Number(values.threads), serve_args: values['serve-arg'], host_cpus: os.availableParallelism(), summary, results };
  let all: unknown[] = [];
  try {
    all = JSON.parse(fs.readFileSync(values.out!, 'utf8')) as unknown[];
  } catch {
    all = [];
  }
  fs.writeFileSync(values.out!, `${JSON.stringify([...all.filter((x) => (x as { label?: string }).label !== values.label), out], null, 2)}\n`);
  console.log(`written to ${values.out}`);
} finally {
  fs.rmSync(root, { recursive: true, force: true });
}
