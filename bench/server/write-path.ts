// The answer's write, alone (bench, not a test): express's res.send(text) against res.end(text) with the same
// headers, for a 20 KB /predict-sized JSON answer, timed from the call until the last byte is with the kernel.
//   node --import tsx bench/server/write-path.ts send|end [fork]   (fork: the client in another process, as in bench.ts)
import express from 'express';
import { RawClient } from './raw-client.ts';
const body = { detections: Array.from({ length: 100 }, (_, i) => ({ label: 'person', label_id: 1, score: Math.fround(Math.random()), box: [Math.fround(Math.random()*640), 1.5, 2.25, 3.125], box_cxcywh_norm: [0.1,0.2,0.3,0.4].map(Math.fround) })) , timing_ms: { a: 1.23456789 } };
const mode = process.argv[2];
const app = express(); app.set('etag', false);
const xs: number[] = [];
app.post('/p', (req, res) => {
  req.resume(); req.on('end', () => {
    const text = JSON.stringify(body);
    const t0 = performance.now();
    res.setHeader('Server-Timing', 'a;dur=1');
    if (mode === 'send') res.type('application/json').send(text);
    else { res.setHeader('Content-Type', 'application/json; charset=utf-8'); res.setHeader('Content-Length', Buffer.byteLength(text)); res.end(text); }
    const done = () => xs.push(performance.now() - t0);
    if (res.writableFinished) done(); else res.once('finish', done);
  });
});
if (mode === 'client') {
  const c = await RawClient.connect(process.argv[3]!);
  for (let i = 0; i < 3000; i++) await c.request('POST', '/p', { 'content-type': 'application/json' }, '{}');
  await c.close(); process.exit(0);
}
const srv = app.listen(0, '127.0.0.1', async () => {
  if (process.argv[3] === 'fork') {
    const { fork } = await import('node:child_process');
    const ch = fork(new URL(import.meta.url).pathname, ['client', `http://127.0.0.1:${(srv.address() as any).port}`], { execArgv: ['--import', 'tsx'] });
    await new Promise((r) => ch.once('exit', r));
    xs.sort((a, b) => a - b); console.log(mode, 'other process: p50 ms', xs[xs.length >> 1]!.toFixed(4), 'p90', xs[Math.floor(xs.length * 0.9)]!.toFixed(4));
    srv.close(); process.exit(0);
  }
  const c = await RawClient.connect(`http://127.0.0.1:${(srv.address() as any).port}`);
  let h = '';
  for (let i = 0; i < 3000; i++) { const r = await c.request('POST', '/p', { 'content-type': 'application/json' }, '{}'); if (i === 0) h = JSON.stringify(r.headers) + ' ' + r.body.length; }
  xs.sort((a, b) => a - b); console.log(mode, 'p50 ms', xs[xs.length >> 1]!.toFixed(4), 'p90', xs[Math.floor(xs.length * 0.9)]!.toFixed(4), h);
  await c.close(); srv.close(); process.exit(0);
});
