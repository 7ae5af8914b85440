import type { IncomingHttpHeaders } from 'node:http';
import type { CatalogModel } from '../catalog/catalog.js';
import { GatewayError } from '../errors.js';
import {
  answerIdentity,
  chatCompletion,
  type StreamChunks,
  streamChunks,
} from '../providers/openai-response.js';
import type { ChatCompletion, ChatRequest } from '../providers/openai-types.js';
import type { ProviderRegistry } from '../providers/registry.js';
import {
  type MeteredUsage,
  type ProviderCall,
  type ProviderCompletion,
  ProviderError,
  type ProviderStream,
  type StreamPart,
  type UpstreamLimits,
} from '../providers/types.js';
import { completionTokens, promptTokens, toOpenAIUsage } from '../providers/usage.js';
import {
  type Admission,
  type PaymentGate,
  type StatedCost,
  type UsageRecorder,
  usageCost,
} from './chat-contracts.js';
import { providerFailure } from './provider-failure.js';

/** The request log of the route (pino's signature). */
export interface ChatLog {
  info(details: object, message: string): void;
  warn(details: object, message: string): void;
  error(details: object, message: string): void;
}

export interface ChatInput {
  request: ChatRequest;
  model: CatalogModel;
  headers: IncomingHttpHeaders;
  /** The served URL (x402 `resource`). */
  url: string;
  requestId: string;
  /**
   * Aborted when the client goes away: nothing more is written to it, and a request not sent to
   * the provider yet is not sent. One sent is not cut: the provider bills what it generates, so
   * its answer is read to its end and billed as the provider counts it.
   */
  clientGone: AbortSignal;
  log: ChatLog;
  response: ChatResponse;
}

/** What the service may do to the HTTP answer besides returning a JSON body. */
export interface ChatResponse {
  /** Headers of whatever answer follows: JSON body, event stream or error envelope. */
  headers(values: Record<string, string>): void;
  /** Opens the event stream (200, `text/event-stream`). */
  openStream(): EventSink;
  /** An error as the stream's last event: the envelope's `error`, as a JSON body would carry it. */
  errorEvent(error: GatewayError): string;
}

/** A server-sent event stream as the route writes it. */
export interface EventSink {
  /** Writes `data: <json>\n\n` for each event, in one write, without waiting for the client. */
  send(...events: string[]): void;
  /** Ends the stream, after `data: [DONE]` when `done`. */
  close(done: boolean): void;
}

/**
 * Runs one validated chat request: admit the payer (which settles its debts), forward, record the
 * usage, answer. Resolves with the JSON body to send, or `undefined` once it streamed the answer.
 * Errors before an answer began are thrown as GatewayError (the envelope); after an event stream
 * began they go out as an SSE error event.
 */
export interface ChatService {
  handle(input: ChatInput): Promise<unknown>;
}

export interface ChatServiceOptions {
  registry: Pick<ProviderRegistry, 'adapterFor'>;
  gate: PaymentGate;
  recorder: UsageRecorder;
}

/**
 * How long a stream's opening waits for the upstream's first part: long enough for an error the
 * provider reports at once, short enough that a client sees its stream begin while a model thinks.
 */
const FIRST_PART_WAIT_MS = 1_000;

/**
 * A request whose usage cannot be recorded gets no successful answer: the provider was paid
 * but the payer will never be charged, so the gateway logs the usage at error level (for the
 * operator to reconcile) and answers 500 `internal_error`, or ends the stream with that error
 * and without the usage chunk or `[DONE]`.
 */
const NOT_RECORDED =
  'the gateway could not record the usage of this request, so it withholds the answer; nothing is charged';

