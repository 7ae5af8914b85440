import fc from 'fast-check';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';
import type { ErrorCode } from '../../src/http/errors.js';

/** Every stable code of the envelope (server/src/http/errors.ts). */
const ERROR_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'validation_error',
  'invalid_json',
  'unsupported_media_type',
  'payload_too_large',
  'unauthorized',
  'payment_required',
  'rate_limited',
  'too_many_in_flight',
  'not_found',
  'method_not_allowed',
  'unsupported_model',
  'provider_error',
  'provider_invalid_request',
  'context_length_exceeded',
  'provider_rate_limited',
  'provider_overloaded',
  'payments_unavailable',
  'internal_error',
]);

/** Runs per property: enough to reach the odd corners, few enough that the suite stays well under a minute. */
export const RUNS = Number(process.env.FUZZ_RUNS ?? 300);

/**
 * The suite's property for a REST answer: never a 500, and every refusal is the envelope with a
 * stable code and a message. Returns the parsed body.
 */
export function expectNoServerFault(res: LightMyRequestResponse, path: string, sent: unknown): unknown {
  const context = `${res.statusCode} ${res.body.slice(0, 500)}\nfor ${describe(sent)}`;
  expect(res.statusCode, context).not.toBe(500);
  expect(res.statusCode, context).toBeLessThan(600);
  if (res.statusCode < 400) return undefined;
  expect(res.headers['content-type'], context).toMatch(/^application\/json/);
  const body = res.json();
  expect(body, context).toMatchObject({ data: null, meta: { path, timestamp: expect.any(String) } });
  expect(ERROR_CODES.has(body.error?.code), context).toBe(true);
  expect(body.error.code, context).not.toBe('internal_error');
  expect(typeof body.error.message, context).toBe('string');
  expect(body.error.message.length, context).toBeGreaterThan(0);
  return body;
}

/** The gateway still answers after the run: nothing crashed or wedged it. */
export async function expectAlive(app: FastifyInstance): Promise<void> {
  const res = await app.inject({ method: 'GET', url: '/v1/models' });
  expect(res.statusCode).toBe(200);
}

function describe(sent: unknown): string {
  const text =
    typeof sent === 'string'
      ? sent
      : JSON.stringify(sent, (_key, value) => (typeof value === 'bigint' ? `${value}n` : value));
  return text === undefined
    ? String(sent)
    : text.length > 600
      ? `${text.slice(0, 600)}… (${text.length} chars)`
      : text;
}

/** Keys that poison prototypes when a parser or a merge takes them at face value. */
export const POISON_KEYS = ['__proto__', 'constructor', 'prototype', 'toString', 'valueOf', 'hasOwnProperty'];

/** One UTF-16 code unit, lone surrogates included. */
const codeUnit = fc.integer({ min: 0, max: 0xffff }).map((unit) => String.fromCharCode(unit));

/** Strings a careless parser, regex or provider translation trips on. */
export const hostileString: fc.Arbitrary<string> = fc.oneof(
  fc.string(),
  fc.string({ unit: 'grapheme' }),
  fc.string({ unit: 'binary' }),
  fc.string({ unit: codeUnit }),
  fc.constantFrom(
    '',
    ' ',
    '\u0000',
    '\ud800',
    '\udfff',
    'a\ud83d',
    '\u202e\u0041',
    '\ufeff',
    '𝕳𝖊𝖑𝖑𝖔 👩‍👩‍👧‍👦',
    '../../etc/passwd',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a template injection attempt, as text
    '${process.exit()}',
    '{{7*7}}',
    '__proto__',
    'constructor',
    'null',
    'NaN',
    '-0',
    '1e400',
  ),
  fc.constantFrom(...POISON_KEYS),
);

/** Any JSON value, with hostile strings and keys (prototype-poisoning ones included). */
export const hostileJson: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constantFrom(null, true, false, 0, -1, 1.5, 2 ** 53, -(2 ** 63), 1e308, Number.MIN_VALUE),
    fc.integer(),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    hostileString,
    fc.array(tie('value'), { maxLength: 5 }),
    fc.dictionary(fc.oneof(hostileString, fc.constantFrom(...POISON_KEYS)), tie('value'), { maxKeys: 5 }),
  ),
})).value;

