// Helpers for the CLI tests: running the program in process or the real bin/rfdetr.js as a subprocess, a
// fixture-replay backend and a tiny /predict server.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { execa } from 'execa';
import { packageRoot, testFixturesDir } from '../../src/config/paths.ts';
import { detectDecoded } from '../../src/detect/pipeline.ts';
import { decodeImage } from '../../src/image/decode.ts';
import { RfdetrError } from '../../src/errors.ts';
import type { InferenceBackend, InferInput, InferResult, SidecarInfo } from '../../src/sidecar/backend.ts';
import { ScriptedBackend } from '../helpers/scripted-backend.ts';
import { fixtureCaseOf } from '../helpers/fixture-images.ts';
import { testSidecarInfo } from '../helpers/sidecar-info.ts';
import { runCli } from '../../cli/program.ts';
import { resolveClasses } from '../../cli/parsers.ts';
import { synthWeights } from '../helpers/synth-weights.ts';
import type { BackendFactory, BackendRequest, CliContext } from '../../cli/context.ts';

export const fixtureDir = path.join(testFixturesDir, 'rfdetr-synth');
export const CASES = ['case-1', 'case-2', 'case-3'] as const;
export const caseImage = (c: string) => path.join(fixtureDir, c, 'input.png');
export const binPath = path.join(packageRoot, 'bin', 'rfdetr.js');

export interface FixtureDetection { query: number; label: number; label_name: string; score: number; box_xyxy: number[] }
export interface FixtureDetections { image: { width: number; height: number }; detections: Record<string, FixtureDetection[]> }

export function fixtureDetections(c: string): FixtureDetections {
  return JSON.parse(fs.readFileSync(path.join(fixtureDir, c, 'detections.json'), 'utf8')) as FixtureDetections;
}

export function fixtureLabels(): string[] {
  const cfg = JSON.parse(fs.readFileSync(path.join(fixtureDir, 'config.json'), 'utf8')) as { id2label: Record<string, string> };
  const labels: string[] = [];
  for (const [id, name] of Object.entries(cfg.id2label)) labels[Number(id)] = name;
  return labels;
}

/**
 * A backend that replays the fixtures' recorded head outputs: infer() finds the fixture case whose decoded
 * input.png equals the image it is sent and returns that case's logits/pred_boxes. Any other input is an
 * E_INFERENCE error, so a wrong decode fails the tests.
 */
export class FixtureReplayBackend extends ScriptedBackend {
  readonly info: SidecarInfo;
  /** `precision`: what its hello says it runs. */
  constructor(precision = 'fp32') {
    super();
    this.info = testSidecarInfo({
      protocolVersion: 4, sidecarVersion: 'test', engine: 'fixture-replay', device: 'recorded outputs', inputShape: [3, 560, 560],
      numQueries: 300, numClasses: 91, labels: fixtureLabels(), variant: 'base', precision,
    });
  }
  infers = 0;
  closed = false;

  async infer(input: InferInput): Promise<InferResult> {
    this.infers++;
    if (!('image' in input)) throw new RfdetrError('E_INFERENCE', 'fixture-replay backend: expected a decoded image');
    const c = await fixtureCaseOf(input.image);
    if (!c) throw new RfdetrError('E_INFERENCE', 'fixture-replay backend: the image matches no fixture case');
    return { outputs: { logits: c.logits.slice(), pred_boxes: c.predBoxes.slice() }, preprocessMs: 0.75, forwardMs: 1.5, transferMs: 0.25 };
  }
  async close(): Promise<void> {
    this.closed = true;
    this.setState('stopped');
  }
  destroy(): void {
    this.setState('stopped');
  }
}

/**
 * The fixture replay behind a sidecar that decodes plain JPEG/PNG files itself (as the real one does): a file
 * it is sent (`{ encoded }`) is decoded with sharp and replayed, its decode reported as 2 ms; `decline` makes it
 * refuse every file (E_SIDECAR_DECLINED). `inputs` records each input's form.
 */
export class DecodingReplayBackend extends FixtureReplayBackend {
  decline = false;
  inputs: string[] = [];
  override decodes(_format: 'jpeg' | 'png'): boolean {
    return true;
  }
  override async infer(input: InferInput): Promise<InferResult> {
    this.inputs.push(Object.keys(input)[0]!);
    if (!('encoded' in input)) return super.infer(input);
    if (this.decline) throw new RfdetrError('E_SIDECAR_DECLINED', 'declined (scripted)');
    return { ...(await super.infer({ image: await decodeImage(input.encoded.bytes) })), decodeMs: 2 };
  }
}

export interface RunResult { code: number; stdout: string; stderr: string; requests: BackendRequest[] }

export interface InProcessOptions {
  backend?: InferenceBackend;
  /** Opens a backend per request (beats `backend`). */
  factory?: (req: BackendRequest) => InferenceBackend;
  stdin?: Buffer;
  tty?: boolean;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
}

