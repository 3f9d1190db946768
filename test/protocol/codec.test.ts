// The TypeScript codec against the golden frames (shared with the C++ tests) and the framing rules.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { testFixturesDir, packageRoot } from '../../src/config/paths.ts';
import {
  FrameReader, decodePayload, encodeFrame, encodeFrameParts, inferReplyAt, f32Bytes, f32FromBytes, MAX_FRAME_BYTES, PROTOCOL_VERSION, PROTOCOL_VERSION_WITHOUT_OUTPUTS,
  PROTOCOL_VERSION_WITHOUT_VARIANT, type WireMessage,
} from '../../src/protocol/codec.ts';
import { WIRE_ERRORS } from '../../src/protocol/error-codes.ts';
import { Packr } from 'msgpackr';

const framesDir = path.join(testFixturesDir, 'frames');
interface Entry { file: string; fields?: Record<string, unknown>; error?: string; error_id?: number }
const manifest = JSON.parse(readFileSync(path.join(framesDir, 'manifest.json'), 'utf8')) as Entry[];
const goodFrames = manifest.filter((e) => e.fields);
const badFrames = manifest.filter((e) => e.error);

function toJson(m: WireMessage): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(m)) {
    if (m.kind === 'hello' && (k === 'op' || k === 'ok')) continue;
    if (v instanceof Uint8Array) out[k] = Buffer.from(v).toString('hex');
    else if (k === 'image') {
      const im = v as { width: number; height: number; rgb: Uint8Array };
      out[k] = { width: im.width, height: im.height, rgb: Buffer.from(im.rgb).toString('hex') };
    } else if (k === 'image_encoded') {
      const r = v as { format: string; width: number; height: number; bytes: Uint8Array };
      out[k] = { format: r.format, width: r.width, height: r.height, bytes: Buffer.from(r.bytes).toString('hex') };
    } else if (k === 'outputs' && m.kind === 'reply') {
      out[k] = Object.fromEntries(Object.entries(v as Record<string, Uint8Array>).map(([name, b]) => [name, Buffer.from(b).toString('hex')]));
    } else out[k] = v;
  }
  return out;
}

/** Feeds bytes through a FrameReader in chunks of `step` bytes; returns decoded results and framing errors. */
function readAll(bytes: Buffer, step: number) {
  const payloads: Buffer[] = [];
  const errors: string[] = [];
  const r = new FrameReader((p) => payloads.push(Buffer.from(p)), (e) => errors.push(e));
  for (let i = 0; i < bytes.length; i += step) r.push(bytes.subarray(i, Math.min(bytes.length, i + step)));
  return { payloads, errors };
}

test('golden frames: the manifest covers every op, reply shape and error code', () => {
  const files = new Set(goodFrames.map((e) => e.file));
  for (const f of ['hello.bin', 'hello-card.bin', 'hello-v3.bin', 'hello-v2.bin', 'reply-infer-v3.bin', 'reply-infer-three-outputs.bin', 'request-infer.bin', 'request-infer-image.bin', 'request-ping.bin', 'request-shutdown.bin', 'reply-infer.bin', 'reply-ok.bin',
    'request-infer-image-encoded.bin', 'reply-infer-decode-ms.bin', 'request-decoders.bin', 'reply-decoders.bin']) {
    assert.ok(files.has(f), `manifest lacks ${f}`);
  }
  for (const code of Object.keys(WIRE_ERRORS)) assert.ok(files.has(`error-${code}.bin`), `no golden frame for ${code}`);
  assert.ok(badFrames.length >= 15);
});

