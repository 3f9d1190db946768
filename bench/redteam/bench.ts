// The red-team scenario (a bench, not a test: bounded in count and time, 127.0.0.x only). Starts `rfdetr serve`
// (cpu engine, synthetic weights) as its own process and measures it from outside:
//   1. under attack: every hostile kind at once from 127.0.0.1 (stalled bodies, slow headers, 40 MB junk, 8192²
//      PNG bombs singly and in batches of 16, return_image on 8192² noise, corrupt encodings; ≤ 50 connections)
//      while a client at 127.0.0.2 sends one valid request a second for 40 s: its statuses and latencies, the
//      server's peak RSS, its RSS after 60 s idle, whether it is alive;
//   2. return_image on an 8192² noise JPEG, single and a batch of five: statuses, RSS growth;
//   3. API keys: 401 without / with a wrong key, 200 with the right one, probes open;
//   4. the CLI: `detect -r` on a symlink loop, `detect -` on /dev/zero: exit status, message, time.
//   node --import tsx bench/redteam/bench.ts [--out bench/redteam/results.json] [--label NAME] [--env K=V ...]
//     [--only attack,return,keys,cli] [--seconds 40] [--idle 60] [--server-log FILE] [--node-arg ARG ...]
//     [--serve-arg ARG ...] [--no-attack]
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { parseArgs } from 'node:util';
import sharp from 'sharp';
import { packageRoot } from '../../src/config/paths.ts';

const { values } = parseArgs({
  options: {
    out: { type: 'string', default: path.join(packageRoot, 'bench', 'redteam', 'results.json') },
    label: { type: 'string', default: 'default' },
    env: { type: 'string', multiple: true, default: [] },
    seconds: { type: 'string', default: '40' },
    idle: { type: 'string', default: '60' },
    only: { type: 'string', default: 'all' },
    'server-log': { type: 'string' },
    // e.g. --node-arg=--cpu-prof --node-arg=--cpu-prof-dir=/tmp/prof: where the server's own CPU goes
    'node-arg': { type: 'string', multiple: true, default: [] },
    // e.g. --serve-arg=--decode-nice=0: a flag for every `rfdetr serve` the bench starts (the A/B of one setting)
    'serve-arg': { type: 'string', multiple: true, default: [] },
    // the legitimate client alone: what the engine gives it at this load with nobody attacking (the control)
    'no-attack': { type: 'boolean', default: false },
  },
});
const extraEnv = Object.fromEntries(values.env!.map((kv) => kv.split(/=(.*)/s).slice(0, 2)));
const bin = path.join(packageRoot, 'bin', 'rfdetr.js');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const rssMiB = (pid: number) => {
  try {
    return Number(/^VmRSS:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;
  } catch {
    return NaN;
  }
};
const median = (a: number[]) => {
  const s = [...a].sort((x, y) => x - y);
  return s.length ? s[Math.floor((s.length - 1) / 2)]! : NaN;
};
const cpuSeconds = (pid: number) => {
  const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(f[11]) + Number(f[12])) / 100; // utime + stime in clock ticks (100 Hz)
};
/** CPU seconds of `pid`'s main thread, of its other threads, and of its child processes (the sidecar), with their nice values. */
function cpuSplit(pid: number): { main: number; helpers: number; sidecar: number; helper_nice: number[]; sidecar_nice: number[] } {
  const threads = (p: number) => fs.readdirSync(`/proc/${p}/task`).flatMap((tid) => {
    try {
      const st = fs.readFileSync(`/proc/${p}/task/${tid}/stat`, 'utf8');
      const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
      return [{ tid: Number(tid), cpu: (Number(f[11]) + Number(f[12])) / 100, nice: Number(f[16]) }];
    } catch {
      return []; // the thread ended meanwhile
    }
  });
  const own = threads(pid);
  const kids = fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  const side = kids.flatMap((k) => { try { return threads(k); } catch { return []; } });
  const sum = (a: Array<{ cpu: number }>) => a.reduce((n, t) => n + t.cpu, 0);
  const helpers = own.filter((t) => t.tid !== pid);
  return { main: sum(own.filter((t) => t.tid === pid)), helpers: sum(helpers), sidecar: sum(side), helper_nice: [...new Set(helpers.map((t) => t.nice))], sidecar_nice: [...new Set(side.map((t) => t.nice))] };
}

