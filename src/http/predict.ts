// POST /predict: serving? → body (JSON | multipart | raw; own slot and timeout, its bytes counted in the memory
// budget as they arrive) → admission (every image takes a place in the queue at once, or 503) → decode (sharp,
// off the event loop; a decode slot, then the pixels' and any annotation's bytes reserved from the header,
// fairly across clients) → the engine queue (fair across clients) → the detect pipeline (the sidecar resizes, normalises and runs the forward; postprocess) →
// JSON. A per-request deadline covers all of it; a client that leaves before its forward starts costs no
// forward, and every error ends this request only (4xx/5xx), never the process. This file receives the body,
// admits the request and answers it: the body is a source of frames (one image, a batch or an image_url) run
// by the one runner (src/detect/frame-runner.ts) through the server's detector (frame-detector.ts) into a
// JSON sink.
import type { Request, Response } from 'express';
import { RfdetrError, isRfdetrError, type ErrorCode } from '../errors.ts';
import type { DetectParams, PredictResponse, PredictTiming } from '../detect/pipeline.ts';
import { runFrames, type FrameOutcome } from '../detect/frame-runner.ts';
import type { QueuePlaces } from './admission.ts';
import { JSON_BYTE_COST, type UndecodedBytes } from './memory-budget.ts';
import { bodyFormOf, bodyLimitFor, type BatchInput, type BodyForm, type PredictInput, type UrlInput } from './body.ts';
import { MAX_IMAGE_BYTES } from '../image/decode.ts';
import { classFilterOf, classThresholdsOf } from './params.ts';
import { abortedBy, beginActive, type ActivePredict } from './active.ts';
import { deadlineError } from './engine-queue.ts';
import type { Stage } from './metrics.ts';
import { inferenceError } from './respond.ts';
import type { Timeline } from './timeline.ts';
import type { PredictDeps, PredictDialect, RunContext } from './predict-context.ts';
import { createFrameDetector, type ServerFrame } from './frame-detector.ts';
import type { ModelLane } from './model-lanes.ts';
import { requestedModel } from './served-models.ts';

// Errors that are about the request, not one of its images: they end a batch as a whole.
const REQUEST_LEVEL = new Set<ErrorCode>(['E_DEADLINE', 'E_ABORTED', 'E_DRAINING', 'E_CLOSED', 'E_STARTING', 'E_SIDECAR_FAILED']);

/** One failed image of a batch: what a request with that image alone would have been answered. */
function imageErrorBody(e: unknown): Record<string, unknown> {
  const err = isRfdetrError(e) ? e : inferenceError(e);
  const body: Record<string, unknown> = { detail: err.message, code: err.code };
  if (err.details) for (const [k, v] of Object.entries(err.details)) if (!(k in body) && k !== 'wireCode' && k !== 'type') body[k] = v;
  body.status = err.status;
  return body;
}

/**
 * The body length a request declares (a plain Content-Length within what its form may send), else 0. A longer
 * one is refused by the body reader at once (413 / 400), without reading, so it reserves nothing.
 */
function declaredLength(req: Request, form: BodyForm): number {
  const cl = req.headers['content-length'];
  if (cl === undefined || req.headers['transfer-encoding'] !== undefined || !/^\d{1,15}$/.test(cl)) return 0;
  const n = Number(cl);
  return n <= (form === 'raw' ? MAX_IMAGE_BYTES : bodyLimitFor(MAX_IMAGE_BYTES)) ? n : 0;
}

function bodyTimeoutError(ms: number): RfdetrError {
  return new RfdetrError('E_BODY_TIMEOUT', `the request body did not arrive completely within ${ms} ms: send the whole body promptly (the connection is closed)`, { body_timeout_ms: ms });
}

