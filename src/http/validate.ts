// Validation against the one schema (schema.ts): ajv compiles each schema once; a failure becomes the 422
// "Expected <x-expected> for <field> but received <value>" (sharp's invalidParameterError style) with the code
// from the error table. Multipart fields and query strings are text: numbers, booleans and comma lists written
// as text are turned into JSON values first, and a failure quotes the text as it was received.
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import type { TSchema } from '@sinclair/typebox';
import { RfdetrError } from '../errors.ts';

/** Describes a received value the way sharp does: `1.1 of type number`, `"x" of type string`. */
export function describeValue(v: unknown): string {
  if (v === undefined) return 'nothing (the field is missing)';
  if (v === null) return 'null';
  if (Array.isArray(v)) return `an array of length ${v.length}`;
  if (typeof v === 'string') {
    const shown = v.length > 40 ? `${JSON.stringify(v.slice(0, 40))}… (${v.length} characters)` : JSON.stringify(v);
    return `${shown} of type string`;
  }
  if (typeof v === 'object') return 'an object';
  return `${String(v)} of type ${typeof v}`;
}

export function schemaError(field: string, expected: string, received: unknown): RfdetrError {
  return new RfdetrError('E_SCHEMA', `Expected ${expected} for ${field} but received ${describeValue(received)}`, {
    field,
    expected,
  });
}

// `useDefaults` fills the schema's defaults in; `verbose` gives each error its schema (for `x-expected`) and
// its data. One error is reported: the first field in schema order, so a missing image comes first.
const ajv = new Ajv({ useDefaults: true, verbose: true, allErrors: false, strict: true });
ajv.addVocabulary(['x-expected', 'x-expected-text']);

const compiled = new Map<TSchema, ValidateFunction>();

/**
 * Compiles `schema` now: the first compile costs ~110 ms (ajv's code generation), which must be paid at start,
 * not on the event loop in the middle of somebody's request.
 */
export function precompile(schema: TSchema): ValidateFunction {
  let v = compiled.get(schema);
  if (!v) compiled.set(schema, (v = ajv.compile(schema)));
  return v;
}

/** `/images/2` → `images[2]`; `` → `the request body`. */
function fieldOf(path: string): string {
  if (path === '') return 'the request body';
  return path.slice(1).split('/').map((p, i) => (/^\d+$/.test(p) ? `[${p}]` : i === 0 ? p : `.${p}`)).join('');
}

function expectedOf(schema: unknown, textForm: boolean): string {
  const s = (schema ?? {}) as Record<string, unknown>;
  const text = (textForm ? s['x-expected-text'] : undefined) ?? s['x-expected'];
  return typeof text === 'string' ? text : `a value matching ${JSON.stringify(s)}`;
}

function toSchemaError(e: ErrorObject, originals: Record<string, unknown> | undefined): RfdetrError {
  const textForm = originals !== undefined;
  if (e.keyword === 'required') {
    const name = (e.params as { missingProperty: string }).missingProperty;
    const prop = (e.parentSchema as { properties?: Record<string, unknown> }).properties?.[name];
    const field = fieldOf(`${e.instancePath}/${name}`);
    return schemaError(field, expectedOf(prop, textForm), undefined);
  }
  if (e.keyword === 'additionalProperties') {
    const raw = (e.params as { additionalProperty: string }).additionalProperty;
    // The name is the client's text: a few hundred kB of key must not come back in the error.
    const name = raw.length > 40 ? `${raw.slice(0, 40)}…` : raw;
    const known = Object.keys((e.parentSchema as { properties?: Record<string, unknown> }).properties ?? {});
    const field = fieldOf(`${e.instancePath}/${name}`);
    const expected = `only the fields ${known.join(', ')}`;
    return new RfdetrError('E_SCHEMA', `Unknown field ${field} (received ${describeValue((e.data as Record<string, unknown>)[raw])}): expected ${expected}; check the spelling`, { field, expected });
  }
  // A failed branch of a union reports on the union itself: its `x-expected` covers every branch.
  const field = fieldOf(e.instancePath);
  const top = e.instancePath.split('/')[1];
  const received = textForm && top !== undefined && e.instancePath === `/${top}` ? originals[top] : e.data;
  return schemaError(field, expectedOf(e.parentSchema, textForm), received);
}

/** Validates `data` against `schema` (filling defaults in), or throws the 422 naming the first bad field. */
export function validate<T>(schema: TSchema, data: unknown, originals?: Record<string, unknown>): T {
  const v = precompile(schema);
  if (v(data)) return data as T;
  const errors = v.errors ?? [];
  // Inside a union ajv reports each branch, then the union: the union's own error carries its `x-expected`.
  const union = errors.find((e) => e.keyword === 'anyOf');
  throw toSchemaError(union ?? errors[0]!, originals);
}

// A decimal number as text (multipart fields, query strings). JSON numbers never go through this.
const NUMBER_TEXT = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

/**
 * Multipart fields and query parameters arrive as strings: numbers and booleans written as text become JSON
 * values, anything else stays a string (and fails the schema, reported with the text as received).
 */
export function fromTextFields(fields: Record<string, unknown>, schema: TSchema): Record<string, unknown> {
  const props = (schema as { properties?: Record<string, { type?: string }> }).properties ?? {};
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(fields)) {
    const type = props[k]?.type;
    if (typeof v !== 'string') out[k] = v;
    else if (type === 'array') out[k] = v.split(',').map((x) => x.trim()).filter((x) => x !== '').map((x) => (/^\d+$/.test(x) ? Number(x) : x));
    else if ((type === 'number' || type === 'integer') && NUMBER_TEXT.test(v.trim())) out[k] = Number(v.trim());
    else if (type === 'boolean' && /^(true|1)$/i.test(v.trim())) out[k] = true;
    else if (type === 'boolean' && /^(false|0)$/i.test(v.trim())) out[k] = false;
    else out[k] = v;
  }
  return out;
}