export function createChatService({ registry, gate, recorder }: ChatServiceOptions): ChatService {
  /**
   * An answer the provider completed without stating its usage (an OpenAI-compatible upstream that
   * ignores `stream_options.include_usage`) is billed for its output estimated from its text, its
   * prompt uncounted: said at warn level once per model (the metric counts each), for the operator
   * to fix the upstream or its catalog entry.
   */
  const unmeteredModels = new Set<string>();
  const warnIfUnmetered = (input: ChatInput, usage: MeteredUsage) => {
    if (usage.exact || unmeteredModels.has(input.model.id)) return;
    unmeteredModels.add(input.model.id);
    input.log.warn(
      { model: input.model.id, usage },
      'the provider did not report the usage of this answer; it is billed only for its output, estimated from its text (said once per model)',
    );
  };

  const admit = (input: ChatInput) =>
    gate.admit({
      headers: input.headers,
      model: input.model,
      request: input.request,
      url: input.url,
      requestId: input.requestId,
    });

  const providerCall = (input: ChatInput): ProviderCall => ({
    model: input.model,
    request: input.request,
    requestId: input.requestId,
  });

  const record = async (input: ChatInput, admission: Admission, usage: MeteredUsage): Promise<StatedCost> => {
    let cost: StatedCost;
    try {
      cost = await recorder.record({
        requestId: input.requestId,
        payer: admission.payer,
        rail: admission.rail,
        model: input.model,
        usage,
      });
    } catch (error) {
      input.log.error(
        { err: error, payer: admission.payer, model: input.model.id, usage },
        'usage NOT recorded: the provider served this request but its payer will not be charged',
      );
      throw new GatewayError('internal_error', NOT_RECORDED);
    }
    admission.recorded?.(cost);
    return cost;
  };

  /**
   * Streams the upstream's parts, from its first batch on, to the client but the finish, which is
   * held back to state the usage and its cost once recorded; returns it, and what ended the stream
   * early, if anything did.
   */
  const relay = async (
    sink: EventSink,
    chunks: StreamChunks,
    batches: AsyncIterator<StreamPart[]>,
    first: Promise<IteratorResult<StreamPart[]>>,
    clientGone: AbortSignal,
  ): Promise<{ finish?: StreamPart; failure?: unknown; relayed: boolean }> => {
    let finish: StreamPart | undefined;
    let relayed = false;
    try {
      sink.send(chunks.opening());
      for (let next = await first; !next.done; next = await batches.next()) {
        const parts = next.value.filter((part) => part.type !== 'finish');
        finish = next.value.find((part) => part.type === 'finish') ?? finish;
        if (!clientGone.aborted && parts.length > 0) {
          sink.send(...parts.map((part) => chunks.part(part)));
          relayed = true;
        }
      }
      return { finish, relayed };
    } catch (error) {
      // Whatever failed, the upstream's body is let go (a no-op when the upstream itself failed).
      await batches.return?.();
      return { finish, failure: error, relayed };
    }
  };

  /**
   * An upstream call that failed before any answer went out (a stream before its first part, or a
   * whole answer the gateway cannot pass on): an HTTP error (the client may retry), after billing
   * what the provider had counted of it (`usage`), which the error's details state.
   */
  const failedBeforeAnswer = async (
    input: ChatInput,
    admission: Admission,
    usage: MeteredUsage | undefined,
    error: unknown,
  ): Promise<unknown> => {
    if (!usage || !counted(usage) || !billable(error)) return providerFailure(error, input.model) ?? error;
    let cost: StatedCost;
    try {
      cost = await record(input, admission, usage);
    } catch (recordError) {
      input.log.info({ err: error }, 'the upstream call failed before its answer');
      throw recordError;
    }
    await addOwedHeaders(input, admission);
    return providerFailure(error, input.model, toOpenAIUsage(usage, usageCost(cost))) ?? error;
  };

  const complete = async (
    input: ChatInput,
    admission: Admission,
    send: (limits: UpstreamLimits) => Promise<ProviderCompletion>,
  ): Promise<ChatCompletion> => {
    let completion: ProviderCompletion;
    try {
      completion = await send({ outputTokens: admission.outputTokens });
    } catch (error) {
      const usage = error instanceof ProviderError ? error.options.usage : undefined;
      throw await failedBeforeAnswer(input, admission, usage, error);
    }
    const cost = await record(input, admission, completion.usage);
    warnIfUnmetered(input, completion.usage);
    await addOwedHeaders(input, admission);
    return chatCompletion(answerIdentity(input.model.id), completion, usageCost(cost));
  };

  const stream = async (
    input: ChatInput,
    admission: Admission,
    send: (limits: UpstreamLimits) => Promise<ProviderStream>,
  ): Promise<void> => {
    let upstream: ProviderStream;
    try {
      upstream = await send({ outputTokens: admission.outputTokens });
    } catch (error) {
      throw providerFailure(error, input.model) ?? error;
    }
    // The event stream opens with the first parts, or after FIRST_PART_WAIT_MS without any (a model
    // thinking first): an upstream failing before (an overload reported in the stream after its 200,
    // a reset) is still an HTTP error a client retries.
    const batches = upstream[Symbol.asyncIterator]();
    const first = batches.next();
    try {
      await settledWithin(first, FIRST_PART_WAIT_MS);
    } catch (error) {
      throw await failedBeforeAnswer(input, admission, upstream.usage(), error);
    }
    const chunks = streamChunks(answerIdentity(input.model.id));
    // Gone meanwhile: the answer is still read to its end and billed, into no stream.
    const sink = input.clientGone.aborted ? DISCARDED : input.response.openStream();
    try {
      const { finish, failure, relayed } = await relay(sink, chunks, batches, first, input.clientGone);
      const usage = upstream.usage();
      const held = finish ? [chunks.part(finish)] : [];
      let cost: StatedCost | undefined;
      if (relayed || billable(failure)) {
        try {
          cost = await record(input, admission, usage);
        } catch (error) {
          if (!input.clientGone.aborted) sink.send(...held, input.response.errorEvent(error as GatewayError));
          return;
        }
      }
      if (failure === undefined && cost !== undefined) {
        warnIfUnmetered(input, usage);
        if (input.clientGone.aborted)
          return input.log.info(
            { usage },
            'the client went away during the stream; its whole answer was billed',
          );
        // As OpenAI: a chunk without choices only when asked for; else the finish states the usage
        // (a client reading `choices[0]` of every chunk would fail on one without).
        if (input.request.stream_options?.include_usage)
          sink.send(...held, chunks.usage(usage, usageCost(cost)));
        else if (finish) sink.send(chunks.part(finish, { usage, cost: usageCost(cost) }));
        return sink.close(true);
      }
      if (!input.clientGone.aborted && held.length > 0) sink.send(...held);
      if (input.clientGone.aborted) {
        input.log.info(
          { usage, billed: cost !== undefined },
          'the client went away during the stream, and the upstream call failed before its end',
        );
      } else {
        let error = providerFailure(failure, input.model);
        if (error === undefined) {
          input.log.error({ err: failure }, 'the stream failed');
          error = new GatewayError('internal_error', 'the gateway failed while streaming this answer');
        }
        sink.send(input.response.errorEvent(error));
      }
    } finally {
      // Unless it ended with [DONE], the stream ends without (whatever happened) and its timers stop.
      sink.close(false);
    }
  };

  return {
    async handle(input) {
      // Translated first: a request the provider cannot express is refused before any payment work.
      const adapter = registry.adapterFor(input.model);
      let answer: (admission: Admission) => Promise<unknown>;
      try {
        if (input.request.stream) {
          const send = adapter.prepareStream(providerCall(input));
          answer = (admission) => stream(input, admission, send);
        } else {
          const send = adapter.prepareCompletion(providerCall(input));
          answer = (admission) => complete(input, admission, send);
        }
      } catch (error) {
        throw providerFailure(error, input.model) ?? error;
      }
      const admission = await admit(input);
      try {
        // Gone while it waited (for its payer's settlement): nothing is sent, nothing is owed.
        if (input.clientGone.aborted) throw new ClientGoneError();
        input.response.headers(admission.responseHeaders);
        return await answer(admission);
      } finally {
        admission.release();
      }
    },
  };
}

