// Holds every thread of libuv's pool until the test releases it, so that work queued to the pool (sharp's
// decodes, fs calls) is in progress but cannot finish: a test can then check what the event loop still does
// meanwhile without timing anything. Each thread is parked in a blocking read(2) of a FIFO; the release
// writes one byte per reader. The pool is first in, first out, so work queued after hold() waits behind them.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export interface PoolHold {
  /** True while no work queued after hold() has run (a canary fs.stat queued behind the readers is pending). */
  held(): boolean;
  /** Lets every parked thread go and resolves once they all returned. Safe to call twice. */
  release(): Promise<void>;
}

/** libuv reads UV_THREADPOOL_SIZE once, at the pool's first use; 4 without it. */
export function threadPoolSize(): number {
  const n = Number(process.env.UV_THREADPOOL_SIZE);
  return Number.isInteger(n) && n > 0 ? n : 4;
}

export function holdThreadPool(threads = threadPoolSize()): PoolHold {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rfdetr-pool-'));
  const fifo = path.join(dir, 'hold');
  execFileSync('mkfifo', [fifo]);
  // O_RDWR: opening a FIFO for reading alone would block until a writer came; read and write ends in one fd.
  const fd = fs.openSync(fifo, fs.constants.O_RDWR);
  const parked = Array.from({ length: threads }, () => new Promise<void>((resolve, reject) => {
    fs.read(fd, Buffer.alloc(1), 0, 1, null, (err) => (err ? reject(err) : resolve()));
  }));
  let canaryRan = false;
  fs.stat(dir, () => (canaryRan = true));
  let released: Promise<void> | undefined;
  return {
    held: () => !canaryRan,
    release: () => (released ??= (async () => {
      fs.writeSync(fd, Buffer.alloc(threads));
      await Promise.all(parked);
      fs.closeSync(fd);
      fs.rmSync(dir, { recursive: true, force: true });
    })()),
  };
}
