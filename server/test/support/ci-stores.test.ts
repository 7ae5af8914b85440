import { describe, expect, test } from 'vitest';
import { missingStores } from './ci-stores.js';

const postgres = 'postgres://paygate@localhost:5432/paygate';
const redis = 'redis://localhost:6379';

describe('the stores CI requires', () => {
  test.each([
    ['CI unset', {}],
    ['CI unset, stores unset or not PostgreSQL', { DATABASE_URL: 'sqlite://ledger.db' }],
    ['CI=false', { CI: 'false' }],
    ['CI empty', { CI: '' }],
  ])('%s: none', (_case, env) => {
    expect(missingStores(env)).toEqual([]);
  });

  test.each([
    ['CI=true with both set', { CI: 'true', DATABASE_URL: postgres, REDIS_URL: redis }, []],
    ['CI=1 with both set', { CI: '1', DATABASE_URL: postgres, REDIS_URL: redis }, []],
    [
      'a DATABASE_URL not naming PostgreSQL',
      { CI: 'true', DATABASE_URL: 'sqlite://ledger.db', REDIS_URL: redis },
      ['DATABASE_URL is not a postgres:// URL'],
    ],
    ['REDIS_URL missing', { CI: 'true', DATABASE_URL: postgres }, ['REDIS_URL is not set']],
    ['both missing', { CI: 'true' }, ['DATABASE_URL is not set', 'REDIS_URL is not set']],
  ])('%s', (_case, env, missing) => {
    expect(missingStores(env)).toEqual(missing);
  });
});
