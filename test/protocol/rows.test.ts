// Selected rows through the TypeScript codec (sidecar/PROTOCOL.md, "Selected rows"): the segment hello's
// `rows: "selected"`, the infer request's `select` (also with its image left uncopied) and the reply's `rows`;
// the golden frames hold the bytes both codecs share, and each malformed form is told what was expected.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Packr } from 'msgpackr';
import { testFixturesDir } from '../../src/config/paths.ts';
import { decodePayload, encodeFrame, encodeFrameParts, f32Bytes, type WireMessage, type WireRequest } from '../../src/protocol/codec.ts';

const framesDir = path.join(testFixturesDir, 'frames');
const packr = new Packr({ useRecords: false, variableMapSize: true });
const payloadOf = (file: string) => readFileSync(path.join(framesDir, file)).subarray(4);
function decoded(file: string): WireMessage {
  const r = decodePayload(payloadOf(file));
  assert.ok(r.ok, `${file}: ${r.ok ? '' : r.message}`);
  return r.message;
}

test('the segment hello marks pred_masks rows "selected", after its shape, and re-encodes to the golden bytes', () => {
  const h = decoded('hello-segment.bin');
  assert.ok(h.kind === 'hello');
  assert.equal(h.task, 'segment');
  assert.deepEqual(h.outputs, [
    { name: 'logits', dtype: 'f32', shape: [100, 2] },
    { name: 'pred_boxes', dtype: 'f32', shape: [100, 4] },
    { name: 'pred_masks', dtype: 'f32', shape: [100, 78, 78], rows: 'selected' },
  ]);
  const bytes = readFileSync(path.join(framesDir, 'hello-segment.bin'));
  assert.ok(encodeFrame(h).equals(bytes));
  // {name, dtype, shape, rows} in that order: fixmap 4 … "shape" [100, 78, 78] "rows" "selected"
  assert.ok(bytes.includes(Buffer.from('a5736861706593644e4ea4726f7773a873656c6563746564', 'hex')));
});

test('select comes after the image key with its keys in order; an integral number is an integer', () => {
  const m = decoded('request-infer-select.bin') as WireRequest;
  assert.deepEqual(m.select, { threshold: 0.3, max: 100, classes: [1, 3], class_thresholds: { 1: 1, 3: 0.5 } });
  const p = payloadOf('request-infer-select.bin');
  const at = p.indexOf(Buffer.from('a673656c656374', 'hex')); // "select"
  assert.ok(at > p.indexOf(Buffer.from('a5696d616765', 'hex')), 'select after image');
  // select {threshold: f64 0.3, max: 100, classes: [1, 3], class_thresholds: {"1": 1, "3": f64 0.5}}
  assert.equal(p.subarray(at + 7, at + 18).toString('hex'), '84a97468726573686f6c64cb'.slice(0, 22));
  assert.ok(p.subarray(at).includes(Buffer.from('a36d617864a7636c6173736573920103b0636c6173735f7468726573686f6c647382a13101a133cb', 'hex')));
  assert.deepEqual((decoded('request-infer-select-minimal.bin') as WireRequest).select, { threshold: 0, max: 0 });
});

test('encodeFrameParts: with select after it, an infer\'s binary is still left uncopied and the bytes equal msgpackr\'s', () => {
  const select = { threshold: 0.45, max: 7, classes: [0, 90], class_thresholds: { 17: 0.6 } };
  for (const n of [0, 8, 256, 70_000]) { // whole f32s, for pixel_values
    const data = Uint8Array.from({ length: n }, (_, i) => (i * 13 + 5) & 0xff);
    const forms: [WireRequest, Record<string, unknown>][] = [
      [{ kind: 'request', id: 9, op: 'infer', image: { width: n, height: 1, rgb: data }, select }, { id: 9, op: 'infer', image: { width: n, height: 1, rgb: data }, select }],
      [{ kind: 'request', id: 9, op: 'infer', pixel_values: data, select }, { id: 9, op: 'infer', pixel_values: data, select }],
      [{ kind: 'request', id: 9, op: 'infer', image_encoded: { format: 'png', width: 3, height: 2, bytes: data }, select: { threshold: 1, max: 0 } },
        { id: 9, op: 'infer', image_encoded: { format: 'png', width: 3, height: 2, bytes: data }, select: { threshold: 1, max: 0 } }],
    ];
    for (const [msg, plain] of forms) {
      const parts = encodeFrameParts(msg);
      assert.equal(parts.length, 3);
      assert.equal(parts[1]!.buffer, data.buffer, 'the binary is not copied');
      const frame = Buffer.concat(parts);
      const whole = packr.pack(plain);
      assert.equal(frame.readUInt32LE(0), whole.length);
      assert.ok(frame.subarray(4).equals(whole), `n=${n}`);
      assert.ok(frame.equals(encodeFrame(msg)));
      const r = decodePayload(frame.subarray(4));
      assert.ok(r.ok && r.message.kind === 'request');
      assert.deepEqual(r.message.select, msg.select);
    }
  }
  // By shm reference the byte-by-byte writer has no select: the general path carries it.
  const ref = { name: 'rfdetr-shm-1-1-0', offset: 64, length: 3, width: 1, height: 1 };
  const parts = encodeFrameParts({ kind: 'request', id: 5, op: 'infer', image_shm: ref, select });
  const r = decodePayload(Buffer.concat(parts).subarray(4));
  assert.ok(r.ok && r.message.kind === 'request');
  assert.deepEqual(r.message.select, select);
  assert.ok(Buffer.concat(parts).subarray(4).equals(packr.pack({ id: 5, op: 'infer', image_shm: ref, select })));
});

