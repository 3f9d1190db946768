// The value parsers of the command-line flags, and `--classes` resolved against the model's labels. A malformed
// value is a usage error (exit 2) that names what was expected and what was received (commander adds the flag).
import { InvalidArgumentError } from 'commander';
import { RfdetrError } from '../src/errors.ts';
import { resolveClassList, resolveClassThresholds, someNames } from '../src/detect/classes.ts';

function received(v: string): string {
  return JSON.stringify(v);
}

export function parseThreshold(v: string): number {
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n) || n < 0 || n > 1) throw new InvalidArgumentError(`expected a number from 0 to 1 but received ${received(v)}`);
  return n;
}

export function intParser(min: number, max: number): (v: string) => number {
  return (v: string) => {
    const n = Number(v);
    if (!/^\s*-?\d+\s*$/.test(v) || !Number.isSafeInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(`expected an integer from ${min} to ${max} but received ${received(v)}`);
    }
    return n;
  };
}

export function positiveNumber(v: string): number {
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n) || n < 0) throw new InvalidArgumentError(`expected a number >= 0 but received ${received(v)}`);
  return n;
}

export function parseClasses(v: string, prev: string[] | undefined): string[] {
  const items = v.split(',').map((s) => s.trim()).filter((s) => s.length > 0);
  if (items.length === 0) throw new InvalidArgumentError(`expected class names or ids separated by commas (e.g. cat,dog) but received ${received(v)}`);
  return [...(prev ?? []), ...items];
}

/** Class names (or numeric ids) → class indices in `labels`; unknown names are a usage error naming them. */
export function resolveClasses(names: readonly string[] | undefined, labels: readonly string[]): Set<number> | undefined {
  if (!names || names.length === 0) return undefined;
  const { ids, unknown, known } = resolveClassList(names, labels);
  if (unknown.length) {
    throw new RfdetrError('E_USAGE', `--classes: unknown class ${unknown.map((u) => JSON.stringify(u)).join(', ')}; expected names from the model's labels (${someNames(known)}) or class ids 0..${labels.length - 1}`);
  }
  return ids;
}

/** `person:0.4,3:0.7` (repeatable) → {"person": 0.4, "3": 0.7}: a threshold per class name or id. */
export function parseClassThresholds(v: string, prev: Record<string, number> | undefined): Record<string, number> {
  const out = { ...(prev ?? {}) };
  const items = v.split(',').map((s) => s.trim()).filter((s) => s.length > 0);
  for (const item of items) {
    const i = item.lastIndexOf(':');
    const t = item.slice(i + 1).trim();
    const n = Number(t);
    if (i <= 0 || t === '' || !Number.isFinite(n) || n < 0 || n > 1) {
      throw new InvalidArgumentError(`expected class:threshold pairs separated by commas, each threshold 0 to 1 (e.g. person:0.4,3:0.7) but received ${received(item)}`);
    }
    out[item.slice(0, i).trim()] = n;
  }
  if (items.length === 0) throw new InvalidArgumentError(`expected class:threshold pairs (e.g. person:0.4) but received ${received(v)}`);
  return out;
}

/** --class-thresholds against `labels`: thresholds by class index; an unknown class is a usage error naming it. */
export function resolveClassThresholdFlag(thresholds: Readonly<Record<string, number>> | undefined, labels: readonly string[]): Map<number, number> | undefined {
  if (!thresholds) return undefined;
  const { byId, unknown, known } = resolveClassThresholds(thresholds, labels);
  if (unknown.length) {
    throw new RfdetrError('E_USAGE', `--class-thresholds: unknown class ${unknown.map((u) => JSON.stringify(u)).join(', ')}; expected names from the model's labels (${someNames(known)}) or class ids 0..${labels.length - 1}`);
  }
  return byId;
}
