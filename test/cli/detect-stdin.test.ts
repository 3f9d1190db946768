// rfdetr detect - with a video on stdin, end to end through bin/rfdetr.js and the test build's sidecar
// (test-echo engine): a streamable container is decoded while the pipe is still open; a QuickTime file larger than the
// still-image cap is spooled and decoded whole.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { binPath } from './helpers.ts';
import { videoCli } from '../helpers/video-cli.ts';
import { makeVideo } from '../helpers/videos.ts';

const cli = videoCli('detect-stdin-');
const { testSidecar, skip } = cli;

function start() {
  const child = spawn(process.execPath, [binPath, 'detect', '--engine', 'test-echo', '--weights', cli.weights, '--json', '-'], {
    env: { ...process.env, RFDETR_SIDECAR: testSidecar }, stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  const lineWaiters: Array<() => void> = [];
  child.stdout.on('data', (c: Buffer) => {
    stdout += c;
    if (stdout.includes('\n')) for (const w of lineWaiters.splice(0)) w();
  });
  child.stderr.on('data', (c: Buffer) => (stderr += c));
  const closed = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  const firstLine = new Promise<void>((resolve) => (stdout.includes('\n') ? resolve() : lineWaiters.push(resolve)));
  return { child, closed, firstLine, out: () => stdout, err: () => stderr };
}

const frames = (s: string) => s.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => typeof l.frame === 'number');

test('detect - on an MPEG-TS pipe answers frames while the pipe is still open', skip, async () => {
  const ts = fs.readFileSync(makeVideo(cli.dir, 'clip.ts', { frames: 300 }));
  const r = start();
  // 10 s of stream, more than ffmpeg's 5 s of probing; the pipe stays open: a spooling reader would wait for
  // its end and print nothing.
  r.child.stdin.write(ts);
  const guard = setTimeout(() => r.child.kill('SIGKILL'), 120_000);
  const first = await Promise.race([r.firstLine.then(() => 'line'), r.closed.then(() => 'exited')]);
  assert.equal(first, 'line', `no frame before stdin was closed:\n${r.err()}`);
  r.child.stdin.end();
  const code = await r.closed;
  clearTimeout(guard);
  assert.equal(code, 0, r.err());
  assert.deepEqual(frames(r.out()).map((l) => l.frame), Array.from({ length: 300 }, (_, i) => i));
});

test('detect - on a QuickTime file over the 32 MiB still-image cap decodes every frame (spooled, not refused)', skip, async () => {
  const mp4 = makeVideo(cli.dir, 'big.mov', { frames: 150, width: 320, height: 240, codec: ['-c:v', 'rawvideo', '-pix_fmt', 'rgb24'] });
  assert.ok(fs.statSync(mp4).size > 32 * 1024 * 1024, `the clip is over 32 MiB (${fs.statSync(mp4).size} bytes)`);
  const r = start();
  fs.createReadStream(mp4).pipe(r.child.stdin);
  const guard = setTimeout(() => r.child.kill('SIGKILL'), 120_000);
  const code = await r.closed;
  clearTimeout(guard);
  assert.equal(code, 0, r.err());
  assert.equal(frames(r.out()).length, 150);
});