function weights(): string {
  const dir = path.join(os.tmpdir(), 'rfdetr-redteam-weights');
  if (!fs.existsSync(path.join(dir, 'model.safetensors'))) {
    const r = spawnSync(process.execPath, [bin, 'weights', 'synth', '--seed', '1', '--out', dir], { stdio: 'inherit' });
    if (r.status !== 0) throw new Error('weights synth failed');
  }
  return dir;
}

const stderrTails: Array<() => string[]> = [];

interface Server {
  proc: ChildProcess;
  url: string;
  port: number;
  stop(): Promise<void>;
}

async function serve(args: string[], env: Record<string, string> = {}): Promise<Server> {
  const port = 21000 + Math.floor(Math.random() * 3000);
  const proc = spawn(process.execPath, [...values['node-arg']!, bin, 'serve', '--host', '127.0.0.1', '--port', String(port), '--weights', weights(), '--engine', 'cpu', '--log-level', values['server-log'] ? 'info' : 'warn', ...values['serve-arg']!, ...args], {
    env: { ...process.env, ...extraEnv, ...env }, stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  proc.stderr!.on('data', (d) => (err = (err + d).slice(-4000)));
  if (values['server-log']) proc.stderr!.pipe(fs.createWriteStream(values['server-log'], { flags: 'a' }));
  stderrTails.push(() => err.split('\n').filter((l) => !l.includes('SYNTHETIC')).slice(-6));
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    if (proc.exitCode !== null) throw new Error(`serve exited ${proc.exitCode}: ${err}`);
    try {
      if ((await fetch(`${url}/ready`)).status === 200) break;
    } catch { /* not listening yet */ }
    if (i > 600) throw new Error(`serve not ready after 300 s: ${err}`);
    await sleep(500);
  }
  return {
    proc, url, port,
    stop: async () => {
      proc.kill('SIGTERM');
      await new Promise((r) => proc.once('exit', r));
    },
  };
}

/** One request from `localAddress`; resolves with status and ms (status 0: connection error). */
function request(port: number, localAddress: string, p: string, body: Buffer, headers: Record<string, string>, timeoutMs = 120_000): Promise<{ status: number; ms: number; bytes: number; detail?: string; stages?: Record<string, number> }> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    const req = http.request({ host: '127.0.0.1', port, path: p, method: 'POST', localAddress, headers: { 'content-length': String(body.length), ...headers }, agent: false, timeout: timeoutMs }, (res) => {
      let bytes = 0;
      let head = '';
      res.on('data', (c: Buffer) => {
        bytes += c.length;
        if (head.length < 300) head += c.toString('utf8', 0, Math.min(c.length, 300));
      });
      const st = res.headers['server-timing'];
      res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - t0, bytes, ...(res.statusCode !== 200 ? { detail: head.slice(0, 300) } : {}), ...(typeof st === 'string' ? { stages: stagesOf(st) } : {}) }));
      res.on('error', () => resolve({ status: 0, ms: performance.now() - t0, bytes }));
    });
    req.on('error', () => resolve({ status: 0, ms: performance.now() - t0, bytes: 0 }));
    req.on('timeout', () => req.destroy());
    req.end(body);
  });
}

const json = (o: unknown) => Buffer.from(JSON.stringify(o));

/** `Server-Timing: name;dur=ms, ...` as {name: ms} (the request's timeline, SERVING.md). */
function stagesOf(header: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const part of header.split(',')) {
    const m = /^\s*([\w-]+);dur=([\d.]+)/.exec(part);
    if (m) out[m[1]!] = Number(m[2]);
  }
  return out;
}

