// The HTTP server over the real sidecar, in its own process, for bench/server/bench.ts (not a test).
//   node --import tsx bench/server/serve.ts --weights DIR [--engine cpu|test-sleep] [--forward-ms 8] [--threads N]
// `test-sleep` is the test build's engine whose forward is a fixed sleep off the host's cores (a TT-like
// stand-in: the sidecar overlaps the next request's resize with it). Prints `LISTENING <url>` on stdout and
// answers IPC messages: {cmd:'stats'} → event-loop delay since the last reset, server and sidecar RSS, the
// time requests spent in the sidecar (busy_ms), the sum of the engine's own forward times (forward_ms) and the
// forward count, the CPU time of both processes so far; {cmd:'timelines'} → the /predict timelines finished since
// the last ask (src/http/timeline.ts) and the offset of this process's performance.now() to CLOCK_MONOTONIC;
// {cmd:'reset'} resets the event-loop histogram. Exits on SIGTERM after drain.
import fs from 'node:fs';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { packageRoot } from '../../src/config/paths.ts';
import { createServer } from '../../src/http/server.ts';
import { createJsonLogger } from '../../src/http/log.ts';
import { createBackend, silentLogger } from '../../src/sidecar/index.ts';
import type { TimelineRecord } from '../../src/http/timeline.ts';

const { values } = parseArgs({
  options: {
    weights: { type: 'string' }, engine: { type: 'string', default: 'cpu' }, 'forward-ms': { type: 'string', default: '8' },
    threads: { type: 'string', default: '0' }, 'queue-size': { type: 'string', default: '64' },
  },
});
if (!values.weights) throw new Error('serve.ts: --weights DIR is required');
const testBinary = path.join(packageRoot, 'sidecar', 'build', 'rfdetr-sidecar-test');
const backend = createBackend({
  engine: values.engine,
  weightsDir: values.weights,
  threads: Number(values.threads),
  logger: silentLogger,
  ...(values.engine === 'test-sleep' ? { command: { file: testBinary }, env: { RFDETR_TEST_FORWARD_MS: values['forward-ms'] } } : {}),
});
const timelines: TimelineRecord[] = [];
const srv = createServer({
  backend, queueSize: Number(values['queue-size']), deadlineMs: 600_000, logger: createJsonLogger('warn'), defaultMetrics: false,
  onTimeline: (t) => timelines.push(t),
});
const { url } = await srv.listen('127.0.0.1', 0);
await backend.ready(300_000);

const eld = monitorEventLoopDelay({ resolution: 1 });
eld.enable();
// performance.now() + this offset = CLOCK_MONOTONIC in ms, the clock every process on the host shares.
const monoOffsetMs = () => Number(process.hrtime.bigint()) / 1e6 - performance.now();
/** utime + stime of a process in ms (clock ticks of 10 ms). */
const cpuMs = (pid: number | undefined) => {
  if (!pid) return null;
  const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(f[11]) + Number(f[12])) * 10;
};
const rssKiB = (pid: number | undefined) => {
  if (!pid) return null;
  const m = /^VmRSS:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : null;
};
process.on('message', async (m: { cmd: string }) => {
  if (m.cmd === 'reset') {
    eld.reset();
    process.send!({ ok: true });
  } else if (m.cmd === 'timelines') {
    process.send!({ mono_offset_ms: monoOffsetMs(), timelines: timelines.splice(0) });
  } else if (m.cmd === 'stats') {
    const own = process.cpuUsage();
    process.send!({
      server_cpu_ms: (own.user + own.system) / 1000,
      sidecar_cpu_ms: cpuMs(backend.pid),
      eld_ms: { p50: eld.percentile(50) / 1e6, p99: eld.percentile(99) / 1e6, max: eld.max / 1e6 },
      server_rss_kib: rssKiB(process.pid),
      sidecar_rss_kib: rssKiB(backend.pid),
      busy_ms: srv.engine.busyMs(),
      forward_ms: 1000 * ((await srv.metrics.engineForwardSeconds.get()).values[0]?.value ?? 0),
      forwards: srv.engine.forwardCount,
    });
  }
});
process.stdout.write(`LISTENING ${url} ${backend.info?.engine} ${backend.info?.device}\n`);
process.on('SIGTERM', () => {
  void srv.drain(5000).then(() => process.exit(0));
});
