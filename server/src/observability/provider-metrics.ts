import type { ProviderRegistry } from '../providers/registry.js';
import {
  type ProviderAdapter,
  type ProviderCompletion,
  ProviderError,
  type ProviderStream,
  UpstreamCutError,
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
  const complete = async (send: () => Promise<ProviderCompletion>) => {
    const started = performance.now();
    try {
      const completion = await send();
      metrics.providerCall(provider, 'complete', 'ok', elapsedSeconds(started));
      if (!completion.usage.exact) metrics.usageUnreported(provider);
      return completion;
    } catch (error) {
      metrics.providerCall(provider, 'complete', outcomeOf(error), elapsedSeconds(started));
      throw error;
    }
  };
  const stream = async (send: () => Promise<ProviderStream>): Promise<ProviderStream> => {
    const started = performance.now();
    let upstream: ProviderStream;
    try {
      upstream = await send();
    } catch (error) {
      metrics.providerCall(provider, 'stream', outcomeOf(error), elapsedSeconds(started));
      throw error;
    }
    return {
      usage: () => upstream.usage(),
      async *[Symbol.asyncIterator]() {
        let firstToken = true;
        try {
          for await (const parts of upstream) {
            if (firstToken && parts.some((part) => part.type === 'delta')) {
              firstToken = false;
              metrics.providerFirstToken(provider, elapsedSeconds(started));
            }
            yield parts;
          }
          metrics.providerCall(provider, 'stream', 'ok', elapsedSeconds(started));
          if (!upstream.usage().exact) metrics.usageUnreported(provider);
        } catch (error) {
          const outcome = outcomeOf(error);
          metrics.providerCall(
            provider,
            'stream',
            outcome === 'connection' ? 'stream' : outcome,
            elapsedSeconds(started),
          );
          throw error;
        }
      },
    };
  };
  return {
    prepareCompletion(call) {
      const send = adapter.prepareCompletion(call);
      return (limits) => complete(() => send(limits));
    },
    prepareStream(call) {
      const send = adapter.prepareStream(call);
      return (limits) => stream(() => send(limits));
    },
  };
}

function outcomeOf(error: unknown): ProviderFailure {
  if (error instanceof UpstreamCutError) return 'cut';
  if (!(error instanceof ProviderError)) return 'connection';
  if (error.options.timeout) return 'timeout';
  const status = error.upstreamStatus;
  // An exact count comes with an answer the provider ended as a failure, not with one that broke off.
  if (status === undefined)
    return error.options.reported || error.options.usage?.exact ? 'answer' : 'connection';
  return status >= 500 ? 'status_5xx' : 'status_4xx';
}

function elapsedSeconds(started: number): number {
  return (performance.now() - started) / 1000;
}
