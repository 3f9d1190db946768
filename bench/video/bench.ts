// rfdetr detect on video files, end to end through bin/rfdetr.js (not a test). For each scenario: a 150-frame
// and a 600-frame run of the same H.264 file; the marginal rate (450 frames / the difference in wall time)
// cancels start-up (engine load, ffprobe). Each run's CPU time (getrusage of the whole process tree, via
// /usr/bin/time) per frame, the pipeline's engine-busy share (from detect's summary line), and the load
// average. The cpu engine's rate is compared with its own forward rate (1000 / mean timing_ms.inference of
// the same run). Writes bench/video/results.json.
//   node --import tsx bench/video/bench.ts [--weights DIR] [--only NAME,…]
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { packageRoot } from '../../src/config/paths.ts';

const { values } = parseArgs({ options: { weights: { type: 'string' }, only: { type: 'string' }, short: { type: 'string', default: '150' }, long: { type: 'string', default: '600' } } });
const weights = values.weights ?? path.join(packageRoot, 'sidecar', 'build', 'test-weights', 'seed-0x1');
const testSidecar = path.join(packageRoot, 'sidecar', 'build', 'rfdetr-sidecar-test');
const bin = path.join(packageRoot, 'bin', 'rfdetr.js');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-video-'));
const SHORT = Number(values.short);
const LONG = Number(values.long);

function makeVideo(w: number, h: number, frames: number): string {
  const out = path.join(dir, `${w}x${h}-${frames}.mp4`);
  if (!fs.existsSync(out)) {
    execFileSync('ffmpeg', ['-v', 'error', '-y', '-f', 'lavfi', '-i', `testsrc2=size=${w}x${h}:rate=30`, '-frames:v', String(frames), '-c:v', 'libx264', '-preset', 'veryfast', '-pix_fmt', 'yuv420p', out]);
  }
  return out;
}

interface RunResult { frames: number; wallS: number; cpuS: number; busyPct: number; meanInferenceMs: number; load: string }

function run(engine: string, file: string, extra: string[], env: Record<string, string>): RunResult {
  const out = path.join(dir, 'save');
  fs.rmSync(out, { recursive: true, force: true });
  const args = ['-f', '%e %U %S', process.execPath, bin, 'detect', '--engine', engine, '--weights', weights, '--json', ...extra.map((a) => (a === 'SAVE' ? out : a)), file];
  const r = spawnSync('/usr/bin/time', args, { env: { ...process.env, ...env }, encoding: 'utf8', maxBuffer: 1 << 30 });
  if (r.status !== 0) throw new Error(`detect failed (${r.status}): ${r.stderr.slice(-2000)}`);
  const lines = r.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l) as { timing_ms: { inference: number } });
  const [wall, user, sys] = r.stderr.trim().split('\n').pop()!.split(' ').map(Number) as [number, number, number];
  const busy = /engine busy (\d+) %/.exec(r.stderr);
  return {
    frames: lines.length, wallS: wall, cpuS: user + sys, busyPct: busy ? Number(busy[1]) : NaN,
    meanInferenceMs: lines.reduce((a, l) => a + l.timing_ms.inference, 0) / Math.max(1, lines.length), load: fs.readFileSync('/proc/loadavg', 'utf8').trim(),
  };
}

interface Scenario { name: string; engine: string; w: number; h: number; extra: string[]; target: string; short?: number; long?: number }
const scenarios: Scenario[] = [
  { name: 'test-sleep-8ms-640x480-json', engine: 'test-sleep', w: 640, h: 480, extra: [], target: '>= 100 frames/s, engine busy >= 80 %' },
  { name: 'test-sleep-8ms-640x480-save', engine: 'test-sleep', w: 640, h: 480, extra: ['--save', 'SAVE'], target: '>= 60 frames/s' },
  { name: 'test-sleep-8ms-1280x720-json', engine: 'test-sleep', w: 1280, h: 720, extra: [], target: '>= 60 frames/s' },
  { name: 'cpu-640x480-json', engine: 'cpu', w: 640, h: 480, extra: [], target: 'within 5 % of its own forward rate', short: 8, long: 24 },
];
const only = values.only?.split(',');
const results: Record<string, unknown> = { when: new Date().toISOString(), cpu: os.cpus()[0]?.model, cores: os.availableParallelism(), short: SHORT, long: LONG };
for (const s of scenarios) {
  if (only && !only.includes(s.name)) continue;
  const short = s.short ?? SHORT;
  const long = s.long ?? LONG;
  const env: Record<string, string> = s.engine.startsWith('test-') ? { RFDETR_SIDECAR: testSidecar, RFDETR_TEST_FORWARD_MS: '8' } : {};
  const a = run(s.engine, makeVideo(s.w, s.h, short), s.extra, env);
  const b = run(s.engine, makeVideo(s.w, s.h, long), s.extra, env);
  const marginal = (b.frames - a.frames) / (b.wallS - a.wallS);
  const cpuPerFrameMs = (1000 * (b.cpuS - a.cpuS)) / (b.frames - a.frames);
  const forwardRate = 1000 / b.meanInferenceMs;
  const r = {
    target: s.target, marginal_fps: marginal, cpu_ms_per_frame_marginal: cpuPerFrameMs,
    end_to_end_fps_long: b.frames / b.wallS, engine_busy_pct_long: b.busyPct, forward_rate_fps: forwardRate, fps_vs_forward_rate: marginal / forwardRate,
    runs: { short: a, long: b },
  };
  results[s.name] = r;
  console.log(`${s.name}: marginal ${marginal.toFixed(1)} frames/s (target ${s.target}); CPU ${cpuPerFrameMs.toFixed(1)} ms/frame; busy ${b.busyPct} %; forward rate ${forwardRate.toFixed(1)}/s (ratio ${(marginal / forwardRate).toFixed(3)}); load ${b.load}`);
}
const outFile = path.join(packageRoot, 'bench', 'video', 'results.json');
const prev = fs.existsSync(outFile) ? JSON.parse(fs.readFileSync(outFile, 'utf8')) as Record<string, unknown> : {};
fs.writeFileSync(outFile, `${JSON.stringify({ ...prev, ...results }, null, 2)}\n`);
fs.rmSync(dir, { recursive: true, force: true });
