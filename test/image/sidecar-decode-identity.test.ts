// The in-sidecar decode (sidecar/src/decode, run as sidecar/build/rfdetr-decode) against the server's own decode:
// every file of the corpus (decode-corpus.ts) either decodes to exactly decodeImage's bytes, or is declined AND is
// one of the forms meant to decline (DECLINED_FORMS) with the reason that form names. A plain file declined by
// accident fails as surely as a wrong pixel. Byte-flipped files: whatever the decoder accepts, the server decodes
// to the same bytes (it never accepts what the server rejects, never approximates).
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { decodeImage } from '../../src/image/decode.ts';
import { packageRoot } from '../../src/config/paths.ts';
import { DECLINED_FORMS, decodeCorpus, mutations, type DecodeCase } from './decode-corpus.ts';

const tool = path.join(packageRoot, 'sidecar', 'build', 'rfdetr-decode');
const missing = `${tool} is not built: nothing the repository builds is a reason to skip (it is built with the sidecar: npm install, or cmake --build sidecar/build --target rfdetr-decode)`;

interface Outcome {
  c: DecodeCase;
  status: number | null;
  stdout: Buffer;
  stderr: string;
  /** decodeImage's pixels, or undefined when it rejects the file. */
  want?: Uint8Array;
}

let dir = '';
let count = 0;

async function run(c: DecodeCase): Promise<Outcome> {
  const file = path.join(dir, `${count++}.${c.format}`);
  fs.writeFileSync(file, c.bytes);
  const r = spawnSync(tool, [c.format, file, String(c.width), String(c.height)], { maxBuffer: 256 * 1024 * 1024 });
  fs.rmSync(file);
  const img = await decodeImage(c.bytes, { thread: false }).catch(() => undefined);
  return { c, status: r.status, stdout: r.stdout, stderr: r.stderr.toString(), ...(img ? { want: img.data } : {}) };
}

function same(o: Outcome): boolean {
  return o.want !== undefined && Buffer.compare(o.stdout, Buffer.from(o.want.buffer, o.want.byteOffset, o.want.length)) === 0;
}

function firstDifference(o: Outcome): string {
  const [a, b] = [o.stdout, o.want];
  if (!b) return 'decodeImage rejects the file';
  if (a.length !== b.length) return `${a.length} bytes, decodeImage ${b.length}`;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return `byte ${i} (pixel ${Math.floor(i / 3)}, channel ${i % 3}): ${a[i]} vs decodeImage ${b[i]}`;
  return 'equal';
}

const outcomes: Outcome[] = [];
const mutated: Outcome[] = [];

before(async () => {
  if (!fs.existsSync(tool)) return;
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'decode-identity-'));
  try {
    const corpus = await decodeCorpus();
    for (const c of corpus) outcomes.push(await run(c));
    // Mutations of a small file of each kind the decoder reads.
    const seeds = corpus.filter((c) => !c.declines && c.bytes.length < 20000 && c.width * c.height >= 64);
    for (const [i, c] of seeds.filter((_, i) => i % 4 === 0).entries()) {
      for (const [k, bytes] of mutations(c.bytes, 12, i + 1).entries()) mutated.push(await run({ ...c, name: `${c.name} flip #${k}`, bytes }));
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('sidecar decode: every file it accepts decodes to exactly decodeImage\'s bytes', (t) => {
  assert.ok(fs.existsSync(tool), missing);
  assert.ok(outcomes.length >= 190, `the corpus has ${outcomes.length} files; expected at least 190`);
  const wrong = outcomes.filter((o) => o.status === 0 && !same(o)).map((o) => `${o.c.name}: ${firstDifference(o)}`);
  assert.deepEqual(wrong, [], `decoded differently from the server:\n${wrong.join('\n')}`);
  const crashed = outcomes.filter((o) => o.status !== 0 && o.status !== 3).map((o) => `${o.c.name}: exit ${o.status} ${o.stderr}`);
  assert.deepEqual(crashed, []);
  const accepted = outcomes.filter((o) => o.status === 0).length;
  t.diagnostic(`${outcomes.length} files: ${accepted} identical, ${outcomes.length - accepted} declined`);
});

test('sidecar decode: it declines exactly the forms meant to decline, naming the reason', () => {
  assert.ok(fs.existsSync(tool), missing);
  const wrong: string[] = [];
  for (const o of outcomes) {
    const declined = o.status === 3;
    if (declined && !o.c.declines) wrong.push(`${o.c.name}: declined a plain file (${o.stderr.trim()})`);
    if (!declined && o.c.declines) wrong.push(`${o.c.name}: accepted a form meant to decline (${o.c.declines})`);
    if (declined && o.c.declines && !o.c.declines.test(o.stderr)) wrong.push(`${o.c.name}: declined with '${o.stderr.trim()}', expected ${o.c.declines}`);
  }
  assert.deepEqual(wrong, [], wrong.join('\n'));
  const forms = new Set(outcomes.filter((o) => o.c.declines).map((o) => String(o.c.declines)));
  assert.equal(forms.size, Object.keys(DECLINED_FORMS).length, `the corpus holds each declined form; it holds ${[...forms].join(', ')}`);
});

test('sidecar decode: a byte-flipped file it accepts decodes to decodeImage\'s bytes (never what the server rejects)', (t) => {
  assert.ok(fs.existsSync(tool), missing);
  assert.ok(mutated.length >= 200, `${mutated.length} mutations; expected at least 200`);
  const wrong = mutated.filter((o) => (o.status === 0 && !same(o)) || (o.status !== 0 && o.status !== 3)).map((o) => `${o.c.name}: exit ${o.status}, ${firstDifference(o)}`);
  assert.deepEqual(wrong, [], wrong.join('\n'));
  const accepted = mutated.filter((o) => o.status === 0).length;
  const serverReads = mutated.filter((o) => o.want).length;
  t.diagnostic(`${mutated.length} mutations: ${accepted} accepted (identical), ${mutated.length - accepted} declined; the server reads ${serverReads}`);
});

test('rfdetr-decode: exit 2 on usage errors, 3 with the reason on a decline', () => {
  assert.ok(fs.existsSync(tool), missing);
  assert.equal(spawnSync(tool, ['gif', 'x', '1', '1']).status, 2);
  assert.equal(spawnSync(tool, ['png', 'x', '0', '1']).status, 2);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'decode-tool-'));
  try {
    const file = path.join(tmp, 'not.png');
    fs.writeFileSync(file, 'not a png');
    const r = spawnSync(tool, ['png', file, '1', '1']);
    assert.equal(r.status, 3);
    assert.match(r.stderr.toString(), /declined: png: no PNG signature/);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});