/** The median of each stage over the answered requests, ms: where the legitimate client's time went. */
function stageMedians(rs: Array<{ stages?: Record<string, number> }>): Record<string, number> {
  const names = [...new Set(rs.flatMap((r) => Object.keys(r.stages ?? {})))];
  return Object.fromEntries(names.map((n) => [n, Math.round(median(rs.flatMap((r) => (r.stages?.[n] !== undefined ? [r.stages[n]!] : []))))]));
}

async function images() {
  const zeros = await sharp({ create: { width: 8192, height: 8192, channels: 3, background: { r: 0, g: 0, b: 0 } } }).png({ compressionLevel: 9 }).toBuffer();
  // Noise in 8×8 blocks: full-entropy 8192² noise is a 55 MB JPEG, over the 32 MB image limit; this is ~7 MB,
  // as in the red-team report, and its annotated PNG still does not compress.
  const noise = await sharp(randomBytes(1024 * 1024 * 3), { raw: { width: 1024, height: 1024, channels: 3 } }).resize(8192, 8192, { kernel: 'nearest' }).jpeg({ quality: 80 }).toBuffer();
  const valid = fs.readFileSync(path.join(packageRoot, 'test', 'fixtures', 'rfdetr-synth', 'case-1', 'input.png'));
  return { zeros, noise, valid };
}

/** Every hostile kind at once from 127.0.0.1 until `until`; returns counts by kind and status. */
function attack(port: number, img: Awaited<ReturnType<typeof images>>, until: number) {
  const counts: Record<string, Record<string, number>> = {};
  const count = (kind: string, status: number) => {
    counts[kind] ??= {};
    counts[kind]![status] = (counts[kind]![status] ?? 0) + 1;
  };
  const loop = async (kind: string, send: () => Promise<{ status: number }>) => {
    while (performance.now() < until) count(kind, (await send()).status);
  };
  const raw = (kind: string, head: string, dripMs: number) => loop(kind, () => new Promise((resolve) => {
    const s = net.connect({ port, host: '127.0.0.1', localAddress: '127.0.0.1' });
    let out = '';
    let i = 0;
    const t = setInterval(() => {
      if (performance.now() > until || s.destroyed) return clearInterval(t);
      if (i < head.length) s.write(head[i++]!);
    }, dripMs);
    s.on('data', (d) => (out += d));
    s.on('error', () => {});
    s.on('close', () => {
      clearInterval(t);
      resolve({ status: Number(/^HTTP\/1\.1 (\d+)/.exec(out)?.[1] ?? 0) });
    });
    setTimeout(() => s.destroy(), Math.max(0, until - performance.now()) + 100);
  }));
  const junk = randomBytes(40 * 1024 * 1024);
  const bombJson = json({ image: img.zeros.toString('base64') });
  const batchJson = json({ images: Array(16).fill(img.zeros.toString('base64')) });
  const noiseJson = json({ image: img.noise.toString('base64'), return_image: 'png' });
  const good = zlib.gzipSync(json({ image: img.valid.toString('base64') }));
  const corrupt = Buffer.concat([good.subarray(0, 20), Buffer.alloc(64, 0xa5), good.subarray(84)]);
  const post = (kind: string, body: Buffer, headers: Record<string, string>) => loop(kind, () => request(port, '127.0.0.1', '/predict', body, { 'content-type': 'application/json', ...headers }));
  const stalledHead = 'POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{"image":"';
  const tasks = [
    ...Array.from({ length: 12 }, () => raw('stalled_body', stalledHead, 1)),
    ...Array.from({ length: 6 }, () => raw('slow_headers', 'POST /predict HTTP/1.1\r\nHost: x\r\nX-Slow: ' + 'a'.repeat(10_000), 500)),
    ...Array.from({ length: 4 }, () => post('junk_40mb', junk, {})),
    ...Array.from({ length: 8 }, () => post('png_bomb', bombJson, {})),
    ...Array.from({ length: 4 }, () => post('png_bomb_batch16', batchJson, {})),
    ...Array.from({ length: 4 }, () => post('return_image_noise', noiseJson, {})),
    ...Array.from({ length: 4 }, () => post('corrupt_gzip', corrupt, { 'content-encoding': 'gzip' })),
  ];
  return { done: Promise.all(tasks), counts, connections: tasks.length };
}

