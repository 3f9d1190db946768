// The client's side of "Images the sidecar decodes" (sidecar/PROTOCOL.md) against a scripted peer on a real Unix
// socket: the lazy `decoders` question, RFDETR_SIDECAR_DECODE=off, an older sidecar's E_UNKNOWN_OP, the
// image_encoded request as sent, and E_DECODE turned into E_SIDECAR_DECLINED.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { SidecarConnection } from '../../src/sidecar/client.ts';
import { FrameReader, decodePayload, encodeFrame, type WireMessage, type WireRequest } from '../../src/protocol/codec.ts';
import { detectOutputs, wireHello } from '../helpers/wire-hello.ts';
import { isRfdetrError, type RfdetrError } from '../../src/errors.ts';

const NQ = 2;
const NC = 3;

interface Peer {
  socketPath: string;
  /** Every request the peer read, in order. */
  requests: WireRequest[];
  /** Answers a held decoders question (mode 'held'). */
  release: () => void;
}

/**
 * A scripted sidecar: hello, then ping → ok; decoders → ['jpeg', 'png'] ('new'), E_UNKNOWN_OP as an older
 * sidecar answers it ('old') or held until release() ('held'); infer of a file whose first byte is 0 →
 * E_DECODE, else logits = the file's first byte, with decode_ms (a minute for first byte 5).
 */
async function peer(t: { after: (fn: () => unknown) => void }, mode: 'new' | 'old' | 'held'): Promise<Peer> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rfdetr-decoders-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const socketPath = path.join(dir, 's.sock');
  const requests: WireRequest[] = [];
  let held: (() => void) | undefined;
  let released = false;
  const srv = net.createServer((sock) => {
    const send = (m: WireMessage) => sock.write(encodeFrame(m));
    send(wireHello({ sidecar_version: '0.0.0-scripted', engine: 'scripted', device: 'scripted', num_queries: NQ, num_classes: NC, labels: ['N/A', 'a', 'b'] }));
    const reader = new FrameReader((p) => {
      const r = decodePayload(p);
      if (!r.ok) {
        send({ kind: 'error', id: r.id, ok: false, error: { code: r.code, message: r.message } });
        return;
      }
      const m = r.message;
      if (m.kind !== 'request') return;
      requests.push(m);
      if (m.op === 'ping') send({ kind: 'reply', id: m.id, ok: true });
      if (m.op === 'decoders') {
        const answer = () => send({ kind: 'reply', id: m.id, ok: true, decoders: ['jpeg', 'png'] });
        if (mode === 'old') send({ kind: 'error', id: m.id, ok: false, error: { code: 'E_UNKNOWN_OP', message: "unknown op 'decoders'; expected one of infer, ping, shutdown, shm_attach" } });
        else if (mode === 'held' && !released) held = answer;
        else answer();
      }
      if (m.op === 'infer' && m.image_encoded) {
        const first = m.image_encoded.bytes[0]!;
        if (first === 0) {
          send({ kind: 'error', id: m.id, ok: false, error: { code: 'E_DECODE', message: 'png: truncated IDAT (scripted)' } });
          return;
        }
        // First byte 5: a decode as long as a minute and nothing else, so transferMs is 0 only when decodeMs is subtracted.
        const times = first === 5 ? { decode_ms: 60_000, preprocess_ms: 0, forward_ms: 0 } : { decode_ms: 4.5, preprocess_ms: 0.5, forward_ms: 2 };
        send({ kind: 'reply', id: m.id, ok: true, outputs: detectOutputs(new Float32Array(NQ * NC).fill(first), new Float32Array(NQ * 4)), ...times });
      }
    }, () => sock.destroy());
    sock.on('data', (d: Buffer) => reader.push(d));
    sock.on('error', () => {});
  });
  await new Promise<void>((resolve) => srv.listen(socketPath, resolve));
  t.after(() => srv.close());
  return {
    socketPath, requests,
    release: () => {
      released = true;
      held?.();
    },
  };
}

async function connect(t: { after: (fn: () => unknown) => void }, p: Peer): Promise<SidecarConnection> {
  const conn = await SidecarConnection.connect(p.socketPath, { helloTimeoutMs: 10_000 });
  t.after(() => conn.close());
  return conn;
}

const ops = (p: Peer) => p.requests.map((r) => r.op);
const png = (first: number) => ({ format: 'png' as const, width: 640, height: 480, bytes: Uint8Array.from([first, 0x50, 0x4e, 0x47, 1, 2, 3]) });

