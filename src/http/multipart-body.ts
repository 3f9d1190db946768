// A multipart/form-data body read with busboy: at most one file part ("image"), each named field at most once,
// the body, the file and each field capped, every malformed or cut-off form an error naming what was wrong.
// /predict's fields (body.ts) and DeepStack's (compat-deepstack.ts) are read by it.
import type { Request } from 'express';
import busboy from 'busboy';
import { RfdetrError } from '../errors.ts';
import type { BodyLimits, PredictInput } from './body.ts';
import { bodyTooLarge, imageTooLargeError } from './params.ts';

/**
 * A multipart/form-data body: at most one file part, named "image", and at most `maxFields` fields (by default
 * as many as `fieldNames`, the fields the route reads), each at most once, given to `accept` (which gives the
 * input or throws what is wrong with it).
 */
export function readMultipartBody(req: Request, limits: BodyLimits, fieldNames: readonly string[], accept: (fields: Record<string, unknown>, file: Buffer | undefined) => PredictInput, maxFields = fieldNames.length): Promise<PredictInput> {
  return new Promise((resolve, reject) => {
    const enc = (req.headers['content-encoding'] ?? 'identity').toLowerCase();
    if (enc !== 'identity') {
      reject(new RfdetrError('E_UNSUPPORTED_MEDIA', `Expected no Content-Encoding for a multipart/form-data body but received ${JSON.stringify(enc)}: send it uncompressed, or use a JSON body`));
      return;
    }
    let bb: busboy.Busboy;
    try {
      bb = busboy({
        headers: req.headers,
        // Each field at most once, plus the image part.
        limits: { files: 1, fields: maxFields, parts: maxFields + 1, fileSize: limits.maxImageBytes, fieldSize: limits.maxBodyBytes },
      });
    } catch (e) {
      reject(new RfdetrError('E_SCHEMA', `multipart body cannot be parsed (${(e as Error).message}): expected multipart/form-data with a boundary`));
      return;
    }
    const fields: Record<string, unknown> = {};
    let file: Buffer | undefined;
    let failure: Error | undefined;
    let received = 0;
    let done = false;
    const fail = (e: Error) => {
      if (!failure) failure = e;
    };
    const finish = () => {
      if (done) return;
      done = true;
      req.off('data', count);
      if (failure) return reject(failure);
      try {
        resolve(accept(fields, file));
      } catch (e) {
        reject(e);
      }
    };
    const count = (chunk: Buffer) => {
      received += chunk.length;
      if (received > limits.maxBodyBytes && !done) {
        done = true;
        req.unpipe(bb);
        req.off('data', count);
        reject(bodyTooLarge(limits.maxBodyBytes));
      }
    };
    req.on('data', count);
    bb.on('file', (name, stream) => {
      if (name !== 'image') {
        fail(new RfdetrError('E_SCHEMA', `Expected the file part to be named "image" but received a file part named ${JSON.stringify(name)}`));
        stream.resume();
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      stream.on('data', (c: Buffer) => {
        size += c.length;
        chunks.push(c);
      });
      stream.on('limit', () => fail(imageTooLargeError(limits.maxImageBytes + 1, limits.maxImageBytes, 'bytes')));
      // A part cut off before its closing boundary errors on the part's stream as well as on busboy: without
      // this listener that error would be unhandled and take the process down.
      stream.on('error', (e: Error) => {
        fail(new RfdetrError('E_SCHEMA', `multipart body is malformed (${e.message}): expected multipart/form-data whose "image" part ends with the closing boundary`));
        finish();
      });
      stream.on('end', () => {
        if (!stream.truncated) file = Buffer.concat(chunks, size);
      });
    });
    bb.on('field', (name, value, info) => {
      if (info.valueTruncated) fail(bodyTooLarge(limits.maxBodyBytes));
      if (name in fields) fail(new RfdetrError('E_SCHEMA', `field ${JSON.stringify(name)} is given twice: expected each field at most once`));
      fields[name] = value;
    });
    bb.on('filesLimit', () => fail(new RfdetrError('E_SCHEMA', 'Expected exactly one file part ("image") but received more than one')));
    bb.on('fieldsLimit', () => fail(new RfdetrError('E_SCHEMA', `Expected at most ${maxFields} fields (${fieldNames.join(', ')}${maxFields > fieldNames.length ? ', and others ignored' : ''}) but received more`)));
    bb.on('partsLimit', () => fail(new RfdetrError('E_SCHEMA', `Expected at most ${maxFields + 1} parts in the multipart body but received more`)));
    bb.on('error', (e: Error) => {
      fail(new RfdetrError('E_SCHEMA', `multipart body is malformed (${e.message}): expected multipart/form-data with an "image" file part`));
      finish();
    });
    bb.on('close', finish);
    req.on('error', (e: Error) => {
      fail(new RfdetrError('E_ABORTED', `the request stream failed while the body was received (${e.message})`));
      finish();
    });
    req.on('aborted', () => {
      fail(new RfdetrError('E_ABORTED', 'the client closed the connection while sending the body'));
      finish();
    });
    req.pipe(bb);
  });
}
