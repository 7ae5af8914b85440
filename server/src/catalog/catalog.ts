import { readFileSync } from 'node:fs';
import { ConfigError } from '../config.js';

/** USD per million tokens, as decimal strings with at most 6 decimals (so pico-USD per token is whole). */
export interface PriceSheet {
  input: string;
  output: string;
  cacheRead?: string;
  cacheWrite?: string;
  /** Defaults to the output price. */
  reasoning?: string;
}

/** A model's prices: its base sheet, and optionally a higher tier for long prompts. */
export interface ModelPricing extends PriceSheet {
  longPrompt?: LongPromptTier;
}

/**
 * Prices of every token of a request whose prompt (input + cache read + cache write tokens) is longer
 * than `aboveTokens`, as Google bills Gemini 2.5 Pro prompts over 200k tokens.
 */
export interface LongPromptTier extends PriceSheet {
  aboveTokens: number;
}

export interface CatalogModel {
  /** `<provider>/<model>`, the name clients use. */
  id: string;
  /** `anthropic`, `google`, or the name of an OpenAI-compatible upstream in the catalog. */
  provider: string;
  /** The id the provider itself knows the model by. */
  providerModel: string;
  name: string;
  contextLength: number;
  maxOutputTokens: number;
  /**
   * The most tokens the provider bills one image at (MODELS_FILE `maxImageTokens`), for the bound on
   * what a request can cost before it is forwarded. Default DEFAULT_MAX_IMAGE_TOKENS.
   */
  maxImageTokens: number;
  pricing: ModelPricing;
  /** The sampling parameters the model takes; the others are left out of its requests. */
  sampling: SamplingRule;
  /** The day its prices were last checked against `source` (YYYY-MM-DD), when the catalog says. */
  priceCheckedAt?: string;
  /** Where its prices and limits were read, when the catalog says. */
  source?: string;
}

/** OpenAI request fields that only steer sampling, which some models refuse. */
export const SAMPLING_PARAMETERS = [
  'temperature',
  'top_p',
  'top_k',
  'seed',
  'frequency_penalty',
  'presence_penalty',
] as const;
export type SamplingParameter = (typeof SAMPLING_PARAMETERS)[number];

/**
 * MODELS_FILE `sampling`: the parameters a model takes (`parameters`), and groups of them it takes
 * only one of (`notTogether`: the first given of a group is sent, the others left out), as Claude
 * Sonnet 4.5 refuses `temperature` with `top_p`.
 */
export interface SamplingRule {
  parameters: readonly SamplingParameter[];
  notTogether: readonly (readonly SamplingParameter[])[];
}

/**
 * What a model takes when its entry does not say: what the family's translation carries (Anthropic
 * has no seed nor penalties, Gemini 2.5 and later refuse penalties, as do Claude models before the
 * 4.7 generation `temperature` beside `top_p`).
 */
const DEFAULT_SAMPLING: Record<'anthropic' | 'google' | 'upstream', SamplingRule> = {
  anthropic: { parameters: ['temperature', 'top_p', 'top_k'], notTogether: [['temperature', 'top_p']] },
  google: { parameters: ['temperature', 'top_p', 'top_k', 'seed'], notTogether: [] },
  upstream: { parameters: SAMPLING_PARAMETERS, notTogether: [] },
};

/** An operator-listed OpenAI-compatible upstream (OpenAI, OpenRouter, vLLM, Ollama...). */
export interface OpenAICompatibleUpstream {
  baseUrl: string;
  /** Name of the environment variable holding its API key, if it needs one. */
  apiKeyEnv?: string;
  /**
   * The field the upstream takes a request's output token limit in: `max_tokens` (most
   * OpenAI-compatible servers) or `max_completion_tokens` (OpenAI, whose reasoning models refuse
   * `max_tokens`). When set, a client's limit is sent in this field whichever of the two it used;
   * unset, the client's field is kept and a default limit goes out as `max_tokens`.
   */
  tokenLimitField?: TokenLimitField;
}

export type TokenLimitField = 'max_tokens' | 'max_completion_tokens';
const TOKEN_LIMIT_FIELDS: readonly TokenLimitField[] = ['max_tokens', 'max_completion_tokens'];

