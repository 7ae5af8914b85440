import type { ProviderRegistry } from '../providers/registry.js';
import {
  type ProviderAdapter,
  type ProviderCall,
  type ProviderCompletion,
  ProviderError,
  type ProviderStream,
} from '../providers/types.js';
import type { GatewayMetrics, ProviderFailure } from './metrics.js';

/** The registry's adapters, each call timed and its failures counted per provider. */
export function meteredProviders<R extends Pick<ProviderRegistry, 'adapterFor'>>(
  registry: R,
  metrics: GatewayMetrics,
): R {
  const metered = new Map<ProviderAdapter, ProviderAdapter>();
  return {
    ...registry,
    adapterFor(model) {
      const adapter = registry.adapterFor(model);
      let wrapped = metered.get(adapter);
      if (!wrapped) {
        wrapped = meteredAdapter(adapter, model.provider, metrics);
        metered.set(adapter, wrapped);
      }
      return wrapped;
    },
  };
}

function meteredAdapter(
  adapter: ProviderAdapter,
  provider: string,
  metrics: GatewayMetrics,
): ProviderAdapter {
  // Only sending is timed and counted: a call the adapter cannot translate never reaches the provider.
  const complete = async (call: ProviderCall, send: () => Promise<ProviderCompletion>) => {
    const started = performance.now();
    try {
      const completion = await send();
      metrics.providerCall(provider, 'complete', 'ok', elapsedSeconds(started));
      return completion;
    } catch (error) {
      metrics.providerCall(provider, 'complete', outcomeOf(error, call.signal), elapsedSeconds(started));
      throw error;
    }
  };
  const stream = async (call: ProviderCall, send: () => Promise<ProviderStream>): Promise<ProviderStream> => {
    const started = performance.now();
    let upstream: ProviderStream;
    try {
      upstream = await send();
    } catch (error) {
      metrics.providerCall(provider, 'stream', outcomeOf(error, call.signal), elapsedSeconds(started));
      throw error;
    }
    return {
      usage: () => upstream.usage(),
      async *[Symbol.asyncIterator]() {
        let firstToken = true;
        let ended = false;
        try {
          for await (const parts of upstream) {
            if (firstToken && parts.some((part) => part.type === 'delta')) {
              firstToken = false;
              metrics.providerFirstToken(provider, elapsedSeconds(started));
            }
            yield parts;
          }
          ended = true;
          metrics.providerCall(provider, 'stream', 'ok', elapsedSeconds(started));
        } catch (error) {
          ended = true;
          const outcome = outcomeOf(error, call.signal);
          metrics.providerCall(
            provider,
            'stream',
            outcome === 'connection' ? 'stream' : outcome,
            elapsedSeconds(started),
          );
          throw error;
        } finally {
          // The reader stopped early: the gateway, not the provider, ended the call.
          if (!ended) metrics.providerCall(provider, 'stream', 'cancelled', elapsedSeconds(started));
        }
      },
    };
  };
  return {
    prepareCompletion(call) {
      const send = adapter.prepareCompletion(call);
      return () => complete(call, send);
    },
    prepareStream(call) {
      const send = adapter.prepareStream(call);
      return () => stream(call, send);
    },
  };
}

function outcomeOf(error: unknown, signal: AbortSignal): 'cancelled' | ProviderFailure {
  if (signal.aborted || (error instanceof ProviderError && error.options.cancelled)) return 'cancelled';
  if (!(error instanceof ProviderError)) return 'connection';
  if (error.options.timeout) return 'timeout';
  const status = error.upstreamStatus;
  if (status === undefined) return 'connection';
  return status >= 500 ? 'status_5xx' : 'status_4xx';
}

function elapsedSeconds(started: number): number {
  return (performance.now() - started) / 1000;
}