test('golden frames: the version-4 hello declares task, outputs, precision(s) and host_cores; older sidecars\' version-3 and version-2 hellos still decode', () => {
  const decode = (file: string) => {
    const bytes = readFileSync(path.join(framesDir, file));
    const r = decodePayload(bytes.subarray(4));
    assert.ok(r.ok && r.message.kind === 'hello', `${file}: ${r.ok ? r.message.kind : r.message}`);
    return { hello: r.message, bytes };
  };
  const v4 = decode('hello.bin');
  assert.equal(v4.hello.protocol_version, PROTOCOL_VERSION);
  assert.equal(v4.hello.task, 'detect');
  assert.deepEqual(v4.hello.outputs, [{ name: 'logits', dtype: 'f32', shape: [300, 3] }, { name: 'pred_boxes', dtype: 'f32', shape: [300, 4] }]);
  assert.deepEqual([v4.hello.precision, v4.hello.precisions, v4.hello.host_cores], ['int8', ['fp32', 'int8'], true]);
  assert.equal(encodeFrame(v4.hello).toString('hex'), v4.bytes.toString('hex'));
  // host_cores is the last key: "host_cores" (aa + 10 bytes) then true (c3) end the frame
  assert.equal(v4.bytes.subarray(-12).toString('hex'), Buffer.concat([Buffer.from([0xaa]), Buffer.from('host_cores'), Buffer.from([0xc3])]).toString('hex'));
  assert.equal(decode('hello-card.bin').hello.host_cores, false);
  const v3 = decode('hello-v3.bin');
  assert.equal(v3.hello.protocol_version, PROTOCOL_VERSION_WITHOUT_OUTPUTS);
  assert.equal(v3.hello.variant, 'large');
  assert.equal(Object.hasOwn(v3.hello, 'outputs'), false);
  assert.equal(encodeFrame(v3.hello).toString('hex'), v3.bytes.toString('hex'));
  // variant is the last key: "variant" (a7 + 7 bytes) then "large" (a5 + 5 bytes) end the frame
  assert.equal(v3.bytes.subarray(-14).toString('hex'), Buffer.concat([Buffer.from([0xa7]), Buffer.from('variant'), Buffer.from([0xa5]), Buffer.from('large')]).toString('hex'));
  const v2 = decode('hello-v2.bin');
  assert.equal(v2.hello.protocol_version, PROTOCOL_VERSION_WITHOUT_VARIANT);
  assert.equal(Object.hasOwn(v2.hello, 'variant'), false);
  assert.equal(encodeFrame(v2.hello).toString('hex'), v2.bytes.toString('hex'));
  for (const [file, why] of [
    ['bad-hello-without-variant.bin', /a version-3 hello must carry exactly .*, labels, variant \(PROTOCOL.md\); it lacks 'variant'/],
    ['bad-hello-v2-with-variant.bin', /a version-2 hello must carry exactly .*, labels \(PROTOCOL.md\); 'variant' is not one of them/],
    ['bad-hello-variant-not-str.bin', /'variant' must be a string/],
    ['bad-hello-v4-without-outputs.bin', /a version-4 hello must carry exactly .*, variant, task, outputs, precision, precisions, host_cores \(PROTOCOL.md\); it lacks 'outputs'/],
    ['bad-hello-v4-without-host-cores.bin', /it lacks 'host_cores'/],
    ['bad-hello-v3-with-task.bin', /a version-3 hello .*'task' is not one of them/],
    ['bad-hello-output-dtype-f16.bin', /field 'outputs\[0\]\.dtype' must be one of f32, got 'f16'/],
    ['bad-hello-output-shape-not-uints.bin', /field 'outputs\[0\]\.shape' must be an array of unsigned integers/],
    ['bad-hello-output-unknown-key.bin', /field 'outputs\[0\]' has an unknown key 'layout'; expected name, dtype, shape/],
    ['bad-hello-outputs-not-array.bin', /field 'outputs' must be an array of \{name, dtype, shape\}, got map/],
    ['bad-hello-host-cores-not-bool.bin', /field 'host_cores' must be a boolean, got unsigned integer/],
    ['bad-hello-precisions-not-strings.bin', /field 'precisions' must be an array of strings/],
    ['bad-reply-outputs-not-bins.bin', /field 'outputs\.logits' must be binary \(f32 little-endian\), got array/],
    ['bad-reply-outputs-not-map.bin', /field 'outputs' must be a map of output name to binary/],
    ['bad-reply-outputs-odd-bytes.bin', /field 'outputs\.logits' must hold whole f32 values, got 6 bytes/],
    ['bad-reply-outputs-and-logits.bin', /an ok reply carries nothing, exactly outputs, preprocess_ms, forward_ms \(version 4, and rows for a selected output; logits, pred_boxes/],
    ['bad-reply-outputs-without-forward-ms.bin', /an ok reply carries nothing, exactly outputs, preprocess_ms, forward_ms/],
  ] as const) {
    const r = decodePayload(readFileSync(path.join(framesDir, file)).subarray(4));
    assert.ok(!r.ok && r.code === 'E_FIELD', file);
    assert.match(r.message, why, file);
  }
});

test('golden frames: TS decodes each to the manifest fields and re-encodes identical bytes', () => {
  for (const e of goodFrames) {
    const bytes = readFileSync(path.join(framesDir, e.file));
    const { payloads, errors } = readAll(bytes, bytes.length);
    assert.deepEqual(errors, [], e.file);
    assert.equal(payloads.length, 1, e.file);
    const r = decodePayload(payloads[0]!);
    assert.ok(r.ok, `${e.file}: ${r.ok ? '' : r.message}`);
    assert.deepEqual(toJson(r.message), e.fields, e.file);
    assert.equal(encodeFrame(r.message).toString('hex'), bytes.toString('hex'), `${e.file} re-encodes differently`);
  }
});

test('golden bad frames: TS rejects each with the manifest error code and id', () => {
  for (const e of badFrames) {
    const bytes = readFileSync(path.join(framesDir, e.file));
    const { payloads, errors } = readAll(bytes, 1);
    if (errors.length) {
      assert.equal(e.error, 'E_FRAME', `${e.file}: framing error ${errors[0]} but manifest says ${e.error}`);
      assert.equal(payloads.length, 0);
      continue;
    }
    assert.equal(payloads.length, 1, e.file);
    const r = decodePayload(payloads[0]!);
    assert.equal(r.ok, false, `${e.file} decoded but should fail with ${e.error}`);
    if (!r.ok) {
      assert.equal(r.code, e.error, `${e.file}: ${r.message}`);
      assert.equal(r.id, e.error_id, e.file);
      assert.ok(r.message.length > 10);
    }
  }
});

test('framing: every golden frame delivered a byte at a time, back to back, yields the same messages', () => {
  const all = Buffer.concat(goodFrames.map((e) => readFileSync(path.join(framesDir, e.file))));
  for (const step of [1, 3, 7, 4096]) {
    const { payloads, errors } = readAll(all, step);
    assert.deepEqual(errors, []);
    assert.equal(payloads.length, goodFrames.length, `step ${step}`);
    payloads.forEach((p, i) => {
      const r = decodePayload(p);
      assert.ok(r.ok);
      if (r.ok) assert.deepEqual(toJson(r.message), goodFrames[i]!.fields);
    });
  }
});

test('framing: an over-cap length is refused from the header alone, and the reader stops', () => {
  const h = Buffer.alloc(4);
  h.writeUInt32LE(MAX_FRAME_BYTES + 1, 0);
  const { payloads, errors } = readAll(Buffer.concat([h, readFileSync(path.join(framesDir, 'request-ping.bin'))]), 2);
  assert.equal(errors.length, 1);
  assert.match(errors[0]!, new RegExp(`${MAX_FRAME_BYTES + 1} is outside 1 to ${MAX_FRAME_BYTES}`));
  assert.equal(payloads.length, 0, 'nothing after a framing error is delivered');
  // Exactly at the cap is allowed by the reader (it waits for the payload).
  h.writeUInt32LE(MAX_FRAME_BYTES, 0);
  assert.deepEqual(readAll(h, 4).errors, []);
});

test('encodeFrame refuses a payload over the cap', () => {
  const big = new Uint8Array(MAX_FRAME_BYTES);
  assert.throws(() => encodeFrame({ kind: 'request', id: 1, op: 'infer', pixel_values: big }), new RegExp(`over the ${MAX_FRAME_BYTES}-byte cap`));
});

test('decodePayload: trailing bytes after the map are E_FRAME naming the cause', () => {
  const ping = readFileSync(path.join(framesDir, 'request-ping.bin')).subarray(4);
  const r = decodePayload(Buffer.concat([ping, Buffer.from([0x01])]));
  assert.equal(r.ok, false);
  if (!r.ok) {
    assert.equal(r.code, 'E_FRAME');
    assert.match(r.message, /trailing/);
  }
});

test('f32 helpers: bin views round-trip, including from a misaligned offset', () => {
  const xs = new Float32Array([1.5, -2.25, 3.125e-8, 65504]);
  const bytes = new Uint8Array(new ArrayBuffer(17), 1, 16);
  bytes.set(f32Bytes(xs));
  assert.equal(bytes.byteOffset % 4, 1);
  assert.deepEqual(Array.from(f32FromBytes(bytes)), Array.from(xs));
});

test('error table: src/protocol/error-codes.ts matches the table in sidecar/PROTOCOL.md', () => {
  const doc = readFileSync(path.join(packageRoot, 'sidecar', 'PROTOCOL.md'), 'utf8');
  const block = doc.split('<!-- error-codes:begin -->')[1]?.split('<!-- error-codes:end -->')[0];
  assert.ok(block, 'PROTOCOL.md has no error-codes block');
  const rows = block.split('\n').filter((l) => /^\| `E_/.test(l)).map((l) => l.split('|').map((c) => c.trim()));
  const fromDoc = rows.map((c) => ({ code: c[1]!.replace(/`/g, ''), closes: c[2] === 'yes' }));
  const fromTs = Object.entries(WIRE_ERRORS).map(([code, v]) => ({ code, closes: v.closesConnection }));
  assert.deepEqual(fromTs, fromDoc);
});