export interface Catalog {
  models: readonly CatalogModel[];
  upstreams: Readonly<Record<string, OpenAICompatibleUpstream>>;
  find(id: string): CatalogModel | undefined;
}

type Fail = (where: string, problem: string) => never;

const BUILT_IN_PROVIDERS = new Set(['anthropic', 'google']);
const PRICE = /^\d{1,9}(\.\d{1,6})?$/;
const DAY = /^\d{4}-\d{2}-\d{2}$/;
/**
 * Claude's high-resolution models bill a 2576-pixel image at ~4,800 tokens, Gemini's largest tiling
 * less: a bound for every built-in model; a catalog entry may state its own.
 */
export const DEFAULT_MAX_IMAGE_TOKENS = 4_800;
const DEFAULT_FILE = new URL('./models.json', import.meta.url);

/** Loads and checks the catalog; a bad file stops start-up with a ConfigError naming MODELS_FILE. */
export function loadCatalog(file?: string): Catalog {
  const source = file ?? DEFAULT_FILE;
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(source, 'utf8'));
  } catch (error) {
    throw new ConfigError('MODELS_FILE', `could not be read as JSON (${(error as Error).message})`);
  }
  return parseCatalog(raw);
}

export function parseCatalog(raw: unknown): Catalog {
  const fail: Fail = (where, problem) => {
    throw new ConfigError('MODELS_FILE', `${where} ${problem}`);
  };
  if (!isObject(raw) || !Array.isArray(raw.models)) return fail('catalog', 'must be an object with "models"');
  const upstreams: Record<string, OpenAICompatibleUpstream> = {};
  for (const [name, value] of Object.entries(isObject(raw.upstreams) ? raw.upstreams : {})) {
    if (BUILT_IN_PROVIDERS.has(name)) fail(`upstreams.${name}`, 'shadows a built-in provider');
    if (!isObject(value) || typeof value.baseUrl !== 'string' || !/^https?:\/\//.test(value.baseUrl))
      fail(`upstreams.${name}.baseUrl`, 'must be an http(s) URL');
    const upstream = value as Record<string, unknown>;
    const tokenLimitField = upstream.tokenLimitField;
    if (tokenLimitField !== undefined && !TOKEN_LIMIT_FIELDS.includes(tokenLimitField as TokenLimitField))
      fail(`upstreams.${name}.tokenLimitField`, 'must be "max_tokens" or "max_completion_tokens"');
    upstreams[name] = {
      baseUrl: String(upstream.baseUrl).replace(/\/+$/, ''),
      apiKeyEnv: typeof upstream.apiKeyEnv === 'string' ? upstream.apiKeyEnv : undefined,
      tokenLimitField: tokenLimitField as TokenLimitField | undefined,
    };
  }
  const byId = new Map<string, CatalogModel>();
  for (const [i, entry] of (raw.models as unknown[]).entries()) {
    const at = `models[${i}]`;
    if (!isObject(entry)) return fail(at, 'must be an object');
    const text = (key: string) =>
      typeof entry[key] === 'string' && entry[key] !== ''
        ? (entry[key] as string)
        : fail(`${at}.${key}`, 'must be a non-empty string');
    const count = (key: string) =>
      Number.isSafeInteger(entry[key]) && (entry[key] as number) > 0
        ? (entry[key] as number)
        : fail(`${at}.${key}`, 'must be a positive integer');
    const id = text('id');
    const provider = text('provider');
    if (!id.startsWith(`${provider}/`)) fail(`${at}.id`, `must start with "${provider}/"`);
    if (!BUILT_IN_PROVIDERS.has(provider) && !upstreams[provider])
      fail(`${at}.provider`, `"${provider}" is neither anthropic, google nor a listed upstream`);
    if (byId.has(id)) fail(`${at}.id`, `"${id}" is listed twice`);
    const contextLength = count('contextLength');
    const maxOutputTokens = count('maxOutputTokens');
    const maxImageTokens =
      entry.maxImageTokens === undefined ? DEFAULT_MAX_IMAGE_TOKENS : count('maxImageTokens');
    // Limits the provider would refuse: every request asking for them fails upstream.
    if (maxOutputTokens > contextLength)
      fail(`${at}.maxOutputTokens`, `of "${id}" must be at most its contextLength (${contextLength})`);
    const pricing = entry.pricing;
    if (!isObject(pricing)) return fail(`${at}.pricing`, 'must be an object');
    checkPriceSheet(pricing, `${at}.pricing`, fail);
    if (pricing.longPrompt !== undefined)
      checkLongPromptTier(pricing.longPrompt, `${at}.pricing.longPrompt`, contextLength, fail);
    const optionalText = (key: string) => (entry[key] === undefined ? undefined : text(key));
    const priceCheckedAt = optionalText('priceCheckedAt');
    if (priceCheckedAt !== undefined && !isDay(priceCheckedAt))
      fail(`${at}.priceCheckedAt`, 'must be a date as YYYY-MM-DD');
    const model: CatalogModel = {
      id,
      provider,
      providerModel: text('providerModel'),
      name: text('name'),
      contextLength,
      maxOutputTokens,
      maxImageTokens,
      pricing: pricing as unknown as ModelPricing,
      sampling:
        entry.sampling === undefined
          ? DEFAULT_SAMPLING[
              BUILT_IN_PROVIDERS.has(provider) ? (provider as 'anthropic' | 'google') : 'upstream'
            ]
          : samplingRule(entry.sampling, `${at}.sampling`, fail),
      ...(priceCheckedAt !== undefined && { priceCheckedAt }),
      ...(entry.source !== undefined && { source: text('source') }),
    };
    byId.set(id, model);
  }
  const models = [...byId.values()];
  return { models, upstreams, find: (id) => byId.get(id) };
}

function checkPriceSheet(sheet: Record<string, unknown>, where: string, fail: Fail): void {
  for (const key of ['input', 'output', 'cacheRead', 'cacheWrite', 'reasoning']) {
    const price = sheet[key];
    const optional = key !== 'input' && key !== 'output';
    if (price === undefined && optional) continue;
    if (typeof price !== 'string' || !PRICE.test(price))
      fail(`${where}.${key}`, 'must be a decimal string of USD per million tokens (at most 6 decimals)');
  }
}

/** A tier whose threshold no prompt can pass is a mistake in the catalog, not a harmless extra. */
function checkLongPromptTier(tier: unknown, where: string, contextLength: number, fail: Fail): void {
  if (!isObject(tier)) fail(where, 'must be an object');
  const above = tier.aboveTokens;
  if (!Number.isSafeInteger(above) || (above as number) <= 0)
    fail(`${where}.aboveTokens`, 'must be a positive integer');
  if ((above as number) >= contextLength)
    fail(`${where}.aboveTokens`, `must be below contextLength (${contextLength}), or the tier never applies`);
  checkPriceSheet(tier, where, fail);
}

/** A rule naming a parameter twice, or one it does not take, is a mistake in the catalog. */
function samplingRule(rule: unknown, where: string, fail: Fail): SamplingRule {
  if (!isObject(rule)) return fail(where, 'must be an object with "parameters"');
  const names = (value: unknown, at: string): SamplingParameter[] => {
    if (!Array.isArray(value)) return fail(at, 'must be a list of parameter names');
    for (const name of value)
      if (!SAMPLING_PARAMETERS.includes(name))
        fail(at, `names ${JSON.stringify(name)}, not one of ${SAMPLING_PARAMETERS.join(', ')}`);
    if (new Set(value).size !== value.length) fail(at, 'names a parameter twice');
    return value;
  };
  const parameters = names(rule.parameters, `${where}.parameters`);
  const groups = rule.notTogether ?? [];
  if (!Array.isArray(groups)) return fail(`${where}.notTogether`, 'must be a list of parameter groups');
  const notTogether = groups.map((group, i) => {
    const at = `${where}.notTogether[${i}]`;
    const members = names(group, at);
    if (members.length < 2) fail(at, 'must name at least two parameters');
    const untaken = members.find((name) => !parameters.includes(name));
    if (untaken) fail(at, `names "${untaken}", which is not in ${where}.parameters`);
    return members;
  });
  return { parameters, notTogether };
}

/** A real calendar day: Date would roll 2026-02-30 over into March. */
function isDay(text: string): boolean {
  return DAY.test(text) && new Date(`${text}T00:00:00Z`).toISOString().startsWith(text);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
