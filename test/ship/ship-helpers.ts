// Shared by the ship tests: the names the packaging must agree with (the ready log line, the default port, the
// probe routes), each read from the code that owns it, and the repository's text files.
import fs from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../../src/config/paths.ts';
import { READY_MESSAGE } from '../../src/http/log.ts';
import { buildOpenApi } from '../../src/http/openapi.ts';
import { MAX_IMAGE_BYTES, MAX_IMAGE_SIDE } from '../../src/image/limits.ts';

export { DEFAULT_PORT } from '../../cli/commands/serve.ts';

/** The line `rfdetr serve` logs once when it serves (src/http/log.ts); tt-model waits for its kind's ready text in it. */
export const READY_LINE = READY_MESSAGE;

/** Probe routes and what each means (SERVING.md, "Routes"). */
export const ROUTES = { readiness: '/ready', liveness: '/tt-liveness', health: '/health' } as const;

export function readText(rel: string): string {
  return fs.readFileSync(path.join(packageRoot, rel), 'utf8');
}

/** The server's routes, from its own OpenAPI document. */
export function serverRoutes(): Set<string> {
  const doc = buildOpenApi({ maxImageBytes: MAX_IMAGE_BYTES, maxImageSide: MAX_IMAGE_SIDE, maxBodyBytes: 2 * MAX_IMAGE_BYTES }) as { paths?: Record<string, unknown> };
  return new Set(Object.keys(doc.paths ?? {}));
}
