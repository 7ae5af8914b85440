import { type EventSourceMessage, serverSentEvents } from './sse.js';
import {
  type MeteredUsage,
  type ProviderAdapter,
  type ProviderCall,
  type ProviderCompletion,
  ProviderError,
  type ProviderStream,
  type StreamPart,
} from './types.js';
import type { Upstream, UpstreamRequest } from './upstream.js';

/** An HTTP request to a provider, below its base URL. */
export interface ProviderRequest {
  path: string;
  headers: Record<string, string>;
  body: unknown;
}

/** Reads one streamed answer, event by event. */
export interface StreamDecoder {
  /** The parts one upstream event carries; throws ProviderError for an error event. */
  decode(event: EventSourceMessage): StreamPart[];
  /** The upstream closed the stream: the last parts, or a ProviderError if it was not finished. */
  end(): StreamPart[];
  /** Usage reported so far; exact once `end` accepted the stream as complete. */
  usage(): MeteredUsage;
}

/**
 * What makes a provider family: pure translations both ways. The HTTP, SSE and error plumbing
 * around them is shared by `familyAdapter`.
 */
export interface ProviderFamily {
  /** Throws UntranslatableRequestError for a request the provider cannot express. */
  request(call: ProviderCall, stream: boolean): ProviderRequest;
  completion(body: unknown): ProviderCompletion;
  streamDecoder(): StreamDecoder;
}

export function familyAdapter(name: string, family: ProviderFamily, upstream: Upstream): ProviderAdapter {
  /** Transport failures keep their meaning; an answer the family could not read says so. */
  const failure = (error: unknown): ProviderError => {
    if (error instanceof ProviderError || !isReadingError(error)) return upstream.failure(error);
    return new ProviderError(`${name} sent an answer the gateway could not read`, undefined, {
      cause: error,
    });
  };

  return {
    prepareCompletion(call) {
      const request = { ...family.request(call, false), whole: true };
      return async () => {
        const body = await upstream.post(request);
        try {
          return family.completion(JSON.parse(await body.text()));
        } catch (error) {
          throw failure(error);
        }
      };
    },

    prepareStream(call) {
      const request = family.request(call, true);
      return () => streamOf(request);
    },
  };

  async function streamOf(request: UpstreamRequest): Promise<ProviderStream> {
    const body = await upstream.post(request);
    const decoder = family.streamDecoder();
    const parts = async function* (): AsyncGenerator<StreamPart[]> {
      try {
        for await (const events of serverSentEvents(body)) {
          // The parts of the events before one that fails (an error event) still go out first.
          const decoded = decodeAll(decoder, events);
          if (decoded.parts.length > 0) yield decoded.parts;
          if (decoded.failed) throw decoded.failed.error;
        }
        const last = decoder.end();
        if (last.length > 0) yield last;
      } catch (error) {
        throw failure(error);
      }
    };
    const stream: ProviderStream = { usage: () => decoder.usage(), [Symbol.asyncIterator]: parts };
    return stream;
  }
}

/** The parts of the events, in order, up to the first event that fails to decode (and its error). */
function decodeAll(
  decoder: StreamDecoder,
  events: EventSourceMessage[],
): { parts: StreamPart[]; failed?: { error: unknown } } {
  const parts: StreamPart[] = [];
  for (const event of events) {
    try {
      for (const part of decoder.decode(event)) parts.push(part);
    } catch (error) {
      return { parts, failed: { error } };
    }
  }
  return { parts };
}

function isReadingError(error: unknown): boolean {
  return error instanceof SyntaxError || error instanceof TypeError;
}
