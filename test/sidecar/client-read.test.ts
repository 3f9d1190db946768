// The client's socket reads (src/sidecar/client.ts reads into one reused buffer and copies each chunk out)
// against a scripted peer on a real Unix socket: a frame larger than that buffer, and frames that share a read,
// arrive whole and unchanged.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { SidecarConnection } from '../../src/sidecar/client.ts';
import { FrameReader, decodePayload, encodeFrame, type WireMessage } from '../../src/protocol/codec.ts';
import { wireHello } from '../helpers/wire-hello.ts';

test('client: a 364 KB hello spread over several reads and replies sharing one read arrive unchanged', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rfdetr-read-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const socketPath = path.join(dir, 's.sock');
  // 91 labels of 4000 characters, each different: a hello bigger than the client's 256 KB read buffer.
  const labels = Array.from({ length: 91 }, (_, i) => String.fromCharCode(65 + (i % 26)).repeat(3999) + (i % 10));
  const hello: WireMessage = wireHello({ sidecar_version: '0.0.0-read', engine: 'scripted', device: 'scripted', num_queries: 300, num_classes: 91, labels });
  const srv = net.createServer((sock) => {
    sock.write(encodeFrame(hello));
    const reader = new FrameReader((p) => {
      const r = decodePayload(p);
      if (!r.ok || r.message.kind !== 'request') return;
      // Every ping is answered twice in one write: the reply and an error for an id nobody sent would close the
      // connection, so the second frame is the reply to the next id the client will use.
      const id = r.message.id;
      if (id % 2 === 1) sock.write(Buffer.concat([encodeFrame({ kind: 'reply', id, ok: true }), encodeFrame({ kind: 'reply', id: id + 1, ok: true })]));
    }, () => sock.destroy());
    sock.on('data', (d: Buffer) => reader.push(d));
    sock.on('error', () => {});
  });
  await new Promise<void>((resolve) => srv.listen(socketPath, resolve));
  t.after(() => srv.close());
  const conn = await SidecarConnection.connect(socketPath, { helloTimeoutMs: 10_000 });
  t.after(() => conn.close());
  assert.equal(conn.info.labels.length, 91);
  for (let i = 0; i < 91; i++) assert.equal(conn.info.labels[i], labels[i], `label ${i} changed on the way`);
  // Two pings at once: the peer answers both in one write, after the first arrives.
  await Promise.all([conn.ping(5_000), conn.ping(5_000)]);
  assert.equal(conn.closed, false);
});
