import type { FastifyInstance } from 'fastify';
import type { Catalog, CatalogModel, PriceSheet } from '../catalog/catalog.js';
import { success } from './envelope.js';
import { ApiError } from './errors.js';

/**
 * The request fields (OpenRouter's `supported_parameters` names) each family translates, besides
 * the sampling parameters a model takes (its catalog `sampling`).
 */
const FAMILY_PARAMETERS: Record<'anthropic' | 'google' | 'upstream', readonly string[]> = {
  anthropic: [
    'max_tokens',
    'stop',
    'tools',
    'tool_choice',
    'parallel_tool_calls',
    'response_format',
    'structured_outputs',
    'reasoning',
  ],
  google: [
    'max_tokens',
    'stop',
    'tools',
    'tool_choice',
    'response_format',
    'structured_outputs',
    'reasoning',
  ],
  upstream: [
    'max_tokens',
    'stop',
    'tools',
    'tool_choice',
    'parallel_tool_calls',
    'response_format',
    'structured_outputs',
    'reasoning',
    'logit_bias',
    'logprobs',
    'top_logprobs',
  ],
};

function supportedParameters(model: CatalogModel): string[] {
  const family = model.provider === 'anthropic' || model.provider === 'google' ? model.provider : 'upstream';
  return [...FAMILY_PARAMETERS[family], ...model.sampling.parameters];
}

/**
 * Published per model; `data` is a list so that `openai.models.list()` reads the ids. The limits
 * are also under OpenRouter's names (`context_length`, `top_provider`), which clients written for it read.
 */
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
    top_provider: {
      context_length: model.contextLength,
      max_completion_tokens: model.maxOutputTokens,
      is_moderated: false,
    },
    supported_parameters: supportedParameters(model),
    sampling: {
      parameters: model.sampling.parameters,
      not_together: model.sampling.notTogether,
    },
    pricing: {
      unit: 'USD per million tokens',
      ...publishedPrices(pricing),
      ...(pricing.longPrompt && {
        long_prompt: { above_tokens: pricing.longPrompt.aboveTokens, ...publishedPrices(pricing.longPrompt) },
      }),
      ...(model.priceCheckedAt !== undefined && { checked_at: model.priceCheckedAt }),
      ...(model.source !== undefined && { source: model.source }),
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
