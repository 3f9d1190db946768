// The three /predict body forms, each reduced to image bytes + the raw field values:
//   application/json      {"image": "<base64>", "threshold": 0.5, ...}     (the reference app's form)
//   multipart/form-data   an `image` file part (or a base64 `image` text field) + text fields
//   image/* or application/octet-stream   the image bytes themselves; fields from the query string
// The limits: 32 MB of image bytes (→ 400, E_IMAGE_TOO_LARGE), and a JSON/multipart body cap that fits a
// 32 MB image in wrapped base64 (→ 413, E_BODY_TOO_LARGE).
import { isUtf8 } from 'node:buffer';
import type { Request, Response } from 'express';
import express from 'express';
import { RfdetrError, isRfdetrError } from '../errors.ts';
import { bodyEncodingOf, readDecoded } from './content-encoding.ts';
import { countBatchImages, extractJsonImage } from './json-image.ts';
import { MAX_BATCH_IMAGES } from './schema.ts';
import { readMultipartBody } from './multipart-body.ts';
import { base64DecodedLength, bodyTooLarge, decodeBase64Image, imageTooLargeError, parsePredictBatchJson, parsePredictJson, parsePredictUrlJson, parsePredictParams, PREDICT_FIELDS, schemaError, type PredictParams } from './params.ts';

/**
 * Body cap for JSON and multipart: a 32 MB image is 44,739,244 base64 characters, 45.9 M wrapped at 76
 * columns with CRLF. The 4 MiB of slack covers a data: prefix and the other fields, and lets a slightly
 * oversized image (up to ~35 MB unwrapped) get the precise 400 "image is N bytes; the limit is …" instead
 * of a 413. express's default (100 kB) would refuse ordinary photos.
 */
export function bodyLimitFor(maxImageBytes: number): number {
  const b64 = Math.ceil(maxImageBytes / 3) * 4;
  return Math.ceil((b64 * 78) / 76) + 4 * 1024 * 1024;
}

export interface PredictInput {
  image: Buffer;
  params: PredictParams;
  form: 'json' | 'multipart' | 'raw';
}

/** `image_url`: fetched after the body is in (when the server allows its host). */
export interface UrlInput {
  url: string;
  params: PredictParams;
  form: 'url';
}

/** `images: [...]`: each image's bytes, or the error that image alone gets (the others still run). */
export interface BatchInput {
  images: Array<Buffer | RfdetrError>;
  params: PredictParams;
  form: 'batch';
}

export interface BodyLimits {
  maxImageBytes: number;
  maxBodyBytes: number;
}

/** Maps errors thrown by express's body parsers (http-errors with a `type`) onto the error table. */
export function fromParserError(e: unknown, limits: BodyLimits, form: 'json' | 'raw'): Error {
  if (isRfdetrError(e)) return e;
  const err = e as { type?: string; message?: string; length?: number; limit?: number };
  switch (err.type) {
    case 'entity.too.large':
      return form === 'raw' ? imageTooLargeError(err.length ?? limits.maxImageBytes + 1, limits.maxImageBytes, 'bytes') : bodyTooLarge(limits.maxBodyBytes, err.length);
    case 'entity.parse.failed':
      return new RfdetrError('E_SCHEMA', `request body is not valid JSON (${err.message}): expected a JSON object like {"image": "<base64 PNG/JPEG>", "threshold": 0.5}`);
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return new RfdetrError('E_UNSUPPORTED_MEDIA', `${err.message}: expected a utf-8 JSON body`);
    case 'request.aborted':
      return new RfdetrError('E_ABORTED', 'the client closed the connection while sending the body');
    case 'request.size.invalid':
      return new RfdetrError('E_SCHEMA', `request body length does not match Content-Length (${err.message})`);
    default: {
      // A corrupt gzip/deflate/br/zstd body: body-parser passes zlib's error on with status 400 and no type.
      const z = e as { code?: unknown; errno?: unknown; status?: unknown };
      if (z.status === 400 && (typeof z.errno === 'number' || (typeof z.code === 'string' && /^(Z_|ERR_)/.test(z.code)))) {
        return new RfdetrError('E_BODY_ENCODING', `the request body could not be decompressed as its Content-Encoding says (${err.message}): send the body uncompressed or correctly encoded`);
      }
      return e instanceof Error ? e : new Error(String(e));
    }
  }
}