test('encodeFrameParts: an infer frame with its binary left uncopied equals msgpackr\'s whole encoding (bin8/16/32)', () => {
  const packr = new Packr({ useRecords: false, variableMapSize: true });
  for (const n of [0, 6, 255, 256, 65535, 65536, 70001 * 3]) {
    const rgb = Uint8Array.from({ length: n }, (_, i) => (i * 31) & 0xff);
    const whole = packr.pack({ id: 9, op: 'infer', image: { width: n, height: 1, rgb } });
    const parts = encodeFrameParts({ kind: 'request', id: 9, op: 'infer', image: { width: n, height: 1, rgb } });
    assert.equal(parts.length, 2);
    assert.equal(parts[1]!.buffer, rgb.buffer, 'the image bytes are not copied');
    const frame = Buffer.concat(parts);
    assert.equal(frame.readUInt32LE(0), whole.length);
    assert.ok(frame.subarray(4).equals(whole), `n=${n}`);
    const px = new Float32Array(n);
    const wholePx = packr.pack({ id: 9, op: 'infer', pixel_values: f32Bytes(px) });
    assert.ok(Buffer.concat(encodeFrameParts({ kind: 'request', id: 9, op: 'infer', pixel_values: f32Bytes(px) })).subarray(4).equals(wholePx), `px n=${n}`);
  }
});

