// Opening a connection to a sidecar up to its accepted hello: the socket, the frame reader, the hello
// deadline, and the checks of hello.ts. At the hello the caller's `make` builds the connection synchronously
// and takes over every later frame and failure, so nothing the sidecar sends after its hello is missed.
import net from 'node:net';
import { RfdetrError } from '../errors.ts';
import { FrameReader, decodePayload, type WireMessage } from '../protocol/codec.ts';
import type { SidecarInfo } from './backend.ts';
import { acceptHello } from './hello.ts';

/** Bytes read from the socket at a time: an infer reply and its header in one read. */
const READ_BUFFER_BYTES = 256 << 10;

/** What takes over after the hello: each later message, and the first failure (bad frame, socket error or close). */
export interface DialHandlers {
  onMessage(m: WireMessage, readAt: number): void;
  onFail(err: RfdetrError): void;
}

export function dialSidecar<T extends DialHandlers>(socketPath: string, helloTimeoutMs: number, make: (socket: net.Socket, info: SidecarInfo) => T): Promise<T> {
  return new Promise((resolve, reject) => {
    // Frames are read into one reused buffer, READ_BUFFER_BYTES at a time, and copied out: an infer reply
    // (114 KB at 300×91) then arrives in one read, not in the two 64 KB reads of a plain socket an event-loop
    // turn apart.
    const readBuf = Buffer.allocUnsafeSlow(READ_BUFFER_BYTES);
    const socket = net.createConnection({
      path: socketPath,
      onread: {
        buffer: readBuf,
        callback: (n: number, buf: Uint8Array) => {
          const chunk = Buffer.allocUnsafe(n);
          chunk.set(buf.subarray(0, n));
          reader.push(chunk);
          return true;
        },
      },
    });
    let handlers: T | undefined;
    let settled = false;
    const fail = (err: RfdetrError) => {
      if (handlers) {
        handlers.onFail(err);
        return;
      }
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      reject(err);
    };
    const timer = setTimeout(() => {
      fail(new RfdetrError('E_PROTOCOL', `no hello from the sidecar on ${socketPath} within ${helloTimeoutMs} ms; is it a sidecar, and is it still starting?`));
    }, helloTimeoutMs);
    const reader = new FrameReader(
      (payload) => {
        const readAt = performance.now();
        const r = decodePayload(payload);
        if (!r.ok) {
          reader.stop();
          fail(new RfdetrError('E_PROTOCOL', `sidecar sent a bad frame (${r.code}: ${r.message}); closing the connection`));
          return;
        }
        if (handlers) {
          handlers.onMessage(r.message, readAt);
          return;
        }
        const m = r.message;
        if (m.kind !== 'hello') {
          reader.stop();
          fail(new RfdetrError('E_PROTOCOL', `the sidecar's first frame must be its hello, got a ${m.kind} with id ${m.id}`));
          return;
        }
        const info = acceptHello(m);
        if (info instanceof RfdetrError) {
          reader.stop();
          fail(info);
          return;
        }
        settled = true;
        clearTimeout(timer);
        handlers = make(socket, info);
        resolve(handlers);
      },
      (message) => fail(new RfdetrError('E_PROTOCOL', `sidecar sent a bad frame (${message}); closing the connection`)),
    );
    socket.on('error', (e: NodeJS.ErrnoException) => {
      fail(new RfdetrError('E_SIDECAR_EXITED', `sidecar socket ${socketPath}: ${e.code ?? ''} ${e.message}`, { socketPath, errno: e.code }));
    });
    socket.on('close', () => {
      fail(new RfdetrError('E_SIDECAR_EXITED', `the sidecar closed the connection on ${socketPath}`, { socketPath }));
    });
  });
}
