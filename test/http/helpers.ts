// Shared by the HTTP tests: a scripted InferenceBackend (deterministic outputs, controllable delay, blocking,
// failure and state) and a server started on an ephemeral port with its log lines captured.
import path from 'node:path';
import { testFixturesDir } from '../../src/config/paths.ts';
import { SafetensorsFile } from '../../src/weights/safetensors.ts';
import type { BackendState, InferenceBackend, InferInput, InferOptions, InferResult, SidecarInfo } from '../../src/sidecar/backend.ts';
import { createServer, type CreateServerOptions, type RfdetrServer } from '../../src/http/server.ts';
import { createJsonLogger } from '../../src/http/log.ts';
import fs from 'node:fs';

export const fixtureDir = path.join(testFixturesDir, 'rfdetr-synth');

export interface Golden {
  name: string;
  png: Buffer;
  pixelValues: Float32Array;
  logits: Float32Array;
  predBoxes: Float32Array;
  detections: Record<string, Array<{ query: number; label: number; label_name: string; score: number; box_xyxy: number[] }>>;
  width: number;
  height: number;
}

let goldenCache: Golden[] | undefined;
export function goldens(): Golden[] {
  goldenCache ??= ['case-1', 'case-2', 'case-3'].map((name) => {
    const dir = path.join(fixtureDir, name);
    const st = SafetensorsFile.read(path.join(dir, 'golden.safetensors'));
    const det = JSON.parse(fs.readFileSync(path.join(dir, 'detections.json'), 'utf8'));
    return {
      name,
      png: fs.readFileSync(path.join(dir, 'input.png')),
      pixelValues: st.f32('pixel_values'),
      logits: st.f32('logits'),
      predBoxes: st.f32('pred_boxes'),
      detections: det.detections,
      width: det.image.width,
      height: det.image.height,
    };
  });
  return goldenCache;
}

export function cocoLabels(): string[] {
  const cfg = JSON.parse(fs.readFileSync(path.join(fixtureDir, 'config.json'), 'utf8')) as { id2label: Record<string, string> };
  const out: string[] = [];
  for (let i = 0; i < 91; i++) out.push(cfg.id2label[String(i)] ?? 'N/A');
  return out;
}

export function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  if (a.length !== b.length) return Infinity;
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

/** Responds with the golden outputs of the fixture case whose pixel_values match the input (≤ 1e-5), else throws. */
export function goldenResponder(pixels: Float32Array): { logits: Float32Array; predBoxes: Float32Array; case: string } {
  let best = Infinity;
  for (const g of goldens()) {
    const d = maxAbsDiff(pixels, g.pixelValues);
    if (d <= 1e-5) return { logits: g.logits, predBoxes: g.predBoxes, case: g.name };
    best = Math.min(best, d);
  }
  throw new Error(`pixel_values match no fixture case (best max-abs ${best})`);
}

/** Always case-1's outputs, whatever the input. */
export function fixedResponder(): { logits: Float32Array; predBoxes: Float32Array } {
  const g = goldens()[0]!;
  return { logits: g.logits, predBoxes: g.predBoxes };
}

export class FakeBackend implements InferenceBackend {
  state: BackendState = 'ready';
  info: SidecarInfo | null;
  /** Forward time reported and waited (ms). */
  forwardMs = 0;
  /** Simulated transfer time reported (ms), not waited. */
  transferMs = 0.25;
  fail: Error | undefined;
  respond: (pixels: Float32Array) => { logits: Float32Array; predBoxes: Float32Array } = fixedResponder;
  calls = 0;
  completed = 0;
  closed = 0;
  destroyed: Error | undefined;
  lastPixels: Float32Array | undefined;
  private gate: Promise<void> | undefined;
  private openGate: (() => void) | undefined;

  constructor(labels: string[] = cocoLabels()) {
    this.info = {
      protocolVersion: 1,
      sidecarVersion: 'fake-0',
      engine: 'fake',
      device: 'fake device (test)',
      inputShape: [3, 560, 560],
      numQueries: 300,
      numClasses: 91,
      labels,
    };
  }

  /** Every forward from now on waits until the returned function is called. */
  block(): () => void {
    this.gate = new Promise((r) => (this.openGate = r));
    return () => this.release();
  }

  release(): void {
    this.openGate?.();
    this.gate = undefined;
  }

  async infer(input: InferInput, opts: InferOptions = {}): Promise<InferResult> {
    this.calls++;
    if (!('pixelValues' in input)) throw new Error('fake backend: expected pixelValues');
    const pixels = input.pixelValues;
    this.lastPixels = pixels;
    if (this.state !== 'ready') throw new Error(`fake backend is ${this.state}`);
    if (opts.signal?.aborted) throw new Error('aborted before the forward');
    const t0 = performance.now();
    if (this.gate) await this.gate;
    if (this.forwardMs > 0) await new Promise((r) => setTimeout(r, Math.max(0, this.forwardMs - (performance.now() - t0))));
    this.completed++;
    if (this.fail) throw this.fail;
    const out = this.respond(pixels);
    return { logits: out.logits, predBoxes: out.predBoxes, preprocessMs: 0, forwardMs: this.forwardMs || performance.now() - t0, transferMs: this.transferMs };
  }

  async close(): Promise<void> {
    this.closed++;
    this.state = 'stopped';
  }

  destroy(err?: Error): void {
    this.destroyed = err ?? new Error('destroyed');
    this.state = 'stopped';
  }
}

export interface Started {
  srv: RfdetrServer;
  backend: FakeBackend;
  url: string;
  logs: Array<Record<string, unknown>>;
  stop(): Promise<void>;
}

export async function start(opts: Partial<CreateServerOptions> & { backend?: FakeBackend } = {}): Promise<Started> {
  const backend = opts.backend ?? new FakeBackend();
  const logs: Array<Record<string, unknown>> = [];
  const srv = createServer({
    statePollMs: 10,
    defaultMetrics: false,
    logger: createJsonLogger(opts.logLevel ?? 'debug', (line) => logs.push(JSON.parse(line))),
    ...opts,
    backend,
  });
  const { url } = await srv.listen('127.0.0.1', 0);
  return { srv, backend, url, logs, stop: () => srv.drain(2000) };
}

export async function waitFor(cond: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

export async function postJson(url: string, body: unknown, headers: Record<string, string> = {}, signal?: AbortSignal) {
  const res = await fetch(`${url}/predict`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    signal,
  });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, json, text };
}

/** A Buffer as a Uint8Array over its own ArrayBuffer (what fetch and Blob accept). */
export function u8(b: Buffer | Uint8Array): Uint8Array<ArrayBuffer> {
  return new Uint8Array(b);
}