test('encodeFrameParts: an infer of an image file leaves its bytes uncopied and equals msgpackr\'s whole encoding (bin8/16/32)', () => {
  const packr = new Packr({ useRecords: false, variableMapSize: true });
  for (const n of [1, 255, 256, 65535, 65536, 300_000]) {
    const bytes = Uint8Array.from({ length: n }, (_, i) => (i * 29 + 3) & 0xff);
    for (const format of ['jpeg', 'png']) {
      const image_encoded = { format, width: 640, height: 70000, bytes };
      const whole = packr.pack({ id: 70000, op: 'infer', image_encoded });
      const parts = encodeFrameParts({ kind: 'request', id: 70000, op: 'infer', image_encoded });
      assert.equal(parts.length, 2);
      assert.equal(parts[1]!.buffer, bytes.buffer, 'the file bytes are not copied');
      const frame = Buffer.concat(parts);
      assert.equal(frame.readUInt32LE(0), whole.length);
      assert.ok(frame.subarray(4).equals(whole), `n=${n} ${format}`);
      const r = decodePayload(frame.subarray(4));
      assert.ok(r.ok && r.message.kind === 'request', r.ok ? '' : r.message);
      assert.deepEqual({ ...r.message.image_encoded, bytes: Buffer.from(r.message.image_encoded!.bytes) }, { ...image_encoded, bytes: Buffer.from(bytes) });
    }
  }
});

