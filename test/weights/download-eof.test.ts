// A CDN that writes the whole body and closes the socket at once (Connection: close) while the client reads
// slowly: undici 7's HTTP/1 parser, left paused by a full body buffer when the FIN arrives, throws an uncatchable
// AssertionError (nodejs/undici#5360) that takes the whole process down. The download path must never get there.
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
// Before the fix every run of this test crashed, within the first few downloads (10 of 10 runs).
const RUNS = 30;

/** A terminal that takes 3 ms per write: the progress bar slows the reader down. */
function slowTty() {
  return {
    isTTY: true,
    write(_s: string) {
      const t = performance.now();
      while (performance.now() - t < 3);
      return true;
    },
  };
}

test(`download: ${RUNS} downloads in a row from a CDN that closes the socket right after the body, read slowly, never crash`, async () => {
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
      const r = await resolveWeights({ env: { HOME: root, HF_HUB_CACHE: cache, HF_ENDPOINT: hub.hubUrl }, progress: slowTty() });
      assert.ok(fs.readFileSync(r.files.model).equals(model.content), `run ${i}: the downloaded file differs`);
      fs.rmSync(cache, { recursive: true, force: true });
    }
  } finally {
    process.off('uncaughtException', onUncaught);
    await hub.close();
    fs.rmSync(root, { recursive: true, force: true });
  }
  assert.deepEqual(uncaught.map((e) => e.message.split('\n').join(' ')), [], 'no uncaught exception during the downloads');
});
