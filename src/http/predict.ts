// POST /predict: serving? → body (JSON | multipart | raw; own slot, byte budget and timeout) → decode (sharp,
// off the event loop; a decode slot and the pixels' bytes reserved from the header first) → admission to the
// engine queue → the detect pipeline (the sidecar resizes, normalises and runs the forward; postprocess) →
// JSON. A per-request deadline covers all of it; a client that leaves before its forward starts costs no
// forward, and every error ends this request only (4xx/5xx), never the process.
import type { Request, Response } from 'express';
import { RfdetrError, isRfdetrError } from '../errors.ts';
import type { RgbImage } from '../image/decode.ts';
import type { InferenceBackend } from '../sidecar/backend.ts';
import { detectDecoded } from '../detect/pipeline.ts';
import type { Admission, BodyBytes } from './admission.ts';
import { bodyFormOf, type PredictInput } from './body.ts';
import { abortedError, deadlineError, type EngineQueue } from './engine-queue.ts';
import type { EngineState } from './engine-state.ts';
import { STAGES, type ServerMetrics, type Stage } from './metrics.ts';
import { inferenceError, type ErrorResponder } from './respond.ts';

export interface PredictDeps {
  backend: InferenceBackend;
  engineState: EngineState;
  engine: EngineQueue;
  admission: Admission;
  metrics: ServerMetrics;
  errors: ErrorResponder;
  deadlineMs: number;
  readBody: (req: Request, res: Response, form: ReturnType<typeof bodyFormOf>) => Promise<PredictInput>;
  decode: (bytes: Uint8Array, opts: { reserve: (bytes: number) => Promise<void> }) => Promise<RgbImage>;
  labels: () => readonly string[];
  /** Called with each forward's duration (for the Retry-After estimate). */
  onForward: (forwardMs: number) => void;
  /** Depth gauges changed. */
  changed: () => void;
}

/** One /predict request in progress, for the drain. */
export interface ActivePredict {
  done: Promise<void>;
  /** Aborted when the client goes away or the drain deadline passes. */
  abort: AbortController;
}

function bodyTimeoutError(ms: number): RfdetrError {
  return new RfdetrError('E_BODY_TIMEOUT', `the request body did not arrive completely within ${ms} ms: send the whole body promptly (the connection is closed)`, { body_timeout_ms: ms });
}

/** Rejects when `signal` aborts; never resolves otherwise. */
function abortedBy(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    if (signal.aborted) reject(signal.reason);
    else signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
}

