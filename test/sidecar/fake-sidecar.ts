// A scripted fake sidecar for the supervisor tests: takes the real sidecar's flags, listens on the real Unix
// socket, prints READY and speaks the protocol, misbehaving as FAKE_SCENARIO says. FAKE_SCENARIO is a comma
// list; the Nth start (counted in the file FAKE_COUNTER) plays the Nth entry (the last one repeats).
//   ok              serve: infer echoes (logits[i] = px[i] + 1, pred_boxes[i] = px[27300 + i] / 2), ping, shutdown;
//                   decoders is answered E_UNKNOWN_OP, as a sidecar from before that op does
//   crash-on-infer  exit(3) with a stderr line on the first infer
//   hang            send the hello, then never answer anything
//   garbage         answer an infer with a frame that is not MessagePack
//   bad-version     hello with protocol_version 99
//   old-hello       an older sidecar's hello: protocol version 2, no variant; then as ok, with version-2 replies
//   v3-hello        a version-3 sidecar's hello (no task, outputs, precisions); then as ok, with version-3 replies
//                   (logits and pred_boxes as keys)
//   classify-hello  a version-4 hello whose task is 'classify' (no postprocess here)
//   swapped-outputs as ok, but the infer reply carries pred_boxes before logits
//   bad-hello       a reply instead of the hello
//   exit-at-start   print a reason on stderr as the real sidecar does and exit 1 (startup failure) before READY
//   exit-usage      the same with exit 2 (usage error)
//   crash-at-start  print a line on stderr and exit 3 (not a documented status) before READY
//   no-ready        never print READY
//   stubborn        ignore the shutdown op and SIGTERM
//   held            hold every infer's answer until the process gets SIGUSR2, then answer the held ones and
//                   every later one at once
//   mute-pings      as ok, but never answer a ping (infers are answered at once): busy or wedged, only the
//                   replies tell
// 'slow-reader': reads its socket at about 6 MB/s (one read of at most 64 KB every 10 ms) and holds its infers'
// replies until a ping arrives (so nothing but bytes read shows it alive while a backlog drains).
// FAKE_VARIANT=NAME: the variant its hello names (default base).
// FAKE_LOG_PINGS=1: log each ping answered (or left unanswered) on stderr.
// FAKE_ENV_OUT=FILE: write the names of the environment variables it was started with into FILE (JSON).
import net from 'node:net';
import { existsSync, readFileSync, unlinkSync, writeFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import {
  FrameReader, decodePayload, encodeFrame, f32Bytes, f32FromBytes, PROTOCOL_VERSION, PROTOCOL_VERSION_WITHOUT_OUTPUTS, PROTOCOL_VERSION_WITHOUT_VARIANT,
} from '../../src/protocol/codec.ts';
import { wireHello } from '../helpers/wire-hello.ts';

const argv = process.argv.slice(2);
const flag = (name: string) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const socketPath = flag('--socket');
if (!socketPath) {
  process.stderr.write('fake-sidecar: --socket is required\n');
  process.exit(2);
}
let start = 0;
const counter = process.env.FAKE_COUNTER;
if (counter) {
  start = existsSync(counter) ? Number(readFileSync(counter, 'utf8')) : 0;
  writeFileSync(counter, String(start + 1));
}
const plan = (process.env.FAKE_SCENARIO ?? 'ok').split(',');
const scenario = plan[Math.min(start, plan.length - 1)]!;
process.stderr.write(`fake-sidecar: start ${start} plays '${scenario}'\n`);

if (process.env.FAKE_ENV_OUT) writeFileSync(process.env.FAKE_ENV_OUT, JSON.stringify(Object.keys(process.env)));
if (scenario === 'exit-at-start') {
  process.stderr.write('load_weights: reading config.json\n');
  process.stderr.write("rfdetr-sidecar: engine 'fake' failed to start: config.json: id2label is missing (scripted failure)\n");
  process.exit(1);
}
if (scenario === 'exit-usage') {
  process.stderr.write("rfdetr-sidecar: --engine 'nope' is not built into this sidecar; built: cpu (scripted failure)\n");
  process.exit(2);
}
if (scenario === 'crash-at-start') {
  process.stderr.write('fake-sidecar: cannot open device 0 (scripted crash)\n');
  process.exit(3);
}
if (scenario === 'stubborn') process.on('SIGTERM', () => process.stderr.write('fake-sidecar: ignoring SIGTERM\n'));
else process.on('SIGTERM', () => stop(0));
// 'held': the answers wait for the test's SIGUSR2, never for a clock.
let held: Array<() => void> | null = scenario === 'held' ? [] : null;
process.on('SIGUSR2', () => {
  const answers = held ?? [];
  held = null;
  for (const answer of answers) answer();
});

const NQ = 300;
const NC = 91;
const labels = ['N/A', ...Array.from({ length: NC - 1 }, (_, i) => `label-${i + 1}`)];
const sockets = new Set<net.Socket>();
const slowHeld: Array<() => void> = [];

function stop(code: number): void {
  for (const s of sockets) s.destroy();
  server.close();
  if (existsSync(socketPath!)) unlinkSync(socketPath!);
  process.exit(code);
}

const server = net.createServer((sock) => {
  sockets.add(sock);
  sock.on('close', () => sockets.delete(sock));
  sock.on('error', () => {});
  if (scenario === 'bad-hello') {
    sock.write(encodeFrame({ kind: 'reply', id: 0, ok: true }));
  } else if (scenario === 'old-hello') {
    sock.write(encodeFrame({
      kind: 'hello', id: 0, protocol_version: PROTOCOL_VERSION_WITHOUT_VARIANT, sidecar_version: '0.0.0-fake-old',
      engine: 'fake', device: 'scripted fake', input_shape: [3, 560, 560], num_queries: NQ, num_classes: NC, labels,
    }));
  } else if (scenario === 'v3-hello') {
    sock.write(encodeFrame({
      kind: 'hello', id: 0, protocol_version: PROTOCOL_VERSION_WITHOUT_OUTPUTS, sidecar_version: '0.0.0-fake-v3',
      engine: 'fake', device: 'scripted fake', input_shape: [3, 560, 560], num_queries: NQ, num_classes: NC, labels,
      variant: process.env.FAKE_VARIANT ?? 'base',
    }));
  } else {
    sock.write(encodeFrame(wireHello({
      protocol_version: scenario === 'bad-version' ? 99 : PROTOCOL_VERSION, sidecar_version: '0.0.0-fake', engine: 'fake', device: 'scripted fake',
      num_queries: NQ, num_classes: NC, labels, variant: process.env.FAKE_VARIANT ?? 'base', ...(scenario === 'classify-hello' ? { task: 'classify' } : {}),
    })));
  }
  const oldReplies = scenario === 'old-hello' || scenario === 'v3-hello';
  const reader = new FrameReader((payload) => {
    if (scenario === 'hang') return;
    const r = decodePayload(payload);
    if (!r.ok) {
      sock.write(encodeFrame({ kind: 'error', id: r.id, ok: false, error: { code: r.code, message: r.message } }));
      return;
    }
    const m = r.message;
    if (m.kind !== 'request') return;
    if (m.op === 'decoders') {
      // As a sidecar from before the op answers it: this fake decodes nothing.
      sock.write(encodeFrame({ kind: 'error', id: m.id, ok: false, error: { code: 'E_UNKNOWN_OP', message: "unknown op 'decoders'; expected one of infer, ping, shutdown, shm_attach" } }));
    } else if (m.op === 'ping') {
      const mute = scenario === 'mute-pings';
      if (process.env.FAKE_LOG_PINGS) process.stderr.write(`fake-sidecar: ping ${m.id} ${mute ? 'not answered' : 'answered'}\n`);
      if (scenario === 'slow-reader') for (const answer of slowHeld.splice(0)) answer();
      if (!mute) sock.write(encodeFrame({ kind: 'reply', id: m.id, ok: true }));
    } else if (m.op === 'shutdown') {
      if (scenario === 'stubborn') return;
      sock.write(encodeFrame({ kind: 'reply', id: m.id, ok: true }), () => stop(0));
    } else if (m.op === 'infer') {
      // The tests wait for this line (the supervisor logs the sidecar's stderr) to know a request is in flight.
      process.stderr.write(`fake-sidecar: infer ${m.id} received\n`);
      if (scenario === 'crash-on-infer') {
        process.stderr.write('fake-sidecar: crashing on purpose in the middle of an infer\n');
        process.exit(3);
      }
      if (scenario === 'garbage') {
        sock.write(Buffer.from([5, 0, 0, 0, 0xc1, 0xc1, 0xc1, 0xc1, 0xc1]));
        return;
      }
      const px = f32FromBytes(m.pixel_values!);
      const logits = new Float32Array(NQ * NC);
      const boxes = new Float32Array(NQ * 4);
      for (let i = 0; i < logits.length; i++) logits[i] = px[i]! + 1;
      for (let i = 0; i < boxes.length; i++) boxes[i] = px[NQ * NC + i]! * 0.5;
      const outputs = scenario === 'swapped-outputs' ? { pred_boxes: f32Bytes(boxes), logits: f32Bytes(logits) } : { logits: f32Bytes(logits), pred_boxes: f32Bytes(boxes) };
      const reply = () => sock.write(encodeFrame(oldReplies
        ? { kind: 'reply', id: m.id, ok: true, logits: f32Bytes(logits), pred_boxes: f32Bytes(boxes), preprocess_ms: 0, forward_ms: 0.25 }
        : { kind: 'reply', id: m.id, ok: true, outputs, preprocess_ms: 0, forward_ms: 0.25 }));
      if (held) held.push(reply);
      else if (scenario === 'slow-reader') slowHeld.push(reply);
      else reply();
    }
  }, () => sock.destroy());
  if (scenario === 'slow-reader') {
    // One read (at most libuv's 64 KB) then a 10-ms pause: ~6 MB/s. (Polling a paused socket with read() every
    // 10 ms instead sometimes stopped reading for seconds, which the supervisor rightly counted as missed pings.)
    let tick: NodeJS.Timeout | undefined;
    sock.on('data', (d: Buffer) => {
      reader.push(d);
      sock.pause();
      tick = setTimeout(() => sock.resume(), 10);
    });
    sock.on('close', () => clearTimeout(tick));
  } else {
    sock.on('data', (d: Buffer) => reader.push(d));
  }
});

mkdirSync(path.dirname(socketPath), { recursive: true, mode: 0o700 });
if (existsSync(socketPath)) unlinkSync(socketPath);
server.listen(socketPath, () => {
  if (scenario === 'no-ready') return;
  process.stdout.write(`READY ${JSON.stringify({ engine: 'fake', device: 'scripted fake', protocol_version: PROTOCOL_VERSION, socket: socketPath, pid: process.pid })}\n`);
});

// --exit-with-parent, the portable way: node has no PR_SET_PDEATHSIG.
if (argv.includes('--exit-with-parent')) {
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent) stop(0);
  }, 200).unref();
}
