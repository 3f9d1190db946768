// What `rfdetr detect` sends frames to: the engine in this process (the sidecar's infer, with the decoded
// frame) or a running server (--url: POST /predict with the encoded image, classes applied by the server).
// Both give the /predict response object.
import fs from 'node:fs';
import { cocoConfigPath } from '../../src/config/paths.ts';
import { RfdetrClient, HttpStatusError } from '../../src/client/client.ts';
import { detectDecoded, type PredictResponse } from '../../src/detect/pipeline.ts';
import { isRfdetrError } from '../../src/errors.ts';
import type { RgbImage } from '../../src/image/decode.ts';
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
}

/** One frame for the detector: decoded pixels (in process) or the encoded bytes (a server decodes them). */
export interface DetectorFrame {
  image?: RgbImage;
  bytes?: Uint8Array;
  /** When the frame's work started (performance.now()) and how long getting its pixels took. */
  t0: number;
  decodeMs: number;
}

export interface FrameDetector {
  readonly labels: readonly string[];
  /** Whether frames must carry encoded bytes (a server) rather than pixels. */
  readonly wantsBytes: boolean;
  detect(frame: DetectorFrame): Promise<PredictResponse>;
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

export async function inProcessDetector(ctx: CliContext, f: DetectParamsFlags): Promise<FrameDetector> {
  const w = await weightsFor(ctx, f);
  const backend = await openEngine(ctx, 'detect', backendRequest(ctx, f, w.dir));
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
  const params = { threshold: f.threshold, max_detections: f.maxDetections, return_raw: f.raw, classes, classThresholds };
  return {
    labels,
    wantsBytes: false,
    async detect(frame) {
      if (!frame.image) throw new Error('inProcessDetector: the frame has no pixels');
      const r = await detectDecoded((input, o) => backend.infer(input, o), backend.info, frame.image, params, { t0: frame.t0, decodeMs: frame.decodeMs });
      return r.response;
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
    wantsBytes: true,
    async detect(frame) {
      if (!frame.bytes) throw new Error('remoteDetector: the frame has no encoded bytes');
      return client.predict(frame.bytes, {
        threshold: f.threshold, max_detections: f.maxDetections, return_raw: f.raw,
        ...(f.classes?.length ? { classes: f.classes.map((c) => (/^\d+$/.test(c) ? Number(c) : c)) } : {}),
        ...(f.classThresholds ? { class_thresholds: f.classThresholds } : {}),
      });
    },
    close: () => client.close(),
  };
}