/**
 * `depth` nested arrays (or objects, or objects keyed `__proto__`) around `inner`, as JSON text:
 * built as text, so any depth is cheap.
 */
export function nestedJson(depth: number, kind: 'array' | 'object' | 'proto', inner = '1'): string {
  if (kind === 'array') return `${'['.repeat(depth)}${inner}${']'.repeat(depth)}`;
  const key = kind === 'proto' ? '__proto__' : 'a';
  return `${`{"${key}":`.repeat(depth)}${inner}${'}'.repeat(depth)}`;
}

/** `template` as JSON text with the value at `path` (set or added) replaced by the JSON text `raw`. */
export function withRawJsonAt(template: unknown, path: ReadonlyArray<string | number>, raw: string): string {
  const marker = '\u0000raw-json-marker\u0000';
  const text = JSON.stringify(mutate(template, path, { op: 'replace', value: marker }));
  return text.replace(JSON.stringify(marker), () => raw);
}

/** Every path to a value inside `value` (the root is []). */
export function pathsOf(value: unknown, prefix: Array<string | number> = []): Array<Array<string | number>> {
  const paths: Array<Array<string | number>> = [prefix];
  if (value === null || typeof value !== 'object') return paths;
  const entries: Array<[string | number, unknown]> = Array.isArray(value)
    ? [...value.entries()]
    : Object.entries(value);
  for (const [key, item] of entries) paths.push(...pathsOf(item, [...prefix, key]));
  return paths;
}

export type Mutation =
  | { op: 'replace'; value: unknown }
  | { op: 'delete' }
  | { op: 'add'; key: string; value: unknown };

/** A copy of `template` with the value at `path` replaced, deleted, or given an extra key. */
export function mutate(template: unknown, path: ReadonlyArray<string | number>, mutation: Mutation): unknown {
  if (path.length === 0) {
    if (mutation.op === 'replace') return mutation.value;
    if (
      mutation.op === 'add' &&
      template !== null &&
      typeof template === 'object' &&
      !Array.isArray(template)
    )
      return withKey(template as Record<string, unknown>, mutation.key, mutation.value);
    return template;
  }
  const [head, ...rest] = path;
  if (Array.isArray(template)) {
    const copy = [...template];
    if (rest.length === 0 && mutation.op === 'delete') copy.splice(head as number, 1);
    else copy[head as number] = mutate(copy[head as number], rest, mutation);
    return copy;
  }
  const copy = { ...(template as Record<string, unknown>) };
  if (rest.length === 0 && mutation.op === 'delete') delete copy[head as string];
  else copy[head as string] = mutate(copy[head as string], rest, mutation);
  return copy;
}

/** An own property even for `__proto__`, so JSON.stringify sends it as a key. */
function withKey(target: Record<string, unknown>, key: string, value: unknown): Record<string, unknown> {
  const copy = { ...target };
  Object.defineProperty(copy, key, { value, enumerable: true, configurable: true, writable: true });
  return copy;
}

export const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  hostileJson.map((value) => ({ op: 'replace' as const, value })),
  fc.constant({ op: 'delete' as const }),
  fc
    .tuple(fc.oneof(fc.constantFrom(...POISON_KEYS), hostileString), hostileJson)
    .map(([key, value]) => ({ op: 'add' as const, key, value })),
);

/** A template mutated at one of its paths, as fast-check shrinks it best: template, path index, mutation. */
export function mutated(templates: readonly unknown[]): fc.Arbitrary<unknown> {
  return fc.tuple(fc.constantFrom(...templates), fc.nat(), mutation).map(([template, pick, change]) => {
    const paths = pathsOf(template);
    return mutate(template, paths[pick % paths.length] as Array<string | number>, change);
  });
}
