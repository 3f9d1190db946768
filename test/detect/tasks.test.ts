// The task table: detect reads logits/pred_boxes by name and renders return_raw exactly as before; a hello
// whose task or outputs the table cannot serve is named as such.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { testFixturesDir } from '../../src/config/paths.ts';
import { postprocess, rawToNested } from '../../src/detect/postprocess.ts';
import { helloTaskError, KNOWN_TASKS, taskFor } from '../../src/detect/tasks.ts';
import { SafetensorsFile } from '../../src/weights/safetensors.ts';

const golden = SafetensorsFile.read(path.join(testFixturesDir, 'rfdetr-synth', 'case-1', 'golden.safetensors'));
const logits = golden.f32('logits');
const predBoxes = golden.f32('pred_boxes');
const dims = { numQueries: predBoxes.length / 4, numClasses: logits.length / (predBoxes.length / 4) };

test('detect task: the postprocess and the raw rendering read the outputs by name, identical to the kernel on its own', () => {
  const detect = taskFor('detect');
  const outputs = { logits, pred_boxes: predBoxes };
  const opts = { width: 640, height: 480, threshold: 0.3, maxDetections: 300, labels: [] };
  const got = detect.postprocess(outputs, dims, opts);
  assert.ok(got.length > 0);
  assert.deepEqual(got, postprocess({ logits, predBoxes, numQueries: dims.numQueries, numClasses: dims.numClasses }, opts));
  const raw = detect.raw(outputs, dims);
  assert.deepEqual(Object.keys(raw), ['logits', 'pred_boxes']);
  assert.equal(JSON.stringify(raw), JSON.stringify(rawToNested(logits, predBoxes, dims.numQueries, dims.numClasses)));
  assert.throws(() => detect.postprocess({ logits }, dims, opts), /no 'pred_boxes' output; it has logits/);
});

test('detect task: its outputs are logits [Q,C] and pred_boxes [Q,4], f32, in that order', () => {
  assert.deepEqual(taskFor('detect').outputs({ numQueries: 300, numClasses: 91 }), [
    { name: 'logits', dtype: 'f32', shape: [300, 91] }, { name: 'pred_boxes', dtype: 'f32', shape: [300, 4] },
  ]);
});

test('a hello with a task this server has no postprocess for, or without an output its task reads, is named', () => {
  const base = { numQueries: 300, numClasses: 91, outputs: taskFor('detect').outputs({ numQueries: 300, numClasses: 91 }) };
  assert.equal(helloTaskError({ ...base, task: 'detect' }), undefined);
  assert.deepEqual(KNOWN_TASKS, ['detect', 'segment']);
  const other = helloTaskError({ ...base, task: 'classify' });
  assert.match(other ?? '', /serves the task 'classify', which this server has no postprocess for \(it knows detect, segment\)/);
  assert.throws(() => taskFor('classify'), /no postprocess for the task 'classify'; this server knows detect, segment/);
  assert.throws(() => taskFor('toString'), /no postprocess for the task 'toString'/);
  const noBoxes = helloTaskError({ ...base, task: 'detect', outputs: base.outputs.slice(0, 1) });
  assert.match(noBoxes ?? '', /reads the output pred_boxes f32 \[300,4\], but the sidecar declares no 'pred_boxes' \(its outputs: logits f32 \[300,91\]\)/);
  const wrongShape = helloTaskError({ ...base, task: 'detect', outputs: [base.outputs[0]!, { name: 'pred_boxes', dtype: 'f32', shape: [300, 5] }] });
  assert.match(wrongShape ?? '', /declares pred_boxes f32 \[300,5\]/);
  // Extra outputs are carried, not refused: a task reads the ones it names.
  assert.equal(helloTaskError({ ...base, task: 'detect', outputs: [...base.outputs, { name: 'aux', dtype: 'f32', shape: [1] }] }), undefined);
});
