// `rfdetr detect INPUT...`: wiring only; one image = `detectImage` (src/detect/pipeline.ts) in process, or
// POST /predict on a running server with --url (src/client). Both give the same response object.
//
// Output: --json → stdout carries exactly one compact JSON line per image that succeeded (the /predict
// response plus "image") and nothing else; otherwise a table per image on stderr. Progress bar (TTY only)
// and the closing line (images/s, mean per-stage ms) on stderr.
//
// Failures: inputs that name nothing are all reported before any engine starts (exit 1, nothing run). An image
// that cannot be read or decoded is reported on stderr naming it, gets no stdout line, and the run continues
// with the other images; the exit status is then 1. An engine or server failure stops the run (exit 1).
import fs from 'node:fs';
import path from 'node:path';
import { Command, Option } from 'commander';
import { cocoConfigPath } from '../../src/config/paths.ts';
import { RfdetrClient, HttpStatusError } from '../../src/client/client.ts';
import { annotatePng } from '../../src/draw/annotate.ts';
import { decodeImage } from '../../src/image/decode.ts';
import { buildPredictResponse, detectImage, selectDetections, type PredictResponse } from '../../src/detect/pipeline.ts';
import { isRfdetrError, RfdetrError } from '../../src/errors.ts';
import type { InferenceBackend } from '../../src/sidecar/backend.ts';
import type { CliContext } from '../context.ts';
import { expandInputs, type ImageInput } from '../inputs.ts';
import {
  addEngineOptions, backendRequest, EXIT_HELP, intParser, parseClasses, parseThreshold, resolveClasses, stderrLine, weightsFor,
  type EngineFlags,
} from '../options.ts';
import { ProgressBar } from '../progress.ts';

export interface DetectFlags extends EngineFlags {
  threshold: number;
  maxDetections: number;
  classes?: string[];
  raw?: boolean;
  json?: boolean;
  save?: string;
  recursive?: boolean;
  url?: string;
}

/** The run ended with some images failed (each already reported): exit status 1. */
export class ImagesFailedError extends Error {
  override name = 'ImagesFailedError';
}

/** Per-image failures that do not stop the run: unreadable or undecodable input. */
function isImageProblem(e: unknown): boolean {
  if (e instanceof HttpStatusError) return [400, 413, 415, 422].includes(e.httpStatus);
  return isRfdetrError(e, 'E_IMAGE_UNDECODABLE') || isRfdetrError(e, 'E_IMAGE_TOO_LARGE');
}

function cocoLabels(): string[] {
  const cfg = JSON.parse(fs.readFileSync(cocoConfigPath, 'utf8')) as { id2label: Record<string, string> };
  const labels: string[] = [];
  for (const [id, name] of Object.entries(cfg.id2label)) labels[Number(id)] = name;
  return labels;
}

function fmt(n: number, digits: number): string {
  return n.toFixed(digits);
}

export function formatTable(name: string, r: PredictResponse): string {
  const lines = [`${name}  ${r.image_size.width}x${r.image_size.height}  ${r.num_detections} detection${r.num_detections === 1 ? '' : 's'} (threshold ${r.threshold})  inference ${fmt(r.timing_ms.inference, 1)} ms, total ${fmt(r.timing_ms.total, 1)} ms`];
  if (r.detections.length) {
    const w = Math.max(5, ...r.detections.map((d) => d.label.length));
    lines.push(`  ${'#'.padStart(3)}  ${'label'.padEnd(w)}  ${'id'.padStart(3)}  score   ${'x1'.padStart(7)} ${'y1'.padStart(7)} ${'x2'.padStart(7)} ${'y2'.padStart(7)}`);
    r.detections.forEach((d, i) => {
      lines.push(`  ${String(i + 1).padStart(3)}  ${d.label.padEnd(w)}  ${String(d.label_id).padStart(3)}  ${fmt(d.score, 3)}  ${d.box.map((v) => fmt(v, 1).padStart(7)).join(' ')}`);
    });
  }
  return lines.join('\n');
}

