// What the server adds to a forward, through the real sidecar (bench, not a test).
//   node --import tsx bench/server/bench.ts [--weights DIR] [--n 30] [--old-url URL] [--out FILE]
// The server runs in a child process (bench/server/serve.ts) so the load generator does not share its event
// loop. Scenarios, each measured against a baseline taken in the same run:
//   overhead   concurrency 1: client round trip − timing_ms.inference, for a 640×480 PNG, a 640×480 JPEG and a
//              4000×3000 JPEG, against sharp decoding the same bytes to RGB in this process (interleaved with
//              the requests); with the cpu engine and with test-sleep (a fixed 8 ms forward off the host cores).
//              Targets: 640×480 ≤ decode + 3 ms; 4000×3000 ≤ 1.25 × decode + 5 ms.
//   crowd      8 clients sending 4000×3000 JPEGs to test-sleep: the server's event-loop delay p99 (target
//              ≤ 10 ms) and the engine's busy fraction (target ≥ 95 %), and the same for 640×480 JPEGs.
//   memory     1000 requests at concurrency 4 (640×480 JPEG, test-sleep): server and sidecar RSS over the
//              first and the last 100.
//   old        with --old-url, the overhead scenario against another server (e.g. the previous main, started
//              by hand with `rfdetr serve`) for the ratio to the old path.
// Bodies are sent as the contract's JSON ({"image": base64}) unless noted; results go to bench/server/results.json.
import { fork } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { Pool } from 'undici';
import { testFixturesDir } from '../../src/config/paths.ts';
import { decodeImage } from '../../src/image/decode.ts';
import { synthWeights } from '../../test/helpers/synth-weights.ts';
import { median, pct, r2 } from '../stats.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const { values } = parseArgs({ options: { weights: { type: 'string' }, n: { type: 'string', default: '30' }, 'old-url': { type: 'string' }, out: { type: 'string' }, only: { type: 'string' } } });
const N = Number(values.n);
const outFile = values.out ?? path.join(here, 'results.json');
const weights = values.weights ?? await synthWeights();


interface Server {
  url: string;
  engine: string;
  stats(): Promise<{ eld_ms: { p50: number; p99: number; max: number }; server_rss_kib: number; sidecar_rss_kib: number; busy_ms: number; forward_ms: number; forwards: number }>;
  reset(): Promise<void>;
  stop(): Promise<void>;
}

async function startServer(engine: string, forwardMs = 8): Promise<Server> {
  const child = fork(path.join(here, 'serve.ts'), ['--weights', weights, '--engine', engine, '--forward-ms', String(forwardMs)], {
    execArgv: ['--import', 'tsx'], stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
  });
  const line = await new Promise<string>((resolve, reject) => {
    let buf = '';
    child.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      const m = /LISTENING (.*)\n/.exec(buf);
      if (m) resolve(m[1]!);
    });
    child.once('exit', (c) => reject(new Error(`serve.ts exited with ${c}`)));
  });
  const ask = <T>(cmd: string) => new Promise<T>((resolve) => {
    child.once('message', (m) => resolve(m as T));
    child.send({ cmd });
  });
  return {
    url: line.split(' ')[0]!,
    engine: line.split(' ').slice(1).join(' '),
    stats: () => ask('stats'),
    reset: () => ask('reset'),
    stop: () => new Promise((r) => {
      child.once('exit', () => r());
      child.kill('SIGTERM');
    }),
  };
}

