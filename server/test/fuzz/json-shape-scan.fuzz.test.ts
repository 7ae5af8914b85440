import fc from 'fast-check';
import { expect, test } from 'vitest';
import { JsonShapeScan, type ShapeLimits } from '../../src/http/json-shape-scan.js';
import { hostileJson, RUNS } from './hostile.js';

/**
 * The scan of a body's bytes agrees with the parsed value however the bytes are split into chunks
 * (escapes and UTF-8 characters cut in two included): it refuses exactly the JSON that exceeds a
 * bound, naming one it exceeds. Small bounds, so random values cross each of them.
 */
const LIMITS: ShapeLimits = { nesting: 3, entries: 4, values: 12 };

/** Strings with runs long enough to be searched natively, between what must be escaped or looks like structure. */
const longStrings = fc.array(
  fc
    .array(
      fc.oneof(
        fc.constantFrom('"', '\\', '[', ']', '{', '}', ',', ':', 'é', '😀', '\n'),
        fc.nat({ max: 100 }).map((length) => 'a'.repeat(length)),
      ),
      { maxLength: 8 },
    )
    .map((parts) => parts.join('')),
  { maxLength: 6 },
);

interface Shape {
  nesting: number;
  entries: number;
  values: number;
}

/** What the scan measures, taken from the parsed value: levels, largest container, all entries. */
function shapeOf(value: unknown): Shape {
  if (value === null || typeof value !== 'object') return { nesting: 0, entries: 0, values: 0 };
  const children = Object.values(value);
  const inner = children.map(shapeOf);
  return {
    nesting: 1 + Math.max(0, ...inner.map((shape) => shape.nesting)),
    entries: Math.max(children.length, ...inner.map((shape) => shape.entries)),
    values: children.length + inner.reduce((sum, shape) => sum + shape.values, 0),
  };
}

/** `bytes` cut at the given offsets (taken modulo its length). */
function chunked(bytes: Buffer, cuts: number[]): Buffer[] {
  const offsets = [...new Set(cuts.map((cut) => cut % (bytes.length + 1)))].sort((a, b) => a - b);
  return [...offsets, bytes.length].map((end, i) => bytes.subarray(i === 0 ? 0 : offsets[i - 1], end));
}

test('the scan refuses exactly the JSON that exceeds a bound, however its bytes are split', () => {
  fc.assert(
    fc.property(
      fc.oneof(hostileJson, longStrings, fc.dictionary(fc.string(), longStrings)),
      fc.boolean(),
      fc.array(fc.nat(), { maxLength: 12 }),
      (value, indented, cuts) => {
        const bytes = Buffer.from(JSON.stringify(value, null, indented ? 2 : undefined) ?? 'null');
        const scan = new JsonShapeScan(LIMITS);
        const refusal = chunked(bytes, cuts).reduce(
          (refused: ReturnType<JsonShapeScan['take']>, chunk) => refused ?? scan.take(chunk),
          undefined,
        );
        const shape = shapeOf(value);
        const exceeded = [
          shape.nesting > LIMITS.nesting && `more than ${LIMITS.nesting} levels`,
          shape.entries > LIMITS.entries && `more than ${LIMITS.entries} entries`,
          shape.values > LIMITS.values && `more than ${LIMITS.values} values`,
        ].filter((bound): bound is string => bound !== false);
        const context = `${bytes.toString('utf8').slice(0, 300)} split at ${cuts}`;
        expect(refusal === undefined, context).toBe(exceeded.length === 0);
        if (refusal) {
          expect(refusal.code, context).toBe('validation_error');
          expect(
            exceeded.some((bound) => refusal.message.includes(bound)),
            `${refusal.message}\nfor ${context}`,
          ).toBe(true);
        }
      },
    ),
    { numRuns: RUNS * 10 },
  );
});
