import type { Catalog, CatalogModel } from '../catalog/catalog.js';
import type { GatewayConfig } from '../config.js';
import { anthropicFamily } from './anthropic/index.js';
import { geminiFamily } from './gemini/index.js';
import { openAICompatibleFamily } from './openai-compatible/index.js';
import { familyAdapter, type ProviderFamily } from './provider-family.js';
import type { ProviderAdapter } from './types.js';
import { createUpstream, type Upstream, type UpstreamTimeouts } from './upstream.js';

/** The adapter of every provider the catalog names, each with its own keep-alive pool. */
export interface ProviderRegistry {
  adapterFor(model: CatalogModel): ProviderAdapter;
  /** Closes the upstream pools (on app close). */
  close(): Promise<void>;
  /** Cuts every provider call under way (each fails with an UpstreamCutError giving `reason`); resolves with their number. */
  cut(reason: string): Promise<number>;
}

export interface ProviderRegistryOptions {
  providers: GatewayConfig['providers'];
  upstreams: Catalog['upstreams'];
  timeouts: UpstreamTimeouts;
  /** Where the API keys of OpenAI-compatible upstreams are read (their `apiKeyEnv`). */
  env: Readonly<Record<string, string | undefined>>;
}

export function createProviderRegistry(options: ProviderRegistryOptions): ProviderRegistry {
  const pools: Upstream[] = [];
  const adapters = new Map<string, ProviderAdapter>();
  const add = (provider: string, baseUrl: string, family: ProviderFamily) => {
    const upstream = createUpstream(provider, baseUrl, options.timeouts);
    pools.push(upstream);
    adapters.set(provider, familyAdapter(provider, family, upstream));
  };
  const { anthropic, google } = options.providers;
  add('anthropic', anthropic.baseUrl, anthropicFamily(anthropic.apiKey, { autoCache: anthropic.autoCache }));
  add('google', google.baseUrl, geminiFamily(google.apiKey));
  for (const [name, upstream] of Object.entries(options.upstreams)) {
    const apiKey = upstream.apiKeyEnv ? options.env[upstream.apiKeyEnv]?.trim() || undefined : undefined;
    add(name, upstream.baseUrl, openAICompatibleFamily(apiKey, upstream.tokenLimitField));
  }
  return {
    adapterFor(model) {
      const adapter = adapters.get(model.provider);
      if (!adapter) throw new Error(`no adapter for provider "${model.provider}" of ${model.id}`);
      return adapter;
    },
    async close() {
      await Promise.all(pools.map((pool) => pool.close()));
    },
    async cut(reason) {
      const cut = await Promise.all(pools.map((pool) => pool.cut(reason)));
      return cut.reduce((sum, calls) => sum + calls, 0);
    },
  };
}