test('decodes(): nothing asked at connect; false until the decoders reply arrives, true after; asked once per connection', async (t) => {
  const p = await peer(t, 'held');
  const conn = await connect(t, p);
  await conn.ping(5_000);
  assert.deepEqual(ops(p), ['ping'], 'no decoders request at connect');
  assert.equal(conn.decodes('png'), false, 'the first call only asks');
  await conn.ping(5_000); // the peer has read the question (frames arrive in order) and holds its answer
  assert.deepEqual(ops(p), ['ping', 'decoders', 'ping']);
  assert.equal(conn.decodes('png'), false, 'still false while the reply is held');
  assert.equal(conn.decodes('jpeg'), false);
  p.release();
  await conn.decodersKnown();
  assert.equal(conn.decodes('png'), true);
  assert.equal(conn.decodes('jpeg'), true);
  await conn.ping(5_000);
  assert.deepEqual(ops(p), ['ping', 'decoders', 'ping', 'ping'], 'asked once');
});

test('RFDETR_SIDECAR_DECODE=off: decodes() is false without asking, and a file is refused before it is sent', async (t) => {
  const p = await peer(t, 'new');
  const before = process.env.RFDETR_SIDECAR_DECODE;
  process.env.RFDETR_SIDECAR_DECODE = 'off';
  let conn: SidecarConnection;
  try {
    conn = await connect(t, p);
  } finally {
    if (before === undefined) delete process.env.RFDETR_SIDECAR_DECODE;
    else process.env.RFDETR_SIDECAR_DECODE = before;
  }
  assert.equal(conn.decodes('png'), false);
  await conn.decodersKnown();
  assert.equal(conn.decodes('png'), false);
  assert.equal(conn.decodes('jpeg'), false);
  const e = await conn.infer({ encoded: png(7) }).then(() => assert.fail('must be refused'), (err: RfdetrError) => err);
  assert.ok(isRfdetrError(e, 'E_SIDECAR_DECLINED'), String(e));
  assert.match(e.message, /RFDETR_SIDECAR_DECODE=off.*send it as \{ image \}/);
  await conn.ping(5_000);
  assert.deepEqual(ops(p), ['ping'], 'neither the question nor the file was sent');
});

test('an older sidecar answers decoders with E_UNKNOWN_OP: decodes() stays false, the connection keeps serving, and it is not asked again', async (t) => {
  const p = await peer(t, 'old');
  const conn = await connect(t, p);
  assert.equal(conn.decodes('jpeg'), false);
  await conn.decodersKnown();
  assert.equal(conn.decodes('jpeg'), false);
  assert.equal(conn.decodes('png'), false);
  assert.equal(conn.closed, false);
  await conn.ping(5_000);
  assert.deepEqual(ops(p), ['decoders', 'ping']);
  const e = await conn.infer({ encoded: png(7) }).then(() => assert.fail('must be refused'), (err: RfdetrError) => err);
  assert.ok(isRfdetrError(e, 'E_SIDECAR_DECLINED'), String(e));
  assert.match(e.message, /it decodes none/);
});

test('infer({ encoded }): before the answer it is refused unsent; after it, sent as image_encoded, with decodeMs; E_DECODE is E_SIDECAR_DECLINED with the reason', async (t) => {
  const p = await peer(t, 'new');
  const conn = await connect(t, p);
  const early = await conn.infer({ encoded: png(7) }).then(() => assert.fail('must be refused'), (err: RfdetrError) => err);
  assert.ok(isRfdetrError(early, 'E_SIDECAR_DECLINED'), String(early));
  assert.match(early.message, /not yet said/);
  await conn.decodersKnown();
  const file = png(7);
  const r = await conn.infer({ encoded: file });
  const sent = p.requests.at(-1)!;
  assert.equal(sent.op, 'infer');
  assert.deepEqual({ ...sent.image_encoded, bytes: Buffer.from(sent.image_encoded!.bytes) }, { ...file, bytes: Buffer.from(file.bytes) });
  assert.deepEqual(Array.from(r.outputs.logits!), new Array(NQ * NC).fill(7));
  assert.equal(r.decodeMs, 4.5);
  assert.equal(r.preprocessMs, 0.5);
  assert.equal(r.forwardMs, 2);
  const long = await conn.infer({ encoded: png(5) });
  assert.equal(long.decodeMs, 60_000);
  assert.equal(long.transferMs, 0, 'transferMs is the round trip less decodeMs (and the other sidecar times)');

  const e = await conn.infer({ encoded: png(0) }).then(() => assert.fail('must be declined'), (err: RfdetrError) => err);
  assert.ok(isRfdetrError(e, 'E_SIDECAR_DECLINED'), String(e));
  assert.match(e.message, /E_DECODE: png: truncated IDAT \(scripted\)/);
  assert.equal(e.details?.wireCode, 'E_DECODE');
  assert.equal(conn.closed, false, 'E_DECODE does not close the connection');
  assert.equal((await conn.infer({ encoded: png(9) })).outputs.logits![0], 9);
  const jpeg = await conn.infer({ encoded: { ...png(3), format: 'jpeg' } });
  assert.equal(p.requests.at(-1)!.image_encoded?.format, 'jpeg');
  assert.equal(jpeg.outputs.logits![0], 3);
});
