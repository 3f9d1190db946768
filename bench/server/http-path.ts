// The HTTP path alone (bench, not a test): the server of a checkout in this process with an in-process engine
// that answers at once (every query above 0.5 and 100 detections kept, as with test-sleep's logits, pixel_values + 1), sharp's real decode, and
// the minimal client (raw-client.ts) in another process sending a 640×480 JPEG at concurrency 1. Prints the
// p50 of every timeline stage and of the client's round trip less the decode, per checkout, alternating
// checkouts block by block so both see the same load.
//   node --import tsx bench/server/http-path.ts [--baseline DIR] [--n 300] [--blocks 4] [--body raw|json|multipart]
import { fork } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { RawClient } from './raw-client.ts';
import { testFixturesDir } from '../../src/config/paths.ts';
import { median } from '../stats.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const { values } = parseArgs({ options: { baseline: { type: 'string' }, n: { type: 'string', default: '300' }, blocks: { type: 'string', default: '4' }, body: { type: 'string', default: 'raw' }, child: { type: 'string' }, root: { type: 'string' } } });
const BOUNDARY = 'rfdetr-bench-boundary-7d3f';

async function bodyOf(kind: string): Promise<{ body: Buffer; ct: string }> {
  const png = fs.readFileSync(path.join(testFixturesDir, 'rfdetr-synth', 'case-1', 'input.png'));
  const jpeg = await sharp(png).jpeg({ quality: 90 }).toBuffer();
  if (kind === 'json') return { body: Buffer.from(JSON.stringify({ image: jpeg.toString('base64') })), ct: 'application/json' };
  if (kind === 'multipart') {
    const head = `--${BOUNDARY}\r\nContent-Disposition: form-data; name="image"; filename="x.jpg"\r\nContent-Type: application/octet-stream\r\n\r\n`;
    return { body: Buffer.concat([Buffer.from(head), jpeg, Buffer.from(`\r\n--${BOUNDARY}--\r\n`)]), ct: `multipart/form-data; boundary=${BOUNDARY}` };
  }
  return { body: jpeg, ct: 'image/jpeg' };
}

if (values.child) {
  // The server: a checkout's createServer, an engine that answers at once.
  const root = path.resolve(values.root ?? path.join(here, '..', '..'));
  const { createServer } = await import(path.join(root, 'src/http/server.ts'));
  const { createJsonLogger } = await import(path.join(root, 'src/http/log.ts'));
  const Q = 300, C = 91;
  const logits = new Float32Array(Q * C);
  const boxes = new Float32Array(Q * 4);
  let seed = 1;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  for (let i = 0; i < logits.length; i++) logits[i] = rnd() * 4.7 - 1.1;
  for (let i = 0; i < boxes.length; i++) boxes[i] = rnd() * 0.5;
  const listeners = new Set<(s: string, p: string) => void>();
  const backend = {
    state: 'ready', restarts: 0, failureReason: null,
    info: { protocolVersion: 2, sidecarVersion: 'bench', engine: 'instant', device: 'bench', inputShape: [3, 560, 560], numQueries: Q, numClasses: C, labels: Array.from({ length: C }, (_, i) => `class-${i}`) },
    onStateChange: (l: (s: string, p: string) => void) => (listeners.add(l), () => listeners.delete(l)),
    // Both result shapes, so that an A/B run against a checkout from before named outputs serves too.
    infer: async () => ({ outputs: { logits, pred_boxes: boxes }, logits, predBoxes: boxes, preprocessMs: 0, forwardMs: 0, transferMs: 0 }),
    close: async () => {}, destroy: () => {},
  };
  const stages: Record<string, number[]> = {};
  const srv = createServer({ backend, queueSize: 64, deadlineMs: 600_000, logger: createJsonLogger('warn'), defaultMetrics: false,
    onTimeline: (t: { stages: Array<[string, number]>; marks: Record<string, number> }) => { for (const [k, v] of t.stages) (stages[k] ??= []).push(v); (stages['to-last-byte'] ??= []).push(t.stages.filter(([k]) => k !== 'write').reduce((n, [, v]) => n + v, 0)); } });
  const { url } = await srv.listen('127.0.0.1', 0);
  process.send!({ url });
  process.on('message', (m: { cmd: string }) => {
    if (m.cmd === 'stages') {
      process.send!(Object.fromEntries(Object.entries(stages).map(([k, v]) => [k, median(v.splice(0))])));
    } else void srv.drain(100).then(() => process.exit(0));
  });
} else {
  const { body, ct } = await bodyOf(values.body!);
  const N = Number(values.n);
  const roots: Array<[string, string]> = [...(values.baseline ? [['baseline', path.resolve(values.baseline)] as [string, string]] : []), ['this', path.resolve(here, '..', '..')]];
  const servers = await Promise.all(roots.map(async ([label, root]) => {
    const child = fork(fileURLToPath(import.meta.url), ['--child', '1', '--root', root], { execArgv: ['--import', 'tsx', ...(process.env.PROF ? ['--cpu-prof', '--cpu-prof-interval', '50', '--cpu-prof-dir=/tmp/prof'] : [])] });
    const { url } = await new Promise<{ url: string }>((r) => child.once('message', (m) => r(m as { url: string })));
    return { label, child, client: await RawClient.connect(url) };
  }));
  const out: Record<string, { rtt: number[]; full: number[]; stages: Array<Record<string, number>> }> = {};
  console.log(`load ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`);
  for (let b = 0; b < Number(values.blocks); b++) {
    for (const s of servers) {
      const rtt: number[] = [];
      const full: number[] = [];
      for (let i = 0; i < N; i++) {
        const r = await s.client.request('POST', '/predict', { 'content-type': ct }, body);
        if (r.status !== 200) throw new Error(`status ${r.status}: ${r.body.toString()}`);
        const t = JSON.parse(r.body.toString()).timing_ms;
        if (i >= N / 10) rtt.push(r.t1 - r.t0 - t.decode), full.push(r.t1 - r.t0);
      }
      const st = await new Promise<Record<string, number>>((r) => { s.child.once('message', (m) => r(m as Record<string, number>)); s.child.send({ cmd: 'stages' }); });
      (out[s.label] ??= { rtt: [], full: [], stages: [] }).rtt.push(median(rtt));
      out[s.label]!.full.push(median(full));
      out[s.label]!.stages.push(st);
    }
  }
  for (const [label, o] of Object.entries(out)) {
    const keys = Object.keys(o.stages[0]!).filter((k) => !['decode', 'inference', 'preprocess', 'sidecar-io', 'decode-header', 'pixel-wait'].includes(k));
    console.log(`${label}: round trip − decode p50 per block ${o.rtt.map((x) => x.toFixed(3)).join(' ')}; round trip − the server's stages up to its write p50 per block ${o.full.map((x, i) => (x - o.stages[i]!['to-last-byte']!).toFixed(3)).join(' ')}`);
    console.log(`   stages (median of block p50s) ${keys.map((k) => `${k} ${median(o.stages.map((s) => s[k] ?? 0)).toFixed(3)}`).join(', ')}`);
  }
  console.log(`load ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`);
  for (const s of servers) s.child.send({ cmd: 'exit' }), s.client.close();
}
