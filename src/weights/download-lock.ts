// A cross-process lock on one blob download, so two processes filling the same Hub cache never write the same
// blob at once: an O_EXCL file holding the owner's pid, taken over when that owner is gone.
import fs from 'node:fs';
import path from 'node:path';
import { RfdetrError } from '../errors.ts';
import { pidAlive } from '../pid.ts';

// Separate from huggingface_hub's own flock files, which stay behind after use and cannot be read as held or
// free without flock.
const heldLocks = new Set<string>();

/** Waits (up to 30 minutes, saying so once) until this process holds `lockPath`. */
export async function acquireLock(lockPath: string, log: (line: string) => void): Promise<{ release(): void }> {
  fs.mkdirSync(path.dirname(lockPath), { recursive: true });
  const deadline = Date.now() + 30 * 60_000;
  let said = false;
  for (;;) {
    try {
      const fd = fs.openSync(lockPath, 'wx');
      fs.writeSync(fd, String(process.pid));
      fs.closeSync(fd);
      heldLocks.add(lockPath);
      return {
        release: () => {
          heldLocks.delete(lockPath);
          fs.rmSync(lockPath, { force: true });
        },
      };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    let owner = NaN;
    let ageMs = 0;
    try {
      const text = fs.readFileSync(lockPath, 'utf8').trim();
      ageMs = Date.now() - fs.statSync(lockPath).mtimeMs;
      // Created but its pid not yet written: give the owner a moment before calling it stale.
      owner = text === '' && ageMs < 5_000 ? process.pid : Number(text);
    } catch {
      continue; // released between our open and read
    }
    if (owner === process.pid && !heldLocks.has(lockPath) && ageMs < 5_000) {
      await new Promise((r) => setTimeout(r, 50));
      continue;
    }
    const heldHere = owner === process.pid && heldLocks.has(lockPath);
    if (!heldHere && (!Number.isInteger(owner) || owner <= 0 || !alive(owner))) {
      log(`weights: taking over the stale download lock ${lockPath} (owner ${owner} is gone)`);
      fs.rmSync(lockPath, { force: true });
      continue;
    }
    if (Date.now() > deadline) {
      throw new RfdetrError('E_HUB', `another process (pid ${owner}) has held ${lockPath} for 30 minutes; stop it or remove the lock file`, { lockPath });
    }
    if (!said) log(`weights: waiting for pid ${owner}, which is downloading the same file (${lockPath})`);
    said = true;
    await new Promise((r) => setTimeout(r, 250));
  }
}

function alive(pid: number): boolean {
  return pid !== process.pid && pidAlive(pid); // held in this process only while in heldLocks (checked by the caller)
}

