// What the server adds to a forward, through the real sidecar (bench, not a test).
//   node --expose-gc --import tsx bench/server/bench.ts [--weights DIR] [--n 30] [--only overhead,overhead-noshm,crowd,crowd-noshm,memory,overhead-cpu]
//        [--images png-640x480,jpeg-640x480,jpeg-4000x3000] [--shm-max-bytes N] [--clients raw,undici] [--cpu-prof-dir DIR] [--server-node-args=--trace-gc]
//        [--baseline DIR] [--client-gc auto|full] [--server-env K=V,K=V] [--out FILE]
// --server-env K=V,...: environment for this tree's servers only (not the baseline's nor this process's, so the
// sharp baseline decode here is unchanged), e.g. GLIBC_TUNABLES=glibc.malloc.hugetlb=1.
// --baseline DIR: the overhead scenario also runs on a server started from another checkout (DIR, e.g. an
// extracted `git archive main` with node_modules linked and its sidecar built), block by block alternating
// with this tree's (baseline first, then this tree, per image × body × client), so both see the same load;
// the results get an `overhead_ab` table of the two p50s per case.
// The server runs in a child process (bench/server/serve.ts) so the load generator does not share its event
// loop. Scenarios, each measured against a baseline taken in the same run:
//   overhead      concurrency 1, test-sleep (a fixed 8 ms forward off the host cores), a 640×480 PNG, a 640×480
//                 JPEG and a 4000×3000 JPEG, each as base64 JSON, multipart and a raw body: the client round trip
//                 against the server's timeline of the same request (src/http/timeline.ts; both on
//                 CLOCK_MONOTONIC), so the part of the round trip no server stage covers is measured (target
//                 ≤ 1 ms p50); the overhead (round trip − timing_ms.inference) against sharp decoding the same
//                 bytes in this process, interleaved with the requests (targets: 640×480 ≤ decode + 3 ms;
//                 4000×3000 ≤ 1.25 × decode + 5 ms); the CPU time of server and sidecar per request.
//   overhead-cpu  the same with the cpu engine (its real forward), JSON and raw bodies.
//   crowd         8 clients sending 4000×3000 JPEGs to test-sleep: the server's event-loop delay p99 (target
//                 ≤ 10 ms) and the engine's busy fraction, and the same for 640×480 JPEGs (target ≥ 90 %).
//   memory        1000 requests at concurrency 4 (640×480 JPEG, test-sleep): server and sidecar RSS over the
//                 first and the last 100.
// Results go to bench/server/results.json, with the load average before and after (the host is shared).
import { fork } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { Pool } from 'undici';
import { RawClient } from './raw-client.ts';
import { testFixturesDir } from '../../src/config/paths.ts';
import { decodeImage } from '../../src/image/decode.ts';
import { synthWeights } from '../../test/helpers/synth-weights.ts';
import { median, pct, r2 } from '../stats.ts';
import type { TimelineRecord } from '../../src/http/timeline.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const { values } = parseArgs({ options: { weights: { type: 'string' }, n: { type: 'string', default: '30' }, out: { type: 'string' }, only: { type: 'string' }, images: { type: 'string' }, 'shm-max-bytes': { type: 'string' }, clients: { type: 'string', default: 'raw,undici' }, 'cpu-prof-dir': { type: 'string' }, baseline: { type: 'string' }, 'client-gc': { type: 'string', default: 'auto' }, 'server-node-args': { type: 'string' }, 'server-env': { type: 'string' } } });
// The overhead scenario's clients: `raw` (raw-client.ts: the round trip ends at the last byte, nothing of a
// client library inside it; what the accounting target is measured with) and `undici` (pool.request +
// body.json() inside the round trip, as a real client sees it).
const CLIENTS = values.clients!.split(',') as Array<'raw' | 'undici'>;
const N = Number(values.n);
const outFile = values.out ?? path.join(here, 'results.json');
const weights = values.weights ?? await synthWeights();


interface Server {
  url: string;
  engine: string;
  stats(): Promise<{ eld_ms: { p50: number; p99: number; max: number }; server_rss_kib: number; sidecar_rss_kib: number; busy_ms: number; forward_ms: number; forwards: number; server_cpu_ms: number; sidecar_cpu_ms: number | null }>;
  timelines(): Promise<{ mono_offset_ms: number; timelines: TimelineRecord[] }>;
  reset(): Promise<void>;
  stop(): Promise<void>;
}

