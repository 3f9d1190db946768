// The supervisor against the real C++ sidecar: the test build (engine "test-echo", which can sleep, hang and
// fail on request) and the product binary with the CPU engine on a synthetic checkpoint.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { packageRoot, sidecarBinary, testFixturesDir } from '../../src/config/paths.ts';
import { createBackend, type SidecarBackend, type SidecarBackendOptions } from '../../src/sidecar/index.ts';
import { RfdetrError } from '../../src/errors.ts';
import { SafetensorsFile } from '../../src/weights/safetensors.ts';
import { rampPixels } from './pixels.ts';
import { PROTOCOL_VERSION } from '../../src/protocol/codec.ts';
import { decodeImage } from '../../src/image/decode.ts';
import { skipOrFail } from '../helpers/skip.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { createLogger } from '../../src/log.ts';

const testBinary = path.join(packageRoot, 'sidecar', 'build', 'rfdetr-sidecar-test');
const packageVersion = (JSON.parse(readFileSync(path.join(packageRoot, 'package.json'), 'utf8')) as { version: string }).version;

function backend(t: { after: (fn: () => unknown) => void }, opts: SidecarBackendOptions): SidecarBackend {
  const b = createBackend({ startupTimeoutMs: 300_000, restart: { initialDelayMs: 20 }, ...opts });
  t.after(() => b.destroy());
  return b;
}

function waitReadyAgain(b: SidecarBackend, notPid: number | undefined, timeoutMs: number): Promise<void> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const tick = () => {
      if (b.state === 'ready' && b.pid !== notPid) return resolve();
      if (b.state === 'failed' || performance.now() - t0 > timeoutMs) return reject(new Error(`no restart: state ${b.state}`));
      setTimeout(tick, 20);
    };
    tick();
  });
}

const SENTINEL_ABORT = -1002;
const SENTINEL_HANG = -1003;
const SENTINEL_SLEEP = -1004;

test('real sidecar (test-echo): READY, hello, infer, and a kill -9 mid-infer fails fast and restarts', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rfdetr-real-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const logs: string[] = [];
  const b = backend(t, { engine: 'test-echo', weightsDir: dir, command: { file: testBinary }, logger: createLogger('debug', (_l, m) => logs.push(m)) });
  await b.ready();
  assert.deepEqual(
    { ...b.info, labels: b.info!.labels.length },
    { protocolVersion: PROTOCOL_VERSION, sidecarVersion: packageVersion, engine: 'test-echo', device: 'test double (deterministic echo)',
      inputShape: [3, 560, 560], numQueries: 300, numClasses: 91, labels: 91, variant: 'base', task: 'detect',
      outputs: [{ name: 'logits', dtype: 'f32', shape: [300, 91] }, { name: 'pred_boxes', dtype: 'f32', shape: [300, 4] }],
      // The engine's facts from the sidecar's one registry (--list-engines says the same).
      precision: 'fp32', precisions: ['fp32'], hostCores: true,
      // The READY line's --nice outcome: not asked for here.
      enginePriority: { requested: 0, nice: os.getPriority(0), applied: false, autogroup: 'not requested' } },
  );
  const px = rampPixels();
  const r = await b.infer({ pixelValues: px });
  for (let i = 0; i < r.outputs.logits!.length; i += 37) assert.equal(r.outputs.logits![i], Math.fround(px[i]! + 1));

  const slow = rampPixels();
  slow[0] = SENTINEL_SLEEP;
  slow[1] = 3000;
  const pid = b.pid!;
  const pending = b.infer({ pixelValues: slow });
  await waitFor('the forward to start sleeping', () => logs.some((l) => l.includes('test_engine_forward: sleeping 3000 ms')));
  process.kill(pid, 'SIGKILL');
  // Failed by the death itself: before the replacement is ready (the 3 s forward would have ended much later).
  const e = await pending.then(() => assert.fail('infer must fail'), (err: RfdetrError) => Object.assign(err, { stateThen: b.state }));
  assert.equal(e.code, 'E_SIDECAR_EXITED', e.message);
  assert.equal(e.details?.signal, 'SIGKILL');
  assert.notEqual(e.stateThen, 'ready', 'the pending infer was failed on the death, not after the restart');
  await waitReadyAgain(b, pid, 20_000);
  const again = await b.infer({ pixelValues: px });
  assert.deepEqual(again.outputs.logits!, r.outputs.logits!);
  await b.close();
  assert.equal(b.state, 'stopped');
});

