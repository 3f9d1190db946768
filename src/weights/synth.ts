// `rfdetr weights synth`: runs the one generator implementation, the C++ `rfdetr-synth` built with the sidecar
// (fixtures SPEC v1 + the family rule table, bit-exact), then checks its output against the variant's schema. The seed is validated here so a bad
// value is a usage error naming it, before any process starts.
import fs from 'node:fs';
import path from 'node:path';
import { execa } from 'execa';
import { synthBinary } from '../config/paths.ts';
import { RfdetrError } from '../errors.ts';
import { CONFIG_FILE, MODEL_FILE } from './hub-cache.ts';
import { schemaFor } from './schema.ts';
import { verifyWeights, type VerifyReport } from './verify.ts';

const U64_MAX = (1n << 64n) - 1n;

/** Parses a seed: decimal or 0x-hex, 0 ≤ N < 2^64. Throws E_USAGE naming the value otherwise. */
export function parseSeed(text: string): bigint {
  const t = text;
  // Same grammar as rfdetr-synth's parser: digits are decimal (a leading 0 is not octal), 0x/0X introduces hex.
  const ok = /^\d+$/.test(t) || /^0[xX][0-9a-fA-F]+$/.test(t);
  const v = ok ? BigInt(t) : -1n;
  if (!ok || v > U64_MAX) {
    throw new RfdetrError('E_USAGE', `Expected a seed as a decimal or 0x-hex integer up to 64 bits (0..18446744073709551615 or 0x0..0xffffffffffffffff) for --seed but received ${JSON.stringify(text)}`);
  }
  return v;
}

export function formatSeed(seed: bigint): string {
  return `0x${seed.toString(16)}`;
}

/** Parses --num-classes: an integer 1..100000. */
export function parseNumClasses(text: string): number {
  const ok = /^[1-9]\d{0,5}$/.test(text.trim());
  const v = Number(text.trim());
  if (!ok || v > 100_000) throw new RfdetrError('E_USAGE', `Expected an integer 1..100000 for --num-classes but received ${JSON.stringify(text)}`);
  return v;
}

/** Parses --variant: one of the schemas (base, nano, …, large_deprecated; seg-nano, …, seg-2xlarge). */
export function parseVariant(text: string): string {
  return schemaFor(text).variant;
}

export interface SynthOptions {
  seed: bigint;
  out: string;
  numClasses?: number | undefined;
  /** Default base. */
  variant?: string | undefined;
  env?: NodeJS.ProcessEnv;
  /** The generator's stdout and stderr, passed through as they arrive (its "synthetic" warning among them). */
  onStdout?: (chunk: string) => void;
  onStderr?: (chunk: string) => void;
  signal?: AbortSignal;
}

export interface SynthResult {
  dir: string;
  seed: bigint;
  files: { model: string; config: string };
  binary: string;
  report: VerifyReport;
}

/** Runs rfdetr-synth --seed N --out DIR [--num-classes N] [--variant V] and verifies what it wrote (as that variant). */
export async function runSynth(opts: SynthOptions): Promise<SynthResult> {
  const env = opts.env ?? process.env;
  const binary = synthBinary(env);
  const dir = path.resolve(opts.out);
  if (!fs.existsSync(binary)) {
    throw new RfdetrError('E_WEIGHTS_NOT_FOUND', `the synthetic-checkpoint generator ${binary} does not exist. Build it with \`npm run build:sidecar\` (or point RFDETR_SYNTH at it)`, { binary });
  }
  fs.mkdirSync(dir, { recursive: true });
  // Decimal on the command line: any integer parser reads it the same way (a leading 0 is never octal here).
  const args = ['--seed', opts.seed.toString(10), '--out', dir];
  if (opts.numClasses !== undefined) args.push('--num-classes', String(opts.numClasses));
  if (opts.variant !== undefined) args.push('--variant', opts.variant);
  const child = execa(binary, args, { env, extendEnv: false, reject: false, stdin: 'ignore', cancelSignal: opts.signal, encoding: 'utf8', stripFinalNewline: false });
  const tail: string[] = [];
  child.stdout?.on('data', (b: Buffer) => opts.onStdout?.(b.toString()));
  child.stderr?.on('data', (b: Buffer) => {
    const s = b.toString();
    tail.push(s);
    if (tail.length > 50) tail.shift();
    opts.onStderr?.(s);
  });
  const res = await child;
  if (res.failed) {
    const how = res.exitCode !== undefined ? `exited with code ${res.exitCode}` : `failed (${res.signal ?? res.shortMessage})`;
    throw new RfdetrError('E_WEIGHTS_INVALID', `${binary} ${args.join(' ')} ${how}: ${tail.join('').trim().split('\n').slice(-5).join(' | ') || '(no output)'}`, { binary, exitCode: res.exitCode });
  }
  const files = { model: path.join(dir, MODEL_FILE), config: path.join(dir, CONFIG_FILE) };
  const report = await verifyWeights(files, { hashes: false });
  if (report.ok && report.model.variant !== (opts.variant ?? 'base')) {
    report.problems.push(`${files.model}: identifies as ${report.model.variant}, not the ${opts.variant ?? 'base'} that was asked for`);
    report.ok = false;
  }
  if (!report.ok) {
    throw new RfdetrError('E_WEIGHTS_INVALID', [`${binary} ran but its output in ${dir} does not verify:`, ...report.problems.map((p) => `  - ${p}`)].join('\n'), { problems: report.problems });
  }
  return { dir, seed: opts.seed, files, binary, report };
}
