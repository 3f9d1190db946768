// Still images through the frame pipeline: each input read (file, stdin, URL) is a frame holding the file,
// which the detector's transport sends to the sidecar to decode or decodes here once (with --save it is
// decoded here: the pixels feed the engine and the drawing); its result printed as a table or a JSON line and
// optionally saved as an annotated PNG/JPEG. Who decoded each file is counted for the closing line.
import path from 'node:path';
import { annotate, formatForName, layoutLabels } from '../../src/draw/annotate.ts';
import { runFrames, type FrameOutcome } from '../../src/detect/frame-runner.ts';
import type { PredictResponse } from '../../src/detect/pipeline.ts';
import { MAX_IMAGE_BYTES } from '../../src/image/decode.ts';
import { createUrlFetcher } from '../../src/image/fetch-url.ts';
import type { CliContext } from '../context.ts';
import { readImageFile, type ImageInput } from '../inputs.ts';
import { ProgressBar } from '../../src/progress.ts';
import { RefusedOverwrite, writeFileInDir } from '../save-file.ts';
import { isImageProblem, type Detected, type DetectorFrame, type FrameDetector } from './detect-engine.ts';

export function formatTable(name: string, r: PredictResponse): string {
  const lines = [`${name}  ${r.image_size.width}x${r.image_size.height}  ${r.num_detections} detection${r.num_detections === 1 ? '' : 's'} (threshold ${r.threshold})  inference ${r.timing_ms.inference.toFixed(1)} ms, total ${r.timing_ms.total.toFixed(1)} ms`];
  if (r.detections.length) {
    const w = Math.max(5, ...r.detections.map((d) => d.label.length));
    lines.push(`  ${'#'.padStart(3)}  ${'label'.padEnd(w)}  ${'id'.padStart(3)}  score   ${'x1'.padStart(7)} ${'y1'.padStart(7)} ${'x2'.padStart(7)} ${'y2'.padStart(7)}`);
    r.detections.forEach((d, i) => {
      lines.push(`  ${String(i + 1).padStart(3)}  ${d.label.padEnd(w)}  ${String(d.label_id).padStart(3)}  ${d.score.toFixed(3)}  ${d.box.map((v) => v.toFixed(1).padStart(7)).join(' ')}`);
    });
  }
  return lines.join('\n');
}

/** <base><ext> in the save directory, -2, -3, … when two inputs share a name. */
export function uniqueName(input: ImageInput, ext: (shown: string) => string, used: Set<string>): string {
  const shown = input.url !== undefined ? new URL(input.url).pathname : input.live !== undefined ? input.live.replace(/[?#].*$/, '') : input.name;
  const base = input.path === null && input.url === undefined && input.live === undefined ? 'stdin' : path.basename(shown, path.extname(shown)).replace(/[^\w.-]+/g, '_') || 'video';
  const e = ext(shown);
  let name = `${base}${e}`;
  for (let i = 2; used.has(name); i++) name = `${base}-${i}${e}`;
  used.add(name);
  return name;
}

export interface ImageRunTotals {
  ok: number;
  failed: string[];
  notSaved: string[];
  sums: Record<'decode' | 'preprocess' | 'inference' | 'postprocess' | 'transfer' | 'total', number>;
  /** Images whose file the sidecar decoded, and those decoded here (after a decline too); a server's are neither. */
  bySidecar: number;
  byHere: number;
}

interface StillFrame extends DetectorFrame {
  input: ImageInput;
}

export async function runImages(ctx: CliContext, images: readonly (ImageInput & { stdinBytes?: Buffer })[], detector: FrameDetector, o: { json: boolean; saveDir?: string | undefined; used: Set<string>; totals: ImageRunTotals; signal: AbortSignal }): Promise<void> {
  const log = (l: string) => void ctx.stderr.write(`${l}\n`);
  const bar = new ProgressBar(ctx.stderr, { unit: 'items', total: images.length });
  // A URL the user typed: any host and address, with the server's size cap and time limit.
  const fetchUrl = createUrlFetcher({ maxBytes: MAX_IMAGE_BYTES });
  const { totals } = o;
  async function* frames(): AsyncGenerator<StillFrame | { frame: StillFrame; error: Error }> {
    for (const [index, input] of images.entries()) {
      const t0 = performance.now();
      let bytes: Uint8Array;
      try {
        bytes = input.url !== undefined ? await fetchUrl(input.url) : input.path === null ? input.stdinBytes ?? await ctx.readStdin() : readImageFile(input.path);
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        const why = input.url !== undefined || code === 'E_IMAGE_TOO_LARGE' ? (e as Error).message : `cannot read the file (${code ?? (e as Error).message})`;
        yield { frame: { data: { file: new Uint8Array(0) }, index, source: input.name, input, t0 }, error: new Error(why) };
        continue;
      }
      yield { data: { file: bytes }, index, source: input.name, input, t0 };
    }
  }
  const sink = async ({ frame, result: detected, error }: FrameOutcome<StillFrame, Detected>) => {
    const name = frame.input.name;
    const shown = frame.input.shown;
    bar.clear();
    if (error || !detected) {
      log(`detect: ${shown}: ${error?.message ?? 'no result'}`);
      totals.failed.push(shown);
      bar.advance(1, shown);
      return;
    }
    const result = detected.response;
    totals.ok++;
    if (detected.by === 'sidecar') totals.bySidecar++;
    else if (detected.by !== null) totals.byHere++;
    for (const k of Object.keys(totals.sums) as (keyof ImageRunTotals['sums'])[]) totals.sums[k] += result.timing_ms[k] ?? 0;
    if (o.json) ctx.stdout.write(`${JSON.stringify({ image: name, ...result })}\n`);
    else log(formatTable(shown, result));
    const img = detected.pixels;
    if (o.saveDir && img) {
      const file = uniqueName(frame.input, (s) => (formatForName(s) === 'jpeg' ? '.jpg' : '.png'), o.used);
      const skipped = layoutLabels(img.width, img.height, result.detections).skipped.length;
      try {
        const out = writeFileInDir(o.saveDir, file, await annotate(img, result.detections, formatForName(file)));
        if (!o.json) log(`  saved ${out}${skipped ? ` (${skipped} label${skipped === 1 ? '' : 's'} left out: no room without covering another)` : ''}`);
      } catch (e) {
        if (!(e instanceof RefusedOverwrite) && (e as NodeJS.ErrnoException).code === undefined) throw e;
        log(`detect: ${shown}: not saved: ${(e as Error).message}`);
        totals.notSaved.push(shown);
      } finally {
        detected.release();
      }
    }
    bar.advance(1, shown);
  };
  try {
    await runFrames(frames(), (f) => detector.detect(f, o.saveDir !== undefined), sink, { isFrameProblem: isImageProblem, signal: o.signal });
  } finally {
    bar.clear();
  }
}
