// A POST /predict/video body onto disk: the video is written to a file in a fresh temporary directory as it
// arrives (ffprobe needs a seekable file: an MP4's index may sit at its end), never held in memory. Two forms:
//   video/* or application/octet-stream   the video bytes themselves; the options from the query string
//   multipart/form-data                    a `video` file part + the options as text fields
// Over `maxBytes` the upload is cut off (413); `onBytes` may cut it off too (the disk budget). Whatever happens, `cleanup()` removes the directory; on a
// failure here it has already been removed.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import type { Request } from 'express';
import busboy from 'busboy';
import { RfdetrError } from '../errors.ts';
import { abortedBy } from './active.ts';

export interface VideoUpload {
  /** The video file. */
  file: string;
  bytes: number;
  /** Option fields as text: the query string, or the multipart text fields. */
  fields: Record<string, unknown>;
  /** Removes the temporary directory (idempotent). */
  cleanup: () => Promise<void>;
}

export interface VideoBodyOptions {
  maxBytes: number;
  /** Where the temporary directories go (default os.tmpdir()). */
  tmpRoot?: string | undefined;
  signal: AbortSignal;
  /** Sees the upload's size each time it grows; what it throws ends the upload with that error. */
  onBytes?: (total: number) => void;
}

export type VideoBodyForm = 'raw' | 'multipart';

/** Which form a request's Content-Type selects, or a 415 naming what is accepted. */
export function videoBodyFormOf(req: Request): VideoBodyForm {
  if (req.is('multipart/form-data')) return 'multipart';
  if (req.is('video/*') || req.is('application/octet-stream')) return 'raw';
  const ct = req.headers['content-type'];
  throw new RfdetrError(
    'E_UNSUPPORTED_MEDIA',
    `Expected Content-Type video/* (video/mp4, video/webm, …), application/octet-stream or multipart/form-data for the /predict/video body but received ${ct ? JSON.stringify(ct) : 'no Content-Type'}`,
  );
}

export function videoTooLarge(maxBytes: number): RfdetrError {
  return new RfdetrError('E_BODY_TOO_LARGE', `the video is larger than the ${maxBytes}-byte limit (${(maxBytes / 2 ** 20).toFixed(0)} MiB, --video-max-bytes): send a shorter or more compressed video`, { limit: maxBytes });
}

function emptyVideo(): RfdetrError {
  return new RfdetrError('E_SCHEMA', 'the video is empty (0 bytes): expected the video file as the body, or as a multipart file part named "video"', { field: 'video', expected: 'a video file' });
}

/**
 * Writes `src` to `file`, failing past `max` bytes. `src` is unpiped, never destroyed: destroying a request
 * would close its socket before the 413 could be sent.
 */
function writeCapped(src: Readable, file: string, max: number, counted: (n: number) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const out = fs.createWriteStream(file);
    let n = 0;
    let settled = false;
    const settle = (e?: Error) => {
      if (settled) return;
      settled = true;
      src.off('data', onData);
      src.off('error', onError);
      src.off('close', onClose);
      if (e) {
        src.unpipe(out);
        out.destroy();
        reject(e);
      } else resolve();
    };
    const onData = (chunk: Buffer) => {
      n += chunk.length;
      if (n > max) return settle(videoTooLarge(max));
      try {
        counted(n);
      } catch (e) {
        settle(e as Error);
      }
    };
    const onError = () => settle(aborted());
    // `close` before `end` is a connection that went away mid-body.
    const onClose = () => {
      if (!src.readableEnded) settle(aborted());
    };
    src.on('data', onData);
    src.on('error', onError);
    src.on('close', onClose);
    out.on('error', (e) => settle(new RfdetrError('E_INTERNAL', `the video could not be written to a temporary file: ${e.message}`)));
    out.on('finish', () => settle());
    src.pipe(out);
  });
}

function aborted(): RfdetrError {
  return new RfdetrError('E_ABORTED', 'the client closed the connection while sending the video');
}

