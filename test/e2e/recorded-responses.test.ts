// Every /predict response body (JSON, multipart and raw bodies; one image and a batch with an undecodable entry;
// classes, class_thresholds, max_detections, return_raw, return_image png/jpeg; 400/422 error bodies) of Base
// and the four family sizes, and every `detect --json` line (a PNG, a JPEG, a directory, --raw), byte for byte
// equal to what the code at e59466b answered (test/fixtures/responses/, recorded by record.ts there). Masked,
// value only: the numbers of `timing_ms`; stored as a sha256 of their exact text: `raw` and an annotated
// image's `base64`. Key order and every other byte are compared.
//
// Pinned (test/e2e/recorded/scenarios.ts): RFDETR_CPU_ISA=avx2 and --threads 2. Measured on a Zen 4: the cpu
// engine's raw outputs are bit-identical for --threads 1 and 2 and differ in the last bits between its avx512 and
// avx2 kernels. Assumed, not run elsewhere: any CPU with AVX2 and FMA runs the pinned kernels' instructions in the
// same order and so gives the same bits (Zen 3, Ice Lake, Sapphire Rapids). A CPU without AVX2/FMA cannot
// reproduce the recordings: the test skips saying so (skip-or-fail), never passes. The family sizes need the
// shared family fixtures' PNGs, else they skip too.
// The JPEG decodes (the sidecar's libjpeg-turbo, sharp's in the CLI) and sharp's JPEG encode of return_image gave
// the same bytes with their SIMD forced down (JSIMD_FORCESSE2=1, JSIMD_FORCENONE=1: base and detect pass); the PNG
// encode of return_image (sharp's zlib-ng) is assumed CPU-independent, not checked on another CPU.
//
// Re-record (only for a deliberate change of the contract), from a checkout of the code to record:
//   node --import tsx test/fixtures/responses/record.ts /path/to/that/checkout
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../../src/config/paths.ts';
import { skipOrFail } from '../helpers/skip.ts';
import { MODELS, cpuCannotReproduce, familyDir, recordDetect, recordServe, recordingsDir, type Recorded } from './recorded/scenarios.ts';

const cpuSkip = cpuCannotReproduce();

/** "" when equal, else where `got` first differs from `want`, with context. */
function firstDifference(want: string, got: string): string {
  if (want === got) return '';
  let i = 0;
  while (i < want.length && want[i] === got[i]) i++;
  return `first difference at byte ${i}:\n  recorded: …${want.slice(Math.max(0, i - 80), i + 80)}\n  now:      …${got.slice(Math.max(0, i - 80), i + 80)}`;
}

const recorded = <T>(file: string): Record<string, T> => JSON.parse(fs.readFileSync(path.join(recordingsDir, file), 'utf8')) as Record<string, T>;

for (const model of MODELS) {
  test(`recorded responses: every /predict body of ${model} equals the recording from the old code`, async (t) => {
    if (cpuSkip) return skipOrFail(t, cpuSkip);
    if (model !== 'base' && !fs.existsSync(familyDir)) return skipOrFail(t, `no family fixtures at ${familyDir} (set RFDETR_FAMILY_FIXTURES)`);
    const want = recorded<Recorded>(`serve-${model}.json`);
    const got = await recordServe(packageRoot, model);
    assert.deepEqual(Object.keys(got), Object.keys(want), 'the same scenarios as recorded');
    const wrong: string[] = [];
    for (const [name, w] of Object.entries(want)) {
      const g = got[name]!;
      if (g.status !== w.status || g.content_type !== w.content_type) wrong.push(`${name}: ${g.status} ${g.content_type}, recorded ${w.status} ${w.content_type}`);
      const diff = firstDifference(w.body, g.body);
      if (diff) wrong.push(`${name}: body ${diff}`);
    }
    assert.equal(wrong.length, 0, `${model}: ${wrong.length} of ${Object.keys(want).length} responses differ from the recording:\n${wrong.join('\n')}`);
  });
}

test('recorded responses: every `detect --json` line on base equals the recording from the old code', async (t) => {
  if (cpuSkip) return skipOrFail(t, cpuSkip);
  const want = recorded<string[]>('detect-base.json');
  const got = await recordDetect(packageRoot);
  assert.deepEqual(Object.keys(got), Object.keys(want), 'the same runs as recorded');
  const wrong: string[] = [];
  for (const [name, w] of Object.entries(want)) {
    const g = got[name]!;
    if (g.length !== w.length) wrong.push(`${name}: ${g.length} lines, recorded ${w.length}`);
    w.forEach((line, i) => {
      const diff = firstDifference(line, g[i] ?? '');
      if (diff) wrong.push(`${name} line ${i + 1}: ${diff}`);
    });
  }
  assert.equal(wrong.length, 0, `${wrong.length} detect runs differ from the recording:\n${wrong.join('\n')}`);
});
