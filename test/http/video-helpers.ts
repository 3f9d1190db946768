// Shared by the POST /predict/video tests: the answer's NDJSON lines, and stills sent while a video holds the
// engine (queued behind it, then answered once it is let go).
import assert from 'node:assert/strict';
import { goldens, u8, waitFor, type Started } from './helpers.ts';

export function ndjsonLines(text: string): any[] {
  return text.trim().split('\n').map((l) => JSON.parse(l));
}

/**
 * Sends `n` PNG stills to /predict, waits until they wait in the engine queue behind the `queuedBefore` jobs
 * already there, calls `release()`, and asserts every still is answered 200.
 */
export async function stillsBehindVideo(s: Started, queuedBefore: number, release: () => void, n = 3): Promise<void> {
  const png = goldens()[0]!.png;
  const stills = Array.from({ length: n }, () => fetch(`${s.url}/predict`, { method: 'POST', headers: { 'content-type': 'image/png' }, body: u8(png) }));
  await waitFor(() => s.srv.engine.depth === queuedBefore + n, `the ${n} stills queued behind the video's frame`);
  release();
  const answered = await Promise.all(stills);
  assert.deepEqual(answered.map((r) => r.status), Array.from({ length: n }, () => 200));
}