test('real sidecar (test-echo): a crashing forward (abort) and a hung forward are both recovered', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rfdetr-real-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const b = backend(t, { engine: 'test-echo', weightsDir: dir, command: { file: testBinary }, stallMs: 400, pingIntervalMs: 100 });
  await b.ready();
  const crash = rampPixels();
  crash[0] = SENTINEL_ABORT;
  let pid = b.pid;
  const e = await b.infer({ pixelValues: crash }).then(() => assert.fail('must fail'), (err: RfdetrError) => err);
  assert.equal(e.code, 'E_SIDECAR_EXITED');
  assert.equal(e.details?.signal, 'SIGABRT');
  await waitReadyAgain(b, pid, 20_000);

  // The real sidecar answers pings during a forward, so a stuck forward is caught by stallMs, not by pings.
  const hang = rampPixels();
  hang[0] = SENTINEL_HANG;
  pid = b.pid;
  const h = await b.infer({ pixelValues: hang }, { deadlineMs: 200 }).then(() => assert.fail('must fail'), (err: RfdetrError) => err);
  assert.equal(h.code, 'E_DEADLINE');
  await waitReadyAgain(b, pid, 20_000);
  const px = rampPixels();
  assert.equal((await b.infer({ pixelValues: px })).outputs.logits![5], Math.fround(px[5]! + 1));
});

test('real sidecar (test-echo): SIGTERM → exit 0 and the socket file is gone', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rfdetr-real-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const socket = path.join(dir, 'run', 's.sock');
  const p = execa(testBinary, ['--socket', socket, '--engine', 'test-echo', '--weights', dir], { reject: false, buffer: false, stdout: 'pipe', stderr: 'ignore' });
  await new Promise<void>((res) => p.stdout!.once('data', () => res()));
  assert.ok(existsSync(socket));
  p.kill('SIGTERM');
  const r = await p;
  assert.equal(r.exitCode, 0);
  assert.equal(existsSync(socket), false);
});

// ---- the product binary with the CPU engine ------------------------------------------------------------

async function synthDir(): Promise<string> {
  const { synthWeights } = await import('../helpers/synth-weights.ts');
  return synthWeights();
}

test('real sidecar (cpu, synthetic checkpoint): READY/hello, golden logits and boxes, kill -9 recovery', async (t) => {
  const weights = await synthDir();
  const b = backend(t, { engine: 'cpu', weightsDir: weights, threads: 2, defaultDeadlineMs: 300_000 });
  await b.ready();
  assert.equal(b.info?.engine, 'cpu');
  assert.equal(b.info?.protocolVersion, PROTOCOL_VERSION);
  assert.equal(b.info?.sidecarVersion, packageVersion);
  assert.equal(b.info?.numQueries, 300);
  assert.equal(b.info?.numClasses, 91);
  assert.equal(b.info?.labels[1], 'person');

  const golden = SafetensorsFile.read(path.join(testFixturesDir, 'rfdetr-synth', 'case-1', 'golden.safetensors'));
  const r = await b.infer({ pixelValues: golden.f32('pixel_values') });
  const maxAbs = (a: Float32Array, g: Float32Array) => {
    assert.equal(a.length, g.length);
    let m = 0;
    for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - g[i]!));
    return m;
  };
  const dl = maxAbs(r.outputs.logits!, golden.f32('logits'));
  const db = maxAbs(r.outputs.pred_boxes!, golden.f32('pred_boxes'));
  t.diagnostic(`cpu engine case-1: logits max |Δ| ${dl.toExponential(2)}, pred_boxes max |Δ| ${db.toExponential(2)}, forward_ms ${r.forwardMs.toFixed(0)}, transfer_ms ${r.transferMs.toFixed(2)}`);
  assert.ok(dl <= 1e-3, `logits max |Δ| ${dl}`);
  assert.ok(db <= 1e-3, `pred_boxes max |Δ| ${db}`);
  assert.ok(r.forwardMs > 0);
  assert.equal(r.preprocessMs, 0, 'pixel_values need no preprocess');

  // The decoded image, resized and normalised by the sidecar: the same forward as the reference's pixel_values
  // (the C++ preprocess is bit-exact with them, sidecar/tests/preprocess), so the same outputs.
  const img = await decodeImage(readFileSync(path.join(testFixturesDir, 'rfdetr-synth', 'case-1', 'input.png')));
  const asked = performance.now();
  const ri = await b.infer({ image: img });
  assert.ok(ri.preprocessMs > 0, `preprocess_ms ${ri.preprocessMs}`);
  // The request timeline's marks: the frame left before the reply came, and the sidecar's own work lies between
  // the call and the reply (the write's callback may run late on a loaded loop, so the call is the causal bound).
  assert.ok(ri.frameWrittenAt !== undefined && ri.replyReadAt !== undefined, 'frame written / reply read are reported');
  assert.ok(asked <= ri.frameWrittenAt && ri.frameWrittenAt < ri.replyReadAt, `asked ${asked}, written ${ri.frameWrittenAt}, read ${ri.replyReadAt}`);
  assert.ok(ri.replyReadAt - asked >= ri.forwardMs + ri.preprocessMs - 0.5, `asked ${asked}, read ${ri.replyReadAt}, forward ${ri.forwardMs}, preprocess ${ri.preprocessMs}`);
  assert.deepEqual(ri.outputs.logits!, r.outputs.logits!, 'image input gives exactly the pixel_values input\'s logits');
  assert.deepEqual(ri.outputs.pred_boxes!, r.outputs.pred_boxes!);

  const pid = b.pid!;
  // Killed in the same turn as the request is made: it cannot have been answered, whatever the forward's speed.
  const pending = b.infer({ pixelValues: golden.f32('pixel_values') });
  process.kill(pid, 'SIGKILL');
  const e = await pending.then(() => assert.fail('must fail'), (err: RfdetrError) => Object.assign(err, { stateThen: b.state }));
  assert.equal(e.code, 'E_SIDECAR_EXITED');
  assert.equal(e.details?.signal, 'SIGKILL');
  assert.notEqual(e.stateThen, 'ready', 'the pending infer was failed on the death, not after the restart');
  await waitReadyAgain(b, pid, 300_000);
  const again = await b.infer({ pixelValues: golden.f32('pixel_values') });
  assert.ok(maxAbs(again.outputs.logits!, golden.f32('logits')) <= 1e-3);
  await b.close();
});