test('an infer reply with rows decodes (past the byte-by-byte reader) with each row\'s query, rows right after outputs', () => {
  const m = decoded('reply-infer-rows.bin');
  assert.ok(m.kind === 'reply');
  assert.deepEqual(m.rows, { pred_masks: [2, 0] });
  assert.equal(m.outputs!.pred_masks!.length, 32);
  const p = payloadOf('reply-infer-rows.bin');
  const rowsAt = p.indexOf(Buffer.from('a4726f7773', 'hex'));
  assert.ok(rowsAt > p.indexOf(Buffer.from('a76f757470757473', 'hex')) && rowsAt < p.indexOf(Buffer.from('ad70726570726f636573735f6d73', 'hex')));
  const none = decoded('reply-infer-rows-none.bin');
  assert.ok(none.kind === 'reply');
  assert.deepEqual(none.rows, { pred_masks: [] });
  assert.equal(none.outputs!.pred_masks!.length, 0);
  assert.equal(none.decode_ms, 2);
  const f = encodeFrame({ kind: 'reply', id: 3, ok: true, outputs: { m: f32Bytes(new Float32Array(2)) }, rows: { m: [7] }, preprocess_ms: 0, forward_ms: 1 });
  const back = decodePayload(f.subarray(4));
  assert.ok(back.ok && back.message.kind === 'reply');
  assert.deepEqual(back.message.rows, { m: [7] });
});

test('malformed rows and select forms are E_FIELD naming the field and what it must be', () => {
  for (const [file, why] of [
    ['bad-hello-output-rows-not-selected.bin', /field 'outputs\[0\]\.rows' is 'all'; expected 'selected' \(or no rows key\)/],
    ['bad-hello-output-rows-no-axis.bin', /field 'outputs\[0\]' selects rows but its shape has no axis 0/],
    ['bad-infer-select-not-map.bin', /field 'select' must be a map \{threshold, max, classes, class_thresholds\}, got float/],
    ['bad-infer-select-no-max.bin', /field 'select' lacks 'max'/],
    ['bad-infer-select-threshold-not-number.bin', /field 'select\.threshold' must be a number, got string/],
    ['bad-infer-select-max-negative.bin', /field 'select\.max' must be an unsigned integer, got negative integer/],
    ['bad-infer-select-classes-not-uints.bin', /field 'select\.classes' must be an array of unsigned integers \(class ids\)/],
    ['bad-infer-select-class-threshold-not-number.bin', /field 'select\.class_thresholds\.1' must be a number, got string/],
    ['bad-infer-select-unknown-key.bin', /field 'select' has an unknown key 'top_k'/],
    ['bad-ping-with-select.bin', /field 'select' is not part of a 'ping' request/],
    ['bad-reply-rows-not-map.bin', /field 'rows' must be a map of output name to an array of unsigned integers/],
    ['bad-reply-rows-not-uints.bin', /field 'rows\.m' must be an array of unsigned integers \(query indices\), got an array holding float/],
    ['bad-reply-rows-without-outputs.bin', /an ok reply carries nothing, exactly outputs/],
  ] as const) {
    const r = decodePayload(payloadOf(file));
    assert.ok(!r.ok && r.code === 'E_FIELD', file);
    assert.match(r.message, why, file);
  }
});
