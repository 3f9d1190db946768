// rfdetr detect - with a video on stdin, end to end through bin/rfdetr.js and the test build's sidecar
// (test-echo engine): a streamable container is decoded while the pipe is still open; a QuickTime file larger than the
// still-image cap is spooled and decoded whole.
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { binPath } from './helpers.ts';
import { videoCli } from '../helpers/video-cli.ts';
import { makeVideo } from '../helpers/videos.ts';

const cli = videoCli('detect-stdin-');
const { testSidecar, skip } = cli;

/** Starts detect --json - ; the test's end kills it, so a run that hangs fails by the test's timeout and leaves nothing. */
function start(t: TestContext) {
  const child = spawn(process.execPath, [binPath, 'detect', '--engine', 'test-echo', '--weights', cli.weights, '--json', '-'], {
    env: { ...process.env, RFDETR_SIDECAR: testSidecar }, stdio: ['pipe', 'pipe', 'pipe'],
  });
  t.after(() => child.kill('SIGKILL'));
  let stdout = '';
  let stderr = '';
  let lineSeen: () => void = () => {};
  const firstLine = new Promise<void>((resolve) => (lineSeen = resolve));
  child.stdout.on('data', (c: Buffer) => {
    stdout += c;
    if (stdout.includes('\n')) lineSeen();
  });
  child.stderr.on('data', (c: Buffer) => (stderr += c));
  const closed = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  return { child, closed, firstLine, out: () => stdout, err: () => stderr };
}

const frames = (s: string) => s.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => typeof l.frame === 'number');

test('detect - on an MPEG-TS pipe answers frames while the pipe is still open', { ...skip, timeout: 120_000 }, async (t) => {
  const ts = fs.readFileSync(makeVideo(cli.dir, 'clip.ts', { frames: 300 }));
  const r = start(t);
  // 10 s of stream, more than ffmpeg's 5 s of probing; the pipe stays open: a spooling reader would wait for
  // its end and print nothing.
  r.child.stdin.write(ts);
  const first = await Promise.race([r.firstLine.then(() => 'line'), r.closed.then(() => 'exited')]);
  assert.equal(first, 'line', `no frame before stdin was closed:\n${r.err()}`);
  r.child.stdin.end();
  const code = await r.closed;
  assert.equal(code, 0, r.err());
  assert.deepEqual(frames(r.out()).map((l) => l.frame), Array.from({ length: 300 }, (_, i) => i));
});

test('detect - on a QuickTime file over the 32 MiB still-image cap decodes every frame (spooled, not refused)', { ...skip, timeout: 120_000 }, async (t) => {
  const mp4 = makeVideo(cli.dir, 'big.mov', { frames: 150, width: 320, height: 240, codec: ['-c:v', 'rawvideo', '-pix_fmt', 'rgb24'] });
  assert.ok(fs.statSync(mp4).size > 32 * 1024 * 1024, `the clip is over 32 MiB (${fs.statSync(mp4).size} bytes)`);
  const r = start(t);
  fs.createReadStream(mp4).pipe(r.child.stdin);
  const code = await r.closed;
  assert.equal(code, 0, r.err());
  assert.equal(frames(r.out()).length, 150);
});