test('real sidecar (cpu): NOTIFY_SOCKET gets READY=1 and STOPPING=1; SIGTERM → exit 0, socket gone', async (t) => {
  const py = await execa('python3', ['--version'], { reject: false });
  if (py.exitCode !== 0) return skipOrFail(t, 'python3 is needed to bind a Unix datagram socket (node cannot)');
  const weights = await synthDir();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rfdetr-notify-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const notify = path.join(dir, 'notify.sock');
  const socket = path.join(dir, 's.sock');
  // A bound datagram socket that prints each notification on a line.
  const listener = execa('python3', ['-u', '-c', `
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
print("BOUND", flush=True)
s.settimeout(120)
while True:
    m = s.recv(256).decode()
    print(m, flush=True)
    if m == "STOPPING=1":
        break
`, notify], { buffer: true, reject: false, stdout: 'pipe' });
  t.after(() => listener.kill('SIGKILL'));
  await new Promise<void>((res) => listener.stdout!.once('data', () => res()));
  const p = execa(sidecarBinary(), ['--socket', socket, '--engine', 'cpu', '--weights', weights, '--threads', '2'], {
    reject: false, buffer: false, stdout: 'pipe', stderr: 'ignore', env: { NOTIFY_SOCKET: notify },
  });
  t.after(() => p.kill('SIGKILL'));
  const line = await new Promise<string>((res) => p.stdout!.once('data', (d: Buffer) => res(d.toString())));
  assert.match(line, /^READY \{.*"engine":"cpu".*\}\n$/);
  p.kill('SIGTERM');
  const r = await p;
  assert.equal(r.signal, undefined, 'SIGTERM must be handled (a library thread must not take the default action)');
  assert.equal(r.exitCode, 0);
  assert.equal(existsSync(socket), false);
  const got = (await listener).stdout.split('\n');
  assert.deepEqual(got.slice(0, 3), ['BOUND', 'READY=1', 'STOPPING=1']);
});

test('real sidecar (cpu): a bad config.json is a startup failure: not restarted, the sidecar\'s own message', async (t) => {
  const weights = await synthDir();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rfdetr-badcfg-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  symlinkSync(path.join(weights, 'model.safetensors'), path.join(dir, 'model.safetensors'));
  writeFileSync(path.join(dir, 'config.json'), '{"id2label": ');
  const b = backend(t, { engine: 'cpu', weightsDir: dir, threads: 1, restart: { initialDelayMs: 20, maxCrashes: 5 } });
  const states: string[] = [];
  b.onStateChange((s) => states.push(s));
  const e = await b.ready().then(() => assert.fail('a bad config.json must not start'), (err: RfdetrError) => err);
  assert.equal(e.code, 'E_SIDECAR_FAILED');
  assert.match(e.message, /could not start \(exit status 1, startup failure; not restarted\)/);
  assert.match(e.message, /config\.json: not valid JSON/);
  assert.doesNotMatch(e.message, /crashed/);
  assert.deepEqual(states, ['failed']);
  assert.equal(b.restarts, 0);
});