/** True when the Content-Type names no charset or utf-8; any other (or unclear) one is express.json's to judge. */
function isUtf8Json(req: Request): boolean {
  const ct = req.headers['content-type'] ?? '';
  return !/charset/i.test(ct) || /^[^;]*;\s*charset="?utf-8"?\s*$/i.test(ct);
}

/**
 * A utf-8 JSON body from its bytes, as express.json parses it: a BOM is dropped, an empty body is `{}`,
 * a syntax error is the 422 naming JSON.parse's message.
 */
function parseJsonBytes(bytes: Buffer): unknown {
  // Turning bytes that are not UTF-8 into a string costs the event loop ~18 ms per MB (40 MB of noise: 725 ms,
  // every other request's hand-offs waiting meanwhile, bench/redteam); checking them first costs ~0.5 ms per MB.
  if (!isUtf8(bytes)) {
    throw new RfdetrError('E_SCHEMA', `request body is not valid JSON (it is not UTF-8 text, RFC 8259): expected a JSON object like {"image": "<base64 PNG/JPEG>", "threshold": 0.5}`);
  }
  let text = bytes.toString('utf8');
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  if (text.length === 0) return {};
  try {
    return JSON.parse(text);
  } catch (e) {
    throw fromParserError({ type: 'entity.parse.failed', message: (e as Error).message }, { maxImageBytes: 0, maxBodyBytes: 0 }, 'json');
  }
}

export function runParser(mw: express.RequestHandler, req: Request, res: Response): Promise<void> {
  return new Promise((resolve, reject) => {
    mw(req, res, (err?: unknown) => (err ? reject(err) : resolve()));
  });
}

export type BodyForm = 'json' | 'multipart' | 'raw';

// The Content-Types clients send most, exactly as written, with the form req.is() gives them (a request with
// a body); anything else goes through req.is(), whose four calls parse the header four times.
const PLAIN_FORMS = new Map<string, BodyForm>([
  ['application/json', 'json'], ['application/json; charset=utf-8', 'json'],
  ['image/jpeg', 'raw'], ['image/png', 'raw'], ['image/webp', 'raw'], ['application/octet-stream', 'raw'],
]);

/** Which form a request's Content-Type selects, or a 415 naming what is accepted. */
export function bodyFormOf(req: Request): BodyForm {
  const plain = PLAIN_FORMS.get(req.headers['content-type'] ?? '');
  if (plain && (req.headers['transfer-encoding'] !== undefined || !isNaN(req.headers['content-length'] as unknown as number))) return plain;
  if (req.is('application/json')) return 'json';
  if (req.is('multipart/form-data')) return 'multipart';
  if (req.is('image/*') || req.is('application/octet-stream')) return 'raw';
  const ct = req.headers['content-type'];
  throw new RfdetrError(
    'E_UNSUPPORTED_MEDIA',
    `Expected Content-Type application/json, multipart/form-data, image/* or application/octet-stream for the /predict body but received ${ct ? JSON.stringify(ct) : 'no Content-Type'}`,
  );
}

/**
 * The body of a request framed by a Content-Length of at most `limit` bytes and sent as is (no
 * Content-Encoding, no Transfer-Encoding), as express.raw reads it, without its per-request set-up: the
 * bytes in one Buffer, E_ABORTED when the client goes away first. Null when the request is not framed so
 * (express.raw then reads it, with its own answers for the rest). Its 'data' listener is attached before
 * this returns, in the caller's tick.
 */
export function readPlainBody(req: Request, limit: number): Promise<Buffer> | null {
  const h = req.headers;
  const cl = h['content-length'];
  if (cl === undefined || h['transfer-encoding'] !== undefined || (h['content-encoding'] !== undefined && h['content-encoding'].toLowerCase() !== 'identity')) return null;
  if (!/^\d{1,15}$/.test(cl)) return null;
  const length = Number(cl);
  if (length > limit || req.readableEnded || req.destroyed) return null;
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    const done = (e?: Error) => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('aborted', onAborted);
      req.off('error', onAborted);
      req.off('close', onAborted);
      if (e) return reject(e);
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, received));
    };
    const onData = (c: Buffer) => {
      chunks.push(c);
      received += c.length;
    };
    // node's parser ends the body at Content-Length bytes; fewer means the connection went first.
    const onEnd = () => done(received === length ? undefined : new RfdetrError('E_SCHEMA', `request body length does not match Content-Length (request size did not match content length)`));
    const onAborted = () => done(new RfdetrError('E_ABORTED', 'the client closed the connection while sending the body'));
    req.on('data', onData);
    req.once('end', onEnd);
    req.once('aborted', onAborted);
    req.once('error', onAborted);
    req.once('close', onAborted);
  });
}

