// Shared by the POST /predict/video tests: the upload, the answer's NDJSON lines, one forward held until the
// test lets it go, and stills sent while a video holds the engine (queued behind it, then answered).
import assert from 'node:assert/strict';
import { goldens, u8, waitFor, type Started } from './helpers.ts';

/** POST /predict/video with `body` (a video/mp4 upload unless `headers` say otherwise). */
export function postVideo(url: string, query: string, body: BodyInit, headers: Record<string, string> = { 'content-type': 'video/mp4' }, signal?: AbortSignal): Promise<Response> {
  return fetch(`${url}/predict/video${query}`, { method: 'POST', headers, body, signal });
}

/** The backend's `n`th call (counting every call so far) waits in the engine until the returned function is called. */
export function holdForward(s: Started, n: number): () => void {
  let unblock!: () => void;
  const held = new Promise<void>((r) => (unblock = r));
  const respond = s.backend.respond;
  s.backend.respond = async (input) => {
    if (s.backend.calls === n) await held;
    return respond(input);
  };
  return unblock;
}

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
