// The in-sidecar decode (sidecar/src/decode, run as sidecar/build/rfdetr-decode) against the server's own decode:
// every file of the corpus (decode-corpus.ts) either decodes to exactly decodeImage's bytes, or is declined AND is
// one of the forms meant to decline (DECLINED_FORMS) with the reason that form names. A plain file declined by
// accident fails as surely as a wrong pixel.
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { decodeImage } from '../../src/image/decode.ts';
import { packageRoot } from '../../src/config/paths.ts';
import { skipOrFail } from '../helpers/skip.ts';
import { decodeCorpus, type DecodeCase } from './decode-corpus.ts';

const tool = path.join(packageRoot, 'sidecar', 'build', 'rfdetr-decode');
const missing = `${tool} is not built (it is built with the sidecar: npm install, or cmake --build sidecar/build --target rfdetr-decode)`;

interface Outcome {
  c: DecodeCase;
  status: number | null;
  stdout: Buffer;
  stderr: string;
  want: Uint8Array;
}

function runTool(format: string, file: string, w: number, h: number) {
  return spawnSync(tool, [format, file, String(w), String(h)], { maxBuffer: 256 * 1024 * 1024 });
}

let outcomes: Outcome[] = [];

before(async () => {
  if (!fs.existsSync(tool)) return;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'decode-identity-'));
  try {
    for (const c of await decodeCorpus()) {
      const file = path.join(dir, `${outcomes.length}.${c.format}`);
      fs.writeFileSync(file, c.bytes);
      const r = runTool(c.format, file, c.width, c.height);
      const img = await decodeImage(c.bytes, { thread: false });
      assert.equal(img.width, c.width, `${c.name}: decodeImage's width`);
      outcomes.push({ c, status: r.status, stdout: r.stdout, stderr: r.stderr.toString(), want: img.data });
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

function firstDifference(a: Uint8Array, b: Uint8Array): string {
  if (a.length !== b.length) return `${a.length} bytes, decodeImage ${b.length}`;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return `byte ${i} (pixel ${Math.floor(i / 3)}, channel ${i % 3}): ${a[i]} vs decodeImage ${b[i]}`;
  return 'equal';
}

test('sidecar decode: every file it accepts decodes to exactly decodeImage\'s bytes', (t) => {
  if (!fs.existsSync(tool)) return skipOrFail(t, missing);
  assert.ok(outcomes.length >= 170, `the corpus has ${outcomes.length} files; expected at least 170`);
  const wrong = outcomes.filter((o) => o.status === 0 && Buffer.compare(o.stdout, Buffer.from(o.want.buffer, o.want.byteOffset, o.want.length)) !== 0)
    .map((o) => `${o.c.name}: ${firstDifference(o.stdout, o.want)}`);
  assert.deepEqual(wrong, [], `decoded differently from the server:\n${wrong.join('\n')}`);
  const crashed = outcomes.filter((o) => o.status !== 0 && o.status !== 3).map((o) => `${o.c.name}: exit ${o.status} ${o.stderr}`);
  assert.deepEqual(crashed, []);
  const accepted = outcomes.filter((o) => o.status === 0).length;
  t.diagnostic(`${outcomes.length} files: ${accepted} identical, ${outcomes.length - accepted} declined`);
});

test('sidecar decode: it declines exactly the forms meant to decline, naming the reason', (t) => {
  if (!fs.existsSync(tool)) return skipOrFail(t, missing);
  const wrong: string[] = [];
  for (const o of outcomes) {
    const declined = o.status === 3;
    if (declined && !o.c.declines) wrong.push(`${o.c.name}: declined a plain file (${o.stderr.trim()})`);
    if (!declined && o.c.declines) wrong.push(`${o.c.name}: accepted a form meant to decline (${o.c.declines})`);
    if (declined && o.c.declines && !o.c.declines.test(o.stderr)) wrong.push(`${o.c.name}: declined with '${o.stderr.trim()}', expected ${o.c.declines}`);
  }
  assert.deepEqual(wrong, [], wrong.join('\n'));
  const forms = new Set(outcomes.filter((o) => o.c.declines).map((o) => String(o.c.declines)));
  assert.equal(forms.size, 4, `the corpus holds each declined form (interlaced, 16-bit grey, low-bit grey, CMYK); it holds ${[...forms].join(', ')}`);
});

test('rfdetr-decode: exit 2 on usage errors, 3 with the reason on a decline', (t) => {
  if (!fs.existsSync(tool)) return skipOrFail(t, missing);
  assert.equal(spawnSync(tool, ['gif', 'x', '1', '1']).status, 2);
  assert.equal(spawnSync(tool, ['png', 'x', '0', '1']).status, 2);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'decode-tool-'));
  try {
    const file = path.join(dir, 'not.png');
    fs.writeFileSync(file, 'not a png');
    const r = runTool('png', file, 1, 1);
    assert.equal(r.status, 3);
    assert.match(r.stderr.toString(), /declined: png: no PNG signature/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
