// Starts the test build's sidecar (sidecar/build/rfdetr-sidecar-test, engine test-echo: logits = pixel_values + 1)
// on a socket in a fresh temporary directory, and resolves once it printed its READY line (the socket listens).
// The test's after() hook stops it (SIGTERM, awaited) and removes the directory.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execa, type ResultPromise } from 'execa';
import { packageRoot } from '../../src/config/paths.ts';

export const testSidecarBinary = path.join(packageRoot, 'sidecar', 'build', 'rfdetr-sidecar-test');

export async function startTestSidecar(t: { after: (fn: () => unknown) => void }, prefix: string): Promise<{ socket: string; pid: number; child: ResultPromise }> {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  const socket = path.join(dir, 'run', 'sidecar.sock');
  const child = execa(testSidecarBinary, ['--engine', 'test-echo', '--weights', dir, '--socket', socket], { reject: false, stderr: 'ignore' });
  t.after(async () => {
    child.kill('SIGTERM');
    await child;
    rmSync(dir, { recursive: true, force: true });
  });
  await new Promise<void>((resolve, reject) => {
    let buf = '';
    child.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      if (buf.includes('READY ')) resolve();
    });
    void child.then((r) => reject(new Error(`sidecar exited before READY: ${r.exitCode}`)));
  });
  return { socket, pid: child.pid!, child };
}