export function createPredictHandler(d: PredictDeps, active: Set<ActivePredict>) {
  const { admission, engine } = d;

  /** The request body, counted against the body budget and cut off at the body timeout. */
  async function receiveBody(req: Request, res: Response, signal: AbortSignal): Promise<{ input: PredictInput; bytes: BodyBytes }> {
    const form = bodyFormOf(req);
    const body = admission.enterBody();
    let timer: NodeJS.Timeout | undefined;
    let overBudget: (e: Error) => void = () => {};
    const refused = new Promise<never>((_, reject) => {
      overBudget = reject;
      timer = setTimeout(() => reject(bodyTimeoutError(admission.limits.bodyTimeoutMs)), admission.limits.bodyTimeoutMs);
    });
    // Attached in the same tick as the parser's own listener, so both see every chunk.
    const onData = (chunk: Buffer) => {
      body.bytes.add(chunk.length);
      if (body.bytes.over) overBudget(admission.bodyBytesFull());
    };
    req.on('data', onData);
    try {
      const input = await Promise.race([d.readBody(req, res, form), refused, abortedBy(signal)]);
      return { input, bytes: body.bytes };
    } catch (e) {
      body.bytes.release();
      throw e;
    } finally {
      clearTimeout(timer);
      req.off('data', onData);
      body.leave();
      refused.catch(() => {});
    }
  }

  async function run(req: Request, res: Response, signal: AbortSignal, t0: number, deadlineAt: number, inEngine: () => void): Promise<object> {
    const { input, bytes } = await receiveBody(req, res, signal);
    const releases: Array<() => void> = [];
    try {
      // Decode: a slot, then the pixels' bytes (reserved from the header, before any pixel is decoded).
      const tWait0 = performance.now();
      releases.push(await admission.decodes.acquire(signal, () => signal.reason as Error));
      d.changed();
      const tDecode0 = performance.now();
      let reservedMs = 0;
      let image: RgbImage;
      try {
        image = await d.decode(input.image, {
          reserve: async (n) => {
            const r0 = performance.now();
            releases.push(await admission.pixels.acquire(signal, () => signal.reason as Error, n));
            reservedMs = performance.now() - r0;
          },
        });
      } catch (e) {
        if (isRfdetrError(e) || e === signal.reason) throw e;
        throw new RfdetrError('E_IMAGE_UNDECODABLE', `image could not be decoded: ${(e as Error)?.message ?? String(e)}: expected PNG or JPEG bytes`, undefined, { cause: e });
      } finally {
        releases.shift()!(); // the decode slot; the pixels stay reserved until the sidecar has answered
        bytes.release(); // the encoded body is no longer needed
        d.changed();
      }
      const decodeMs = performance.now() - tDecode0 - reservedMs;
      if (signal.aborted) throw signal.reason;
      admission.checkEngineQueue(engine.depth);
      try {
        const r = await detectDecoded(
          (inp, o) => {
            inEngine();
            return engine.run(inp, { signal: o.signal ?? signal, deadlineAt, deadlineMs: d.deadlineMs });
          },
          d.backend.info, image, input.params,
          { t0, decodeMs, waitMs: tDecode0 - tWait0 + reservedMs, signal, labels: d.labels() },
        );
        d.onForward(r.response.timing_ms.inference);
        const timing = r.response.timing_ms as unknown as Record<Stage, number>;
        d.metrics.observeStages(timing);
        res.locals.timing = timing;
        res.locals.numDetections = r.response.num_detections;
        return r.response;
      } catch (e) {
        throw inferenceError(e);
      }
    } finally {
      for (const release of releases) release();
      d.changed();
    }
  }

  return async function handlePredict(req: Request, res: Response): Promise<void> {
    const t0: number = res.locals.t0;
    const refuse = d.engineState.notServing();
    if (refuse) return d.errors.send(res, refuse);
    const abort = new AbortController();
    let finish!: () => void;
    const ctx: ActivePredict = { abort, done: new Promise((r) => (finish = r)) };
    active.add(ctx);
    d.changed();
    const onClose = () => {
      if (!res.writableFinished) abort.abort(abortedError('in progress'));
    };
    res.on('close', onClose);
    const deadlineAt = t0 + d.deadlineMs;
    // Before the engine queue has the request; once it has, its own timer (same deadline) answers, saying
    // where the request was.
    let queued = false;
    const deadlineTimer = setTimeout(() => {
      if (!queued) abort.abort(deadlineError(d.deadlineMs, 'being received, decoded or waiting for a decode slot'));
    }, Math.max(0, deadlineAt - performance.now()));
    try {
      const body = await Promise.race([run(req, res, abort.signal, t0, deadlineAt, () => (queued = true)), abortedBy(abort.signal)]);
      if (!res.writableEnded && !res.destroyed) {
        if (d.engineState.draining) res.setHeader('Connection', 'close');
        const t = res.locals.timing as Record<Stage, number> | undefined;
        if (t) res.setHeader('Server-Timing', STAGES.map((k) => `${k};dur=${t[k]}`).join(', '));
        res.json(body);
      }
    } catch (e) {
      if (!res.destroyed) d.errors.send(res, e);
    } finally {
      clearTimeout(deadlineTimer);
      res.off('close', onClose);
      // A body we stopped reading (timeout, budget, error) must not hold the connection: close it once the
      // answer is out.
      if (!req.complete) res.once('finish', () => req.socket.destroySoon());
      active.delete(ctx);
      d.changed();
      finish();
    }
  };
}
