// The net under /predict/video's errors: a path under the server's temporary root is taken out of an error's
// message and string details, whatever characters the root has; an error without one is passed on as it is.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RfdetrError } from '../../src/errors.ts';
import { clientSafeError, withoutServerPaths } from '../../src/http/server-paths.ts';

const ROOT = '/var/tmp/a.b+c(1)';

test('withoutServerPaths: each path under a root (quoted or not, to the next space or quote) is replaced; a look-alike is not', () => {
  const file = `${ROOT}/rfdetr-video-Xy12/input`;
  assert.equal(withoutServerPaths(`"${file}" is not a readable video (ffprobe: ${file}: Invalid data)`, [ROOT]), '"(a server path)" is not a readable video (ffprobe: (a server path): Invalid data)');
  assert.equal(withoutServerPaths(`open '${file}'`, [ROOT]), "open '(a server path)'");
  assert.equal(withoutServerPaths('/var/tmp/aXb+c(1)/x', [ROOT]), '/var/tmp/aXb+c(1)/x', 'the root\'s "." is a dot, not any character');
});

test('clientSafeError: same code, message and string details scrubbed, the original as cause; untouched errors pass as they are', () => {
  const file = `${ROOT}/rfdetr-video-Xy12/input`;
  const e = new RfdetrError('E_VIDEO_UNDECODABLE', `"${file}" is truncated`, { frames: 3, where: file });
  const safe = clientSafeError(e, [ROOT]) as RfdetrError;
  assert.ok(safe instanceof RfdetrError && safe !== e);
  assert.equal(safe.code, 'E_VIDEO_UNDECODABLE');
  assert.equal(safe.message, '"(a server path)" is truncated');
  assert.deepEqual(safe.details, { frames: 3, where: '(a server path)' });
  assert.equal((safe as Error & { cause?: unknown }).cause, e);
  const plain = new Error(`EACCES: permission denied, mkdtemp '${ROOT}/rfdetr-video-XXXXXX'`);
  const wrapped = clientSafeError(plain, [ROOT]) as RfdetrError;
  assert.equal(wrapped.code, 'E_INTERNAL');
  assert.equal(wrapped.message, "internal error: Error: EACCES: permission denied, mkdtemp '(a server path)'");
  const clean = new RfdetrError('E_VIDEO_TOO_LONG', 'the video lasts 700 s');
  assert.equal(clientSafeError(clean, [ROOT]), clean);
});
