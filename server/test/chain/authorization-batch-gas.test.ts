import type { Address } from 'viem';
import { afterAll, beforeAll, expect, test } from 'vitest';
import {
  createLocalChain,
  createLocalWalletClient,
  type LocalChain,
  type LocalWalletClient,
  mintUsdc,
  usdcBalance,
} from '../../devkit/chain/index.js';
import { settleFreshAuthorizations } from './authorizations.js';

// The gas of x402 `exact` settlements (fresh EOAs' EIP-3009 authorizations) as the gateway's relayer
// sends them: one alone to the token, several in one Multicall3 `aggregate3`. Read from the receipts,
// deterministic on anvil; a batch is held to a ceiling per payer and to costing less than one alone.

/**
 * Per payer, 5 and 12 payers in one transaction; a few hundred gas above the measured values (random
 * keys, nonces and signatures change the calldata's cost slightly).
 */
const CEILING = { five: 51_500n, twelve: 48_000n };
const AMOUNT = 1_234n;

let local: LocalChain;
let relayer: LocalWalletClient;
let treasury: Address;

beforeAll(async () => {
  local = await createLocalChain();
  relayer = createLocalWalletClient(local.chain, local.accounts.gateway.privateKey);
  treasury = local.accounts.treasury.address;
  // Every settlement below finds the treasury holding USDC, as it does in service.
  await mintUsdc(local, treasury, 1n);
});
afterAll(() => local?.stop());

/** `payers` settled in one transaction: the gas per payer, once every payer's USDC is at the treasury. */
async function gasPerPayer(payers: number): Promise<bigint> {
  const before = await usdcBalance(local, treasury);
  const { receipt } = await settleFreshAuthorizations(local, relayer, payers, treasury, AMOUNT);
  expect(await usdcBalance(local, treasury)).toBe(before + BigInt(payers) * AMOUNT);
  return receipt.gasUsed / BigInt(payers);
}

test('x402 settlements of 5 and of 12 payers in one aggregate3 each cost less than one sent alone, within the ceiling', async () => {
  const alone = await gasPerPayer(1);
  const five = await gasPerPayer(5);
  const twelve = await gasPerPayer(12);
  console.log(`x402 gas per payer settlement: alone ${alone}, 5 in one aggregate3 ${five}, 12 ${twelve}`);

  expect(five).toBeLessThan(alone);
  expect(twelve).toBeLessThan(five);
  expect(five).toBeLessThanOrEqual(CEILING.five);
  expect(twelve).toBeLessThanOrEqual(CEILING.twelve);
});
