// Checkpoint files for the weights tests: a tiny safetensors for transport tests, and schema-shaped checkpoints
// written as sparse files (a real header, zero data via ftruncate), so the full 129 MB layout costs no memory.
import fs from 'node:fs';
import path from 'node:path';
import { schemaDir } from '../../src/config/paths.ts';
import { encodeSafetensors, numel } from '../../src/weights/safetensors.ts';

export function tinySafetensors(seed = 1, n = 4096): Buffer {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = Math.sin(seed * 1000 + i);
  return encodeSafetensors([{ name: 'w', dtype: 'F32', shape: [n], data: new Uint8Array(a.buffer) }], { format: 'pt' });
}

export function configJson(numClasses = 91, extra: Record<string, unknown> = {}): Buffer {
  const id2label: Record<string, string> = {};
  for (let i = 0; i < numClasses; i++) id2label[String(i)] = i === 0 ? 'N/A' : `class-${i}`;
  return Buffer.from(JSON.stringify({ model_type: 'rf_detr', id2label, ...extra }, null, 2));
}

interface SchemaJson {
  tensors: { name: string; shape: number[]; class_axis?: number }[];
}

export interface ShapedOptions {
  numClasses?: number;
  drop?: string[];
  add?: Record<string, number[]>;
  reshape?: Record<string, number[]>;
  dtype?: Record<string, 'F16'>;
  /** The family variant whose schema shapes the file (default base). */
  variant?: string;
  /** Renames every key (e.g. to another naming) after the other deviations. */
  rename?: (name: string) => string;
}

/** Writes DIR/model.safetensors shaped by the schema (with the requested deviations) as a sparse file. */
export function writeSchemaShaped(dir: string, opts: ShapedOptions = {}): string {
  const schema = JSON.parse(fs.readFileSync(path.join(schemaDir, `rfdetr-${(opts.variant ?? 'base').replace('_', '-')}.json`), 'utf8')) as SchemaJson;
  const entries: { name: string; shape: number[]; dtype: string }[] = [];
  for (const t of schema.tensors) {
    if (opts.drop?.includes(t.name)) continue;
    let shape = t.shape.slice();
    if (t.class_axis !== undefined && opts.numClasses !== undefined) shape[t.class_axis] = opts.numClasses;
    if (opts.reshape?.[t.name]) shape = opts.reshape[t.name]!;
    entries.push({ name: t.name, shape, dtype: opts.dtype?.[t.name] ?? 'F32' });
  }
  for (const [name, shape] of Object.entries(opts.add ?? {})) entries.push({ name, shape, dtype: 'F32' });
  if (opts.rename) for (const e of entries) e.name = opts.rename(e.name);
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const header: Record<string, unknown> = { __metadata__: { format: 'pt' } };
  let off = 0;
  for (const e of entries) {
    const bytes = numel(e.shape) * (e.dtype === 'F16' ? 2 : 4);
    header[e.name] = { dtype: e.dtype, shape: e.shape, data_offsets: [off, off + bytes] };
    off += bytes;
  }
  let json = JSON.stringify(header);
  while ((8 + json.length) % 8) json += ' ';
  const head = Buffer.alloc(8 + json.length);
  head.writeBigUInt64LE(BigInt(json.length));
  head.write(json, 8);
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, 'model.safetensors');
  const fd = fs.openSync(file, 'w');
  try {
    fs.writeSync(fd, head);
    fs.ftruncateSync(fd, head.length + off);
  } finally {
    fs.closeSync(fd);
  }
  return file;
}

/** A complete schema-valid checkpoint directory (sparse model + config with matching id2label). */
export function writeValidCheckpoint(dir: string, numClasses = 91): { model: string; config: string } {
  const model = writeSchemaShaped(dir, { numClasses });
  const config = path.join(dir, 'config.json');
  fs.writeFileSync(config, configJson(numClasses));
  return { model, config };
}

export function tmpDir(prefix: string): string {
  return fs.mkdtempSync(path.join(fs.realpathSync(process.env.TMPDIR || '/tmp'), `rfdetr-${prefix}-`));
}

/** A stand-in generator: records its argv, warns on stderr, copies a prepared schema-shaped checkpoint to --out. */
export function writeFakeSynth(dir: string): NodeJS.ProcessEnv {
  const src = path.join(dir, 'fake-src');
  writeValidCheckpoint(src);
  const script = path.join(dir, 'fake-rfdetr-synth');
  fs.writeFileSync(script, [
    '#!/bin/sh',
    'printf "%s\\n" "$@" > "$FAKE_SYNTH_ARGS"',
    'echo "rfdetr-synth: WARNING: SYNTHETIC weights, detections are meaningless" >&2',
    'echo "rfdetr-synth: wrote 487 tensors"',
    'while [ $# -gt 0 ]; do case "$1" in --out) out="$2"; shift;; esac; shift; done',
    'if [ -n "$FAKE_SYNTH_FAIL" ]; then echo "rfdetr-synth: cannot write $out: disk full" >&2; exit 3; fi',
    'cp --sparse=always "$FAKE_SYNTH_SRC/model.safetensors" "$out/model.safetensors"',
    '[ -n "$FAKE_SYNTH_NO_CONFIG" ] || cp "$FAKE_SYNTH_SRC/config.json" "$out/config.json"',
  ].join('\n'), { mode: 0o755 });
  return { PATH: process.env.PATH, RFDETR_SYNTH: script, FAKE_SYNTH_SRC: src, FAKE_SYNTH_ARGS: path.join(dir, 'fake-args.txt') };
}
