// The sidecar transport alone (bench, not a test): infer() of a decoded RGB image through the real test-sleep
// sidecar, no HTTP, split like the server's timeline (src/http/timeline.ts): `send` = infer() called → the frame
// handed to the kernel, `sidecar-io` = frame written → reply read, minus the sidecar's preprocess and forward.
//   node --import tsx bench/server/transport.ts [--n 60] [--sizes 640x480,4000x3000] [--baseline DIR] [--forward-ms 8]
// --baseline DIR runs another checkout's client and sidecar (DIR/src, DIR/sidecar/build) in the same run,
// alternating blocks of 10 requests with this tree's, so both see the same load.
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { synthWeights } from '../../test/helpers/synth-weights.ts';
import { median, pct, r2 } from '../stats.ts';

const here = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const { values } = parseArgs({ options: { n: { type: 'string', default: '60' }, sizes: { type: 'string', default: '640x480,4000x3000' }, baseline: { type: 'string' }, 'forward-ms': { type: 'string', default: '8' } } });
const N = Number(values.n);
const weights = await synthWeights();
const roots = [...(values.baseline ? [path.resolve(values.baseline)] : []), here];

interface Backend { ready(ms: number): Promise<void>; infer(i: unknown): Promise<{ preprocessMs: number; forwardMs: number; frameWrittenAt?: number; replyReadAt?: number }>; close(): Promise<void> }
const backends: Backend[] = [];
for (const root of roots) {
  const { createBackend, silentLogger } = await import(path.join(root, 'src', 'sidecar', 'index.ts'));
  const b = createBackend({ engine: 'test-sleep', weightsDir: weights, logger: silentLogger, command: { file: path.join(root, 'sidecar', 'build', 'rfdetr-sidecar-test') }, env: { RFDETR_TEST_FORWARD_MS: values['forward-ms'] } }) as Backend;
  await b.ready(120_000);
  backends.push(b);
}
const rows: Record<string, unknown> = {};
for (const size of values.sizes!.split(',')) {
  const [w, h] = size.split('x').map(Number) as [number, number];
  const data = new Uint8Array(w * h * 3);
  for (let i = 0; i < data.length; i++) data[i] = (i * 2654435761) >>> 24;
  const stats = backends.map(() => ({ send: [] as number[], io: [] as number[], pre: [] as number[], rtt: [] as number[] }));
  for (const b of backends) for (let i = 0; i < 3; i++) await b.infer({ image: { width: w, height: h, data } });
  for (let block = 0; block < N / 10; block++) {
    for (let k = 0; k < backends.length; k++) {
      for (let i = 0; i < 10; i++) {
        // A fresh copy per request, as a decode gives (its pages are new to the writer).
        const img = w * h * 3 > 8 << 20 ? new Uint8Array(data) : data;
        const t0 = performance.now();
        const r = await backends[k]!.infer({ image: { width: w, height: h, data: img } });
        const t1 = performance.now();
        const s = stats[k]!;
        s.send.push(r.frameWrittenAt! - t0);
        s.io.push(r.replyReadAt! - r.frameWrittenAt! - r.preprocessMs - r.forwardMs);
        s.pre.push(r.preprocessMs);
        s.rtt.push(t1 - t0 - r.forwardMs);
      }
    }
  }
  stats.forEach((s, k) => {
    const label = `${roots[k] === here ? 'this tree' : 'baseline'} ${size}`;
    const row = { send_p50: r2(median(s.send)), send_p90: r2(pct(s.send, 90)), sidecar_io_p50: r2(median(s.io)), sidecar_io_p90: r2(pct(s.io, 90)), preprocess_p50: r2(median(s.pre)), rtt_minus_forward_p50: r2(median(s.rtt)) };
    rows[label] = row;
    console.log(label, JSON.stringify(row));
  });
}
for (const b of backends) await b.close();
