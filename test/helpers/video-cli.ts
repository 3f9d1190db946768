// The set-up shared by the tests that run `rfdetr detect` on videos through bin/rfdetr.js and the test
// build's sidecar: the skip (no ffmpeg, or no test sidecar, unless RFDETR_REQUIRE_ALL=1), a scratch
// directory and synthetic weights, made before the file's tests and removed after.
import { after, before } from 'node:test';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { packageRoot } from '../../src/config/paths.ts';
import { synthWeights } from './synth-weights.ts';
import { ffmpegSkipReason } from './videos.ts';

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
  const reason = ffmpegSkipReason() ?? (fs.existsSync(testSidecar) ? null : `needs the test sidecar ${testSidecar} (npm run build:sidecar)`);
  const v: VideoCli = { testSidecar, reason, skip: reason && process.env.RFDETR_REQUIRE_ALL !== '1' ? { skip: reason } : {}, dir: '', weights: '' };
  before(async () => {
    v.dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
    if (!reason) v.weights = await synthWeights();
  });
  after(() => fs.rmSync(v.dir, { recursive: true, force: true }));
  return v;
}
