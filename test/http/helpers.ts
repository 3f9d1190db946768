// Shared by the HTTP tests: a scripted InferenceBackend (deterministic outputs, reported stage times, blocking,
// failure and state) and a server started on an ephemeral port with its log lines captured.
import path from 'node:path';
import { testFixturesDir } from '../../src/config/paths.ts';
import { SafetensorsFile } from '../../src/weights/safetensors.ts';
import type { InferInput, InferOptions, InferResult, SidecarInfo } from '../../src/sidecar/backend.ts';
import { ScriptedBackend, type ScriptedHead } from '../helpers/scripted-backend.ts';
import { fixtureCaseOf } from '../helpers/fixture-images.ts';
import { testSidecarInfo } from '../helpers/sidecar-info.ts';
import { createServer, type CreateServerOptions, type RfdetrServer } from '../../src/http/server.ts';
import { createJsonLogger } from '../../src/http/log.ts';
import fs from 'node:fs';
import { after, before } from 'node:test';
import net from 'node:net';
import { assertCapturedMatch, captureResponses } from '../helpers/openapi-check.ts';

// Every JSON response of a server started here is checked against /openapi.json when it stops.
captureResponses();

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

/** Responds with the recorded outputs of the fixture case whose decoded input.png equals the image, else throws. */
export async function goldenResponder(input: InferInput): Promise<{ logits: Float32Array; predBoxes: Float32Array; case: string }> {
  if (!('image' in input)) throw new Error('golden responder: expected a decoded image');
  const c = await fixtureCaseOf(input.image);
  if (!c) throw new Error(`the ${input.image.width}x${input.image.height} image matches no fixture case's decoded input.png`);
  return { logits: c.logits, predBoxes: c.predBoxes, case: c.name };
}

/** Always case-1's outputs, whatever the input. */
export function fixedResponder(): { logits: Float32Array; predBoxes: Float32Array } {
  const g = goldens()[0]!;
  return { logits: g.logits, predBoxes: g.predBoxes };
}

export class FakeBackend extends ScriptedBackend {
  info: SidecarInfo | null;
  /** Forward time reported (ms), not waited: a test that needs the time to pass moves the clock (see predict.test). */
  forwardMs = 0;
  /** Simulated sidecar preprocess time reported (ms), not waited. */
  preprocessMs = 0.5;
  /** Simulated transfer time reported (ms), not waited. */
  transferMs = 0.25;
  fail: Error | undefined;
  respond: (input: InferInput) => ScriptedHead | Promise<ScriptedHead> = fixedResponder;
  calls = 0;
  completed = 0;
  /** Forwards in progress now, and the most there ever were at once. */
  inFlight = 0;
  maxInFlight = 0;
  closed = 0;
  destroyed: Error | undefined;
  lastInput: InferInput | undefined;
  /** The last forward's options (a segment model's select among them). */
  lastOptions: InferOptions | undefined;
  private gate: Promise<void> | undefined;
  private openGate: (() => void) | undefined;

  constructor(labels: string[] = cocoLabels()) {
    super();
    this.info = testSidecarInfo({
      protocolVersion: 3,
      sidecarVersion: 'fake-0',
      engine: 'fake',
      device: 'fake device (test)',
      inputShape: [3, 560, 560],
      numQueries: 300,
      numClasses: 91,
      labels,
      variant: 'base',
    });
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
    this.lastInput = input;
    this.lastOptions = opts;
    if (this.state !== 'ready') throw new Error(`fake backend is ${this.state}`);
    if (opts.signal?.aborted) throw new Error('aborted before the forward');
    const t0 = performance.now();
    this.maxInFlight = Math.max(this.maxInFlight, ++this.inFlight);
    try {
      if (this.gate) await this.gate;
    } finally {
      this.inFlight--;
    }
    this.completed++;
    if (this.fail) throw this.fail;
    const out = await this.respond(input);
    return { ...this.headOutputs(out, opts), preprocessMs: this.preprocessMs, forwardMs: this.forwardMs || performance.now() - t0, transferMs: this.transferMs };
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
    defaultMetrics: false,
    // One request in the backend at a time, so "queued" and "in the engine" are distinct states the tests can
    // hold still; the default (2, the sidecar's preprocess overlap) is exercised through the real sidecar.
    engineConcurrency: 1,
    logger: createJsonLogger(opts.logLevel ?? 'debug', (line) => logs.push(JSON.parse(line))),
    ...opts,
    backend,
  });
  const { url } = await srv.listen('127.0.0.1', 0);
  return {
    srv, backend, url, logs,
    stop: async () => {
      await srv.drain(2000);
      assertCapturedMatch(srv.app);
    },
  };
}

export async function waitFor(cond: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/**
 * POST /predict. `body`: an object (sent as JSON), a JSON string, or its bytes as they are. Build a body of tens of
 * MB before the server starts (at module load), not between two requests: its seconds of synchronous work on a
 * loaded CI machine can outlive the server's 5 s keep-alive timeout, which then resets the pooled connection fetch
 * sends it on ('fetch failed', ECONNRESET; the CI failure of 7 Dec in batch.test.ts).
 */
export async function postJson(url: string, body: unknown, headers: Record<string, string> = {}, signal?: AbortSignal) {
  const res = await fetch(`${url}/predict`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' || body instanceof Uint8Array ? (body as string | Uint8Array<ArrayBuffer>) : JSON.stringify(body),
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

/**
 * One server (FakeBackend, default options) for the whole test file, started before its tests and stopped
 * after them, and fixture case 1's PNG as base64: read them inside the tests.
 */
export function serverForFile(): { readonly s: Started; readonly png: string } {
  let s: Started | undefined;
  before(async () => {
    s = await start();
  });
  after(() => s?.stop());
  return {
    get s() {
      if (!s) throw new Error('serverForFile: read the server inside a test, after the before hook');
      return s;
    },
    get png() {
      return goldens()[0]!.png.toString('base64');
    },
  };
}

/** Sends raw bytes on a fresh connection and resolves with everything the server wrote before closing. */
export function rawExchange(url: string, bytes: Buffer): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const sock = net.connect(Number(port), hostname);
    let out = '';
    sock.on('data', (d) => (out += d.toString('latin1')));
    sock.on('error', reject);
    sock.on('close', () => resolve(out));
    sock.write(bytes);
  });
}