export async function receiveVideo(req: Request, form: VideoBodyForm, o: VideoBodyOptions): Promise<VideoUpload> {
  const enc = (req.headers['content-encoding'] ?? 'identity').toLowerCase();
  if (enc !== 'identity') {
    throw new RfdetrError('E_UNSUPPORTED_MEDIA', `Expected no Content-Encoding for a video body but received ${JSON.stringify(enc)}: video is already compressed; send it as is`);
  }
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > o.maxBytes + (form === 'multipart' ? 64 * 1024 : 0)) throw videoTooLarge(o.maxBytes);
  const dir = await fs.promises.mkdtemp(path.join(o.tmpRoot ?? os.tmpdir(), 'rfdetr-video-'));
  const file = path.join(dir, 'input');
  let removed = false;
  const cleanup = async () => {
    if (removed) return;
    removed = true;
    await fs.promises.rm(dir, { recursive: true, force: true });
  };
  try {
    let bytes = 0;
    let fields: Record<string, unknown>;
    if (form === 'raw') {
      fields = { ...(req.query as Record<string, unknown>) };
      await Promise.race([writeCapped(req, file, o.maxBytes, (n) => {
        bytes = n;
        o.onBytes?.(n);
      }), abortedBy(o.signal)]);
    } else {
      ({ fields, bytes } = await receiveMultipart(req, file, o));
    }
    if (bytes === 0) throw emptyVideo();
    return { file, bytes, fields, cleanup };
  } catch (e) {
    await cleanup();
    if (o.signal.aborted) throw o.signal.reason;
    throw e;
  }
}

function receiveMultipart(req: Request, file: string, o: VideoBodyOptions): Promise<{ fields: Record<string, unknown>; bytes: number }> {
  return new Promise((resolve, reject) => {
    let bb: busboy.Busboy;
    try {
      bb = busboy({ headers: req.headers, limits: { files: 1, fields: 8, parts: 9, fieldSize: 64 * 1024 } });
    } catch (e) {
      reject(new RfdetrError('E_SCHEMA', `multipart body cannot be parsed (${(e as Error).message}): expected multipart/form-data with a boundary`));
      return;
    }
    const fields: Record<string, unknown> = {};
    let bytes = 0;
    let sawFile = false;
    let writing: Promise<void> | undefined;
    let failure: Error | undefined;
    let settled = false;
    const fail = (e: Error) => {
      failure ??= e;
      finish();
    };
    const finish = () => {
      if (settled) return;
      settled = true;
      req.unpipe(bb);
      o.signal.removeEventListener('abort', onAbort);
      const done = writing ?? Promise.resolve();
      done.then(
        () => {
          if (failure) return reject(failure);
          if (!sawFile) return reject(new RfdetrError('E_SCHEMA', 'Expected a file part named "video" (the video file) but the multipart body has none', { field: 'video', expected: 'a file part named "video"' }));
          resolve({ fields, bytes });
        },
        (e: Error) => reject(failure ?? e),
      );
    };
    const onAbort = () => fail(o.signal.reason as Error);
    o.signal.addEventListener('abort', onAbort, { once: true });
    bb.on('file', (name, stream) => {
      if (name !== 'video') {
        stream.resume();
        fail(new RfdetrError('E_SCHEMA', `Expected the file part to be named "video" but received a file part named ${JSON.stringify(name)}`, { field: name, expected: 'a file part named "video"' }));
        return;
      }
      sawFile = true;
      writing = writeCapped(stream, file, o.maxBytes, (n) => {
        bytes = n;
        o.onBytes?.(n);
      }).catch((e: Error) => {
        stream.resume();
        failure ??= e;
        finish();
      });
    });
    bb.on('field', (name, value) => {
      if (name in fields) fail(new RfdetrError('E_SCHEMA', `field ${JSON.stringify(name)} is given twice: expected each field at most once`, { field: name, expected: 'each field at most once' }));
      fields[name] = value;
    });
    bb.on('filesLimit', () => fail(new RfdetrError('E_SCHEMA', 'Expected exactly one file part ("video") but received more than one')));
    bb.on('fieldsLimit', () => fail(new RfdetrError('E_SCHEMA', 'Expected at most 8 fields (threshold, max_detections, classes, stride, track) but received more')));
    bb.on('error', (e: Error) => fail(new RfdetrError('E_SCHEMA', `multipart body is malformed (${e.message}): expected multipart/form-data with a "video" file part`)));
    bb.on('close', finish);
    req.on('aborted', () => fail(aborted()));
    req.on('error', () => fail(aborted()));
    req.pipe(bb);
  });
}