async function predict(pool: Pool, body: string | Buffer, contentType = 'application/json') {
  const t0 = performance.now();
  const res = await pool.request({ path: '/predict', method: 'POST', headers: { 'content-type': contentType }, body });
  const json = (await res.body.json()) as { timing_ms: Record<string, number> };
  if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}: ${JSON.stringify(json)}`);
  return { rtt: performance.now() - t0, t: json.timing_ms };
}

const png = fs.readFileSync(path.join(testFixturesDir, 'rfdetr-synth', 'case-1', 'input.png'));
const jpeg = await sharp(png).jpeg({ quality: 90 }).toBuffer();
// A phone-sized photo: the fixture image scaled up with detail-preserving noise so the JPEG is photo-sized.
const big = await sharp(png).resize(4000, 3000, { kernel: 'cubic' }).jpeg({ quality: 90 }).toBuffer();
const images: Record<string, Buffer> = { 'png-640x480': png, 'jpeg-640x480': jpeg, 'jpeg-4000x3000': big };
const target = (name: string, decode: number) => name.includes('4000') ? 1.25 * decode + 5 : decode + 3;

async function overhead(url: string, label: string, n: number) {
  const out: Record<string, unknown> = {};
  const pool = new Pool(url, { connections: 1 });
  try {
    for (const [name, bytes] of Object.entries(images)) {
      const body = JSON.stringify({ image: bytes.toString('base64') });
      for (let i = 0; i < 3; i++) await predict(pool, body);
      const over: number[] = [];
      const dec: number[] = [];
      const stages: Record<string, number[]> = { decode: [], preprocess: [], queue: [], transfer: [], postprocess: [], inference: [] };
      for (let i = 0; i < n; i++) {
        const d0 = performance.now();
        await decodeImage(bytes);
        dec.push(performance.now() - d0);
        const { rtt, t } = await predict(pool, body);
        over.push(rtt - t.inference!);
        for (const k of Object.keys(stages)) stages[k]!.push(t[k]!);
      }
      const o = median(over);
      const d = median(dec);
      out[name] = {
        bytes: bytes.length,
        overhead_ms: { p50: r2(o), p90: r2(pct(over, 90)) },
        sharp_decode_ms_p50: r2(d),
        target_ms: r2(target(name, d)),
        meets_target: o <= target(name, d),
        stage_p50_ms: Object.fromEntries(Object.entries(stages).map(([k, v]) => [k, r2(median(v))])),
      };
      console.log(`${label} ${name}: overhead p50 ${r2(o)} ms (p90 ${r2(pct(over, 90))}) vs sharp decode ${r2(d)} ms → target ${r2(target(name, d))} ms ${o <= target(name, d) ? 'MET' : 'NOT MET'}; stages ${JSON.stringify((out[name] as any).stage_p50_ms)}`);
    }
  } finally {
    await pool.close();
  }
  return out;
}

async function crowd(srv: Server, name: string, bytes: Buffer, clients: number, total: number, raw: boolean) {
  const pool = new Pool(srv.url, { connections: clients });
  const body = raw ? bytes : JSON.stringify({ image: bytes.toString('base64') });
  const ct = raw ? 'image/jpeg' : 'application/json';
  for (let i = 0; i < clients; i++) await predict(pool, body, ct);
  await srv.reset();
  const s0 = await srv.stats();
  const t0 = performance.now();
  let next = 0;
  await Promise.all(Array.from({ length: clients }, async () => {
    while (next < total) {
      next++;
      await predict(pool, body, ct);
    }
  }));
  const wall = performance.now() - t0;
  const s1 = await srv.stats();
  await pool.close();
  // The engine is busy while it computes a forward (the sum of the sidecar's forward_ms), not merely while a
  // request is in the sidecar (that includes its resize).
  const busy = (s1.forward_ms - s0.forward_ms) / wall;
  const inSidecar = (s1.busy_ms - s0.busy_ms) / wall;
  const r = {
    clients, requests: total, body: raw ? 'raw image/jpeg' : 'json base64', rps: r2((1000 * total) / wall), engine_busy: r2(busy),
    sidecar_busy: r2(inSidecar), event_loop_delay_ms: { p50: r2(s1.eld_ms.p50), p99: r2(s1.eld_ms.p99), max: r2(s1.eld_ms.max) },
  };
  console.log(`crowd ${name} ×${clients} (${r.body}): ${r.rps} req/s, engine busy ${r2(100 * busy)} % (a request in the sidecar ${r2(100 * inSidecar)} %), event-loop delay p99 ${r.event_loop_delay_ms.p99} ms (max ${r.event_loop_delay_ms.max})`);
  return r;
}

async function memory(srv: Server, total: number) {
  const pool = new Pool(srv.url, { connections: 4 });
  const body = JSON.stringify({ image: jpeg.toString('base64') });
  const samples: Array<{ done: number; server_rss_kib: number; sidecar_rss_kib: number }> = [];
  let done = 0;
  let next = 0;
  await Promise.all(Array.from({ length: 4 }, async () => {
    while (next < total) {
      next++;
      await predict(pool, body);
      done++;
      if (done % 25 === 0) {
        const s = await srv.stats();
        samples.push({ done, server_rss_kib: s.server_rss_kib, sidecar_rss_kib: s.sidecar_rss_kib });
      }
    }
  }));
  await pool.close();
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const first = samples.filter((s) => s.done <= 100);
  const last = samples.filter((s) => s.done > total - 100);
  const r = {
    requests: total,
    server_rss_mib: { first_100: r2(mean(first.map((s) => s.server_rss_kib)) / 1024), last_100: r2(mean(last.map((s) => s.server_rss_kib)) / 1024) },
    sidecar_rss_mib: { first_100: r2(mean(first.map((s) => s.sidecar_rss_kib)) / 1024), last_100: r2(mean(last.map((s) => s.sidecar_rss_kib)) / 1024) },
  };
  console.log(`memory over ${total} requests: server RSS ${r.server_rss_mib.first_100} → ${r.server_rss_mib.last_100} MiB, sidecar RSS ${r.sidecar_rss_mib.first_100} → ${r.sidecar_rss_mib.last_100} MiB`);
  return r;
}

const only = values.only ? new Set(values.only.split(',')) : undefined;
const want = (s: string) => !only || only.has(s);
const results: Record<string, unknown> = {
  date: new Date().toISOString(),
  host: `${os.cpus()[0]?.model} x${os.availableParallelism()}, load avg ${os.loadavg().map((x) => x.toFixed(1)).join(' ')}`,
  node: process.version,
  images: Object.fromEntries(Object.entries(images).map(([k, v]) => [k, v.length])),
};
if (want('overhead')) {
  const cpu = await startServer('cpu');
  try {
    results.overhead_cpu = { engine: cpu.engine, ...(await overhead(cpu.url, 'cpu', N)) };
  } finally {
    await cpu.stop();
  }
}
const sleep = await startServer('test-sleep', 8);
try {
  if (want('overhead')) results.overhead_test_sleep_8ms = { engine: sleep.engine, ...(await overhead(sleep.url, 'test-sleep 8 ms', N)) };
  if (want('crowd')) {
    results.crowd = {
      'jpeg-4000x3000-json': await crowd(sleep, 'jpeg-4000x3000', big, 8, 8 * 8, false),
      'jpeg-4000x3000-raw': await crowd(sleep, 'jpeg-4000x3000', big, 8, 8 * 8, true),
      'jpeg-640x480-json': await crowd(sleep, 'jpeg-640x480', jpeg, 8, 400, false),
    };
  }
  if (want('memory')) results.memory = await memory(sleep, 1000);
} finally {
  await sleep.stop();
}
if (values['old-url']) results.overhead_old = await overhead(values['old-url'], 'old', N);
results.load_avg_after = os.loadavg().map((x) => r2(x));
fs.writeFileSync(outFile, JSON.stringify(results, null, 2) + '\n');
console.log(`wrote ${outFile}`);
