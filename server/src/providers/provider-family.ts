import { answersInFunctions, functionCallParts } from './legacy-functions.js';
import type { ChatRequest } from './openai-types.js';
import { withModelSampling } from './sampling.js';
import { type EventSourceMessage, serverSentEvents } from './sse.js';
import {
  type MeteredUsage,
  type ProviderAdapter,
  type ProviderCall,
  ProviderError,
  type ProviderStream,
  type StreamPart,
  UntranslatableRequestError,
  type UpstreamLimits,
} from './types.js';
import type { Upstream, UpstreamRequest } from './upstream.js';
import { wholeAnswer } from './whole-answer.js';

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
  /**
   * Usage reported so far, the output estimated from the text (GeneratedText) until the provider
   * states it; exact once `end` accepted the stream as complete.
   */
  usage(): MeteredUsage;
}

/**
 * What makes a provider family: pure translations both ways. The HTTP, SSE and error plumbing
 * around them is shared by `familyAdapter`.
 */
export interface ProviderFamily {
  /**
   * The streamed request for `call` once its limits are known; throws UntranslatableRequestError
   * (before any limit) for a request the provider cannot express.
   */
  request(call: ProviderCall): (limits: UpstreamLimits) => ProviderRequest;
  /** Reads the answer to `call` (which some families need to read it as the client asked). */
  streamDecoder(call: ProviderCall): StreamDecoder;
  /** Whether the provider gives token log probabilities; a request for them to one that does not is refused. */
  logprobs?: boolean;
}

export function familyAdapter(name: string, family: ProviderFamily, upstream: Upstream): ProviderAdapter {
  /** Transport failures keep their meaning; an answer the family could not read says so. */
  const failure = (error: unknown): ProviderError => {
    if (error instanceof ProviderError || !isReadingError(error)) return upstream.failure(error);
    return new ProviderError(`${name} sent an answer the gateway could not read`, undefined, {
      cause: error,
    });
  };

  /** The request for the upstream, or UntranslatableRequestError for one this family cannot answer. */
  const translate = (call: ProviderCall): ((limits: UpstreamLimits) => ProviderRequest) => {
    if (!family.logprobs) refuseLogprobs(call.request, name);
    return family.request({ ...call, request: withModelSampling(call.request, call.model) });
  };

  return {
    prepareCompletion(call) {
      const request = translate(call);
      return async (limits) => wholeAnswer(await streamOf({ ...request(limits), whole: true }, call));
    },

    prepareStream(call) {
      const request = translate(call);
      return (limits) => streamOf(request(limits), call);
    },
  };

  async function streamOf(request: UpstreamRequest, call: ProviderCall): Promise<ProviderStream> {
    const body = await upstream.post(request);
    const decoder = family.streamDecoder(call);
    const shaped = answersInFunctions(call.request) ? functionCallParts : (parts: StreamPart[]) => parts;
    const parts = async function* (): AsyncGenerator<StreamPart[]> {
      try {
        for await (const events of serverSentEvents(body)) {
          // The parts of the events before one that fails (an error event) still go out first.
          const decoded = decodeAll(decoder, events);
          const relayed = shaped(decoded.parts);
          if (relayed.length > 0) yield relayed;
          if (decoded.failed) throw decoded.failed.error;
        }
        const last = shaped(decoder.end());
        if (last.length > 0) yield last;
      } catch (error) {
        throw failure(error);
      }
    };
    const stream: ProviderStream = { usage: () => decoder.usage(), [Symbol.asyncIterator]: parts };
    return stream;
  }
}

/** Answered without them, a request for log probabilities would get `logprobs: null` and not know why. */
function refuseLogprobs(request: ChatRequest, provider: string): void {
  const none = `${provider} models give no log probabilities`;
  if (request.logprobs) throw new UntranslatableRequestError('logprobs', `must be false or absent: ${none}`);
  if (request.top_logprobs)
    throw new UntranslatableRequestError('top_logprobs', `must be 0 or absent: ${none}`);
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
