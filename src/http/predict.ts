// POST /predict: serving? → body (JSON | multipart | raw; own slot and timeout, its bytes counted in the memory
// budget as they arrive) → admission (every image takes a place in the queue at once, or 503) → decode (sharp,
// off the event loop; a decode slot, then the pixels' and any annotation's bytes reserved from the header,
// fairly across clients) → the engine queue (fair across clients) → the detect pipeline (the sidecar resizes, normalises and runs the forward; postprocess) →
// JSON. A per-request deadline covers all of it; a client that leaves before its forward starts costs no
// forward, and every error ends this request only (4xx/5xx), never the process.
import type { Request, Response } from 'express';
import { RfdetrError, isRfdetrError, type ErrorCode } from '../errors.ts';
import { encodedForSidecar, type RgbImage } from '../image/decode.ts';
import type { FrameTarget } from '../image/frame-decode.ts';
import type { EncodedImage, InferenceBackend } from '../sidecar/backend.ts';
import type { UrlFetcher } from '../image/fetch-url.ts';
import { annotate, type ImageFormat } from '../draw/annotate.ts';
import { detectDecoded, inputSizeOf, isEncoded, type DetectParams, type DetectResult, type PredictTiming } from '../detect/pipeline.ts';
import type { Admission, QueuePlaces } from './admission.ts';
import { annotateCost, JSON_BYTE_COST, type UndecodedBytes } from './memory-budget.ts';
import { bodyFormOf, type BatchInput, type PredictInput, type UrlInput } from './body.ts';
import { classFilterOf, classThresholdsOf } from './params.ts';
import { beginActive, type ActivePredict } from './active.ts';
import { deadlineError, type EngineQueue } from './engine-queue.ts';
import type { EngineState } from './engine-state.ts';
import type { ServerMetrics, Stage } from './metrics.ts';
import { inferenceError, type ErrorResponder } from './respond.ts';
import type { Timeline, TimelineRecord, Timelines } from './timeline.ts';

