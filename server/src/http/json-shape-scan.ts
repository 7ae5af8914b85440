import type { GatewayError } from '../errors.js';
import { MAX_FORWARDED_NESTING } from '../providers/nesting.js';
import { validationError } from './errors.js';

/**
 * Levels a body may nest: twice what forwarded JSON may, well above the 69 levels (from the body's
 * top) the chat rules accept at their deepest, so those rules name the field of anything between.
 */
export const MAX_BODY_NESTING = 2 * MAX_FORWARDED_NESTING;
/** Elements of one array, or members of one object: thousands of messages or content parts fit. */
export const MAX_CONTAINER_ENTRIES = 10_000;
/** Values in a body (every element and member): about what JSON.parse and validation get through in 20 ms. */
export const MAX_BODY_VALUES = 100_000;

export interface ShapeLimits {
  nesting: number;
  entries: number;
  values: number;
}

const DEFAULT_LIMITS: ShapeLimits = {
  nesting: MAX_BODY_NESTING,
  entries: MAX_CONTAINER_ENTRIES,
  values: MAX_BODY_VALUES,
};

/** Longest top-level key the refusal names (a longer one is named `body`). */
const MAX_NAMED_KEY_BYTES = 128;

/** Bytes of a string looked at one by one before its end is searched for natively. */
const LOOPED_STRING_BYTES = 32;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;

/**
 * Measures a JSON text's nesting and how many values it holds as its bytes arrive, so a body that
 * would block the event loop in JSON.parse is refused before it is parsed, or even fully received.
 * Bytes, not characters: every byte of a multi-byte UTF-8 character is above ASCII, so one split
 * across chunks never looks like a bracket or a quote. Not a validator: malformed text is left to
 * JSON.parse.
 */
export class JsonShapeScan {
  private depth = 0;
  /** Entries seen so far in each open container, by depth (1 is the top). */
  private readonly entries: Uint32Array;
  private values = 0;
  private inString = false;
  private escaped = false;
  private topIsObject = false;
  /** The next string at the top level is a key. */
  private awaitingTopKey = false;
  private topKey: number[] | undefined;
  /** Bytes of the top-level key being read, while one is. */
  private readingKey: number[] | undefined;

  constructor(private readonly limits: ShapeLimits = DEFAULT_LIMITS) {
    this.entries = new Uint32Array(limits.nesting + 2);
  }

  /** The next chunk of the body: the refusal once a limit is crossed, else undefined. */
  take(chunk: Buffer): GatewayError | undefined {
    const end = chunk.length;
    // The next quote and backslash past a string's first bytes (-1: none left), each searched once.
    let quote = -2;
    let backslash = -2;
    for (let i = 0; i < end; i++) {
      if (this.inString) {
        if (this.escaped) {
          this.escaped = false;
          this.keepKeyBytes(chunk, i, i + 1);
          continue;
        }
        // Most strings end within a few bytes, where a loop is cheaper than a native search.
        const near = Math.min(end, i + LOOPED_STRING_BYTES);
        let stop = i;
        while (stop < near && chunk[stop] !== QUOTE && chunk[stop] !== BACKSLASH) stop++;
        if (stop === end) stop = -1;
        else if (stop === near) {
          if (quote !== -1 && quote < near) quote = chunk.indexOf(QUOTE, near);
          if (backslash !== -1 && backslash < near) backslash = chunk.indexOf(BACKSLASH, near);
          stop = backslash !== -1 && (quote === -1 || backslash < quote) ? backslash : quote;
        }
        this.keepKeyBytes(chunk, i, stop === -1 ? end : stop);
        if (stop === -1) return undefined;
        i = stop;
        if (chunk[stop] === QUOTE) this.endString();
        else {
          this.escaped = true;
          this.keepKeyBytes(chunk, i, i + 1);
        }
        continue;
      }
      const byte = chunk[i] as number;
      if (byte <= 0x20 || byte === COLON) continue;
      const refusal =
        byte === COMMA
          ? this.nextEntry()
          : byte === CLOSE_ARRAY || byte === CLOSE_OBJECT
            ? this.close()
            : this.startValue(byte);
      if (refusal) return refusal;
    }
    return undefined;
  }

  private startValue(byte: number): GatewayError | undefined {
    if (this.depth > 0 && this.entries[this.depth] === 0) {
      this.entries[this.depth] = 1;
      if (++this.values > this.limits.values) return this.tooManyValues();
    }
    if (byte === QUOTE) {
      this.inString = true;
      if (this.awaitingTopKey) {
        this.awaitingTopKey = false;
        this.readingKey = [];
      }
      return undefined;
    }
    if (byte !== OPEN_ARRAY && byte !== OPEN_OBJECT) return undefined;
    if (++this.depth > this.limits.nesting)
      return validationError(
        this.field(),
        `nests more than ${this.limits.nesting} levels deep; a body may nest at most ${this.limits.nesting} levels`,
      );
    this.entries[this.depth] = 0;
    if (this.depth === 1) {
      this.topIsObject = byte === OPEN_OBJECT;
      this.awaitingTopKey = this.topIsObject;
    }
    return undefined;
  }

  private nextEntry(): GatewayError | undefined {
    if (this.depth === 0) return undefined;
    const entries = (this.entries[this.depth] as number) + 1;
    this.entries[this.depth] = entries;
    if (entries > this.limits.entries)
      return validationError(
        this.depth === 1 ? 'body' : this.field(),
        `holds an array or object of more than ${this.limits.entries} entries; one may hold at most ${this.limits.entries}`,
      );
    if (++this.values > this.limits.values) return this.tooManyValues();
    if (this.depth === 1) this.awaitingTopKey = this.topIsObject;
    return undefined;
  }

  private close(): undefined {
    if (this.depth > 0) this.depth--;
    return undefined;
  }

  private endString(): void {
    this.inString = false;
    if (this.readingKey) {
      this.topKey = this.readingKey;
      this.readingKey = undefined;
    }
  }

  private keepKeyBytes(chunk: Buffer, from: number, to: number): void {
    const key = this.readingKey;
    if (!key) return;
    for (let i = from; i < to && key.length <= MAX_NAMED_KEY_BYTES; i++) key.push(chunk[i] as number);
  }

  private tooManyValues(): GatewayError {
    return validationError(
      'body',
      `holds more than ${this.limits.values} values (array elements and object members); a body may hold at most ${this.limits.values}`,
    );
  }

  /** The top-level field the excess is in, as the chat rules name fields; `body` when there is none. */
  private field(): string {
    if (!this.topIsObject || !this.topKey?.length || this.topKey.length > MAX_NAMED_KEY_BYTES) return 'body';
    try {
      return JSON.parse(`"${Buffer.from(this.topKey).toString('utf8')}"`) as string;
    } catch {
      return 'body';
    }
  }
}
