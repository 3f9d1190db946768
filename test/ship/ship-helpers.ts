// Shared by the ship tests: the names other branches own (the ready log line, the default port), read from
// their source when it exists, and the skip-or-fail rule for tests that need another branch's artefacts.
import fs from 'node:fs';
import path from 'node:path';
import type { TestContext } from 'node:test';
import { packageRoot } from '../../src/config/paths.ts';

/**
 * The ready log line `rfdetr serve` prints once, as tt-model.yaml's ready_line must match it. Until the HTTP
 * server (src/http) exports it as a constant, this literal is the one place the ship tests read it from; the
 * lead reconciles at merge. Seed: a JSON log line containing `"msg":"rfdetr ready"`.
 */
export const FALLBACK_READY_LINE = '"msg":"rfdetr ready"';

/** The server's default port (DESIGN.md: tt-model's first port). */
export const DEFAULT_PORT = 20000;

/** Probe routes and what they mean (DESIGN.md "Probes"). */
export const ROUTES = { readiness: '/ready', liveness: '/tt-liveness', health: '/health' } as const;

export interface ReadyLineSource {
  value: string;
  from: string;
}

/**
 * Finds an exported string constant whose name contains READY (e.g. `export const READY_LINE = '...'`) in
 * src/http. Returns undefined when src/http does not exist yet (the HTTP branch is not merged).
 */
export function readyLineFromHttp(): ReadyLineSource | undefined {
  const dir = path.join(packageRoot, 'src', 'http');
  if (!fs.existsSync(dir)) return undefined;
  const files = fs.readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'));
  const re = /export\s+const\s+(\w*READY\w*)\s*(?::\s*string\s*)?=\s*(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)"|`([^`$]*)`)/g;
  for (const f of files.sort()) {
    const text = fs.readFileSync(path.join(dir, f), 'utf8');
    for (const m of text.matchAll(re)) {
      const raw = m[2] ?? m[3] ?? m[4] ?? '';
      const value = m[4] !== undefined ? raw : (JSON.parse(`"${raw.replace(/\\'/g, "'").replace(/"/g, '\\"')}"`) as string);
      return { value, from: `src/http/${f} ${m[1]}` };
    }
  }
  return undefined;
}

/** A test that needs something another branch builds: skip with the reason, or fail under RFDETR_REQUIRE_ALL=1. */
export function skipOrFail(t: TestContext, reason: string): void {
  if (process.env.RFDETR_REQUIRE_ALL === '1') throw new Error(`RFDETR_REQUIRE_ALL=1: ${reason}`);
  t.skip(reason);
}

export function readText(rel: string): string {
  return fs.readFileSync(path.join(packageRoot, rel), 'utf8');
}