/** DIR/<base>.png, with -2, -3, … when two inputs share a base name. */
function savePath(dir: string, input: ImageInput, used: Set<string>): string {
  const base = input.path === null ? 'stdin' : path.basename(input.name, path.extname(input.name)) || 'image';
  let name = `${base}.png`;
  for (let i = 2; used.has(name); i++) name = `${base}-${i}.png`;
  used.add(name);
  return path.join(dir, name);
}

interface Runner {
  labels: readonly string[];
  run(bytes: Uint8Array): Promise<{ response: PredictResponse; detections: PredictResponse['detections'] }>;
  close(): Promise<void>;
}

async function inProcessRunner(ctx: CliContext, f: DetectFlags): Promise<Runner> {
  const w = await weightsFor(ctx, f);
  let backend: InferenceBackend;
  backend = await ctx.openBackend(backendRequest(ctx, f, w.dir));
  const labels = backend.info?.labels ?? [];
  let classes: Set<number> | undefined;
  try {
    classes = resolveClasses(f.classes, labels.length ? labels : cocoLabels());
  } catch (e) {
    await backend.close().catch(() => {});
    throw e;
  }
  return {
    labels,
    async run(bytes) {
      const r = await detectImage(backend, bytes, { threshold: f.threshold, maxDetections: f.maxDetections, returnRaw: f.raw, classes });
      return { response: r.response, detections: r.response.detections };
    },
    close: () => backend.close(),
  };
}

function remoteRunner(f: DetectFlags, url: string): Runner {
  const client = new RfdetrClient(url);
  const labels = cocoLabels();
  const classes = resolveClasses(f.classes, labels);
  return {
    labels,
    async run(bytes) {
      // With --classes the server must not cap first: ask for every query above the threshold, filter, then cap.
      const r = await client.predict(bytes, { threshold: f.threshold, maxDetections: classes ? 300 : f.maxDetections, returnRaw: f.raw });
      if (!classes) return { response: r, detections: r.detections };
      const kept = selectDetections(r.detections, classes, f.maxDetections);
      const response = buildPredictResponse({ detections: kept, width: r.image_size.width, height: r.image_size.height, inputSize: r.input_size, threshold: r.threshold, timing: r.timing_ms, raw: r.raw });
      return { response, detections: kept };
    },
    close: () => client.close(),
  };
}