/** Runs the CLI in this process with a fixture-replay backend (or the one given); captures the output. */
export async function runInProcess(argv: string[], o: InProcessOptions = {}): Promise<RunResult> {
  let stdout = '';
  let stderr = '';
  const requests: BackendRequest[] = [];
  const backend = o.backend ?? new FixtureReplayBackend();
  const openBackend: BackendFactory = async (req) => {
    requests.push(req);
    return o.factory ? o.factory(req) : backend;
  };
  const ctx: CliContext = {
    stdout: { write: (s: string) => (stdout += s) },
    stderr: { write: (s: string) => (stderr += s), isTTY: o.tty ?? false, columns: 100 },
    readStdin: async () => o.stdin ?? Buffer.alloc(0),
    env: o.env ?? { ...process.env, TT_RF_DETR_WEIGHTS: await synthWeights() },
    cwd: o.cwd ?? packageRoot,
    openBackend,
  };
  const code = await runCli(argv, ctx);
  return { code, stdout, stderr, requests };
}

/** Runs the real bin/rfdetr.js; never rejects on a non-zero exit. */
export async function runBin(args: string[], opts: { env?: NodeJS.ProcessEnv; input?: Buffer; timeoutMs?: number; cwd?: string } = {}) {
  const r = await execa(process.execPath, [binPath, ...args], {
    reject: false, stripFinalNewline: false, cwd: opts.cwd ?? packageRoot, env: opts.env, timeout: opts.timeoutMs ?? 120_000,
    ...(opts.input ? { input: opts.input } : { stdin: 'ignore' as const }),
  });
  return { code: r.exitCode ?? -1, stdout: String(r.stdout), stderr: String(r.stderr) };
}

export type Handler = (req: http.IncomingMessage, body: Buffer, res: http.ServerResponse) => void | Promise<void>;

/** A tiny HTTP server on 127.0.0.1 (random port) calling `handler` with the whole request body. */
export async function tinyServer(handler: Handler): Promise<{ url: string; close: () => Promise<void>; requests: string[] }> {
  const requests: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      requests.push(`${req.method} ${req.url}`);
      Promise.resolve(handler(req, Buffer.concat(chunks), res)).catch((e: Error) => {
        res.statusCode = 500;
        res.end(JSON.stringify({ detail: e.message }));
      });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }),
  };
}

function json(res: http.ServerResponse, status: number, body: unknown): void {
  res.statusCode = status;
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify(body));
}

/**
 * A minimal /predict server in the test process: /ready 200, POST /predict (JSON base64) answered by
 * detectDecoded on a fixture-replay backend — the library's own response object, so a client must reproduce it.
 */
export async function replayServer(opts: { info?: unknown } = {}): Promise<{ url: string; close: () => Promise<void>; requests: string[] }> {
  const backend = new FixtureReplayBackend();
  return tinyServer(async (req, body, res) => {
    if (req.method === 'GET' && req.url === '/ready') return json(res, 200, { status: 'ready' });
    if (req.method === 'GET' && req.url === '/info' && opts.info !== undefined) return json(res, 200, opts.info);
    if (req.method === 'POST' && req.url === '/predict') {
      const p = JSON.parse(body.toString('utf8')) as { image: string; threshold?: number; max_detections?: number; return_raw?: boolean; classes?: (string | number)[] };
      try {
        // Classes as the real server applies them: resolved against the labels, before max_detections.
        const classes = resolveClasses(p.classes?.map(String), fixtureLabels());
        const t0 = performance.now();
        const image = await decodeImage(Buffer.from(p.image, 'base64'));
        const r = await detectDecoded((input) => backend.infer(input), backend.info, image, { threshold: p.threshold ?? 0.5, max_detections: p.max_detections ?? 100, return_raw: p.return_raw, classes }, { t0, decodeMs: performance.now() - t0 });
        return json(res, 200, r.response);
      } catch (e) {
        const err = e as RfdetrError;
        return json(res, err.status ?? 500, { detail: err.message, code: err.code });
      }
    }
    return json(res, 404, { detail: 'no such route' });
  });
}

/**
 * A module-resolve hook for a child node process (`node --import <register> …`) that appends each import's
 * specifier and resolved URL (`spec url`, one per line) to the file named by RFDETR_IMPORT_LOG.
 */
export function importRecorder(dir: string): { register: string } {
  const hooks = path.join(dir, 'hooks.mjs');
  const register = path.join(dir, 'register.mjs');
  fs.writeFileSync(hooks, `import fs from 'node:fs';
export async function resolve(spec, context, next) {
  const r = await next(spec, context);
  fs.appendFileSync(process.env.RFDETR_IMPORT_LOG, spec + ' ' + r.url + '\\n');
  return r;
}
`);
  fs.writeFileSync(register, `import { register } from 'node:module';\nregister(${JSON.stringify(`file://${hooks}`)});\n`);
  return { register };
}