async function underAttack(img: Awaited<ReturnType<typeof images>>) {
  const s = await serve([]);
  const pid = s.proc.pid!;
  const base = rssMiB(pid);
  let peak = base;
  const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(pid))), 100);
  const seconds = Number(values.seconds);
  const t0 = performance.now();
  const until = t0 + seconds * 1000 + 2000;
  const cpu0 = cpuSeconds(pid);
  const split0 = cpuSplit(pid);
  const a = values['no-attack'] ? { done: Promise.resolve([]), counts: {}, connections: 0 } : attack(s.port, img, until);
  await sleep(2000);
  const valid = json({ image: img.valid.toString('base64') });
  const legit: Array<ReturnType<typeof request>> = [];
  for (let i = 0; i < seconds; i++) {
    legit.push(request(s.port, '127.0.0.2', '/predict', valid, { 'content-type': 'application/json' }));
    await sleep(1000);
  }
  const results = await Promise.all(legit);
  const errors = Object.values(Object.fromEntries(results.filter((r) => r.status !== 200).map((r) => [r.status, `${r.status} ${r.detail ?? ''}`])));
  await a.done;
  const cpuAttack = cpuSeconds(pid) - cpu0;
  const split1 = cpuSplit(pid);
  const cpuSplitAttack = { main_s: Math.round(split1.main - split0.main), helpers_s: Math.round(split1.helpers - split0.helpers), sidecar_s: Math.round(split1.sidecar - split0.sidecar), helper_nice: split1.helper_nice, sidecar_nice: split1.sidecar_nice };
  const peakUnderAttack = peak;
  const loadavg = fs.readFileSync('/proc/loadavg', 'utf8').trim();
  await sleep(Number(values.idle) * 1000);
  const idle = rssMiB(pid);
  clearInterval(sampler);
  const alive = (await fetch(`${s.url}/tt-liveness`).then((r) => r.status).catch(() => 0)) === 200 && s.proc.exitCode === null;
  const after = await request(s.port, '127.0.0.2', '/predict', valid, { 'content-type': 'application/json' });
  // What the sidecar did with --engine-nice (null from a build without it).
  const engineNice = await fetch(`${s.url}/info`).then(async (r) => ((await r.json()) as { sidecar?: { nice?: unknown } }).sidecar?.nice ?? null).catch(() => null);
  await s.stop();
  const ok = results.filter((r) => r.status === 200);
  return {
    legit: {
      sent: results.length, ok: ok.length, ok_fraction: ok.length / results.length,
      statuses: results.reduce<Record<string, number>>((m, r) => ((m[r.status] = (m[r.status] ?? 0) + 1), m), {}),
      p50_ms: Math.round(median(results.map((r) => r.ms))), p50_ok_ms: Math.round(median(ok.map((r) => r.ms))),
      max_ms: Math.round(Math.max(...results.map((r) => r.ms))),
      latencies_ms: results.map((r) => Math.round(r.ms)),
      stage_p50_ms: stageMedians(ok),
      stages_ms: ok.map((r) => Object.fromEntries(Object.entries(r.stages ?? {}).filter(([, ms]) => ms >= 50).map(([n, ms]) => [n, Math.round(ms)]))),
      errors,
    },
    attack: { connections: a.connections, counts: a.counts },
    server: { rss_start_mib: Math.round(base), rss_peak_mib: Math.round(peakUnderAttack), rss_after_idle_mib: Math.round(idle), idle_s: Number(values.idle), cpu_s_during_attack: Math.round(cpuAttack), cpu_split_during_attack: cpuSplitAttack, engine_nice: engineNice, alive, request_after: after.status },
    loadavg_end_of_attack: loadavg,
    server_log_tail: stderrTails.at(-1)?.(),
  };
}

