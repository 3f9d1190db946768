// A real `rfdetr serve` child for tests that read its process (threads, nice values): a free port, the child
// started by bin/rfdetr.js (the compiled CLI, as shipped, when compiled/ is fresh), killed after the test, and
// ready (its /ready 200) before it is handed over.
import assert from 'node:assert/strict';
import net from 'node:net';
import path from 'node:path';
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import type { Readable } from 'node:stream';
import { packageRoot } from '../../src/config/paths.ts';
import { waitFor } from './wait-for.ts';

export async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

/** `rfdetr serve --host 127.0.0.1 --port P ...args`, ready; `log()` is the tail of its stderr. */
export async function startServe(t: { after: (fn: () => void) => void }, args: string[]): Promise<{ child: ChildProcessByStdio<null, null, Readable>; base: string; log: () => string }> {
  const port = await freePort();
  const child = spawn(process.execPath, [path.join(packageRoot, 'bin', 'rfdetr.js'), 'serve', '--host', '127.0.0.1', '--port', String(port), ...args], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let log = '';
  child.stderr.on('data', (d) => (log = (log + d).slice(-4000)));
  t.after(() => void (child.exitCode === null && child.kill('SIGKILL')));
  const base = `http://127.0.0.1:${port}`;
  await waitFor("rfdetr serve's /ready", async () => child.exitCode === null ? (await fetch(`${base}/ready`).then((r) => r.status === 200).catch(() => false)) : assert.fail(`serve exited ${child.exitCode}: ${log}`), 240_000);
  return { child, base, log: () => log };
}
