// Server overhead and throughput with a fake engine of fixed forward time (bench, not a test).
//   node --import tsx bench/server/bench.ts [--forward-ms 50] [--n 200] [--out FILE (default bench/server/results-forward<F>ms.json)]
// The server runs in a child process (bench/server/fake-server.ts) so the load generator does not share its
// event loop. Overhead = timing_ms.total − timing_ms.inference at concurrency 1 (server-side: body parse,
// decode, preprocess, queue, postprocess); the client round trip minus inference is reported too. Throughput
// at concurrency 1/4/8 is compared with the baseline 1/forward-time (an engine that is never idle), and the
// engine busy fraction comes from the server's rfdetr_engine_busy_seconds_total.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { Pool } from 'undici';
import { testFixturesDir } from '../../src/config/paths.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const { values } = parseArgs({ options: { 'forward-ms': { type: 'string', default: '50' }, n: { type: 'string', default: '200' }, out: { type: 'string' }, prep: { type: 'string' } } });
const forwardMs = Number(values['forward-ms']);
const N = Number(values.n);
const outFile = values.out ?? path.join(here, `results-forward${forwardMs}ms.json`);

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}
const r2 = (x: number) => Math.round(x * 100) / 100;

async function startServer(extra: string[] = []): Promise<{ url: string; stop: () => Promise<void> }> {
  const args = ['--import', 'tsx', path.join(here, 'fake-server.ts'), '--forward-ms', String(forwardMs), ...extra];
  if (values.prep) args.push('--prep', values.prep);
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise<string>((resolve, reject) => {
    let buf = '';
    child.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      const m = /LISTENING (\S+)/.exec(buf);
      if (m) resolve(m[1]!);
    });
    child.once('exit', (c) => reject(new Error(`fake-server exited with ${c}`)));
  });
  return {
    url,
    stop: () => new Promise((r) => {
      child.once('exit', () => r());
      child.kill('SIGTERM');
    }),
  };
}

async function busySeconds(pool: Pool): Promise<number> {
  const res = await pool.request({ path: '/metrics', method: 'GET' });
  const text = await res.body.text();
  return Number(/^rfdetr_engine_busy_seconds_total (\S+)$/m.exec(text)![1]);
}

async function predict(pool: Pool, body: string) {
  const t0 = performance.now();
  const res = await pool.request({ path: '/predict', method: 'POST', headers: { 'content-type': 'application/json' }, body });
  const json = (await res.body.json()) as { timing_ms: Record<string, number> };
  if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}: ${JSON.stringify(json)}`);
  return { rtt: performance.now() - t0, t: json.timing_ms };
}

const png = fs.readFileSync(path.join(testFixturesDir, 'rfdetr-synth', 'case-1', 'input.png'));
const jpeg = await sharp(png).jpeg({ quality: 90 }).toBuffer();
const images = { 'png-640x480': png, 'jpeg-640x480': jpeg };

const server = await startServer();
const results: Record<string, unknown> = {
  date: new Date().toISOString(),
  host: `${os.cpus()[0]?.model} x${os.availableParallelism()}, load avg ${os.loadavg().map((x) => x.toFixed(1)).join(' ')}`,
  node: process.version,
  fake_forward_ms: forwardMs,
  note: 'fake backend: the forward is a timer (no CPU), no socket transfer; server in a child process, client undici Pool over loopback',
};
try {
  const overhead: Record<string, unknown> = {};
  const measure = async (name: string, url: string, bytes: Buffer) => {
    const body = JSON.stringify({ image: bytes.toString('base64') });
    const pool = new Pool(url, { connections: 1 });
    for (let i = 0; i < 20; i++) await predict(pool, body);
    const srv: number[] = [];
    const cli: number[] = [];
    const stages: Record<string, number[]> = { decode: [], preprocess: [], queue: [], postprocess: [], http: [] };
    for (let i = 0; i < N; i++) {
      const { rtt, t } = await predict(pool, body);
      srv.push(t.total! - t.inference!);
      cli.push(rtt - t.inference!);
      for (const k of ['decode', 'preprocess', 'queue', 'postprocess']) stages[k]!.push(t[k]!);
      // Everything else inside the server: body read, JSON parse, base64 decode, hand-offs, response build.
      stages.http!.push(t.total! - t.inference! - t.decode! - t.preprocess! - t.queue! - t.postprocess!);
    }
    await pool.close();
    overhead[name] = {
      bytes: bytes.length,
      server_overhead_ms: { p50: r2(pct(srv, 50)), p99: r2(pct(srv, 99)) },
      client_rtt_minus_inference_ms: { p50: r2(pct(cli, 50)), p99: r2(pct(cli, 99)) },
      stage_p50_ms: Object.fromEntries(Object.entries(stages).map(([k, v]) => [k, r2(pct(v, 50))])),
    };
    console.log(`${name}: overhead p50 ${r2(pct(srv, 50))} ms p99 ${r2(pct(srv, 99))} ms (client-side p50 ${r2(pct(cli, 50))}); stage p50 ${JSON.stringify((overhead[name] as any).stage_p50_ms)}`);
  };
  for (const [name, bytes] of Object.entries(images)) await measure(name, server.url, bytes);
  const stubbed = await startServer(['--stub-prep']);
  try {
    await measure('png-640x480, decode+preprocess stubbed (HTTP layer only)', stubbed.url, png);
  } finally {
    await stubbed.stop();
  }
  results.overhead_concurrency_1 = overhead;

  const throughput: Record<string, unknown> = {};
  const body = JSON.stringify({ image: png.toString('base64') });
  for (const c of [1, 4, 8]) {
    const pool = new Pool(server.url, { connections: c });
    for (let i = 0; i < 2 * c; i++) await predict(pool, body);
    const busy0 = await busySeconds(pool);
    const t0 = performance.now();
    let next = 0;
    const fwd: number[] = [];
    await Promise.all(Array.from({ length: c }, async () => {
      while (next < N) {
        next++;
        fwd.push((await predict(pool, body)).t.inference!);
      }
    }));
    // The baseline: an engine that is never idle, at the forward time actually measured (a 50 ms timer
    // fires after ~51-55 ms on a loaded box).
    const meanForward = fwd.reduce((a, b) => a + b, 0) / fwd.length;
    const ideal = 1000 / meanForward;
    const wall = (performance.now() - t0) / 1000;
    const busy = (await busySeconds(pool)) - busy0;
    await pool.close();
    const rps = N / wall;
    throughput[`c${c}`] = { requests: N, wall_s: r2(wall), rps: r2(rps), mean_forward_ms: r2(meanForward), ideal_rps: r2(ideal), ratio_to_ideal: r2(rps / ideal), engine_busy: r2(busy / wall) };
    console.log(`concurrency ${c}: ${r2(rps)} req/s vs 1/forward ${r2(ideal)} (mean forward ${r2(meanForward)} ms; ratio ${r2(rps / ideal)}), engine busy ${r2((100 * busy) / wall)} %`);
  }
  results.throughput_png_640x480 = throughput;
} finally {
  await server.stop();
}
results.load_avg_after = os.loadavg().map((x) => r2(x));
fs.writeFileSync(outFile, JSON.stringify(results, null, 2) + '\n');
console.log(`wrote ${outFile}`);
