// The set-up shared by the tests that run `rfdetr detect` on videos through bin/rfdetr.js and the test
// build's sidecar: the skip (no ffmpeg, unless RFDETR_REQUIRE_ALL=1; a missing test sidecar fails), a scratch
// directory and synthetic weights, made before the file's tests and removed after.
import { after, before } from 'node:test';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { packageRoot } from '../../src/config/paths.ts';
import { synthWeights } from './synth-weights.ts';
import { ffmpegSkipReason } from './videos.ts';
import { requireAll } from './skip.ts';
import assert from 'node:assert/strict';

export interface VideoCli {
  readonly testSidecar: string;
  readonly reason: string | null;
  readonly skip: { skip?: string };
  /** Set before the first test runs. */
  dir: string;
  weights: string;
}

export function videoCli(prefix: string): VideoCli {
  const testSidecar = path.join(packageRoot, 'sidecar', 'build', 'rfdetr-sidecar-test');
  // The repo builds the test sidecar: its absence is a failure, never a skip.
  const reason = ffmpegSkipReason();
  const v: VideoCli = { testSidecar, reason, skip: reason && !requireAll ? { skip: reason } : {}, dir: '', weights: '' };
  before(async () => {
    assert.ok(fs.existsSync(testSidecar), `${testSidecar} is not built: run npm run build:sidecar`);
    v.dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
    if (!reason) v.weights = await synthWeights();
  });
  after(() => fs.rmSync(v.dir, { recursive: true, force: true }));
  return v;
}
