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
import type { ServerMetrics } from './metrics.ts';
import type { ErrorResponder } from './respond.ts';
import type { TimelineRecord, Timelines } from './timeline.ts';
import type { RfdetrError } from '../errors.ts';
import type { ModelLane, ModelLanes } from './model-lanes.ts';

/** What one frame runs against: its model's backend, engine queue and labels, and the server's budgets. */
export interface FrameDeps {
  backend: InferenceBackend;
  engine: EngineQueue;
  admission: Admission;
  metrics: ServerMetrics;
  deadlineMs: number;
  decode: (bytes: Uint8Array, opts: DecodeOptions) => Promise<RgbImage>;
  labels: () => readonly string[];
  onForward: (forwardMs: number) => void;
}

export interface PredictDeps {
  /** The models served; a request picks one (its `model`, else the first). */
  lanes: ModelLanes;
  /** The frame deps of a model (one detector per model is made of them). */
  laneDeps: (lane: ModelLane) => FrameDeps;
  /**
   * Why a request naming `model` (undefined: none yet) cannot be served now: draining, or no model can serve
   * (the only one starting); E_MODEL_NOT_FOUND (thrown) for a model not served.
   */
  notServing: (model: string | undefined) => RfdetrError | undefined;
  /** The server is draining (responses close their connection). */
  draining: () => boolean;
  admission: Admission;
  metrics: ServerMetrics;
  errors: ErrorResponder;
  deadlineMs: number;
  readBody: (req: Request, res: Response, form: ReturnType<typeof bodyFormOf>, onDecoded?: (n: number) => void, admissible?: (images: number) => void) => Promise<PredictInput | BatchInput | UrlInput>;
  /** Bytes → RGB u8 (the backend's transport calls it for a file it decodes here). */
  decode: (bytes: Uint8Array, opts: DecodeOptions) => Promise<RgbImage>;
  /** Fetches an image_url; undefined when the server allows no host. */
  fetchUrl: UrlFetcher | undefined;
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
