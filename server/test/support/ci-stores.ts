// Vitest's globalSetup. Suites that need PostgreSQL or Redis are skipped when DATABASE_URL (a
// postgres:// URL) or REDIS_URL is missing, which suits a developer's machine; under CI a
// missing variable would let the run pass without them, so there it fails the run before any test.

/**
 * What CI lacks, one phrase per variable. CI set to anything but "false" requires both stores;
 * CI unset, empty or "false" requires neither (a missing one skips its suites).
 */
export function missingStores(env: NodeJS.ProcessEnv): string[] {
  if (!env.CI || env.CI === 'false') return [];
  const missing: string[] = [];
  if (!env.DATABASE_URL) missing.push('DATABASE_URL is not set');
  else if (!env.DATABASE_URL.startsWith('postgres')) missing.push('DATABASE_URL is not a postgres:// URL');
  if (!env.REDIS_URL) missing.push('REDIS_URL is not set');
  return missing;
}

export function setup(): void {
  const missing = missingStores(process.env);
  if (missing.length === 0) return;
  throw new Error(
    `CI is set but ${missing.join(' and ')}: the PostgreSQL and Redis suites would be skipped. ` +
      'Set DATABASE_URL=postgres://… and REDIS_URL=redis://… (as .ci/run does), or unset CI to skip them.',
  );
}
