// Whether a process id names a live process: the owner of a stale socket directory (the supervisor) or of a
// download lock (the Hub client) may have died without cleaning up.

/** True when `pid` runs (EPERM: it runs under another user). */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}