async function returnImage(img: Awaited<ReturnType<typeof images>>) {
  const s = await serve([]);
  const pid = s.proc.pid!;
  const base = rssMiB(pid);
  let peak = base;
  const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(pid))), 50);
  const b = img.noise.toString('base64');
  const single = await request(s.port, '127.0.0.1', '/predict', json({ image: b, return_image: 'png' }), { 'content-type': 'application/json' });
  const five = await request(s.port, '127.0.0.1', '/predict', json({ images: Array(5).fill(b), return_image: 'png' }), { 'content-type': 'application/json' });
  const plain = await request(s.port, '127.0.0.1', '/predict', json({ image: b }), { 'content-type': 'application/json' });
  clearInterval(sampler);
  await s.stop();
  return { noise_jpeg_bytes: img.noise.length, single: single.status, single_bytes: single.bytes, batch5: five.status, batch5_bytes: five.bytes, without_return_image: plain.status, rss_start_mib: Math.round(base), rss_peak_mib: Math.round(peak), rss_growth_mib: Math.round(peak - base) };
}

async function apiKeys(img: Awaited<ReturnType<typeof images>>) {
  const key = randomBytes(16).toString('hex');
  const s = await serve([], { RFDETR_API_KEYS: key });
  const body = json({ image: img.valid.toString('base64') });
  const h = { 'content-type': 'application/json' };
  const out = {
    none: (await request(s.port, '127.0.0.1', '/predict', body, h)).status,
    wrong: (await request(s.port, '127.0.0.1', '/predict', body, { ...h, authorization: `Bearer ${key}0` })).status,
    bearer: (await request(s.port, '127.0.0.1', '/predict', body, { ...h, authorization: `Bearer ${key}` })).status,
    x_api_key: (await request(s.port, '127.0.0.1', '/predict', body, { ...h, 'x-api-key': key })).status,
    probes: Object.fromEntries(await Promise.all(['/health', '/ready', '/tt-liveness'].map(async (p) => [p, (await fetch(`${s.url}${p}`)).status]))),
    metrics_without_key: (await fetch(`${s.url}/metrics`)).status,
  };
  await s.stop();
  return out;
}

function cli() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rfdetr-redteam-cli-'));
  fs.copyFileSync(path.join(packageRoot, 'test', 'fixtures', 'rfdetr-synth', 'case-1', 'input.png'), path.join(dir, 'a.png'));
  fs.symlinkSync('.', path.join(dir, 'l1'));
  fs.symlinkSync('.', path.join(dir, 'l2'));
  const run = (args: string[], input?: number) => {
    const t0 = performance.now();
    const r = spawnSync(process.execPath, [bin, 'detect', '--weights', weights(), '--json', ...args], { stdio: [input ?? 'ignore', 'pipe', 'pipe'], timeout: 120_000, encoding: 'utf8' });
    return { status: r.status, seconds: Math.round((performance.now() - t0) / 100) / 10, stdout_lines: r.stdout.split('\n').filter(Boolean).length, stderr_tail: r.stderr.trim().split('\n').slice(-2) };
  };
  const loop = run(['-r', dir]);
  const zero = fs.openSync('/dev/zero', 'r');
  const stdin = run(['-'], zero);
  fs.closeSync(zero);
  fs.rmSync(dir, { recursive: true, force: true });
  return { symlink_loop: loop, dev_zero_stdin: stdin };
}

const img = await images();
const only = values.only!;
const result: Record<string, unknown> = { label: values.label, env: extraEnv, serve_args: values['serve-arg'], date: new Date().toISOString(), cpu: os.cpus()[0]?.model, cores: os.availableParallelism(), loadavg_start: fs.readFileSync('/proc/loadavg', 'utf8').trim() };
if (only === 'all' || only.includes('attack')) result.under_attack = await underAttack(img);
if (only === 'all' || only.includes('return')) result.return_image = await returnImage(img);
if (only === 'all' || only.includes('keys')) result.api_keys = await apiKeys(img);
if (only === 'all' || only.includes('cli')) result.cli = cli();
console.log(JSON.stringify(result, null, 2));
const prev = fs.existsSync(values.out!) ? JSON.parse(fs.readFileSync(values.out!, 'utf8')) : {};
fs.writeFileSync(values.out!, `${JSON.stringify({ ...prev, [values.label!]: result }, null, 2)}\n`);