export async function runDetect(ctx: CliContext, inputs: string[], f: DetectFlags, cmd: Command): Promise<void> {
  const log = stderrLine(ctx);
  const { images, problems } = expandInputs(inputs, { cwd: ctx.cwd, recursive: f.recursive ?? false });
  if (problems.length) {
    throw new Error(`detect: ${problems.length === 1 ? problems[0] : `${problems.length} inputs name no image:\n  ${problems.join('\n  ')}`}\n(nothing was run; expected image files, directories of images, globs or - for stdin)`);
  }
  let saveDir: string | undefined;
  if (f.save !== undefined) {
    saveDir = path.resolve(ctx.cwd, f.save);
    try {
      fs.mkdirSync(saveDir, { recursive: true });
    } catch (e) {
      throw new Error(`detect: --save ${f.save}: cannot create the directory (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
    }
  }
  if (f.url !== undefined) {
    const ignored = ['engine', 'threads', 'weights', 'model', 'revision'].filter((k) => cmd.getOptionValueSource(k) === 'cli');
    if (ignored.length) log(`detect: --url sends the images to a server; ${ignored.map((k) => `--${k}`).join(', ')} ${ignored.length === 1 ? 'does' : 'do'} not apply and ${ignored.length === 1 ? 'is' : 'are'} ignored`);
  }

  const runner = f.url !== undefined ? remoteRunner(f, f.url) : await inProcessRunner(ctx, f);
  const bar = new ProgressBar(ctx.stderr, images.length);
  const used = new Set<string>();
  const sums = { decode: 0, preprocess: 0, inference: 0, postprocess: 0, transfer: 0, total: 0 };
  const failed: string[] = [];
  let ok = 0;
  const t0 = performance.now();
  try {
    for (const input of images) {
      let bytes: Uint8Array;
      try {
        bytes = input.path === null ? await ctx.readStdin() : fs.readFileSync(input.path);
      } catch (e) {
        bar.clear();
        log(`detect: ${input.name}: cannot read the file (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
        failed.push(input.name);
        bar.tick(input.name);
        continue;
      }
      let response: PredictResponse;
      try {
        ({ response } = await runner.run(bytes));
      } catch (e) {
        if (!isImageProblem(e)) throw e;
        bar.clear();
        log(`detect: ${input.name}: ${(e as Error).message}`);
        failed.push(input.name);
        bar.tick(input.name);
        continue;
      }
      ok++;
      for (const k of Object.keys(sums) as (keyof typeof sums)[]) sums[k] += response.timing_ms[k] ?? 0;
      bar.clear();
      if (f.json) ctx.stdout.write(`${JSON.stringify({ image: input.name, ...response })}\n`);
      else log(formatTable(input.name, response));
      if (saveDir) {
        const out = savePath(saveDir, input, used);
        const img = await decodeImage(bytes);
        fs.writeFileSync(out, await annotatePng(img, response.detections));
        if (!f.json) log(`  saved ${out}`);
      }
      bar.tick(input.name);
    }
  } finally {
    bar.clear();
    await runner.close().catch((e: Error) => log(`detect: closing the ${f.url ? 'client' : 'engine'} failed: ${e.message}`));
  }
  const s = (performance.now() - t0) / 1000;
  const per = (k: keyof typeof sums) => (ok ? fmt(sums[k] / ok, 1) : '-');
  log(`detect: ${ok} image${ok === 1 ? '' : 's'}${failed.length ? `, ${failed.length} failed` : ''} in ${fmt(s, 2)} s (${fmt(ok / Math.max(s, 1e-9), 2)} images/s); mean ms per image: decode ${per('decode')}, preprocess ${per('preprocess')}, inference ${per('inference')}, postprocess ${per('postprocess')}, transfer ${per('transfer')}, total ${per('total')}${saveDir ? `; annotated copies in ${saveDir}` : ''}`);
  if (failed.length) throw new ImagesFailedError(`detect: ${failed.length} of ${images.length} image${images.length === 1 ? '' : 's'} failed: ${failed.join(', ')}`);
}

export function detectCommand(ctx: CliContext): Command {
  const cmd = new Command('detect')
    .description('detect objects in images: files, directories, globs or - (stdin)')
    .argument('<inputs...>', 'image files, directories (--recursive for subdirectories), globs, or - for stdin')
    .addOption(new Option('--threshold <t>', 'keep detections with score > t').argParser(parseThreshold).default(0.5))
    .addOption(new Option('--max-detections <n>', 'keep at most n detections per image (highest scores)').argParser(intParser(1, 300)).default(100))
    .addOption(new Option('--classes <names>', 'keep only these classes: names or ids, comma-separated (cat,dog)').argParser(parseClasses))
    .option('--raw', 'include raw logits [300][91] and pred_boxes [300][4] (as /predict return_raw)')
    .option('--json', 'stdout: one compact JSON line per image (the /predict response plus "image"), nothing else')
    .option('--save <dir>', 'write annotated PNG copies (boxes, labels, scores) into dir')
    .option('-r, --recursive', 'also take images from subdirectories of directory inputs')
    .option('--url <url>', 'send the images to a running server (rfdetr serve) instead of starting an engine');
  addEngineOptions(cmd);
  cmd.addHelpText('after', `${EXIT_HELP}\n\nAn image that cannot be read or decoded is reported and skipped (no JSON line); the others still run and the exit status is 1.`);
  return cmd.action(async (inputs: string[], f: DetectFlags, c: Command) => runDetect(ctx, inputs, f, c));
}
