// Where a spawned sidecar's socket lives: a fresh 0700 directory per supervisor, named
// rfdetr-sidecar-<pid>-XXXXXX so that a later process can tell (and remove) a dead owner's.
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const SOCKET_DIR_PREFIX = 'rfdetr-sidecar-';
export const SOCKET_NAME = 'sidecar.sock';

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Removes socket directories left in `tmp` by supervisors that died without closing (SIGKILL, OOM): the sidecar
 * removes its socket when it stops, not the directory. Only directories whose owner pid is gone, and that hold
 * nothing but (at most) the socket, are removed.
 */
export function sweepStaleSocketDirs(tmp: string = os.tmpdir()): string[] {
  const removed: string[] = [];
  let names: string[];
  try {
    names = readdirSync(tmp);
  } catch {
    return removed;
  }
  for (const name of names) {
    const m = /^rfdetr-sidecar-(\d+)-[A-Za-z0-9]{6}$/.exec(name);
    if (!m || Number(m[1]) === process.pid || pidAlive(Number(m[1]))) continue;
    const dir = path.join(tmp, name);
    try {
      if (statSync(dir).uid !== process.getuid?.()) continue;
      if (!readdirSync(dir).every((e) => e === SOCKET_NAME)) continue;
      rmSync(dir, { recursive: true, force: true });
      removed.push(dir);
    } catch {
      // Gone meanwhile, or not ours to read: leave it.
    }
  }
  return removed;
}

/** A fresh socket directory of this process; returns the directory and the socket path inside it. */
export function makeSocketDir(): { dir: string; socketPath: string } {
  const dir = mkdtempSync(path.join(os.tmpdir(), `${SOCKET_DIR_PREFIX}${process.pid}-`));
  return { dir, socketPath: path.join(dir, SOCKET_NAME) };
}