test('encodeFrameParts: an infer by shm reference (written byte by byte) equals msgpackr\'s encoding at every int width', () => {
  const packr = new Packr({ useRecords: false, variableMapSize: true });
  const edges = [0, 1, 127, 128, 255, 256, 65535, 65536, 921600, 0xffffffff];
  for (const id of [1, 127, 128, 65536, 0xffffffff]) {
    for (const v of edges) {
      for (const name of ['', 's', 'rfdetr-slot-4242-0', 'x'.repeat(31)]) {
        const ref = { name, offset: v, length: edges[(edges.indexOf(v) + 3) % edges.length]!, width: edges[(edges.indexOf(v) + 5) % edges.length]!, height: v };
        const whole = packr.pack({ id, op: 'infer', image_shm: ref });
        const parts = encodeFrameParts({ kind: 'request', id, op: 'infer', image_shm: { ...ref } });
        assert.equal(parts.length, 1);
        assert.equal(parts[0]!.readUInt32LE(0), whole.length, `id=${id} v=${v} name=${name}`);
        assert.ok(parts[0]!.subarray(4).equals(whole), `id=${id} v=${v} name=${name}: ${parts[0]!.subarray(4).toString('hex')} vs ${whole.toString('hex')}`);
      }
    }
  }
  // What the byte writer does not cover goes the general way, with the same bytes.
  for (const ref of [{ name: 'x'.repeat(32), offset: 0, length: 1, width: 1, height: 1 }, { name: 'slot-é', offset: 0, length: 1, width: 1, height: 1 },
    { name: 's', offset: 2 ** 33, length: 1, width: 1, height: 1 }]) {
    const whole = packr.pack({ id: 5, op: 'infer', image_shm: ref });
    assert.ok(Buffer.concat(encodeFrameParts({ kind: 'request', id: 5, op: 'infer', image_shm: ref })).subarray(4).equals(whole), ref.name);
  }
});

