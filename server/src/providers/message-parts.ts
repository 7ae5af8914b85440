/** Pieces of OpenAI messages that every provider family translates the same way. */
import { randomUUID } from 'node:crypto';
import { MAX_FORWARDED_NESTING, nestingExceeds } from './nesting.js';
import type { ChatMessage, ContentPart, FilePart } from './openai-types.js';
import { UntranslatableRequestError } from './types.js';

/** An image part as providers take it: inline bytes from a data URL, or a URL they fetch themselves. */
export type ImageSource = { kind: 'inline'; mediaType: string; data: string } | { kind: 'url'; url: string };

const TYPE_LIST = new Intl.ListFormat('en', { type: 'disjunction' });

const DATA_URL = /^data:([^;,]*)((?:;[^;,]*)*),(.*)$/s;

/** The media types a provider takes images (or files) in (others it refuses), and its name for the 400. */
export interface ImageTypes {
  provider: string;
  mediaTypes: readonly string[];
}

/** `field` names the part for the 400 a malformed URL, or an image of a type `taken` lacks, gets. */
export function imageSource(url: string, field: string, taken: ImageTypes): ImageSource {
  if (/^https?:\/\//i.test(url)) {
    if (!URL.canParse(url)) throw new UntranslatableRequestError(field, 'is not a valid URL');
    return { kind: 'url', url };
  }
  const inline = dataUrl(url);
  if (!inline) throw new UntranslatableRequestError(field, 'must be an http(s) URL or a data URL');
  // `image/jpg` is a common slip for the registered `image/jpeg`, which providers insist on.
  const mediaType = inline.mediaType === 'image/jpg' ? 'image/jpeg' : inline.mediaType;
  if (!taken.mediaTypes.includes(mediaType))
    throw new UntranslatableRequestError(field, `must be a data URL ${takenTypes(taken)}`);
  return { kind: 'inline', mediaType, data: inline.data };
}

/** A data URL's media type (lowercase) and its bytes in base64; undefined for another string. */
function dataUrl(url: string): { mediaType: string; data: string } | undefined {
  const match = DATA_URL.exec(url);
  if (!match) return undefined;
  const [, declared = '', parameters = '', payload = ''] = match;
  const data = parameters.split(';').some((parameter) => parameter.toLowerCase() === 'base64')
    ? payload
    : percentDecoded(payload).toString('base64');
  return { mediaType: declared.toLowerCase(), data };
}

/**
 * A `file` part's inline file (its `file_data`, a data URL) in a type `taken` lists; `field` names
 * the part for the 400 another type gets. (`file_id` is refused before translation.)
 */
export function fileSource(
  part: FilePart,
  field: string,
  taken: ImageTypes,
): { mediaType: string; data: string } {
  const inline = dataUrl(part.file.file_data ?? '');
  if (!inline) throw new UntranslatableRequestError(`${field}.file_data`, 'must be a data URL');
  if (!taken.mediaTypes.includes(inline.mediaType))
    throw new UntranslatableRequestError(
      `${field}.file_data`,
      `must be a data URL of type ${TYPE_LIST.format(taken.mediaTypes)} for ${taken.provider} models`,
    );
  return inline;
}

/** The image types a provider takes, as a 400 states them. */
function takenTypes(taken: ImageTypes): string {
  return `of type ${TYPE_LIST.format(taken.mediaTypes)} for ${taken.provider} models`;
}

/** The bytes a data URL's body stands for (the Fetch standard): `%XX` is one byte, any other text its UTF-8. */
function percentDecoded(text: string): Buffer {
  const bytes = Buffer.from(text, 'utf8');
  const decoded = Buffer.alloc(bytes.length);
  let length = 0;
  for (let i = 0; i < bytes.length; i++) {
    const hex = bytes[i] === 0x25 ? bytes.toString('latin1', i + 1, i + 3) : '';
    if (/^[0-9a-f]{2}$/i.test(hex)) {
      decoded[length++] = Number.parseInt(hex, 16);
      i += 2;
    } else decoded[length++] = bytes[i] as number;
  }
  return decoded.subarray(0, length);
}

const BY_EXTENSION: Record<string, string> = {
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  webp: 'image/webp',
  gif: 'image/gif',
  heic: 'image/heic',
  heif: 'image/heif',
  avif: 'image/avif',
  bmp: 'image/bmp',
  svg: 'image/svg+xml',
  tif: 'image/tiff',
  tiff: 'image/tiff',
};

/**
 * The media type of an image URL by its file extension, for providers that want one declared
 * (Gemini's fileData); JPEG, the commonest, when the extension says nothing. An extension naming
 * a type the provider does not take is a 400 naming the part (`field`), as a data URL of that type is:
 * sent, the provider would refuse it, a 502 that clients retry.
 */
export function mediaTypeOfUrl(url: string, field: string, taken: ImageTypes): string {
  const extension = /\.([a-z0-9]+)$/i.exec(new URL(url).pathname)?.[1];
  const mediaType = (extension && BY_EXTENSION[extension.toLowerCase()]) || 'image/jpeg';
  if (!taken.mediaTypes.includes(mediaType))
    throw new UntranslatableRequestError(
      field,
      `must be an image URL ${takenTypes(taken)} (its extension .${extension} says ${mediaType})`,
    );
  return mediaType;
}

/** A tool call id for providers that give none (`call_` + 24 hex digits, like OpenAI's). */
export function newToolCallId(): string {
  return `call_${randomUUID().replaceAll('-', '').slice(0, 24)}`;
}

/** JSON mode where the provider has none for the request: said as a system instruction. */
export const JSON_MODE_INSTRUCTION =
  'Answer with one valid JSON object and nothing else: no prose before or after it, no Markdown code fences.';

/** Instructions rather than a turn: the system role, or `developer` as OpenAI's newer models name it. */
export function isInstruction(message: ChatMessage): boolean {
  return message.role === 'system' || message.role === 'developer';
}

/**
 * A conversation with no turn left once instructions and empty messages are set apart: Anthropic and
 * Gemini refuse it, so it is refused before anything is paid for.
 */
export function noTurnsError(): UntranslatableRequestError {
  return new UntranslatableRequestError('messages', 'must hold a user or assistant message with content');
}

/** The non-empty texts of a message's content, a part each; other parts have none. */
export function textParts(content: string | ContentPart[] | null | undefined): string[] {
  if (content == null) return [];
  const texts =
    typeof content === 'string' ? [content] : content.map((part) => (part.type === 'text' ? part.text : ''));
  return texts.filter((text) => text !== '');
}

/** The text of a message's content, its parts kept apart by a blank line. */
export function textOf(content: string | ContentPart[] | null | undefined): string {
  return textParts(content).join(PART_SEPARATOR);
}

const PART_SEPARATOR = '\n\n';

/**
 * A system (or developer) message that comes after the conversation began, for providers whose only
 * instructions stand before it: sent in its place as user text, tagged so the model reads it as
 * instructions.
 */
export function laterInstruction(text: string): string {
  return `<system>\n${text}\n</system>`;
}

/** A tool call's `arguments` string as the JSON object providers want. */
export function toolArguments(text: string, field: string): Record<string, unknown> {
  if (text.trim() === '') return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new UntranslatableRequestError(field, 'must be a JSON object (as a string)');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new UntranslatableRequestError(field, 'must be a JSON object (as a string)');
  if (nestingExceeds(value))
    throw new UntranslatableRequestError(field, `must nest at most ${MAX_FORWARDED_NESTING} levels deep`);
  return value as Record<string, unknown>;
}