export interface PredictDeps {
  backend: InferenceBackend;
  engineState: EngineState;
  engine: EngineQueue;
  admission: Admission;
  metrics: ServerMetrics;
  errors: ErrorResponder;
  deadlineMs: number;
  readBody: (req: Request, res: Response, form: ReturnType<typeof bodyFormOf>, onDecoded?: (n: number) => void, admissible?: (images: number) => void) => Promise<PredictInput | BatchInput | UrlInput>;
  decode: (bytes: Uint8Array, opts: { reserve: (bytes: number, size: { width: number; height: number }) => Promise<void>; fastDecode?: { size: number }; frameTarget?: (bytes: number) => FrameTarget | undefined }) => Promise<RgbImage>;
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

interface RunContext {
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
  timeline: Timeline;
  /** Each image's stage times, for the stage histograms once the response is out (off the response's path). */
  stageTimes: PredictTiming[];
}

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

function bodyTimeoutError(ms: number): RfdetrError {
  return new RfdetrError('E_BODY_TIMEOUT', `the request body did not arrive completely within ${ms} ms: send the whole body promptly (the connection is closed)`, { body_timeout_ms: ms });
}

/**
 * What an image's decode is charged against its client's share of the engine (engine-queue.ts charge()): its
 * time, at most what its pixels cost a free core. With --decode-nice the decode threads wait for the cores the
 * engine is using, and that wait is no work taken from the engine: a 640×480 PNG's decode took 6–8 ms of CPU
 * and 45 ms → 281 ms of wall time under the red-team attack, 8192² ones 190–340 ms of CPU (this host), hence
 * 5 ms + 4 ns per pixel.
 */
export function decodeCharge(decodeMs: number, header: { width: number; height: number } | undefined): number {
  return header ? Math.min(decodeMs, 5 + 4e-6 * header.width * header.height) : decodeMs;
}

/** A non-RfdetrError out of a decode (sharp's own) as E_IMAGE_UNDECODABLE; the rest as they are. */
function decodeFailure(e: unknown, signal: AbortSignal): unknown {
  if (isRfdetrError(e) || e === signal.reason) return e;
  return new RfdetrError('E_IMAGE_UNDECODABLE', `image could not be decoded: ${(e as Error)?.message ?? String(e)}: expected PNG, JPEG, WebP, GIF or TIFF bytes`, undefined, { cause: e });
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
  async function receiveBody(req: Request, res: Response, signal: AbortSignal, tl: Timeline, client: string): Promise<{ input: PredictInput | BatchInput | UrlInput; bytes: UndecodedBytes }> {
    const form = bodyFormOf(req);
    tl.form = form;
    const body = admission.enterBody(client);
    const cost = form === 'json' ? JSON_BYTE_COST : 1;
    let timer: NodeJS.Timeout | undefined;
    let overBudget: (e: Error) => void = () => {};
    const refused = new Promise<never>((_, reject) => {
      overBudget = reject;
      timer = setTimeout(() => reject(bodyTimeoutError(admission.limits.bodyTimeoutMs)), admission.limits.bodyTimeoutMs);
    });
    // Attached in the same tick as the parser's own listener, so both see every chunk.
    const onData = (chunk: Buffer) => {
      tl.mark('body_first');
      try {
        body.bytes.add(chunk.length * cost);
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
      const input = await Promise.race([d.readBody(req, res, form, (n) => body.bytes.add(n * cost), (n) => admission.check(client, n)), refused, abortedBy(signal)]);
      const parsedAt = performance.now();
      tl.mark('parsed', parsedAt);
      // The parse ran on the event loop every request shares (a batch of sixteen 8192² PNGs in base64: ~18 ms).
      engine.charge(client, parsedAt - (endedAt ?? parsedAt));
      return { input, bytes: body.bytes };
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

  /**
   * The file itself for the sidecar to decode (SERVING.md, "Where images are decoded"), when the sidecar decodes
   * its form and nothing here needs the pixels (return_image draws on them; fast_decode is sharp's own scaled
   * decode); else undefined and the server decodes it. Throws what decodeImage would for empty or oversized bytes.
   */
  function forSidecar(bytes: Buffer, params: { fast_decode?: boolean }, returnImage: ImageFormat | undefined): EncodedImage | undefined {
    if (returnImage || params.fast_decode || !d.backend.decodes) return undefined;
    const encoded = encodedForSidecar(bytes);
    return encoded && d.backend.decodes(encoded.format) ? encoded : undefined;
  }

  /**
   * One image: a decode slot, its pixels reserved from the header, the decode (then `decoded()`, once, either
   * way), the engine queue (leaving the request's queue place when its forward starts), the detect pipeline.
   * A file the sidecar decodes (forSidecar) has its pixels reserved the same way but is sent as it is, its body
   * held (`decoded()`) until the sidecar answered; if the sidecar declines it, it is decoded here and sent again.
   */
  async function runImage(bytes: Buffer, params: DetectParams & { fast_decode?: boolean }, returnImage: ImageFormat | undefined, r: RunContext, decoded: () => void, leaveQueue: () => void, inBatch: boolean): Promise<DetectResult<RgbImage | EncodedImage>> {
    const { signal, client } = r;
    // A batch's images overlap each other: its timeline has the request's stages only.
    const tl = inBatch ? undefined : r.timeline;
    const releases: Array<() => void> = [];
    // Its pixels' buffer goes back to the decode pool when this image is done (a large image's, pixel-pool.ts).
    let decodedImage: RgbImage | undefined;
    let decodedCalled = false;
    const decodeDone = () => {
      if (!decodedCalled) (decodedCalled = true), decoded();
    };
    try {
      // Decode: a slot, then the pixels' bytes (reserved from the header, before any pixel is decoded).
      const tWait0 = performance.now();
      releases.push(await admission.decodes.acquire(signal, () => signal.reason as Error, 1, client));
      const tDecode0 = performance.now();
      tl?.mark('decode_started', tDecode0);
      let reservedMs = 0;
      let header: { width: number; height: number } | undefined;
      const reserve = async (n: number, size: { width: number; height: number }) => {
        // The drawing and its encodings are reserved with the pixels: an image too large to annotate within
        // the budget is refused here, before a pixel is decoded. The earlier images of the same request whose
        // output waits in the response count too (else the request would wait for room only its own
        // response can free).
        header = size;
        const need = n + (returnImage && size ? annotateCost(size.width, size.height) : 0);
        if (need + r.outputBytes > admission.memory.maxWorkPerImage) throw admission.memory.tooLargeFor(size?.width ?? 0, size?.height ?? 0, need, returnImage !== undefined, r.outputBytes);
        const r0 = performance.now();
        tl?.mark('decode_header', r0);
        releases.push(await admission.memory.work.acquire(signal, () => signal.reason as Error, need, client));
        reservedMs = performance.now() - r0;
        tl?.mark('decode_reserved', r0 + reservedMs);
      };
      let image: RgbImage | EncodedImage;
      let encoded: EncodedImage | undefined;
      try {
        encoded = forSidecar(bytes, params, returnImage);
        if (encoded) {
          // The same reservation as the decode's here: the pixels exist in the sidecar instead.
          await reserve(encoded.width * encoded.height * 3, encoded);
          image = encoded;
        } else {
          image = decodedImage = await d.decode(bytes, {
            // The drawing of return_image needs the stored pixels: the exact decode then.
            ...(params.fast_decode && !returnImage ? { fastDecode: { size: inputSizeOf(d.backend.info)[0] } } : {}),
            // Straight into the sidecar's shared memory (src/image/frame-decode.ts); a drawing needs the pixels here.
            ...(d.backend.frameTarget && !returnImage ? { frameTarget: (n: number) => d.backend.frameTarget?.(n) } : {}),
            reserve,
          });
          d.metrics.imagesDecoded.inc({ by: 'server' });
        }
      } catch (e) {
        throw decodeFailure(e, signal);
      } finally {
        releases.shift()!(); // the decode slot; the memory stays reserved until the response is written
        if (!encoded) decodeDone(); // the encoded body is no longer needed (a file for the sidecar: once it answered)
      }
      const tDecoded = performance.now();
      tl?.mark('decode_done', tDecoded);
      const decodeMs = tDecoded - tDecode0 - reservedMs;
      engine.charge(client, decodeCharge(decodeMs, header));
      if (signal.aborted) throw signal.reason;
      // `ms`: this image's decode time here (a file for the sidecar: its header read; the sidecar's decode is added).
      // `waited`: time since the decode spent elsewhere (a declined file's round trip), reported as queue.
      const forward = async (img: RgbImage | EncodedImage, ms: number, waited = 0) => detectDecoded(
        async (inp, o) => {
          r.inEngine();
          const queued = performance.now();
          tl?.mark('engine_queued', queued);
          const out = await engine.run(inp, { signal: o.signal ?? signal, deadlineAt: r.deadlineAt, deadlineMs: d.deadlineMs, client, onStart: leaveQueue });
          if (tl) {
            tl.mark('dispatched', queued + out.queueMs);
            // A backend without a socket (in-process, tests) reports neither: its whole call is the sidecar stage.
            tl.mark('frame_written', out.frameWrittenAt ?? queued + out.queueMs);
            tl.mark('reply_read', out.replyReadAt ?? performance.now());
            tl.sidecar({ decodeMs: out.decodeMs, preprocessMs: out.preprocessMs, forwardMs: out.forwardMs });
          }
          return out;
        },
        d.backend.info, img, params,
        { t0: r.t0, decodeMs: ms, waitMs: tDecode0 - tWait0 + reservedMs + waited, signal, labels: d.labels() },
      );
      try {
        let result: DetectResult<RgbImage | EncodedImage>;
        if (!encoded) result = await forward(image, decodeMs);
        else {
          try {
            result = await forward(encoded, decodeMs);
            d.metrics.imagesDecoded.inc({ by: 'sidecar' });
          } catch (e) {
            if (!isRfdetrError(e) || e.code !== 'E_SIDECAR_DECLINED' || signal.aborted) throw e;
            // Declined (a form its decoder does not take after all, a libjpeg warning it will not pass, a corrupt
            // file): decoded here as any other file, into the pixels already reserved for it. Without a decode slot:
            // waiting for one while holding pixel memory could deadlock with slot holders waiting for memory.
            const t1 = performance.now();
            try {
              image = decodedImage = await d.decode(bytes, { reserve: async () => {} });
            } catch (err) {
              throw decodeFailure(err, signal);
            } finally {
              decodeDone();
            }
            const fallbackMs = performance.now() - t1;
            engine.charge(client, decodeCharge(fallbackMs, header));
            d.metrics.imagesDecoded.inc({ by: 'server_after_decline' });
            if (signal.aborted) throw signal.reason;
            result = await forward(image, decodeMs + fallbackMs, t1 - tDecoded);
          }
        }
        if (tl) {
          const t = result.response.timing_ms;
          tl.mark('forward_done', r.t0 + t.total - t.postprocess);
          tl.mark('postprocessed', r.t0 + t.total);
        }
        if (returnImage && !isEncoded(result.image)) {
          const png = await annotate(result.image, result.detections, returnImage);
          // Until written, the response holds the base64, the JSON string and the buffer sent (4/3 each).
          const output = 4 * Math.ceil(png.length / 3) * 3;
          r.outputBytes += output;
          r.holdUntilSent(admission.memory.work.force(output, client));
          result.response.annotated_image = { format: returnImage, media_type: `image/${returnImage}`, base64: png.toString('base64') };
        }
        d.onForward(result.response.timing_ms.inference);
        r.stageTimes.push(result.response.timing_ms);
        return result;
      } catch (e) {
        throw inferenceError(e);
      }
    } finally {
      decodedImage?.release?.();
      decodeDone();
      leaveQueue();
      for (const release of releases) release();
    }
  }

  async function run(req: Request, res: Response, r: RunContext): Promise<object> {
    const { input, bytes } = await receiveBody(req, res, r.signal, r.timeline, r.client);
    let params: DetectParams & { fast_decode?: boolean };
    let places: QueuePlaces;
    try {
      params = { ...input.params, classes: classFilterOf(input.params.classes, d.labels()), classThresholds: classThresholdsOf(input.params.class_thresholds, d.labels()) };
      places = admission.admit(r.client, input.form === 'batch' ? input.images.filter(Buffer.isBuffer).length : 1);
    } catch (e) {
      bytes.release();
      throw e;
    }
    try {
      if (input.form === 'batch') return await runBatch(input, params, bytes, r, places);
      const image = input.form === 'url' ? await fetchImage(input.url, bytes, r.signal) : input.image;
      const { response } = await runImage(image, params, input.params.return_image, r, () => bytes.release(), places.leave[0]!, false);
      res.locals.timing = response.timing_ms;
      res.locals.numDetections = response.num_detections;
      return response;
    } finally {
      places.leaveAll();
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

  /**
   * `images: [...]`: admitted to the queue together (all of them fit, or the request is refused), then each
   * image goes through the decode slots and the engine queue like a request of its own. An image that
   * fails gets its own error in `results`; an abort or the deadline ends the whole request.
   */
  async function runBatch(input: BatchInput, params: DetectParams & { fast_decode?: boolean }, bytes: UndecodedBytes, r: RunContext, places: QueuePlaces): Promise<object> {
    let pending = input.images.length;
    const decoded = () => {
      if (--pending === 0) bytes.release();
    };
    let place = 0;
    const results = await Promise.all(input.images.map(async (item) => {
      if (!Buffer.isBuffer(item)) {
        decoded();
        return imageErrorBody(item);
      }
      const leave = places.leave[place++]!;
      try {
        return (await runImage(item, params, input.params.return_image, r, decoded, leave, true)).response;
      } catch (e) {
        if (r.signal.aborted) throw r.signal.reason;
        if (isRfdetrError(e) && REQUEST_LEVEL.has(e.code)) throw e;
        return imageErrorBody(e);
      }
    }));
    return { results };
  }

  return async function handlePredict(req: Request, res: Response): Promise<void> {
    const t0: number = res.locals.t0;
    const refuse = d.engineState.notServing();
    if (refuse) return d.errors.send(res, refuse);
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
      const body = await Promise.race([run(req, res, { signal: abort.signal, t0, deadlineAt, inEngine: () => (queued = true), client, outputBytes: 0, holdUntilSent: (r) => held.push(r), timeline, stageTimes }), abortedBy(abort.signal)]);
      if (!res.writableEnded && !res.destroyed) {
        if (d.engineState.draining) res.setHeader('Connection', 'close');
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
      if (!res.destroyed) d.errors.send(res, e);
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
