import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root, whatever directory a script runs from (`npm start` runs in server/). */
export const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));

/** Where the local stack keeps its database and `local-stack.json` by default (git-ignored). */
export const defaultDataDir = join(repoRoot, 'data');

/** The facts file of a stack whose data lives in `dataDir`. */
export function stackFactsPath(dataDir = defaultDataDir): string {
  return join(dataDir, 'local-stack.json');
}