test('decodePayload: an infer reply read byte by byte equals the general path\'s message; every other shape still gets its error', () => {
  const packr = new Packr({ useRecords: false, variableMapSize: true });
  const f64 = (v: number) => { const b = Buffer.alloc(9); b[0] = 0xcb; b.writeDoubleBE(v, 1); return b; };
  const f32 = (v: number) => { const b = Buffer.alloc(5); b[0] = 0xca; b.writeFloatBE(v, 1); return b; };
  const str = (s: string) => Buffer.concat([Buffer.from([0xa0 | Buffer.byteLength(s)]), Buffer.from(s)]);
  type Outs = Array<[string, Uint8Array]>;
  // The outputs map as the sidecar writes it: a fixmap (or, not canonical, a map16) of name → bin.
  const outputsMap = (outs: Outs, map16 = false) => Buffer.concat([
    map16 ? Buffer.from([0xde, 0x00, outs.length]) : Buffer.from([0x80 | outs.length]), ...outs.flatMap(([k, v]) => [str(k), packr.pack(v)])]);
  // The payload as the sidecar writes it, from its parts (so the time encodings can be chosen).
  const reply = (id: number, outs: Outs, pre: Buffer, fwd: Buffer, map = Buffer.from([0x85]), dec?: Buffer, outsBytes: Uint8Array = outputsMap(outs)) => Buffer.concat([
    map, str('id'), packr.pack(id), str('ok'), Buffer.from([0xc3]), str('outputs'), outsBytes,
    ...(dec ? [str('decode_ms'), dec] : []), str('preprocess_ms'), pre, str('forward_ms'), fwd]);
  const map16 = (n: number) => Buffer.from([0xde, 0x00, n]); // valid MessagePack, not canonical: only the general path reads it
  const asBuffers = (outs: Outs) => Object.fromEntries(outs.map(([k, v]) => [k, Buffer.from(v)]));
  for (const id of [0, 7, 128, 300, 65536, 0xffffffff]) {
    for (const n of [0, 4, 252, 256, 65532, 65536, 109200]) {
      const logits = Uint8Array.from({ length: n }, (_, i) => (i * 13) & 0xff);
      const boxes = Uint8Array.from({ length: 16 }, (_, i) => i);
      for (const outs of [[['logits', logits], ['pred_boxes', boxes]], [['logits', logits], ['pred_boxes', boxes], ['pred_masks', boxes]], [['x'.repeat(31), boxes]]] as Outs[]) {
        for (const [pre, fwd, want] of [[f64(0.91), f64(8.125), [0.91, 8.125]], [packr.pack(0), packr.pack(12), [0, 12]], [packr.pack(300), f32(0.5), [300, 0.5]],
          [packr.pack(70000), packr.pack(255), [70000, 255]]] as [Buffer, Buffer, number[]][]) {
          const where = `id=${id} n=${n} ${outs.map(([k]) => k).join(',')}`;
          assert.ok(inferReplyAt(reply(id, outs, pre, fwd)), `the fast reader reads ${where}`);
          const fast = decodePayload(reply(id, outs, pre, fwd));
          const general = decodePayload(reply(id, outs, pre, fwd, map16(5), undefined, outputsMap(outs, true)));
          assert.ok(fast.ok && general.ok, where);
          assert.deepEqual(fast.message, general.message);
          assert.deepEqual(fast.message, { kind: 'reply', id, ok: true, outputs: asBuffers(outs), preprocess_ms: want[0], forward_ms: want[1] });
          assert.deepEqual(Object.keys((fast.message as { outputs: object }).outputs), outs.map(([k]) => k), `${where}: the outputs keep their order`);
          // After an image_encoded request the reply carries decode_ms before preprocess_ms (6 keys).
          for (const [dec, decWant] of [[f64(5.875), 5.875], [packr.pack(6), 6], [f32(0.25), 0.25]] as [Buffer, number][]) {
            assert.ok(inferReplyAt(reply(id, outs, pre, fwd, Buffer.from([0x86]), dec)), `the fast reader reads decode_ms ${where}`);
            const fastD = decodePayload(reply(id, outs, pre, fwd, Buffer.from([0x86]), dec));
            const generalD = decodePayload(reply(id, outs, pre, fwd, map16(6), dec));
            assert.ok(fastD.ok && generalD.ok, `decode_ms ${where}: ${fastD.ok ? '' : fastD.message}`);
            assert.deepEqual(fastD.message, generalD.message);
            assert.deepEqual(fastD.message, { kind: 'reply', id, ok: true, outputs: asBuffers(outs), decode_ms: decWant, preprocess_ms: want[0], forward_ms: want[1] });
          }
        }
      }
    }
  }
  // Not the canonical version-4 infer reply: each gets the general path's verdict.
  const outs: Outs = [['logits', new Uint8Array(8)], ['pred_boxes', new Uint8Array(16)]];
  const cases: [string, Buffer, string | undefined][] = [
    ['trailing byte', Buffer.concat([reply(3, outs, f64(1), f64(2)), Buffer.from([0])]), 'E_FRAME'],
    ['negative time', reply(3, outs, f64(-1), f64(2)), 'E_FIELD'],
    ['NaN time', reply(3, outs, f64(1), f64(NaN)), 'E_FIELD'],
    ['odd logits', reply(3, [['logits', new Uint8Array(6)]], f64(1), f64(2)), 'E_FIELD'],
    ['id over u32', reply(2 ** 33, outs, f64(1), f64(2)), 'E_FRAME'],
    ['truncated', reply(3, outs, f64(1), f64(2)).subarray(0, 40), 'E_FRAME'],
    ['negative decode_ms', reply(3, outs, f64(1), f64(2), Buffer.from([0x86]), f64(-1)), 'E_FIELD'],
    ['6 keys without decode_ms', reply(3, outs, f64(1), f64(2), Buffer.from([0x86])), 'E_FRAME'],
    ['decode_ms in a 5-key map', reply(3, outs, f64(1), f64(2), Buffer.from([0x85]), f64(1)), 'E_FRAME'],
    ['an output that is not binary', reply(3, outs, f64(1), f64(2), undefined, undefined, Buffer.concat([Buffer.from([0x81]), str('logits'), packr.pack([1, 2])])), 'E_FIELD'],
    ['outputs not a map', reply(3, outs, f64(1), f64(2), undefined, undefined, packr.pack([new Uint8Array(4)])), 'E_FIELD'],
    // Valid, read by the general path only: a name that is not printable ASCII, a version-3 reply.
    ['a non-ASCII name', reply(3, [['logité', new Uint8Array(4)]], f64(1), f64(2)), undefined],
    ['a version-3 reply', readFileSync(path.join(framesDir, 'reply-infer-v3.bin')).subarray(4), undefined],
  ];
  for (const [what, payload, code] of cases) {
    assert.equal(inferReplyAt(payload), undefined, what);
    const r = decodePayload(payload);
    assert.equal(r.ok, code === undefined, what);
    if (!r.ok) assert.equal(r.code, code, `${what}: ${r.message}`);
  }
});

