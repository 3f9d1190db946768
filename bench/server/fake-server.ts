// The HTTP server under a fake backend with a fixed forward time, for bench/server/bench.ts (not a test).
// Usage: node --import tsx bench/server/fake-server.ts --forward-ms 50 [--queue-size 64] [--prep N] [--stub-prep]
// Prints one line `LISTENING <url>` on stdout; exits on SIGTERM after drain.
import path from 'node:path';
import { parseArgs } from 'node:util';
import { testFixturesDir } from '../../src/config/paths.ts';
import { SafetensorsFile } from '../../src/weights/safetensors.ts';
import { createServer } from '../../src/http/server.ts';
import { createJsonLogger } from '../../src/http/log.ts';
import { defaultPipeline, type Pipeline } from '../../src/http/pipeline.ts';
import type { BackendState, InferenceBackend, InferInput, InferOptions, InferResult, SidecarInfo } from '../../src/sidecar/backend.ts';

const { values } = parseArgs({ options: { 'forward-ms': { type: 'string', default: '50' }, 'queue-size': { type: 'string', default: '64' }, prep: { type: 'string' }, 'stub-prep': { type: 'boolean', default: false } } });
const forwardMs = Number(values['forward-ms']);

const golden = SafetensorsFile.read(path.join(testFixturesDir, 'rfdetr-synth', 'case-1', 'golden.safetensors'));
const logits = golden.f32('logits');
const predBoxes = golden.f32('pred_boxes');

/** A forward is a timer of `forwardMs`: it occupies no CPU, like a forward on an accelerator or in the sidecar process. */
class TimedBackend implements InferenceBackend {
  state: BackendState = 'ready';
  info: SidecarInfo = { protocolVersion: 1, sidecarVersion: 'bench', engine: 'fake', device: `fake (${forwardMs} ms timer)`, inputShape: [3, 560, 560], numQueries: 300, numClasses: 91, labels: [] };
  async infer(_input: InferInput, _opts?: InferOptions): Promise<InferResult> {
    const t0 = performance.now();
    await new Promise((r) => setTimeout(r, forwardMs));
    return { logits, predBoxes, preprocessMs: 0, forwardMs: performance.now() - t0, transferMs: 0 };
  }
  async close() {
    this.state = 'stopped';
  }
  destroy() {
    this.state = 'stopped';
  }
}

// --stub-prep: decode and preprocess cost nothing (fixed 640x480 result), isolating the HTTP layer's own cost.
const stubPixels = new Float32Array(3 * 560 * 560);
const stub: Pipeline = {
  ...defaultPipeline(),
  decode: async () => ({ data: new Uint8Array(0), width: 640, height: 480 }),
  preprocess: () => stubPixels,
};

const srv = createServer({
  ...(values['stub-prep'] ? { pipeline: stub, prepInWorkers: false } : {}),
  backend: new TimedBackend(),
  queueSize: Number(values['queue-size']),
  deadlineMs: 600_000,
  prepConcurrency: values.prep ? Number(values.prep) : undefined,
  logger: createJsonLogger('warn'),
  defaultMetrics: false,
});
const { url } = await srv.listen('127.0.0.1', 0);
process.stdout.write(`LISTENING ${url}\n`);
process.on('SIGTERM', () => {
  void srv.drain(2000).then(() => process.exit(0));
});
