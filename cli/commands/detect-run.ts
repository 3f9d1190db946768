// `rfdetr detect INPUT...`: wiring only; one image = `detectImage` (src/detect/pipeline.ts) in process, or
// POST /predict on a running server with --url (src/client). Both give the same response object.
//
// Output: --json → stdout carries exactly one compact JSON line per image that succeeded (the /predict
// response plus "image") and nothing else; otherwise a table per image on stderr. Progress bar (TTY only)
// and the closing line (images/s, mean per-stage ms) on stderr.
//
// Failures: an input that names nothing (a missing path, an empty directory, a glob matching nothing) is
// reported before any engine starts and skipped; when no input names an image nothing is started at all. An
// image that cannot be read or decoded is reported on stderr naming it, gets no stdout line, and the run
// continues with the other images. Either way the exit status is then 1, and the closing line counts every
// input: detected + failed = inputs. An engine or server failure stops the run (exit 1).
import fs from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { cocoConfigPath } from '../../src/config/paths.ts';
import { RfdetrClient, HttpStatusError } from '../../src/client/client.ts';
import { annotate, formatForName, layoutLabels } from '../../src/draw/annotate.ts';
import { MAX_IMAGE_BYTES, decodeImage } from '../../src/image/decode.ts';
import { createUrlFetcher } from '../../src/image/fetch-url.ts';
import { buildPredictResponse, detectImage, selectDetections, type PredictResponse } from '../../src/detect/pipeline.ts';
import { isRfdetrError, RfdetrError } from '../../src/errors.ts';
import type { InferenceBackend } from '../../src/sidecar/backend.ts';
import { stderrLine, type CliContext } from '../context.ts';
import { expandInputs, type ImageInput } from '../inputs.ts';
import { type EngineFlags } from '../engine-flags.ts';
import { backendRequest, openEngine, weightsFor } from '../engine-start.ts';
import { resolveClasses } from '../parsers.ts';
import { ProgressBar } from '../progress.ts';
import { serverHasSyntheticWeights } from '../../src/weights/synthetic.ts';
import { RefusedOverwrite, writeFileInDir } from '../save-file.ts';
import { ImagesFailedError } from '../failures.ts';

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

/** <base>.jpg for a JPEG input (written as JPEG), else <base>.png; -2, -3, … when two inputs share a name. */
function saveName(input: ImageInput, used: Set<string>): string {
  const shown = input.url !== undefined ? new URL(input.url).pathname : input.name;
  const base = input.path === null && input.url === undefined ? 'stdin' : path.basename(shown, path.extname(shown)) || 'image';
  const ext = formatForName(shown) === 'jpeg' ? '.jpg' : '.png';
  let name = `${base}${ext}`;
  for (let i = 2; used.has(name); i++) name = `${base}-${i}${ext}`;
  used.add(name);
  return name;
}

interface Runner {
  labels: readonly string[];
  run(bytes: Uint8Array): Promise<{ response: PredictResponse; detections: PredictResponse['detections'] }>;
  close(): Promise<void>;
}

async function inProcessRunner(ctx: CliContext, f: DetectFlags): Promise<Runner> {
  const w = await weightsFor(ctx, f);
  let backend: InferenceBackend;
  backend = await openEngine(ctx, 'detect', backendRequest(ctx, f, w.dir));
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
      const r = await detectImage(backend, bytes, { threshold: f.threshold, max_detections: f.maxDetections, return_raw: f.raw, classes });
      return { response: r.response, detections: r.response.detections };
    },
    close: () => backend.close(),
  };
}

