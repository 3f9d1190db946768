// rfdetr detect on videos, end to end through bin/rfdetr.js and the test build's sidecar (test-echo engine:
// instant forwards, so these test accounting, not speed).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { binPath } from './helpers.ts';
import { videoCli } from '../helpers/video-cli.ts';
import { ffprobeFrames, makeVideo } from '../helpers/videos.ts';
import { waitFor } from '../helpers/wait-for.ts';

const cli = videoCli('detect-video-');
const { testSidecar, skip } = cli;

interface Run { code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }

/** Starts bin/rfdetr.js detect; `onLine` sees each stdout line as it comes (and may signal the process). */
function detect(args: string[], onLine?: (line: string, n: number, child: ReturnType<typeof spawn>) => void): Promise<Run> {
  const child = spawn(process.execPath, [binPath, 'detect', '--engine', 'test-echo', '--weights', cli.weights, ...args], {
    env: { ...process.env, RFDETR_SIDECAR: testSidecar }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  let partial = '';
  let n = 0;
  child.stdout.on('data', (c: Buffer) => {
    stdout += c;
    partial += c;
    let i;
    while ((i = partial.indexOf('\n')) >= 0) {
      const line = partial.slice(0, i);
      partial = partial.slice(i + 1);
      onLine?.(line, ++n, child);
    }
  });
  child.stderr.on('data', (c: Buffer) => (stderr += c));
  return new Promise((resolve) => child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr })));
}

const lines = (s: string) => s.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);

test('detect video --json --save --track: one line per frame 0..N-1, the saved video has N frames', skip, async () => {
  const file = makeVideo(cli.dir, 'clip.mp4', { frames: 12, audio: true });
  const out = path.join(cli.dir, 'out');
  const r = await detect(['--json', '--save', out, '--track', file]);
  assert.equal(r.code, 0, r.stderr);
  const got = lines(r.stdout);
  assert.deepEqual(got.map((l) => l.frame), [...Array(12).keys()]);
  for (const l of got) {
    assert.equal(l.source, file);
    assert.deepEqual(l.image_size, { width: 64, height: 48 });
    assert.equal(typeof l.pts_ms, 'number');
    for (const d of l.detections as { track_id?: unknown }[]) assert.ok('track_id' in d && (d.track_id === null || Number.isInteger(d.track_id)));
  }
  assert.ok(got.some((l) => (l.detections as { track_id: unknown }[]).some((d) => d.track_id !== null)), 'some detection is tracked');
  const saved = path.join(out, 'clip.mp4');
  assert.equal(ffprobeFrames(saved), 12);
  const streams = execFileSync('ffprobe', ['-v', 'error', '-show_entries', 'stream=codec_name', '-of', 'csv=p=0', saved], { encoding: 'utf8' }).trim().split('\n');
  assert.deepEqual(streams, ['h264', 'aac'], 'H.264 video with the audio copied');
});

test('detect video: --vid-stride and --max-frames; a truncated file gives its frames then an error naming it (exit 1)', skip, async () => {
  const file = makeVideo(cli.dir, 'sel.mkv', { frames: 20 });
  const r = await detect(['--json', '--vid-stride', '3', '--max-frames', '4', file]);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(lines(r.stdout).map((l) => l.frame), [0, 3, 6, 9]);
  const whole = makeVideo(cli.dir, 'whole.mp4', { frames: 60 });
  const cut = path.join(cli.dir, 'cut.mp4');
  fs.writeFileSync(cut, fs.readFileSync(whole).subarray(0, Math.floor(fs.statSync(whole).size * 0.6)));
  const t = await detect(['--json', cut]);
  assert.equal(t.code, 1);
  assert.match(t.stderr, /cut\.mp4.*truncated/);
  const n = lines(t.stdout).length;
  assert.ok(n > 0 && n < 60, `${n} lines`);
});

test('detect video: SIGTERM finishes cleanly (exit 0, the saved file has every frame printed); SIGKILL leaves a playable file', skip, async () => {
  const file = makeVideo(cli.dir, 'long.mp4', { frames: 900 });
  const outT = path.join(cli.dir, 'term');
  const term = await detect(['--json', '--save', outT, file], (_l, n, child) => {
    if (n === 20) child.kill('SIGTERM');
  });
  assert.equal(term.code, 0, term.stderr);
  assert.match(term.stderr, /stopped by SIGTERM/);
  const printed = lines(term.stdout).length;
  assert.ok(printed >= 20 && printed < 900, `${printed} lines`);
  assert.equal(ffprobeFrames(path.join(outT, 'long.mp4')), printed);

  const outK = path.join(cli.dir, 'kill');
  const kill = await detect(['--json', '--save', outK, file], (_l, n, child) => {
    if (n === 20) child.kill('SIGKILL');
  });
  assert.equal(kill.signal, 'SIGKILL');
  const saved = path.join(outK, 'long.mp4');
  // The encoder (its own process group) sees its input end and closes the file; wait for it to go.
  await waitFor('the encoder to exit', () => !execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' }).includes(saved), 10_000);
  const frames = ffprobeFrames(saved);
  assert.ok(frames > 0, `a killed run's file decodes (${frames} frames)`);
});

test('detect live: a tcp:// stream is followed across a restart of its server', skip, async () => {
  const clip = makeVideo(cli.dir, 'loop.ts', { frames: 30 });
  const port = await new Promise<number>((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
  });
  const serve = () => spawn('ffmpeg', ['-v', 'error', '-re', '-stream_loop', '-1', '-i', clip, '-c', 'copy', '-f', 'mpegts', `tcp://127.0.0.1:${port}?listen=1`], { stdio: 'ignore' });
  // ffmpeg's listen=1 serves one client and exits: every exit is followed by a new server on the same port.
  let stopping = false;
  let server: ReturnType<typeof spawn>;
  const keep = () => {
    server = serve();
    server.once('exit', () => void (stopping || keep()));
  };
  keep();
  let restarted = false;
  try {
    const r = await detect(['--json', '--max-frames', '60', '--open-timeout', '20000', `tcp://127.0.0.1:${port}`], (_l, n) => {
      if (n === 15 && !restarted) {
        restarted = true;
        server.kill('SIGKILL');
      }
    });
    assert.equal(r.code, 0, r.stderr);
    const idx = lines(r.stdout).map((l) => l.frame as number);
    assert.equal(idx.length, 60);
    idx.forEach((v, i) => assert.ok(i === 0 || v > idx[i - 1]!, `frame indices increase (${idx.join(',')})`));
    assert.match(r.stderr, /reconnect 1/);
    // Every decoded frame is either printed or counted as dropped (the oldest, when the engine lagged).
    const m = /(\d+) dropped, ([1-9]\d*) reconnects/.exec(r.stderr);
    assert.ok(m, r.stderr);
    assert.ok(idx[idx.length - 1]! + 1 <= 60 + Number(m[1]), `last frame ${idx[idx.length - 1]}, ${m[1]} dropped`);
  } finally {
    stopping = true;
    server!.kill('SIGKILL');
  }
});
