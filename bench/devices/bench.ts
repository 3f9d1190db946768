// Requests/s of `rfdetr serve --devices 0,1,2,3` against `--devices 0` (the baseline, measured in the same
// run), with the test sidecar's card stand-in (test-sleep: every forward a fixed sleep off the host's cores)
// under 16 concurrent clients (bench, not a test).
//   node --import tsx bench/devices/bench.ts [--forward-ms 20] [--seconds 8] [--rounds 3] [--clients 16] [--out FILE]
// Each round runs both shapes one after the other (a fresh server each time, 1 s of warm-up not counted);
// reported: the median requests/s per shape, the per-round ratio, CPU ms per request (server + sidecars, from
// /proc), p50/p99 latency and the load average. Results: bench/devices/results.json.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import sharp from 'sharp';
import { Pool } from 'undici';
import { packageRoot } from '../../src/config/paths.ts';
import { synthWeights } from '../../test/helpers/synth-weights.ts';
import { median, pct, r2 } from '../stats.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const { values } = parseArgs({
  options: {
    'forward-ms': { type: 'string', default: '20' }, seconds: { type: 'string', default: '8' }, rounds: { type: 'string', default: '3' },
    clients: { type: 'string', default: '16' }, out: { type: 'string' },
  },
});
const forwardMs = Number(values['forward-ms']);
const seconds = Number(values.seconds);
const rounds = Number(values.rounds);
const clients = Number(values.clients);
const outFile = values.out ?? path.join(here, 'results.json');
const testBinary = path.join(packageRoot, 'sidecar', 'build', 'rfdetr-sidecar-test');
if (!fs.existsSync(testBinary)) throw new Error(`${testBinary} is not built: run npm install`);
const weights = await synthWeights(1n);
const cards = fs.mkdtempSync(path.join(os.tmpdir(), 'rfdetr-bench-cards-'));
for (const c of ['0', '1', '2', '3']) fs.writeFileSync(path.join(cards, c), '');
// A small image: the bench measures the pool, not the decode.
const png = await sharp({ create: { width: 64, height: 48, channels: 3, background: { r: 90, g: 140, b: 200 } } }).png().toBuffer();


/** utime + stime of a process and its children, in ms. */
function cpuMs(pid: number): number {
  const tick = 1000 / 100;  // USER_HZ
  let total = 0;
  const visit = (p: number) => {
    try {
      const stat = fs.readFileSync(`/proc/${p}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      total += (Number(f[11]) + Number(f[12])) * tick;
      for (const t of fs.readdirSync(`/proc/${p}/task`)) {
        for (const c of fs.readFileSync(`/proc/${p}/task/${t}/children`, 'utf8').trim().split(/\s+/).filter(Boolean)) visit(Number(c));
      }
    } catch {
      // exited meanwhile
    }
  };
  visit(pid);
  return total;
}

interface Run { devices: string; rps: number; ok: number; failed: number; cpu_ms_per_request: number; p50_ms: number; p99_ms: number; loadavg: number[] }

async function measure(devices: string): Promise<Run> {
  const server = execa(process.execPath, [path.join(packageRoot, 'bin', 'rfdetr.js'), 'serve', '--engine', 'test-sleep', '--devices', devices,
    '--weights', weights, '--port', '0', '--queue-size', '64', '--log-level', 'info'], {
    env: { RFDETR_SIDECAR: testBinary, RFDETR_TT_DEVICE_DIR: cards, RFDETR_TEST_FORWARD_MS: String(forwardMs), TT_METAL_CACHE: path.join(cards, 'cache') },
    reject: false, buffer: false,
  });
  let log = '';
  server.stderr!.on('data', (d: Buffer) => (log += d.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    const t = setInterval(() => {
      const m = /"msg":"rfdetr-serve ready[^\n]*"url":"([^"]+)"/.exec(log);
      if (m) { clearInterval(t); resolve(m[1]!); }
      if (server.exitCode !== null) { clearInterval(t); reject(new Error(`serve exited: ${log.slice(-500)}`)); }
    }, 20);
  });
  const n = devices.split(',').length;
  await new Promise<void>((resolve) => {
    const t = setInterval(async () => {
      const h = (await (await fetch(`${url}/health`)).json()) as { devices: { state: string }[] };
      if (h.devices.filter((d) => d.state === 'ready').length === n) { clearInterval(t); resolve(); }
    }, 50);
  });
  const pool = new Pool(url, { connections: clients });
  const lat: number[] = [];
  let ok = 0;
  let failed = 0;
  let counting = false;
  let stop = false;
  const client = async () => {
    while (!stop) {
      const t0 = performance.now();
      const r = await pool.request({ path: '/predict', method: 'POST', headers: { 'content-type': 'image/png' }, body: png });
      await r.body.arrayBuffer();
      if (!counting) continue;
      if (r.statusCode === 200) { ok++; lat.push(performance.now() - t0); } else failed++;
    }
  };
  const running = Array.from({ length: clients }, client);
  await new Promise((r) => setTimeout(r, 1000));
  counting = true;
  const cpu0 = cpuMs(server.pid!);
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const elapsed = (performance.now() - t0) / 1000;
  const cpu1 = cpuMs(server.pid!);
  counting = false;
  const okAtEnd = ok;
  stop = true;
  await Promise.all(running);
  await pool.close();
  server.kill('SIGTERM');
  await server;
  return {
    devices, rps: r2(okAtEnd / elapsed), ok: okAtEnd, failed, cpu_ms_per_request: r2((cpu1 - cpu0) / Math.max(1, okAtEnd)),
    p50_ms: r2(median(lat)), p99_ms: r2(pct(lat, 99)), loadavg: os.loadavg().map(r2),
  };
}

const runs: Run[] = [];
for (let i = 0; i < rounds; i++) {
  for (const d of ['0', '0,1,2,3']) {
    const r = await measure(d);
    runs.push(r);
    console.log(`round ${i + 1} --devices ${d}: ${r.rps} req/s (${r.failed} failed), ${r.cpu_ms_per_request} CPU ms/request, p50 ${r.p50_ms} ms, p99 ${r.p99_ms} ms, load ${r.loadavg.join(' ')}`);
  }
}
const one = runs.filter((r) => r.devices === '0');
const four = runs.filter((r) => r.devices !== '0');
const ratios = four.map((r, i) => r2(r.rps / one[i]!.rps));
const summary = {
  forward_ms: forwardMs, clients, seconds, rounds, cpu: os.cpus()[0]?.model, cores: os.availableParallelism(),
  median_rps: { devices_0: r2(median(one.map((r) => r.rps))), devices_0_1_2_3: r2(median(four.map((r) => r.rps))) },
  ratio_per_round: ratios, ratio_of_medians: r2(median(four.map((r) => r.rps)) / median(one.map((r) => r.rps))),
  ideal_rps: { devices_0: r2(1000 / forwardMs), devices_0_1_2_3: r2(4000 / forwardMs) },
  runs,
};
console.log(`median: --devices 0 ${summary.median_rps.devices_0} req/s, --devices 0,1,2,3 ${summary.median_rps.devices_0_1_2_3} req/s: ${summary.ratio_of_medians}× (per round ${ratios.join(', ')})`);
fs.writeFileSync(outFile, `${JSON.stringify(summary, null, 2)}\n`);
fs.rmSync(cards, { recursive: true, force: true });