async function remoteRunner(ctx: CliContext, f: DetectFlags, url: string): Promise<Runner> {
  const client = new RfdetrClient(url);
  if (serverHasSyntheticWeights(await client.info().catch(() => undefined))) {
    stderrLine(ctx)(`WARNING: ${client.baseUrl.origin} serves SYNTHETIC weights (its /info says so): detections are meaningless`);
  }
  const labels = cocoLabels();
  const classes = resolveClasses(f.classes, labels);
  return {
    labels,
    async run(bytes) {
      // With --classes the server must not cap first: ask for every query above the threshold, filter, then cap.
      const r = await client.predict(bytes, { threshold: f.threshold, max_detections: classes ? 300 : f.maxDetections, return_raw: f.raw });
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
  if (f.url !== undefined) {
    const local = ['engine', 'threads', 'precision', 'weights', 'model', 'revision'].filter((k) => cmd.getOptionValueSource(k) === 'cli');
    if (local.length) {
      const flags = local.map((k) => `--${k}`).join(', ');
      throw new RfdetrError('E_USAGE', `detect: --url sends the images to a running server, which has its own engine and weights; ${flags} cannot be combined with it (drop ${local.length === 1 ? 'it' : 'them'}, or drop --url to run the engine here)`);
    }
  }
  const { images, problems } = expandInputs(inputs, { cwd: ctx.cwd, recursive: f.recursive ?? false });
  for (const p of problems) log(`detect: skipped ${p}`);
  if (images.length === 0) {
    throw new ImagesFailedError(`detect: no input names an image (${problems.length} skipped); nothing was run. Expected image files, directories of images, globs or - for stdin`);
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

  const runner = f.url !== undefined ? await remoteRunner(ctx, f, f.url) : await inProcessRunner(ctx, f);
  const bar = new ProgressBar(ctx.stderr, images.length);
  // A URL the user typed: any host and address, with the server's size cap and time limit.
  const fetchUrl = createUrlFetcher({ maxBytes: MAX_IMAGE_BYTES });
  const used = new Set<string>();
  const sums = { decode: 0, preprocess: 0, inference: 0, postprocess: 0, transfer: 0, total: 0 };
  const failed: string[] = [];
  const notSaved: string[] = [];
  let ok = 0;
  const t0 = performance.now();
  try {
    for (const input of images) {
      let bytes: Uint8Array;
      try {
        bytes = input.url !== undefined ? await fetchUrl(input.url) : input.path === null ? await ctx.readStdin() : fs.readFileSync(input.path);
      } catch (e) {
        bar.clear();
        log(`detect: ${input.name}: ${input.url !== undefined ? (e as Error).message : `cannot read the file (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`}`);
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
        const img = await decodeImage(bytes);
        const name = saveName(input, used);
        const skipped = layoutLabels(img.width, img.height, response.detections).skipped.length;
        try {
          const out = writeFileInDir(saveDir, name, await annotate(img, response.detections, formatForName(name)));
          if (!f.json) log(`  saved ${out}${skipped ? ` (${skipped} label${skipped === 1 ? '' : 's'} left out: no room without covering another)` : ''}`);
        } catch (e) {
          if (!(e instanceof RefusedOverwrite) && (e as NodeJS.ErrnoException).code === undefined) throw e;
          log(`detect: ${input.name}: not saved: ${e instanceof RefusedOverwrite ? e.message : `${(e as Error).message}`}`);
          notSaved.push(input.name);
        }
      }
      bar.tick(input.name);
    }
  } finally {
    bar.clear();
    await runner.close().catch((e: Error) => log(`detect: closing the ${f.url ? 'client' : 'engine'} failed: ${e.message}`));
  }
  const s = (performance.now() - t0) / 1000;
  const per = (k: keyof typeof sums) => (ok ? fmt(sums[k] / ok, 1) : '-');
  const total = images.length + problems.length;
  const bad = failed.length + problems.length;
  const counts = bad || notSaved.length
    ? `${ok} of ${total} input${total === 1 ? '' : 's'} detected${bad ? `, ${bad} failed${problems.length ? ` (${problems.length} named no image)` : ''}` : ''}${notSaved.length ? `, ${notSaved.length} not saved` : ''}`
    : `${ok} image${ok === 1 ? '' : 's'}`;
  log(`detect: ${counts} in ${fmt(s, 2)} s (${fmt(ok / Math.max(s, 1e-9), 2)} images/s); mean ms per image: decode ${per('decode')}, preprocess ${per('preprocess')}, inference ${per('inference')}, postprocess ${per('postprocess')}, transfer ${per('transfer')}, total ${per('total')}${saveDir ? `; annotated copies in ${saveDir}` : ''}`);
  if (bad || notSaved.length) {
    const parts = [
      ...(failed.length ? [`failed: ${failed.join(', ')}`] : []),
      ...(problems.length ? [`named no image: ${problems.length}`] : []),
      ...(notSaved.length ? [`not saved: ${notSaved.join(', ')}`] : []),
    ];
    throw new ImagesFailedError(`detect: ${bad} of ${total} input${total === 1 ? '' : 's'} failed${notSaved.length ? ` and ${notSaved.length} not saved` : ''} (${parts.join('; ')})`);
  }
}
