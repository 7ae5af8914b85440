import type { FastifyInstance } from 'fastify';
import type { Catalog, CatalogModel, PriceSheet } from '../catalog/catalog.js';
import { success } from './envelope.js';
import { ApiError } from './errors.js';

/** Published per model; `data` is a list so that `openai.models.list()` reads the ids. */
function describe(model: CatalogModel, created: number) {
  const { pricing } = model;
  return {
    id: model.id,
    object: 'model' as const,
    created,
    owned_by: model.provider,
    name: model.name,
    context_length: model.contextLength,
    max_output_tokens: model.maxOutputTokens,
    pricing: {
      unit: 'USD per million tokens',
      ...publishedPrices(pricing),
      ...(pricing.longPrompt && {
        long_prompt: { above_tokens: pricing.longPrompt.aboveTokens, ...publishedPrices(pricing.longPrompt) },
      }),
    },
  };
}

function publishedPrices(sheet: PriceSheet) {
  return {
    input: sheet.input,
    output: sheet.output,
    ...(sheet.cacheRead !== undefined && { cache_read: sheet.cacheRead }),
    ...(sheet.cacheWrite !== undefined && { cache_write: sheet.cacheWrite }),
    reasoning: sheet.reasoning ?? sheet.output,
  };
}

export interface ModelsRouteOptions {
  catalog: Catalog;
  /** Extra facts for clients (payment terms, ...), published beside the list. */
  metadata?: () => Record<string, unknown>;
}

export default async function modelsRoute(app: FastifyInstance, options: ModelsRouteOptions) {
  const created = Math.floor(Date.now() / 1000);
  const models = options.catalog.models.map((model) => describe(model, created));
  const byId = new Map(models.map((model) => [model.id, model]));
  app.get('/v1/models', async (request) => ({
    object: 'list',
    ...success(models, request.url),
    ...(options.metadata && { gateway: options.metadata() }),
  }));
  // The model's own fields sit beside the envelope too, so that `openai.models.retrieve()` reads them.
  app.get<{ Params: { '*': string } }>('/v1/models/*', async (request) => {
    const id = request.params['*'];
    const model = byId.get(id);
    if (!model)
      throw new ApiError(
        404,
        'not_found',
        `model "${id}" is not served here; GET /v1/models lists the models`,
      );
    return { ...model, ...success(model, request.url) };
  });
}
