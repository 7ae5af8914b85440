import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

interface CatalogFile {
  upstreams?: Record<string, { baseUrl: string; apiKeyEnv?: string }>;
  models: Array<{ id: string; provider: string }>;
}

const SHIPPED_CATALOG = new URL('../../src/catalog/models.json', import.meta.url);

/** Served through the OpenAI-compatible simulator, so the local stack exercises that adapter too. */
const LOCAL_OPENAI_MODEL = {
  id: 'openai/gpt-4o-mini',
  provider: 'openai',
  providerModel: 'gpt-4o-mini',
  name: 'GPT-4o mini (simulated)',
  contextLength: 128000,
  maxOutputTokens: 16384,
  pricing: { input: '0.15', output: '0.60', cacheRead: '0.075' },
};

/**
 * Writes the local stack's catalog: the shipped one, with every OpenAI-compatible upstream pointed at the simulator,
 * plus an `openai` upstream and model when the shipped catalog has none. Returns the file's path (for MODELS_FILE).
 */
export async function writeLocalCatalog(dataDir: string, openAICompatibleUrl: string): Promise<string> {
  const shipped = JSON.parse(await readFile(SHIPPED_CATALOG, 'utf8')) as CatalogFile;
  const upstreams = Object.fromEntries(
    Object.keys(shipped.upstreams ?? {}).map((name) => [name, { baseUrl: openAICompatibleUrl }]),
  );
  upstreams.openai = { baseUrl: openAICompatibleUrl };
  const models = shipped.models.some((model) => model.provider === 'openai')
    ? shipped.models
    : [...shipped.models, LOCAL_OPENAI_MODEL];
  const path = join(dataDir, 'local-stack-models.json');
  await writeFile(path, `${JSON.stringify({ ...shipped, upstreams, models }, null, 2)}\n`);
  return path;
}