export function createPredictHandler(d: PredictDeps, active: Set<ActivePredict>) {
  const { admission } = d;
  const detectors = new WeakMap<ModelLane, ReturnType<typeof createFrameDetector>>();
  const detectorOf = (lane: ModelLane) => {
    let f = detectors.get(lane);
    if (!f) detectors.set(lane, (f = createFrameDetector(d.laneDeps(lane))));
    return f;
  };

  /** The request body, counted against the body budget and cut off at the body timeout. */
  async function receiveBody(req: Request, res: Response, signal: AbortSignal, tl: Timeline, client: string, readBody: PredictDeps['readBody']): Promise<{ input: PredictInput | BatchInput | UrlInput; bytes: UndecodedBytes; parseMs: number }> {
    const form = bodyFormOf(req);
    tl.form = form;
    // Refused before a byte of the body is read (the answer closes the connection): a client whose queue share
    // is full. Bodies read only to be refused afterwards (the red team's batches and 40 MB bodies) cost the
    // server's one thread seconds of copies and GC, every other client waiting (bench/README.md, red team).
    admission.checkShare(client);
    const body = admission.enterBody(client);
    const cost = form === 'json' ? JSON_BYTE_COST : 1;
    // A declared length is reserved at once, so a body that cannot fit in the client's share of the memory
    // budget is refused before it is read rather than part-way through; bytes beyond it are counted as they come.
    const declared = declaredLength(req, form);
    let received = 0;
    try {
      body.bytes.add(declared * cost);
    } catch (e) {
      body.leave();
      throw e;
    }
    let timer: NodeJS.Timeout | undefined;
    let overBudget: (e: Error) => void = () => {};
    const refused = new Promise<never>((_, reject) => {
      overBudget = reject;
      timer = setTimeout(() => reject(bodyTimeoutError(admission.limits.bodyTimeoutMs)), admission.limits.bodyTimeoutMs);
    });
    // Attached in the same tick as the parser's own listener, so both see every chunk.
    const onData = (chunk: Buffer) => {
      tl.mark('body_first');
      received += chunk.length;
      const beyond = Math.min(chunk.length, received - declared);
      if (beyond <= 0) return;
      try {
        body.bytes.add(beyond * cost);
      } catch (e) {
        overBudget(e as Error);
      }
    };
    // Before the parser's own 'end' listener, which parses the body in the same turn.
    let endedAt: number | undefined;
    const onEnd = () => tl.mark('body_end', (endedAt = performance.now()));
    req.on('data', onData);
    req.once('end', onEnd);
    try {
      // A compressed body is counted as it arrives and again as it inflates.
      const input = await Promise.race([readBody(req, res, form, (n) => body.bytes.add(n * cost), (n) => admission.check(client, n)), refused, abortedBy(signal)]);
      const parsedAt = performance.now();
      tl.mark('parsed', parsedAt);
      // The parse ran on the event loop every request shares (a batch of sixteen 8192² PNGs in base64: ~18 ms):
      // charged to the client's share of its model's engine once the model is known.
      return { input, bytes: body.bytes, parseMs: parsedAt - (endedAt ?? parsedAt) };
    } catch (e) {
      body.bytes.release();
      throw e;
    } finally {
      clearTimeout(timer);
      req.off('data', onData);
      req.off('end', onEnd);
      body.leave();
      refused.catch(() => {});
    }
  }

  async function run(req: Request, res: Response, r: RunContext, timeline: Timeline, dialect: PredictDialect | undefined): Promise<object> {
    const { input, bytes, parseMs } = await receiveBody(req, res, r.signal, timeline, r.client, dialect?.readBody ?? d.readBody);
    let params: DetectParams & { fast_decode?: boolean };
    let places: QueuePlaces;
    let lane: ModelLane;
    let leaveLane: () => void;
    try {
      // The model is picked once, here: a reload that swaps it later leaves this request on the one it picked.
      lane = d.lanes.resolve(requestedModel(req, input.params));
      const refuse = lane.engineState.notServing();
      if (refuse) throw refuse;
      lane.engine.charge(r.client, parseMs);
      params = { ...input.params, classes: classFilterOf(input.params.classes, lane.labels()), classThresholds: classThresholdsOf(input.params.class_thresholds, lane.labels()) };
      places = admission.admit(r.client, input.form === 'batch' ? input.images.filter(Buffer.isBuffer).length : 1);
      leaveLane = lane.enter();
    } catch (e) {
      bytes.release();
      throw e;
    }
    r.signal.addEventListener('abort', leaveLane, { once: true });
    const detectFrame = detectorOf(lane);
    try {
      const batch = input.form === 'batch';
      const outcomes: FrameOutcome<ServerFrame, { response: PredictResponse }>[] = [];
      await runFrames(bodyFrames(input, params, bytes, r, places, timeline), detectFrame, (o) => void outcomes.push(o), batch ? {
        // Every image at once (the decode slots and the engine queue pace them); an image's own failure is its entry.
        inFlight: input.images.length, signal: r.signal,
        isFrameProblem: (e) => !r.signal.aborted && !(isRfdetrError(e) && REQUEST_LEVEL.has(e.code)),
      } : { inFlight: 1 });
      if (!batch) {
        const { response } = outcomes[0]!.result!;
        res.locals.timing = response.timing_ms;
        res.locals.numDetections = response.num_detections;
        return dialect ? dialect.respond(response, res) : response;
      }
      if (r.signal.aborted) throw r.signal.reason;
      return { results: outcomes.map((o) => (o.result ? o.result.response : imageErrorBody(o.error))) };
    } finally {
      places.leaveAll();
      leaveLane();
    }
  }

  /**
   * The body as a frame source: its one image (an image_url's bytes fetched first), or a batch's images, each
   * with its place in the queue (a batch is admitted together: all of its images fit, or the request is
   * refused) and each going through the decode slots and the engine queue like a request of its own. A batch
   * entry the body already refused comes as that refusal. Only a lone image marks the request's timeline (a
   * batch's images overlap each other).
   */
  async function* bodyFrames(input: PredictInput | BatchInput | UrlInput, params: DetectParams & { fast_decode?: boolean }, bytes: UndecodedBytes, r: RunContext, places: QueuePlaces, timeline: Timeline): AsyncGenerator<ServerFrame | { frame: ServerFrame; error: Error }> {
    const returnImage = input.params.return_image;
    if (input.form !== 'batch') {
      const image = input.form === 'url' ? await fetchImage(input.url, bytes, r.signal) : input.image;
      yield { data: { file: image }, index: 0, params, returnImage, run: r, timeline, fileDone: () => bytes.release(), leaveQueue: places.leave[0]! };
      return;
    }
    let pending = input.images.length;
    const fileDone = () => {
      if (--pending === 0) bytes.release();
    };
    let place = 0;
    for (const [index, item] of input.images.entries()) {
      const ok = Buffer.isBuffer(item);
      const frame: ServerFrame = {
        data: { file: ok ? item : Buffer.alloc(0) }, index, params, returnImage, run: r, fileDone, leaveQueue: ok ? places.leave[place++]! : () => {},
      };
      if (ok) yield frame;
      else {
        fileDone();
        yield { frame, error: item };
      }
    }
  }

  /** An image_url's bytes, counted in the memory budget as they arrive and held until decoded like a body's. */
  async function fetchImage(url: string, bytes: UndecodedBytes, signal: AbortSignal): Promise<Buffer> {
    try {
      if (!d.fetchUrl) throw new RfdetrError('E_URL_NOT_ALLOWED', 'image_url is off on this server: send the image itself (image, multipart or a raw body), or start the server with --allow-url-host HOST');
      const buf = await d.fetchUrl(url, signal, (n) => bytes.add(n));
      if (buf.length === 0) throw new RfdetrError('E_IMAGE_UNDECODABLE', 'image_url answered 0 bytes: expected PNG, JPEG, WebP, GIF or TIFF bytes');
      return buf;
    } catch (e) {
      bytes.release();
      throw e;
    }
  }

  /** `dialect`: another server's API on this pipeline (its body, response and errors); absent: /predict's own. */
  return async function handlePredict(req: Request, res: Response, dialect?: PredictDialect): Promise<void> {
    const t0: number = res.locals.t0;
    const errors = dialect?.errors ?? d.errors;
    // Before the body: refused when no model can serve (draining, or the only one starting), or when the query
    // string names a model that is not served (an unknown one costs no upload).
    let refuse: RfdetrError | undefined;
    try {
      refuse = d.notServing(requestedModel(req, undefined));
    } catch (e) {
      return errors.send(res, e);
    }
    if (refuse) return errors.send(res, refuse);
    const timeline = d.timelines.begin(t0);
    res.once('finish', () => timeline.mark('finished'));
    const ended = () => {
      const at = performance.now();
      d.timelines.finish(timeline, at, () => d.onTimeline?.(timeline.record(res.writableFinished ? res.statusCode : 499)));
    };
    res.once('close', ended);
    const { abort, end } = beginActive(active, res);
    const deadlineAt = t0 + d.deadlineMs;
    // Before the engine queue has the request; once it has, its own timer (same deadline) answers, saying
    // where the request was.
    let queued = false;
    const held: Array<() => void> = [];
    const stageTimes: PredictTiming[] = [];
    const deadlineTimer = setTimeout(() => {
      if (!queued) abort.abort(deadlineError(d.deadlineMs, 'being received, decoded or waiting for a decode slot'));
    }, Math.max(0, deadlineAt - performance.now()));
    try {
      const client = d.clientOf(req, res);
      const body = await Promise.race([run(req, res, { signal: abort.signal, t0, deadlineAt, inEngine: () => (queued = true), client, outputBytes: 0, holdUntilSent: (r) => held.push(r), stageTimes }, timeline, dialect), abortedBy(abort.signal)]);
      if (!res.writableEnded && !res.destroyed) {
        if (d.draining()) res.setHeader('Connection', 'close');
        const text = JSON.stringify(body);
        timeline.mark('serialised');
        res.setHeader('Server-Timing', timeline.header());
        // The headers express's send() would set for this string, then the string itself: Node writes a string
        // body in one piece with the head, where send() first copies it into a Buffer (a 20 KB answer to a
        // client in another process: 0.20 -> 0.16 ms p50, bench/server/RESULTS.md). Same bytes on the wire.
        res.setHeader('Content-Type', 'application/json; charset=utf-8');
        const length = Buffer.byteLength(text);
        res.setHeader('Content-Length', length);
        // All ASCII (as an answer is unless a label is not): latin1 writes the same bytes with a copy where
        // utf8 checks each character.
        res.end(text, length === text.length ? 'latin1' : 'utf8');
        // A response the socket took whole is finished by now: its last byte is with the kernel ('finish' is
        // emitted later, after the rest of this turn's work, and would charge that work to the write).
        if (res.writableFinished) timeline.mark('finished');
      }
    } catch (e) {
      if (!res.destroyed) errors.send(res, e);
    } finally {
      clearTimeout(deadlineTimer);
      for (const t of stageTimes) d.metrics.observeStages(t as unknown as Record<Stage, number>);
      // The response (and the annotated image in it) is in the socket's hands once written or gone.
      const releaseHeld = () => {
        for (const r of held.splice(0)) r();
      };
      if (res.writableFinished || res.destroyed) releaseHeld();
      else res.once('close', releaseHeld);
      // A body we stopped reading (timeout, budget, error) must not hold the connection: close it once the
      // answer is out.
      if (!req.complete) res.once('finish', () => req.socket.destroySoon());
      end();
    }
  };
}