export function createBodyReader(limits: BodyLimits) {
  const json = express.json({ limit: limits.maxBodyBytes, strict: false, type: () => true });
  // The same read (limit, Content-Encoding) as `json`, giving the bytes: a utf-8 body is parsed by parseJsonBytes.
  const jsonBytes = express.raw({ limit: limits.maxBodyBytes, type: () => true });
  const raw = express.raw({ limit: limits.maxImageBytes, type: () => true });

  /**
   * A compressed body (content-encoding.ts: x-gzip and raw deflate too, the decoded size capped and counted) in
   * place of the parser's own inflate: resolves to the decoded Buffer, or null (no encoding) synchronously
   * enough that the parser attaches its listener in the same tick as the caller's byte counter.
   */
  function readEncoded(req: Request, form: 'json' | 'raw', onDecoded?: (n: number) => void): Promise<Buffer> | null {
    const enc = bodyEncodingOf(req.headers['content-encoding']);
    if (enc === 'identity') return null;
    const limit = form === 'json' ? limits.maxBodyBytes : limits.maxImageBytes;
    const tooLarge = () => form === 'json' ? bodyTooLarge(limits.maxBodyBytes) : imageTooLargeError(limits.maxImageBytes + 1, limits.maxImageBytes, 'bytes');
    return readDecoded(req, enc, limit, tooLarge, onDecoded);
  }

  /**
   * A JSON body into req.body: its bytes when it is utf-8 (returns true; an encoded one inflated, each chunk
   * counted by `onDecoded`), else express.json's parse (returns false).
   */
  async function receiveJson(req: Request, res: Response, onDecoded?: (n: number) => void): Promise<boolean> {
    // A decoded body is bytes like a utf-8 one (its charset, if any, is not re-decoded).
    const encoded = readEncoded(req, 'json', onDecoded);
    const utf8 = encoded !== null || isUtf8Json(req);
    const plain = encoded || !utf8 ? null : readPlainBody(req, limits.maxBodyBytes);
    if (encoded) {
      req.body = await encoded;
    } else if (plain) {
      req.body = await plain;
    } else {
      try {
        await runParser(utf8 ? jsonBytes : json, req, res);
      } catch (e) {
        throw fromParserError(e, limits, 'json');
      }
    }
    return utf8;
  }

  /** A JSON body parsed to a value, read as /predict's is (the routes of other servers' APIs). */
  async function readJsonValue(req: Request, res: Response, onDecoded?: (n: number) => void): Promise<unknown> {
    const utf8 = await receiveJson(req, res, onDecoded);
    return utf8 && Buffer.isBuffer(req.body) ? parseJsonBytes(req.body) : req.body;
  }

  async function readJson(req: Request, res: Response, onDecoded?: (n: number) => void, admissible?: (images: number) => void): Promise<PredictInput | BatchInput | UrlInput> {
    const utf8 = await receiveJson(req, res, onDecoded);
    if (utf8 && Buffer.isBuffer(req.body)) {
      const quick = extractJsonImage(req.body, limits.maxImageBytes);
      if (quick && !('images' in quick.fields) && !('image_url' in quick.fields)) {
        const { params } = parsePredictJson({ ...quick.fields, image: 'x' });
        return { image: quick.image, params, form: 'json' };
      }
      // A plain batch that cannot fit in the queue is refused on its count, before its megabytes are parsed.
      const n = admissible ? countBatchImages(req.body) : undefined;
      if (n !== undefined && n >= 1 && n <= MAX_BATCH_IMAGES) admissible!(n);
      req.body = parseJsonBytes(req.body);
    }
    const body: unknown = req.body;
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      throw schemaError('the request body', 'a JSON object like {"image": "<base64>"}', body);
    }
    if ('image_url' in body) {
      const { url, params } = parsePredictUrlJson(body as Record<string, unknown>);
      return { url, params, form: 'url' };
    }
    if ('images' in body) return readBatch(body as Record<string, unknown>, admissible);
    const { image, params } = parsePredictJson(body as Record<string, unknown>);
    return { image: decodeBase64Image(image, limits.maxImageBytes), params, form: 'json' };
  }

  function readBatch(body: Record<string, unknown>, admissible?: (images: number) => void): BatchInput {
    const { images, params } = parsePredictBatchJson(body);
    const total = images.reduce((n, s) => n + base64DecodedLength(s), 0);
    if (total > limits.maxImageBytes) {
      throw new RfdetrError('E_IMAGE_TOO_LARGE', `the ${images.length} images total about ${total} bytes after base64 decoding; the limit for one request is ${limits.maxImageBytes} bytes (${limits.maxImageBytes / 2 ** 20} MiB) in all: send fewer or smaller images per request`, { bytes: total, max_bytes: limits.maxImageBytes });
    }
    // Before the base64 of up to 16 images is decoded on the event loop: a batch that would not fit in the
    // queue is refused on its count (every item, valid or not). Under the red team's batches of 16, their
    // decode was 1.95 s of the main thread in 15 s, every one refused afterwards (bench/redteam).
    admissible?.(images.length);
    return {
      images: images.map((s) => {
        try {
          return decodeBase64Image(s, limits.maxImageBytes);
        } catch (e) {
          if (isRfdetrError(e)) return e;
          throw e;
        }
      }),
      params,
      form: 'batch',
    };
  }

  async function readRaw(req: Request, res: Response, onDecoded?: (n: number) => void): Promise<PredictInput> {
    const encoded = readEncoded(req, 'raw', onDecoded);
    const plain = encoded ? null : readPlainBody(req, limits.maxImageBytes);
    if (encoded) {
      req.body = await encoded;
    } else if (plain) {
      req.body = await plain;
    } else {
      try {
        await runParser(raw, req, res);
      } catch (e) {
        throw fromParserError(e, limits, 'raw');
      }
    }
    const params = parsePredictParams(req.query as Record<string, unknown>, true);
    const image = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    if (image.length === 0) throw new RfdetrError('E_IMAGE_UNDECODABLE', 'image is empty (0 bytes): expected PNG or JPEG bytes as the request body');
    return { image, params, form: 'raw' };
  }

  /**
   * `onDecoded(n)` sees each chunk a Content-Encoding inflates to (the memory budget); what it throws ends the read.
   * `admissible(n)` is asked before a batch's n images are decoded from base64; what it throws ends the read.
   */
  async function readPredictBody(req: Request, res: Response, form: BodyForm, onDecoded?: (n: number) => void, admissible?: (images: number) => void): Promise<PredictInput | BatchInput | UrlInput> {
    if (form === 'json') return readJson(req, res, onDecoded, admissible);
    if (form === 'raw') return readRaw(req, res, onDecoded);
    return readMultipartBody(req, limits, PREDICT_FIELDS, (fields, file) => predictInputOf(fields, file, limits));
  }
  /** The reader called as /predict's; `jsonValue` reads a JSON body the same way, parsed to a value. */
  return Object.assign(readPredictBody, { jsonValue: readJsonValue });
}

/** /predict's multipart input: its fields, and the image as a file part or a base64 text field. */
function predictInputOf(fields: Record<string, unknown>, file: Buffer | undefined, limits: BodyLimits): PredictInput {
  const params = parsePredictParams(fields, true);
  let image: Buffer;
  if (file !== undefined) {
    if (file.length === 0) throw new RfdetrError('E_IMAGE_UNDECODABLE', 'the image part is empty (0 bytes): expected PNG or JPEG bytes');
    image = file;
  } else if (typeof fields.image === 'string') {
    image = decodeBase64Image(fields.image, limits.maxImageBytes);
  } else {
    throw schemaError('image', 'a file part named "image" (PNG or JPEG bytes) or a base64 text field "image"', undefined);
  }
  return { image, params, form: 'multipart' };
}
