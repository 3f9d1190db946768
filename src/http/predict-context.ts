// The types a POST /predict request runs under, apart from the code: what the handler is given (PredictDeps) and
// what each of its frames runs in (RunContext). predict.ts and predict-video.ts build them and frame-detector.ts
// runs one frame in them; each imports them from here, so none imports another's types back.
import type { Request, Response } from 'express';
import type { DecodeOptions, RgbImage } from '../image/decode.ts';
import type { InferenceBackend } from '../sidecar/backend.ts';
import type { UrlFetcher } from '../image/fetch-url.ts';
import type { PredictResponse, PredictTiming } from '../detect/pipeline.ts';
import type { Admission } from './admission.ts';
import type { bodyFormOf, BatchInput, PredictInput, UrlInput } from './body.ts';
import type { EngineQueue } from './engine-queue.ts';
import type { EngineState } from './engine-state.ts';
import type { ServerMetrics } from './metrics.ts';
import type { ErrorResponder } from './respond.ts';
import type { TimelineRecord, Timelines } from './timeline.ts';

export interface PredictDeps {
  backend: InferenceBackend;
  engineState: EngineState;
  engine: EngineQueue;
  admission: Admission;
  metrics: ServerMetrics;
  errors: ErrorResponder;
  deadlineMs: number;
  readBody: (req: Request, res: Response, form: ReturnType<typeof bodyFormOf>, onDecoded?: (n: number) => void, admissible?: (images: number) => void) => Promise<PredictInput | BatchInput | UrlInput>;
  /** Bytes → RGB u8 (the backend's transport calls it for a file it decodes here). */
  decode: (bytes: Uint8Array, opts: DecodeOptions) => Promise<RgbImage>;
  labels: () => readonly string[];
  /** Fetches an image_url; undefined when the server allows no host. */
  fetchUrl: UrlFetcher | undefined;
  /** Called with each forward's duration (for the Retry-After estimate). */
  onForward: (forwardMs: number) => void;
  /** Who sent the request (the fair share). */
  clientOf: (req: Request, res: Response) => string;
  /** The requests' timelines (Server-Timing); `onTimeline` gets each finished one. */
  timelines: Timelines;
  onTimeline?: (t: TimelineRecord) => void;
}

export interface RunContext {
  signal: AbortSignal;
  /** When the request arrived (performance.now()). */
  t0: number;
  deadlineAt: number;
  /** The request reached the engine queue (its deadline is the queue's from then on). */
  inEngine: () => void;
  client: string;
  /** Bytes of this request's annotated images waiting for the response to be written (in the memory budget). */
  outputBytes: number;
  /** Keeps memory reserved until the response is written (the response holds the annotated image). */
  holdUntilSent: (release: () => void) => void;
  /** Each image's stage times, for the stage histograms once the response is out (off the response's path). */
  stageTimes: PredictTiming[];
}

/**
 * Another server's API served by this pipeline (src/http/compat-*.ts): how its request becomes /predict's input
 * (one image), how /predict's answer becomes its response, and its error shape. The admission, budgets, fair
 * share, deadline and engine are /predict's own.
 */
export interface PredictDialect {
  /** Reads the request into /predict's input (one image), in place of PredictDeps.readBody. */
  readBody: PredictDeps['readBody'];
  /** The response for an image's /predict answer. */
  respond: (response: PredictResponse, res: Response) => object;
  /** Errors in the API's own shape. */
  errors: ErrorResponder;
}
