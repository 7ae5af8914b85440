import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Catalog, loadCatalog, parseCatalog } from '../../src/catalog/catalog.js';

/**
 * Earlier Claude and Gemini models at the list prices they had, listed as an operator would: the
 * payment suites' amounts are computed at these prices (so a price update of the shipped catalog
 * does not move them), and the translation suites test the rules of their generation (Claude 4.5
 * takes temperature or top_p, not both, the catalog's default for Anthropic; Gemini 2.5 thinks to
 * a budget).
 */
export const EARLIER_MODELS = (
  [
    [
      'anthropic',
      'claude-sonnet-4.5',
      200_000,
      64_000,
      { input: '3', output: '15', cacheRead: '0.30', cacheWrite: '3.75' },
    ],
    [
      'anthropic',
      'claude-opus-4.5',
      200_000,
      64_000,
      { input: '5', output: '25', cacheRead: '0.50', cacheWrite: '6.25' },
    ],
    [
      'anthropic',
      'claude-haiku-4.5',
      200_000,
      64_000,
      { input: '1', output: '5', cacheRead: '0.10', cacheWrite: '1.25' },
    ],
    [
      'google',
      'gemini-2.5-pro',
      1_048_576,
      65_536,
      {
        input: '1.25',
        output: '10',
        cacheRead: '0.125',
        longPrompt: { aboveTokens: 200_000, input: '2.50', output: '15', cacheRead: '0.25' },
      },
    ],
    ['google', 'gemini-2.5-flash', 1_048_576, 65_536, { input: '0.30', output: '2.50', cacheRead: '0.03' }],
    [
      'google',
      'gemini-2.5-flash-lite',
      1_048_576,
      65_536,
      { input: '0.10', output: '0.40', cacheRead: '0.01' },
    ],
  ] as const
).map(([provider, name, contextLength, maxOutputTokens, pricing]) => ({
  id: `${provider}/${name}`,
  provider,
  // Anthropic's ids write the version with a dash (claude-sonnet-4-5), Google's with a dot.
  providerModel: provider === 'anthropic' ? name.replace('.', '-') : name,
  name,
  contextLength,
  maxOutputTokens,
  pricing,
}));

/** The shipped catalog and the earlier models, `extra` entries (and upstreams) added. */
export function testCatalog(extra: { upstreams?: object; models?: object[] } = {}): Catalog {
  return parseCatalog({
    upstreams: extra.upstreams ?? {},
    models: [...loadCatalog().models, ...EARLIER_MODELS, ...(extra.models ?? [])],
  });
}

/**
 * The test catalog as a MODELS_FILE, which `testConfig` names: every gateway a test builds or
 * spawns serves the shipped models and the earlier ones.
 */
export const TEST_MODELS_FILE = (() => {
  const shipped = JSON.parse(readFileSync(new URL('../../src/catalog/models.json', import.meta.url), 'utf8'));
  const file = join(mkdtempSync(join(tmpdir(), 'paygate-catalog-')), 'models.json');
  writeFileSync(file, JSON.stringify({ ...shipped, models: [...shipped.models, ...EARLIER_MODELS] }));
  return file;
})();