/** The usage is recorded, so the answer goes out even if what is owed cannot be stated now. */
async function addOwedHeaders(input: ChatInput, admission: Admission): Promise<void> {
  if (!admission.owedHeaders) return;
  try {
    input.response.headers(await admission.owedHeaders());
  } catch (error) {
    input.log.error({ err: error }, 'could not state what the payer owes; answering without those headers');
  }
}

/** The stream of a client that left before it opened. */
const DISCARDED: EventSink = { send() {}, close() {} };

/** Resolves once `promise` settles or `ms` have passed, whichever comes first; rejects if it does first. */
async function settledWithin(promise: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([promise, new Promise((resolve) => (timer = setTimeout(resolve, ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Whether what the provider counted of an answer ending with `failure` (none: it did not fail) is
 * billed while none of it reached the client. A failure the provider reported itself (an error
 * event in its stream, before any text) is not: the client got nothing, retries, and providers do
 * not charge for requests that failed on their side. A broken connection, a timeout or the
 * gateway's own cut is: the provider kept generating, and charges for it. Once part of the answer
 * went out, what was counted is billed whatever ended it.
 */
function billable(failure: unknown): boolean {
  return !(failure instanceof ProviderError && failure.options.reported);
}

/** Whether the provider reported any tokens: what it counted of a failed answer is billed. */
function counted(usage: MeteredUsage): boolean {
  return promptTokens(usage) + completionTokens(usage) > 0;
}

/** The client went away before its request was sent to the provider. */
class ClientGoneError extends Error {
  constructor() {
    super('the client went away before its request was sent to the provider');
    this.name = 'ClientGoneError';
  }
}
