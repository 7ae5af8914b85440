import type { SmartAccountsEnvironment } from '@metamask/smart-accounts-kit';
import { expect, test } from 'vitest';
import { trustedEnvironment } from '../../devkit/stack/authorize-owner.js';
import type { SessionTerms } from '../../src/client/index.js';
import { deployedEnvironment } from '../../src/payments/chain/delegation-framework.js';

const NO_OP = '0x000000000000000000000000000000000000dead';

/** Terms of a gateway naming its own (no-op) caveat enforcers for chain `chainId`. */
function termsNamingNoOpEnforcers(chainId: number): SessionTerms {
  const real = deployedEnvironment(8453);
  const environment = {
    ...real,
    caveatEnforcers: Object.fromEntries(Object.keys(real.caveatEnforcers).map((name) => [name, NO_OP])),
  } as SmartAccountsEnvironment;
  return { chainId, environment } as SessionTerms;
}

test("on a chain with a known Delegation Framework deployment, the gateway's contracts are not trusted", () => {
  const lines: string[] = [];
  const environment = trustedEnvironment(termsNamingNoOpEnforcers(8453), (line) => lines.push(line));
  // The client then compares the gateway's enforcers with these, and refuses its no-op ones.
  expect(environment).toEqual(deployedEnvironment(8453));
  expect(Object.values(environment.caveatEnforcers)).not.toContain(NO_OP);
  expect(lines).toEqual([]);
});

test('on the local chain, with no known deployment, the contracts the gateway names are used', () => {
  const terms = termsNamingNoOpEnforcers(31337);
  const lines: string[] = [];
  expect(trustedEnvironment(terms, (line) => lines.push(line))).toBe(terms.environment);
  expect(lines).toEqual([]);
});

test('on another chain with no known deployment, they are used with a warning', () => {
  const terms = termsNamingNoOpEnforcers(999_999);
  const lines: string[] = [];
  expect(trustedEnvironment(terms, (line) => lines.push(line))).toBe(terms.environment);
  expect(lines).toEqual([
    'chain 999999 has no known Delegation Framework deployment: the contracts the gateway names are used',
  ]);
});
