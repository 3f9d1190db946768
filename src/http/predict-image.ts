// One image of a POST /predict request (predict.ts), a single image's or one of a batch's: a decode slot → its
// pixels and any annotation's bytes reserved from the header (fairly across clients) → the decode, here (sharp,
// off the event loop) or, for a file the sidecar decodes and nothing here needs the pixels of, in the sidecar
// (the file sent as it is; decoded here after all if the sidecar declines it) → the engine queue → the detect
// pipeline → return_image's drawing. Its decode time is charged to the client's share of the engine, and its
// errors come out as the request's answer would be (E_IMAGE_UNDECODABLE, or inferenceError's mapping).
import { RfdetrError, isRfdetrError } from '../errors.ts';
import { encodedForSidecar, type RgbImage } from '../image/decode.ts';
import type { EncodedImage } from '../sidecar/backend.ts';
import { annotate, type ImageFormat } from '../draw/annotate.ts';
import { detectDecoded, inputSizeOf, isEncoded, type DetectParams, type DetectResult } from '../detect/pipeline.ts';
import { annotateCost } from './memory-budget.ts';
import { inferenceError } from './respond.ts';
import type { PredictDeps, RunContext } from './predict-context.ts';

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

/** What runImage needs of the handler's deps. */
export type ImageRunnerDeps = Pick<PredictDeps, 'backend' | 'engine' | 'admission' | 'metrics' | 'deadlineMs' | 'decode' | 'labels' | 'onForward'>;

/** runImage over `d`: predict.ts makes one per handler and calls it for each image of each request. */
export function createImageRunner(d: ImageRunnerDeps) {
  const { admission, engine } = d;

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

  return runImage;
}
