// The detect inputs against hostile file systems and streams: symlink loops end with each file once, a huge
// file is refused from its size, an endless stdin is cut at the image limit, and names that carry terminal
// control sequences are printed escaped.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { escapeForTerminal, expandInputs, readImageFile, readStreamCapped } from '../../cli/inputs.ts';
import { MAX_IMAGE_BYTES } from '../../src/image/limits.ts';

function tmpdir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'rfdetr-inputs-'));
}

test('recursion: two symlinks to "." and one to a parent end, and every file is listed once', () => {
  const dir = tmpdir();
  try {
    fs.writeFileSync(path.join(dir, 'a.png'), 'x');
    fs.mkdirSync(path.join(dir, 'sub'));
    fs.writeFileSync(path.join(dir, 'sub', 'b.jpg'), 'x');
    fs.symlinkSync('.', path.join(dir, 'loop1'));
    fs.symlinkSync('.', path.join(dir, 'loop2'));
    fs.symlinkSync('..', path.join(dir, 'sub', 'up'));
    fs.symlinkSync('a.png', path.join(dir, 'same.png'));
    const { images, problems } = expandInputs([dir], { cwd: dir, recursive: true });
    assert.deepEqual(problems, []);
    assert.deepEqual(images.map((i) => path.relative(dir, i.path!)), ['a.png', 'sub/b.jpg']);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a file over the limit is refused from its size (a sparse 2 GB file), naming both sizes', () => {
  const dir = tmpdir();
  try {
    const f = path.join(dir, 'huge.png');
    const fd = fs.openSync(f, 'w');
    fs.ftruncateSync(fd, 2 * 1024 ** 3);
    fs.closeSync(fd);
    assert.throws(() => readImageFile(f), (e: any) => e.code === 'E_IMAGE_TOO_LARGE' && /the file is 2147483648 bytes; the limit is 33554432 bytes \(32 MiB\)/.test(e.message));
    fs.writeFileSync(f, Buffer.alloc(10, 7));
    assert.deepEqual(readImageFile(f), Buffer.alloc(10, 7));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('stdin is read up to the image limit: an endless stream is cut one chunk past it', async () => {
  let pulled = 0;
  const chunk = Buffer.alloc(1 << 20);
  async function* endless() {
    for (;;) {
      pulled++;
      yield chunk;
    }
  }
  await assert.rejects(readStreamCapped(endless()), (e: any) => e.code === 'E_IMAGE_TOO_LARGE' && /stdin is more than 33554432 bytes/.test(e.message));
  assert.equal(pulled, MAX_IMAGE_BYTES / chunk.length + 1);
  async function* small() {
    yield Buffer.from('ab');
    yield 'cd';
  }
  assert.equal((await readStreamCapped(small())).toString(), 'abcd');
});

test('names with control characters are escaped for the terminal, kept as they are for JSON', () => {
  assert.equal(escapeForTerminal('a\x1b[31mred\nb\u202ec\x9b'), 'a\\x1b[31mred\\x0ab\\u{202e}c\\x9b');
  assert.equal(escapeForTerminal('plain/ünïcode.png'), 'plain/ünïcode.png');
  const dir = tmpdir();
  try {
    const name = 'evil\x1b]0;title\x07\nname.png';
    fs.writeFileSync(path.join(dir, name), 'x');
    const { images } = expandInputs([dir], { cwd: dir, recursive: false });
    assert.equal(images.length, 1);
    assert.equal(path.basename(images[0]!.name), name);
    assert.equal(path.basename(images[0]!.shown), 'evil\\x1b]0;title\\x07\\x0aname.png');
    const missing = expandInputs(['no\x1bsuch\n'], { cwd: dir, recursive: false });
    assert.deepEqual(missing.problems, ['no\\x1bsuch\\x0a: no such file or directory']);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('rfdetr detect - with more than 32 MiB on stdin: exit 1 naming the limit, before any engine starts', async () => {
  const { runBin } = await import('./helpers.ts');
  const r = await runBin(['detect', '-'], { input: Buffer.alloc(MAX_IMAGE_BYTES + 1) });
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, /detect: -: stdin is more than 33554432 bytes; the limit is 33554432 bytes \(32 MiB\) per image: expected one image file; nothing was run/);
  assert.doesNotMatch(r.stderr, /starting the .* engine/);
});
