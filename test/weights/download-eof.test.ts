// A CDN that writes the whole body and closes the socket at once (Connection: close): undici 7's HTTP/1 parser,
// left paused by a full body buffer when the FIN arrives, throws an uncatchable AssertionError (nodejs/undici#5360)
// that takes the whole process down. The download path must never get there. No slow reader is needed to get
// there: the pre-fix path (request()'s body stream into a file write stream) crashed at download 2 to 6 of 30 in
// 6 of 6 runs with no progress stream at all; a busy-waiting terminal added nothing but a dependence on the clock.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { resolveWeights } from '../../src/weights/resolve.ts';
import { FakeHub, type FakeFile } from './fake-hub.ts';
import { configJson, tmpDir } from './checkpoints.ts';

const REPO = 'Roboflow/rf-detr-base';
const PINNED = '7b95b089788e6c7db56d5ea9b0a07ca08ea6ac0a';
const RUNS = 30;

/** A terminal that keeps what it is given: the bar is drawn from the parser callback, on the path under test. */
function recordingTty() {
  const lines: string[] = [];
  return { lines, isTTY: true, write: (s: string) => void lines.push(s) };
}

test(`download: ${RUNS} downloads in a row from a CDN that closes the socket right after the body never crash`, async () => {
  const model: FakeFile = { content: crypto.randomBytes(2 << 20), lfs: true };
  const hub = await new FakeHub().start();
  hub.cdnCloses = true;
  hub.addCommit(REPO, PINNED, { 'model.safetensors': model, 'config.json': { content: configJson(91), lfs: false } }, 'main');
  const uncaught: Error[] = [];
  const onUncaught = (e: Error) => void uncaught.push(e);
  process.prependListener('uncaughtException', onUncaught);
  const root = tmpDir('dl-eof');
  try {
    for (let i = 0; i < RUNS && uncaught.length === 0; i++) {
      const cache = path.join(root, `cache-${i}`);
      const tty = recordingTty();
      const r = await resolveWeights({ env: { HOME: root, HF_HUB_CACHE: cache, HF_ENDPOINT: hub.hubUrl }, progress: tty });
      assert.ok(fs.readFileSync(r.files.model).equals(model.content), `run ${i}: the downloaded file differs`);
      assert.match(tty.lines.join(''), /model\.safetensors \[#{24}\] 100% [^\r]*\n/, `run ${i}: the progress bar ends at 100%`);
      fs.rmSync(cache, { recursive: true, force: true });
    }
  } finally {
    process.off('uncaughtException', onUncaught);
    await hub.close();
    fs.rmSync(root, { recursive: true, force: true });
  }
  assert.deepEqual(uncaught.map((e) => e.message.split('\n').join(' ')), [], 'no uncaught exception during the downloads');
});
