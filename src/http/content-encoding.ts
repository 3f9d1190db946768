// A request body's Content-Encoding, decoded as a stream with the decoded size capped (a small gzip can
// inflate to gigabytes). The names RFC 9110 gives: gzip (and x-gzip, "equivalent to gzip", §8.4.1.3),
// deflate, br; identity is no encoding. `deflate` is meant to be the zlib format (RFC 1950), but many
// clients send raw DEFLATE (RFC 1951) under that name, as browsers have long accepted: the first two bytes
// tell them apart (a zlib header is CMF/FLG with CM = 8 and a multiple of 31).
import { Transform, type Readable } from 'node:stream';
import zlib from 'node:zlib';
import { RfdetrError } from '../errors.ts';

export type BodyEncoding = 'identity' | 'gzip' | 'deflate' | 'br';

/** The encoding a Content-Encoding header names, or a 415 naming those accepted. */
export function bodyEncodingOf(header: string | undefined): BodyEncoding {
  const e = (header ?? 'identity').trim().toLowerCase();
  if (e === '' || e === 'identity') return 'identity';
  if (e === 'gzip' || e === 'x-gzip') return 'gzip';
  if (e === 'deflate' || e === 'br') return e;
  throw new RfdetrError('E_UNSUPPORTED_MEDIA', `Expected Content-Encoding gzip, x-gzip, deflate, br or identity but received ${JSON.stringify(e.slice(0, 64))}: send the body uncompressed or in one of those`);
}

/** Whether the first bytes of a deflate body are a zlib header (else it is raw DEFLATE). */
export function isZlibHeader(b: Uint8Array): boolean {
  return b.length >= 2 && (b[0]! & 0x0f) === 8 && (b[0]! >> 4) <= 7 && ((b[0]! << 8) | b[1]!) % 31 === 0;
}

/** A transform that picks zlib or raw inflate from the first two bytes. */
function sniffingInflate(): Transform {
  let inner: zlib.Inflate | zlib.InflateRaw | undefined;
  let head = Buffer.alloc(0);
  const out = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      if (!inner) {
        head = Buffer.concat([head, chunk]);
        if (head.length < 2) return cb();
        inner = isZlibHeader(head) ? zlib.createInflate() : zlib.createInflateRaw();
        inner.on('data', (d: Buffer) => out.push(d));
        inner.on('error', (e) => out.destroy(e));
        chunk = head;
      }
      if (inner.write(chunk)) cb();
      else inner.once('drain', () => cb());
    },
    flush(cb) {
      if (!inner) return cb(new Error('the deflate body is shorter than 2 bytes'));
      inner.once('end', () => cb());
      inner.end();
    },
  });
  return out;
}

/**
 * Reads `stream` decoded as `encoding` into one Buffer of at most `limit` bytes (decoded); `onBytes(n)` sees
 * each decoded chunk (a memory budget) and what it throws ends the read.
 */
export function readDecoded(stream: Readable, encoding: Exclude<BodyEncoding, 'identity'>, limit: number, tooLarge: () => Error, onBytes?: (n: number) => void): Promise<Buffer> {
  const decoder = encoding === 'gzip' ? zlib.createGunzip() : encoding === 'br' ? zlib.createBrotliDecompress() : sniffingInflate();
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let n = 0;
    let settled = false;
    const fail = (e: Error) => {
      if (settled) return;
      settled = true;
      stream.unpipe(decoder);
      decoder.destroy();
      stream.resume();
      reject(e);
    };
    decoder.on('data', (c: Buffer) => {
      n += c.length;
      if (n > limit) return fail(tooLarge());
      try {
        onBytes?.(c.length);
      } catch (e) {
        return fail(e as Error);
      }
      chunks.push(c);
    });
    decoder.on('error', (e: Error) => fail(new RfdetrError('E_BODY_ENCODING', `the request body could not be decompressed as its Content-Encoding (${encoding}) says (${e.message}): send the body uncompressed or correctly encoded`)));
    decoder.on('end', () => {
      if (settled) return;
      settled = true;
      resolve(Buffer.concat(chunks, n));
    });
    stream.on('aborted', () => fail(new RfdetrError('E_ABORTED', 'the client closed the connection while sending the body')));
    stream.on('error', (e: Error) => fail(new RfdetrError('E_ABORTED', `the request stream failed while the body was received (${e.message})`)));
    stream.pipe(decoder);
  });
}
