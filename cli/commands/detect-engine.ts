// What `rfdetr detect` sends frames to: the engine in this process (its backend's transport decides how each
// frame reaches the sidecar: a plain JPEG/PNG is sent as the file for the sidecar to decode, others are decoded
// here; src/sidecar/transport.ts) or a running server (--url: POST /predict with the file, classes applied by
// the server). Both give the /predict response object.
import fs from 'node:fs';
import { cocoConfigPath } from '../../src/config/paths.ts';
import { RfdetrClient, HttpStatusError } from '../../src/client/client.ts';
import { imageOfInput, type Frame } from '../../src/detect/frame.ts';
import { detectDecoded, type PredictResponse } from '../../src/detect/pipeline.ts';
import type { MaskFormat } from '../../src/detect/masks/formats.ts';
import { StageClock } from '../../src/detect/stage-clock.ts';
import { isRfdetrError } from '../../src/errors.ts';
import { decodeImage, type RgbImage } from '../../src/image/decode.ts';
import type { SidecarInfo } from '../../src/sidecar/backend.ts';
import type { DecodedBy } from '../../src/sidecar/transport.ts';
import { serverHasSyntheticWeights } from '../../src/weights/synthetic.ts';
import type { CliContext } from '../context.ts';
import { stderrLine } from '../context.ts';
import type { EngineFlags } from '../engine-flags.ts';
import { backendRequest, openEngine, weightsFor } from '../engine-start.ts';
import { resolveClasses, resolveClassThresholdFlag } from '../parsers.ts';

export interface DetectParamsFlags extends EngineFlags {
  threshold: number;
  maxDetections: number;
  classes?: string[];
  classThresholds?: Record<string, number>;
  raw?: boolean;
  /** --mask-format (default rle). */
  maskFormat?: MaskFormat;
}

/** One frame for the detector: a file (a still) or pixels (a video frame), and when its work started. */
export interface DetectorFrame extends Frame {
  /** performance.now() when the frame's work started (its read, for a file): timing_ms.total counts from here. */
  t0: number;
}

export interface Detected {
  response: PredictResponse;
  /** The frame's pixels here, when asked for (`needPixels`) or given: what a drawing is made on. */
  pixels: RgbImage | undefined;
  /** Who decoded a file: this process, the sidecar, this process after the sidecar declined it; null: no file, or a server did. */
  by: DecodedBy;
  /** Gives back what the pixels hold (a pool buffer, a shared-memory slot), once drawn. */
  release(): void;
}

export interface FrameDetector {
  readonly labels: readonly string[];
  /** The engine's hello (engine, device, the precision it runs); absent for a server. */
  readonly info?: SidecarInfo | null;
  /** Detects `frame`; `needPixels`: its pixels are wanted here afterwards (--save). */
  detect(frame: DetectorFrame, needPixels: boolean): Promise<Detected>;
  close(): Promise<void>;
}

/** Per-frame failures that do not stop the run: an unreadable or undecodable input. */
export function isImageProblem(e: unknown): boolean {
  if (e instanceof HttpStatusError) return [400, 413, 415].includes(e.httpStatus);
  return isRfdetrError(e, 'E_IMAGE_UNDECODABLE') || isRfdetrError(e, 'E_IMAGE_TOO_LARGE');
}

export function cocoLabels(): string[] {
  const cfg = JSON.parse(fs.readFileSync(cocoConfigPath, 'utf8')) as { id2label: Record<string, string> };
  const labels: string[] = [];
  for (const [id, name] of Object.entries(cfg.id2label)) labels[Number(id)] = name;
  return labels;
}

/** The engine in this process; `command` names it in the start-up line (`detect`, `bench`). */
export async function inProcessDetector(ctx: CliContext, f: DetectParamsFlags, command = 'detect'): Promise<FrameDetector> {
  const w = await weightsFor(ctx, f);
  const backend = await openEngine(ctx, command, backendRequest(ctx, f, w.dir));
  const labels = backend.info?.labels ?? [];
  let classes: Set<number> | undefined;
  let classThresholds: Map<number, number> | undefined;
  try {
    classes = resolveClasses(f.classes, labels.length ? labels : cocoLabels());
    classThresholds = resolveClassThresholdFlag(f.classThresholds, labels.length ? labels : cocoLabels());
  } catch (e) {
    await backend.close().catch(() => {});
    throw e;
  }
  const params = { threshold: f.threshold, max_detections: f.maxDetections, return_raw: f.raw, mask_format: f.maskFormat, classes, classThresholds };
  return {
    labels,
    get info() {
      return backend.info;
    },
    async detect(frame, needPixels) {
      // The first frame waits for the sidecar to say which files it decodes (one round trip before any forward).
      const prepared = await backend.prepare(frame.data, { needPixels, waitForDecoders: true });
      try {
        // The frame's decode counts from its start (its file's read included).
        const clock = new StageClock(frame.t0);
        clock.decoded();
        const r = await prepared.send(
          (input) => detectDecoded((inp, o) => backend.infer(inp, o), backend.info, imageOfInput(input), params, clock.run),
          (fallbackMs, startedAt) => clock.redecoded(fallbackMs, startedAt),
        );
        const release = () => prepared.release();
        if (!needPixels) release();
        return { response: r.response, pixels: needPixels ? prepared.image : undefined, by: prepared.by, release };
      } catch (e) {
        prepared.release();
        throw e;
      }
    },
    close: () => backend.close(),
  };
}

export async function remoteDetector(ctx: CliContext, f: DetectParamsFlags, url: string): Promise<FrameDetector> {
  const client = new RfdetrClient(url);
  if (serverHasSyntheticWeights(await client.info().catch(() => undefined))) {
    stderrLine(ctx)(`WARNING: ${client.baseUrl.origin} serves SYNTHETIC weights (its /info says so): detections are meaningless`);
  }
  const labels = cocoLabels();
  resolveClassThresholdFlag(f.classThresholds, labels); // a misspelt class is a usage error here, not a 422 per image
  return {
    labels,
    async detect(frame, needPixels) {
      if (!('file' in frame.data)) throw new Error('remoteDetector: the frame is not a file (a server takes still images only)');
      const bytes = frame.data.file;
      const response = await client.predict(bytes, {
        threshold: f.threshold, max_detections: f.maxDetections, return_raw: f.raw,
        ...(f.classes?.length ? { classes: f.classes.map((c) => (/^\d+$/.test(c) ? Number(c) : c)) } : {}),
        ...(f.classThresholds ? { class_thresholds: f.classThresholds } : {}),
        // The server's default is rle; a server without masks (an older one) refuses the field.
        ...(f.maskFormat && f.maskFormat !== 'rle' ? { mask_format: f.maskFormat } : {}),
      });
      // The server decoded it for its detections; a drawing here needs the pixels here too.
      const pixels = needPixels ? await decodeImage(bytes) : undefined;
      return { response, pixels, by: null, release: () => pixels?.release?.() };
    },
    close: () => client.close(),
  };
}
