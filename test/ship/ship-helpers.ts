// Shared by the ship tests: the names other branches own (the ready log line, the default port), read from
// their source when it exists, and the skip-or-fail rule for tests that need another branch's artefacts.
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { TestContext } from 'node:test';
import { packageRoot } from '../../src/config/paths.ts';

/**
 * The ready message `rfdetr serve` logs once (src/http/log.ts READY_MESSAGE on the http branch). Used only
 * while src/http is not on this branch; the tests import the constant once it is.
 */
export const FALLBACK_READY_LINE = 'rfdetr-serve ready: Application startup complete';

/** The server's default port (DESIGN.md: tt-model's first port). */
export const DEFAULT_PORT = 20000;

/** Probe routes and what they mean (DESIGN.md "Probes"). */
export const ROUTES = { readiness: '/ready', liveness: '/tt-liveness', health: '/health' } as const;

export interface ReadyLineSource {
  value: string;
  from: string;
}

/** READY_MESSAGE from src/http/log.ts, imported; undefined while src/http is not on this branch. */
export async function readyLineFromHttp(): Promise<ReadyLineSource | undefined> {
  const file = path.join(packageRoot, 'src', 'http', 'log.ts');
  if (!fs.existsSync(file)) return undefined;
  const mod = (await import(pathToFileURL(file).href)) as { READY_MESSAGE?: unknown };
  if (typeof mod.READY_MESSAGE !== 'string') {
    throw new Error(`src/http/log.ts exports no string READY_MESSAGE; the server's ready log line must contain the text tt-model waits for (tt-model.yaml's kind)`);
  }
  return { value: mod.READY_MESSAGE, from: 'src/http/log.ts READY_MESSAGE' };
}

/** A test that needs something another branch builds: skip with the reason, or fail under RFDETR_REQUIRE_ALL=1. */
export function skipOrFail(t: TestContext, reason: string): void {
  if (process.env.RFDETR_REQUIRE_ALL === '1') throw new Error(`RFDETR_REQUIRE_ALL=1: ${reason}`);
  t.skip(reason);
}

export function readText(rel: string): string {
  return fs.readFileSync(path.join(packageRoot, rel), 'utf8');
}

/** The server's routes, from its own OpenAPI document (src/http/openapi.ts); undefined while src/http is absent. */
export async function serverRoutes(): Promise<Set<string> | undefined> {
  const file = path.join(packageRoot, 'src', 'http', 'openapi.ts');
  if (!fs.existsSync(file)) return undefined;
  const mod = (await import(pathToFileURL(file).href)) as { buildOpenApi?: (l: object) => { paths?: Record<string, unknown> } };
  if (typeof mod.buildOpenApi !== 'function') throw new Error('src/http/openapi.ts exports no buildOpenApi(limits)');
  const doc = mod.buildOpenApi({ maxImageBytes: 32 << 20, maxImageSide: 8192, maxBodyBytes: 64 << 20 });
  return new Set(Object.keys(doc.paths ?? {}));
}