test('the infer inputs\' map errors (image, image_shm, image_encoded) name the field and what was expected', () => {
  // One map check (keyedMapError) writes the not-a-map, unknown-key and missing-key sentences for all three:
  // pinned here, as sidecar/tests/protocol pins the C++ side's.
  const cases: Array<[string, string]> = [
    ["bad-infer-image-encoded-bytes-not-bin.bin", "field 'image_encoded.bytes' must be binary (the image file), got string"],
    ["bad-infer-image-encoded-format-not-str.bin", "field 'image_encoded.format' must be a string (\"jpeg\" or \"png\"), got unsigned integer"],
    ["bad-infer-image-encoded-height-not-uint.bin", "field 'image_encoded.height' must be an unsigned integer, got float"],
    ["bad-infer-image-encoded-no-bytes.bin", "field 'image_encoded' lacks 'bytes'; expected format, width, height, bytes"],
    ["bad-infer-image-encoded-unknown-key.bin", "field 'image_encoded' has an unknown key 'quality'; expected format, width, height, bytes"],
    ["bad-infer-image-no-rgb.bin", "field 'image' lacks 'rgb'; expected width, height, rgb"],
    ["bad-infer-image-not-map.bin", "field 'image' must be a map {width, height, rgb}, got binary"],
    ["bad-infer-image-rgb-not-bin.bin", "field 'image.rgb' must be binary (RGB u8 HWC), got string"],
    ["bad-infer-image-shm-name-not-str.bin", "field 'image_shm.name' must be a string (a slot file's name), got unsigned integer"],
    ["bad-infer-image-shm-no-length.bin", "field 'image_shm' lacks 'length'; expected name, offset, length, width, height"],
    ["bad-infer-image-shm-offset-negative.bin", "field 'image_shm.offset' must be an unsigned integer, got negative integer"],
    ["bad-infer-image-shm-unknown-key.bin", "field 'image_shm' has an unknown key 'fd'; expected name, offset, length, width, height"],
    ["bad-infer-image-unknown-key.bin", "field 'image' has an unknown key 'depth'; expected width, height, rgb"],
    ["bad-infer-image-width-not-uint.bin", "field 'image.width' must be an unsigned integer, got negative integer"],
  ];
  for (const [file, want] of cases) {
    const r = decodePayload(readFileSync(path.join(framesDir, file)).subarray(4));
    assert.ok(!r.ok, file);
    assert.equal(r.code, 'E_FIELD', file);
    assert.equal(r.message, want, file);
  }
});
