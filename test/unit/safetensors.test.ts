import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { testFixturesDir } from '../../src/config/paths.ts';
import { SafetensorsFile, encodeSafetensors, parseSafetensorsHeader } from '../../src/weights/safetensors.ts';

test('safetensors: encode then read round-trips names, shapes and bytes', () => {
  const a = new Float32Array([1, 2, 3, 4, 5, 6]);
  const b = new Float32Array([-1.5]);
  const buf = encodeSafetensors([
    { name: 'z.b', dtype: 'F32', shape: [1], data: new Uint8Array(b.buffer) },
    { name: 'a.w', dtype: 'F32', shape: [2, 3], data: new Uint8Array(a.buffer) },
  ], { format: 'pt' });
  assert.equal((8 + Number(buf.readBigUInt64LE(0))) % 8, 0, 'header padded to 8');
  const f = new SafetensorsFile('mem', buf);
  assert.deepEqual([...f.header.tensors.keys()].sort(), ['a.w', 'z.b']);
  assert.deepEqual(f.entry('a.w').shape, [2, 3]);
  assert.deepEqual([...f.f32('a.w')], [...a]);
  assert.deepEqual([...f.f32('z.b')], [-1.5]);
  assert.equal(f.header.metadata.format, 'pt');
});

test('safetensors: truncation, bad offsets and overlaps are named errors', () => {
  const a = new Float32Array([1, 2, 3, 4]);
  const good = encodeSafetensors([{ name: 't', dtype: 'F32', shape: [4], data: new Uint8Array(a.buffer) }]);
  assert.throws(() => parseSafetensorsHeader('x.safetensors', good.subarray(0, good.length - 1), good.length - 1), /x\.safetensors: .*tensor 't' ends at data byte 16 .*truncated/);
  assert.throws(() => parseSafetensorsHeader('x.safetensors', good.subarray(0, 4), 4), /shorter than the 8-byte header length/);
  const mk = (hdr: object, dataLen: number) => {
    let j = JSON.stringify(hdr);
    while ((8 + j.length) % 8) j += ' ';
    const out = Buffer.alloc(8 + j.length + dataLen);
    out.writeBigUInt64LE(BigInt(j.length));
    out.write(j, 8);
    return out;
  };
  const overlap = mk({ a: { dtype: 'F32', shape: [2], data_offsets: [0, 8] }, b: { dtype: 'F32', shape: [2], data_offsets: [4, 12] } }, 12);
  assert.throws(() => new SafetensorsFile('o.safetensors', overlap), /'a' and 'b' overlap/);
  const wrongSize = mk({ a: { dtype: 'F32', shape: [3], data_offsets: [0, 8] } }, 8);
  assert.throws(() => new SafetensorsFile('w.safetensors', wrongSize), /needs 12/);
  const badDtype = mk({ a: { dtype: 'Q4', shape: [1], data_offsets: [0, 1] } }, 1);
  assert.throws(() => new SafetensorsFile('d.safetensors', badDtype), /unsupported dtype "Q4"/);
});

test('safetensors: the extracted fixture goldens have the documented tensors', () => {
  const f = SafetensorsFile.read(path.join(testFixturesDir, 'rfdetr-synth', 'case-1', 'golden.safetensors'));
  assert.deepEqual(f.entry('logits').shape, [1, 300, 91]);
  assert.deepEqual(f.entry('pred_boxes').shape, [1, 300, 4]);
  assert.deepEqual(f.entry('pixel_values').shape, [1, 3, 560, 560]);
  const idx = f.i64('two_stage.topk_indices');
  assert.equal(idx.length, 300);
  assert.ok(idx.every((i) => i >= 0 && i < 1600));
});