const serverEnv = Object.fromEntries((values['server-env'] ?? '').split(',').filter(Boolean).map((kv) => {
  const at = kv.indexOf('=');
  if (at < 1) throw new Error(`--server-env: expected K=V items separated by commas but received '${kv}'`);
  return [kv.slice(0, at), kv.slice(at + 1)];
}));
async function startServer(engine: string, forwardMs = 8, env: Record<string, string> = {}, root?: string): Promise<Server> {
  if (!root) env = { ...serverEnv, ...env };
  const child = fork(root ? path.join(root, 'bench', 'server', 'serve.ts') : path.join(here, 'serve.ts'), ['--weights', weights, '--engine', engine, '--forward-ms', String(forwardMs)], {
    // --cpu-prof-dir DIR: the server writes a V8 CPU profile there when it stops (open it in devtools).
    // --server-node-args "--trace-gc ...": more node flags for the server (its stdout after LISTENING goes to ours).
    execArgv: ['--import', 'tsx', ...(values['cpu-prof-dir'] ? ['--cpu-prof', '--cpu-prof-interval', '200', `--cpu-prof-dir=${values['cpu-prof-dir']}`] : []), ...(values['server-node-args']?.split(' ').filter(Boolean) ?? [])], stdio: ['ignore', 'pipe', 'inherit', 'ipc'], env: { ...process.env, ...env },
  });
  const line = await new Promise<string>((resolve, reject) => {
    let buf = '';
    let listening = false;
    child.stdout!.on('data', (d: Buffer) => {
      if (listening) return void process.stdout.write(d);
      buf += d.toString();
      const m = /LISTENING (.*)\n/.exec(buf);
      if (m) (listening = true), resolve(m[1]!);
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
    timelines: () => ask('timelines'),
    reset: () => ask('reset'),
    stop: () => new Promise((r) => {
      child.once('exit', () => r());
      child.kill('SIGTERM');
    }),
  };
}

interface Sent {
  rtt: number;
  t: Record<string, number>;
  /** CLOCK_MONOTONIC ms when the request was started and when its answer had been read. */
  sentMono: number;
  doneMono: number;
  serverTiming: string | undefined;
}
const monoOffsetMs = Number(process.hrtime.bigint()) / 1e6 - performance.now();
/**
 * With node --expose-gc: the load generator collects its own garbage between requests. A full collection
 * made the next round trip 0.4-0.7 ms slower, on the client's side (an express server that only answers,
 * 36 KB raw bodies, load 7: 0.57-0.77 ms after a minor GC or none, 1.05-1.36 ms after a full one; both
 * before_arrival and the server's wait-body grew), so `--client-gc auto` (the default) takes a minor GC
 * after a baseline decode of at most 8 MiB of pixels and a full one only after larger ones (the 36 MB of a
 * 4000×3000 decode); `--client-gc full` is the full GC every time, as before.
 */
const clientGcFn = (globalThis as { gc?: (o?: { type: 'minor' | 'major' }) => void }).gc;
const clientGc = (pixelBytes: number) => clientGcFn?.(values['client-gc'] === 'full' || pixelBytes > 8 << 20 ? undefined : { type: 'minor' });

/** One request over the bench's minimal client: the round trip ends when the last byte has arrived, the JSON is parsed after the mark. */
async function predictRaw(c: RawClient, body: string | Buffer, contentType = 'application/json', query = ''): Promise<Sent> {
  const res = await c.request('POST', `/predict${query}`, { 'content-type': contentType }, body);
  const json = JSON.parse(res.body.toString()) as { timing_ms: Record<string, number> };
  if (res.status !== 200) throw new Error(`status ${res.status}: ${JSON.stringify(json)}`);
  return { rtt: res.t1 - res.t0, t: json.timing_ms, sentMono: res.t0 + monoOffsetMs, doneMono: res.t1 + monoOffsetMs, serverTiming: res.headers['server-timing'] };
}

async function predict(pool: Pool, body: string | Buffer, contentType = 'application/json', query = ''): Promise<Sent> {
  const t0 = performance.now();
  const res = await pool.request({ path: `/predict${query}`, method: 'POST', headers: { 'content-type': contentType }, body });
  const json = (await res.body.json()) as { timing_ms: Record<string, number> };
  const t1 = performance.now();
  if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}: ${JSON.stringify(json)}`);
  const st = res.headers['server-timing'];
  return { rtt: t1 - t0, t: json.timing_ms, sentMono: t0 + monoOffsetMs, doneMono: t1 + monoOffsetMs, serverTiming: typeof st === 'string' ? st : undefined };
}

const png = fs.readFileSync(path.join(testFixturesDir, 'rfdetr-synth', 'case-1', 'input.png'));
const jpeg = await sharp(png).jpeg({ quality: 90 }).toBuffer();
// A phone-sized photo: the fixture image scaled up with detail-preserving noise so the JPEG is photo-sized.
const big = await sharp(png).resize(4000, 3000, { kernel: 'cubic' }).jpeg({ quality: 90 }).toBuffer();
const allImages: Record<string, Buffer> = { 'png-640x480': png, 'jpeg-640x480': jpeg, 'jpeg-4000x3000': big };
const images = values.images ? Object.fromEntries(values.images.split(',').map((k) => [k, allImages[k]!])) : allImages;
const target = (name: string, decode: number) => name.includes('4000') ? 1.25 * decode + 5 : decode + 3;

type BodyKind = 'json' | 'multipart' | 'raw';
const BOUNDARY = 'rfdetr-bench-boundary-7d3f';
function bodyOf(kind: BodyKind, name: string, bytes: Buffer): { body: string | Buffer; ct: string } {
  if (kind === 'json') return { body: JSON.stringify({ image: bytes.toString('base64') }), ct: 'application/json' };
  if (kind === 'raw') return { body: bytes, ct: name.startsWith('png') ? 'image/png' : 'image/jpeg' };
  const head = `--${BOUNDARY}\r\nContent-Disposition: form-data; name="image"; filename="${name}"\r\nContent-Type: application/octet-stream\r\n\r\n`;
  return { body: Buffer.concat([Buffer.from(head), bytes, Buffer.from(`\r\n--${BOUNDARY}--\r\n`)]), ct: `multipart/form-data; boundary=${BOUNDARY}` };
}

/**
 * Concurrency 1, every image × body kind: the client round trip against the server's timeline of the same
 * request (same clock: CLOCK_MONOTONIC in both processes), the overhead (round trip − timing_ms.inference)
 * against sharp's decode of the same bytes here, and the CPU time both processes spent per request.
 */
async function overhead(srv: Server, label: string, n: number, kinds: BodyKind[]) {
  return (await overheadAb([{ srv, label }], n, kinds))[0]!;
}

/** Untimed requests per image × body on every server before the overhead blocks start. */
const WARMUP_PER_CASE = 10;

/** The overhead scenario on each server in turn, block by block (one image × body × client on every server, then the next). */
async function overheadAb(servers: Array<{ srv: Server; label: string }>, n: number, kinds: BodyKind[]) {
  const outs: Array<Record<string, unknown>> = servers.map(() => ({}));
  const conns = await Promise.all(servers.map(async ({ srv }) => ({ pool: new Pool(srv.url, { connections: 1 }), raw: await RawClient.connect(srv.url) })));
  try {
    // A warm-up pass over every image × body on every server before any block is timed: the first block used to
    // run on freshly started servers whose code paths were not yet compiled (their event-loop delay p50 1.4 ms
    // against 0.4-0.6 later, parse 2.0 ms against 0.6), so whichever case came first read 2-5 ms high on both.
    for (const [name, bytes] of Object.entries(images)) {
      for (const kind of kinds) for (const { raw } of conns) {
        const { body, ct } = bodyOf(kind, name, bytes);
        for (let i = 0; i < WARMUP_PER_CASE; i++) await predictRaw(raw, body, ct);
      }
    }
    for (const [name, bytes] of Object.entries(images)) {
      for (const kind of kinds) for (const client of CLIENTS) for (const [si, { srv, label }] of servers.entries()) {
        const { pool, raw } = conns[si]!;
        const out = outs[si]!;
        const send = client === 'raw' ? (b: string | Buffer, c: string) => predictRaw(raw, b, c) : (b: string | Buffer, c: string) => predict(pool, b, c);
        const { body, ct } = bodyOf(kind, name, bytes);
        for (let i = 0; i < 3; i++) await send(body, ct);
        await srv.timelines();
        const s0 = await srv.stats();
        const sent: Sent[] = [];
        const dec: number[] = [];
        let clientCpu = 0;
        for (let i = 0; i < n; i++) {
          const d0 = performance.now();
          // sharp's own decode on this thread (not the server's decode thread and pool buffer).
          const pixelBytes = (await decodeImage(bytes, { thread: false })).data.byteLength;
          dec.push(performance.now() - d0);
          // The baseline's pixels (36 MB at 4000×3000) are this process's garbage: collected now, not during the round trip.
          clientGc(pixelBytes);
          const c0 = process.cpuUsage();
          sent.push(await send(body, ct));
          const c1 = process.cpuUsage(c0);
          clientCpu += (c1.user + c1.system) / 1000;
        }
        const s1 = await srv.stats();
        const { mono_offset_ms: srvOffset, timelines } = await srv.timelines();
        if (timelines.length !== n) throw new Error(`expected ${n} timelines, got ${timelines.length}`);
        const over = sent.map((x) => x.rtt - x.t.inference!);
        const gap = sent.map((x, i) => x.rtt - timelines[i]!.total);
        const before = sent.map((x, i) => timelines[i]!.start + srvOffset - x.sentMono);
        const after = sent.map((x, i) => x.doneMono - (timelines[i]!.marks.finished! + srvOffset));
        const stageNames = timelines[0]!.stages.map(([k]) => k);
        const stages = Object.fromEntries(stageNames.map((k) => [k, r2(median(timelines.map((t) => t.stages.find(([s]) => s === k)?.[1] ?? 0)))]));
        const o = median(over);
        const d = median(dec);
        const r = {
          bytes: Buffer.byteLength(body),
          overhead_ms: { p50: r2(o), p90: r2(pct(over, 90)) },
          sharp_decode_ms_p50: r2(d),
          target_ms: r2(target(name, d)),
          meets_target: o <= target(name, d),
          round_trip_ms_p50: r2(median(sent.map((x) => x.rtt))),
          timeline_total_ms_p50: r2(median(timelines.map((t) => t.total))),
          // What the server's stages leave out of the client's round trip: before the request event and after the last write.
          unaccounted_ms: { p50: r2(median(gap)), p90: r2(pct(gap, 90)), before_arrival_p50: r2(median(before)), after_last_write_p50: r2(median(after)) },
          accounts_within_1ms: Math.abs(median(gap)) <= 1,
          stage_p50_ms: stages,
          gc_ms: { p50: r2(median(timelines.map((t) => t.gcMs))), mean: r2(timelines.reduce((a, t) => a + t.gcMs, 0) / n) },
          loop_delay_ms_p50: r2(median(timelines.map((t) => t.loopDelayMs))),
          cpu_ms_per_request: {
            server: r2((s1.server_cpu_ms - s0.server_cpu_ms) / n),
            sidecar: r2(((s1.sidecar_cpu_ms ?? 0) - (s0.sidecar_cpu_ms ?? 0)) / n),
            client_incl_sharp_baseline: r2(clientCpu / n),
          },
          timing_ms_p50: Object.fromEntries(['decode', 'preprocess', 'queue', 'transfer', 'postprocess', 'inference', 'total'].map((k) => [k, r2(median(sent.map((x) => x.t[k]!)))])),
          server_timing_example: sent[sent.length >> 1]!.serverTiming,
        };
        out[`${name}-${kind}${client === 'raw' ? '' : '-undici'}`] = r;
        console.log(`${label} ${name} ${kind} (${client === 'raw' ? 'minimal client' : 'undici'}): overhead p50 ${r.overhead_ms.p50} ms vs sharp decode ${r.sharp_decode_ms_p50} → target ${r.target_ms} ${r.meets_target ? 'MET' : 'NOT MET'}; rtt ${r.round_trip_ms_p50}, unaccounted p50 ${r.unaccounted_ms.p50} ms; cpu/req server ${r.cpu_ms_per_request.server} sidecar ${r.cpu_ms_per_request.sidecar}`);
        console.log(`   stages ${Object.entries(stages).filter(([, v]) => v >= 0.05).map(([k, v]) => `${k} ${v}`).join(', ')}; gc mean ${r.gc_ms.mean}, loop-delay p50 ${r.loop_delay_ms_p50}`);
      }
    }
  } finally {
    for (const { pool, raw } of conns) {
      await pool.close();
      await raw.close();
    }
  }
  return outs;
}

async function crowd(srv: Server, name: string, bytes: Buffer, clients: number, total: number, raw: boolean, query = '') {
  const pool = new Pool(srv.url, { connections: clients });
  const body = raw ? bytes : JSON.stringify({ image: bytes.toString('base64'), ...(query ? { fast_decode: true } : {}) });
  const ct = raw ? 'image/jpeg' : 'application/json';
  const q = raw ? query : '';
  for (let i = 0; i < clients; i++) await predict(pool, body, ct, q);
  await srv.reset();
  await srv.timelines();
  const s0 = await srv.stats();
  const load0 = os.loadavg()[0]!;
  const t0 = performance.now();
  let next = 0;
  await Promise.all(Array.from({ length: clients }, async () => {
    while (next < total) {
      next++;
      await predict(pool, body, ct, q);
    }
  }));
  const wall = performance.now() - t0;
  const s1 = await srv.stats();
  const { timelines } = await srv.timelines();
  await pool.close();
  // The engine is busy while it computes a forward (the sum of the sidecar's forward_ms), not merely while a
  // request is in the sidecar (that includes its resize).
  const busy = (s1.forward_ms - s0.forward_ms) / wall;
  const inSidecar = (s1.busy_ms - s0.busy_ms) / wall;
  const gcMs = timelines.reduce((n, t) => n + t.gcMs, 0) / Math.max(1, timelines.length);
  const r = {
    clients, requests: total, body: `${raw ? 'raw image/jpeg' : 'json base64'}${query ? ' fast_decode' : ''}`, rps: r2((1000 * total) / wall), engine_busy: r2(busy),
    sidecar_busy: r2(inSidecar), event_loop_delay_ms: { p50: r2(s1.eld_ms.p50), p99: r2(s1.eld_ms.p99), max: r2(s1.eld_ms.max) },
    cpu_ms_per_request: { server: r2((s1.server_cpu_ms - s0.server_cpu_ms) / total), sidecar: r2(((s1.sidecar_cpu_ms ?? 0) - (s0.sidecar_cpu_ms ?? 0)) / total) },
    gc_ms_per_request: r2(gcMs),
    load_avg_1m: [r2(load0), r2(os.loadavg()[0]!)],
  };
  console.log(`crowd ${name} ×${clients} (${r.body}): ${r.rps} req/s, engine busy ${r2(100 * busy)} % (a request in the sidecar ${r2(100 * inSidecar)} %), event-loop delay p99 ${r.event_loop_delay_ms.p99} ms (max ${r.event_loop_delay_ms.max}); cpu/req server ${r.cpu_ms_per_request.server} sidecar ${r.cpu_ms_per_request.sidecar}; load ${r.load_avg_1m.join(' → ')}`);
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
  ...(Object.keys(serverEnv).length ? { server_env: serverEnv } : {}),
  images: Object.fromEntries(Object.entries(images).map(([k, v]) => [k, v.length])),
};
const KINDS: BodyKind[] = ['json', 'multipart', 'raw'];
// --shm-max-bytes N: the server's RFDETR_SHM_MAX_BYTES (8388608 keeps 4000×3000 frames on the socket; the default sends every size through shared memory).
const sleep = await startServer('test-sleep', 8, values['shm-max-bytes'] ? { RFDETR_SHM_MAX_BYTES: values['shm-max-bytes'] } : {});
try {
  if (want('overhead') && values.baseline) {
    const base = await startServer('test-sleep', 8, values['shm-max-bytes'] ? { RFDETR_SHM_MAX_BYTES: values['shm-max-bytes'] } : {}, path.resolve(values.baseline));
    try {
      const load = os.loadavg().map(r2);
      const [b, t] = await overheadAb([{ srv: base, label: `baseline (${values.baseline})` }, { srv: sleep, label: 'this tree' }], N, KINDS);
      results.overhead_test_sleep_8ms_baseline = { root: path.resolve(values.baseline), engine: base.engine, load_avg_before: load, ...b };
      results.overhead_test_sleep_8ms = { engine: sleep.engine, load_avg_before: load, ...t };
      type Row = { overhead_ms: { p50: number }; sharp_decode_ms_p50: number; target_ms: number };
      results.overhead_ab = Object.fromEntries(Object.keys(t!).map((k) => {
        const x = b![k] as Row, y = t![k] as Row;
        return [k, { baseline_p50: x.overhead_ms.p50, this_p50: y.overhead_ms.p50, delta: r2(y.overhead_ms.p50 - x.overhead_ms.p50), sharp_decode_p50: [x.sharp_decode_ms_p50, y.sharp_decode_ms_p50], target_this: y.target_ms }];
      }));
      for (const [k, v] of Object.entries(results.overhead_ab as Record<string, { baseline_p50: number; this_p50: number; delta: number; target_this: number }>)) {
        console.log(`A/B ${k}: overhead p50 baseline ${v.baseline_p50} → this ${v.this_p50} (${v.delta >= 0 ? '+' : ''}${v.delta} ms), target ${v.target_this}`);
      }
    } finally {
      await base.stop();
    }
  } else if (want('overhead')) results.overhead_test_sleep_8ms = { engine: sleep.engine, load_avg_before: os.loadavg().map(r2), ...(await overhead(sleep, 'test-sleep 8 ms', N, KINDS)) };
  if (want('crowd')) {
    // --images narrows the crowds too (a crowd of an image not listed is skipped).
    const c: Record<string, unknown> = {};
    if (images['jpeg-4000x3000']) {
      c['jpeg-4000x3000-json'] = await crowd(sleep, 'jpeg-4000x3000', big, 8, 8 * 8, false);
      c['jpeg-4000x3000-raw'] = await crowd(sleep, 'jpeg-4000x3000', big, 8, 8 * 8, true);
      c['jpeg-4000x3000-raw-fast_decode'] = await crowd(sleep, 'jpeg-4000x3000', big, 8, 8 * 8, true, '?fast_decode=true');
    }
    if (images['jpeg-640x480']) {
      c['jpeg-640x480-json'] = await crowd(sleep, 'jpeg-640x480', jpeg, 8, 400, false);
      c['jpeg-640x480-raw'] = await crowd(sleep, 'jpeg-640x480', jpeg, 8, 400, true);
    }
    results.crowd = c;
  }
  if (want('memory')) results.memory = await memory(sleep, 1000);
} finally {
  await sleep.stop();
}
// The A side of the shared-memory frames: the same scenarios with every image sent in the frame.
if (want('overhead-noshm') || want('crowd-noshm')) {
  const noShm = await startServer('test-sleep', 8, { RFDETR_SHM: 'off' });
  try {
    if (want('overhead-noshm')) results.overhead_test_sleep_8ms_noshm = { engine: noShm.engine, load_avg_before: os.loadavg().map(r2), ...(await overhead(noShm, 'test-sleep 8 ms, RFDETR_SHM=off', N, KINDS)) };
    if (want('crowd-noshm')) {
      results.crowd_noshm = images['jpeg-4000x3000'] ? {
        'jpeg-4000x3000-json': await crowd(noShm, 'jpeg-4000x3000', big, 8, 8 * 8, false),
        'jpeg-4000x3000-raw': await crowd(noShm, 'jpeg-4000x3000', big, 8, 8 * 8, true),
      } : {};
    }
  } finally {
    await noShm.stop();
  }
}
if (want('overhead-cpu')) {
  const cpu = await startServer('cpu');
  try {
    results.overhead_cpu = { engine: cpu.engine, load_avg_before: os.loadavg().map(r2), ...(await overhead(cpu, 'cpu', Math.min(N, 8), ['json', 'raw'])) };
  } finally {
    await cpu.stop();
  }
}
results.load_avg_after = os.loadavg().map((x) => r2(x));
fs.writeFileSync(outFile, JSON.stringify(results, null, 2) + '\n');
console.log(`wrote ${outFile}`);
