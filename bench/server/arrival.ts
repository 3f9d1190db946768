// How long the kernel and libuv take to hand a request's first bytes to a Node server, with no HTTP and no work:
// a forked echo server notes CLOCK_MONOTONIC at its first 'data' callback of each message and sends it back; the
// client notes the same clock just before its one write. Back to back, and after a 70 ms idle (what the overhead
// bench's server sees between requests while the client decodes its baseline). The floor under the timeline's
// `before_arrival` (bench.ts), which no mark in the server can reach (bench/server/RESULTS.md §13).
//   node --import tsx bench/server/arrival.ts [--runs 40]
import { fork } from 'node:child_process';
import net from 'node:net';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';

if (process.argv[2] === '--serve') {
  net.createServer((s) => {
    s.setNoDelay(true);
    let need = 0;
    let got = 0;
    let first = 0n;
    s.on('data', (d: Buffer) => {
      if (need === 0) [need, got, first] = [d.readUInt32LE(0), 0, process.hrtime.bigint()];
      got += d.length;
      if (got < need) return;
      const b = Buffer.alloc(8);
      b.writeBigUInt64LE(first);
      s.write(b);
      need = 0;
    });
  }).listen(0, '127.0.0.1', function (this: net.Server) {
    process.send!((this.address() as net.AddressInfo).port);
  });
} else {
  const { values } = parseArgs({ options: { runs: { type: 'string', default: '40' } } });
  const runs = Number(values.runs);
  const child = fork(fileURLToPath(import.meta.url), ['--serve'], { execArgv: ['--import', 'tsx'] });
  const port = await new Promise<number>((resolve) => child.once('message', (m) => resolve(m as number)));
  const s = net.connect(port, '127.0.0.1');
  s.setNoDelay(true);
  await new Promise((r) => s.once('connect', r));
  const one = (buf: Buffer) => new Promise<number>((resolve) => {
    buf.writeUInt32LE(buf.length, 0);
    const t0 = process.hrtime.bigint();
    s.once('data', (d: Buffer) => resolve(Number(d.readBigUInt64LE(0) - t0) / 1e6));
    s.write(buf);
  });
  const median = (a: number[]) => [...a].sort((x, y) => x - y)[a.length >> 1]!;
  for (const size of [100, 418_000, 3 << 20]) {
    const buf = Buffer.alloc(size, 1);
    const hot: number[] = [];
    const idle: number[] = [];
    for (let i = 0; i < runs; i++) hot.push(await one(buf));
    for (let i = 0; i < runs; i++) {
      await new Promise((r) => setTimeout(r, 70));
      idle.push(await one(buf));
    }
    console.log(`${size} B: the client's write -> the server's first data callback, p50: back to back ${median(hot).toFixed(3)} ms, after a 70 ms idle ${median(idle).toFixed(3)} ms`);
  }
  s.destroy();
  child.kill();
}
