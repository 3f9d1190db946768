// Waits for a state another process reaches without telling the test (a sidecar's /ready, a child gone from
// the process table): the check is polled, and the bound only turns a hang into a failure that names what
// never happened. Tests assert what they find, never how long it took.
import assert from 'node:assert/strict';

/** Resolves with the first value of `get` that is neither undefined nor false; fails naming `what` after `timeoutMs`. */
export async function waitFor<T>(what: string, get: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 60_000): Promise<T> {
  const t0 = performance.now();
  for (;;) {
    const v = await get();
    if (v !== undefined && v !== false) return v;
    if (performance.now() - t0 > timeoutMs) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
