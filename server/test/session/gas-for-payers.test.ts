import { describe, expect, test } from 'vitest';
import { type LocalChain, type PayerAccount, usdcBalance } from '../../devkit/chain/index.js';
import { debtOf, recordUsages } from '../../src/billing/ledger.js';
import { settlementsOf } from '../../src/billing/settlements.js';
import { createChainClient } from '../../src/payments/chain/chain-client.js';
import { createCollector } from '../../src/payments/session/collector.js';
import { completedRequest } from '../support/usage-entries.js';
import {
  type AnthropicStep,
  authorize,
  chat,
  type GatewayUnderTest,
  newPayer,
  openaiFor,
  type Simulator,
  SMALL,
  SMALL_COST_ATOMIC,
  startOwnGateway,
  withSessionStack,
} from './harness.js';

let local: LocalChain;
let anthropic: Simulator<AnthropicStep>;

withSessionStack(async (stack) => {
  ({ local, anthropic } = stack);
});

const DAY_MS = 86_400_000;

/** A collector of the gateway's database and chain that the test runs (`runOnce`): debts idle 0.3 s are due. */
function collectorOf(gateway: GatewayUnderTest) {
  return createCollector({
    store: gateway.store,
    chain: createChainClient(gateway.config.chain),
    receiptTimeoutMs: 5_000,
    withPayerLock: gateway.store.withPayerLock,
    idleMs: 300,
    intervalMs: 60_000,
    log: { warn: () => {}, error: () => {} },
  });
}

/** What the gateway's relayer sent: every transaction it sends moves its nonce. */
function relayerNonce(): Promise<number> {
  return local.publicClient.getTransactionCount({
    address: local.accounts.gateway.address,
    blockTag: 'pending',
  });
}

/** The payer owes `picoUsd` for a request completed a minute ago. */
async function owing(gateway: GatewayUnderTest, payer: PayerAccount, picoUsd: bigint): Promise<void> {
  await recordUsages(gateway.store, [
    completedRequest(payer.address, picoUsd, { createdAt: new Date(Date.now() - 60_000) }),
  ]);
}

const isDeployed = async (payer: PayerAccount) =>
  (await local.publicClient.getCode({ address: payer.address })) !== undefined;

describe('accounts authorized before they were deployed (ERC-6492): the gateway deploys only those that can pay', () => {
  test('one with a debt and no USDC: the collector sends no deployment, and says why', async () => {
    const gateway = await startOwnGateway({ local, anthropic });
    const payer = await newPayer(local, 6, { salt: 60, deploy: false, fundUsdc: 0n });
    await authorize(gateway, payer);
    await owing(gateway, payer, SMALL_COST_ATOMIC * 1_000_000n);
    const collector = collectorOf(gateway);
    const nonceBefore = await relayerNonce();

    const run = await collector.runOnce();

    expect(run.failed).toEqual([payer.address]);
    expect(await relayerNonce()).toBe(nonceBefore);
    expect(await isDeployed(payer)).toBe(false);
    expect(collector.state().failing[0]?.lastError).toMatch(/holds 0 and owes 66 USDC atomic units/);
  });

  test('one funded but owing less than its deployment would cost: the collector leaves it; its next request deploys it and pays', async () => {
    const gateway = await startOwnGateway({ local, anthropic });
    const payer = await newPayer(local, 6, { salt: 61, deploy: false });
    const session = await authorize(gateway, payer);
    await owing(gateway, payer, SMALL_COST_ATOMIC * 1_000_000n);
    const collector = collectorOf(gateway);
    const nonceBefore = await relayerNonce();

    const run = await collector.runOnce();

    expect(run.failed).toEqual([payer.address]);
    expect(await relayerNonce()).toBe(nonceBefore);
    expect(await isDeployed(payer)).toBe(false);
    expect(collector.state().failing[0]?.lastError).toMatch(/below what deploying it may cost the gateway/);

    anthropic.script({ text: 'paid first', usage: SMALL });
    const next = await chat(openaiFor(gateway, session.token));
    expect(next.headers.get('x-settlement-amount')).toBe(SMALL_COST_ATOMIC.toString());
    expect(await isDeployed(payer)).toBe(true);
  });

  test('one whose USDC covers a debt above its deployment cost is deployed and settled by the collector', async () => {
    const gateway = await startOwnGateway({ local, anthropic });
    const payer = await newPayer(local, 6, { salt: 62, deploy: false, fundUsdc: 10_000_000n });
    await authorize(gateway, payer, { cap: 10_000_000n });
    // $5: above the ~225,000 gas of a deployment at anvil's ~1 gwei with ETH taken at $10,000.
    await owing(gateway, payer, 5_000_000n * 1_000_000n);
    const before = await usdcBalance(local, payer.address);

    const run = await collectorOf(gateway).runOnce();

    expect(run.collected).toEqual([payer.address]);
    expect(await isDeployed(payer)).toBe(true);
    expect(await usdcBalance(local, payer.address)).toBe(before - 5_000_000n);
    const [settlement] = await settlementsOf(gateway.store, payer.address);
    expect(settlement).toMatchObject({ status: 'confirmed', amountAtomic: 5_000_000n });
    expect((await debtOf(gateway.store, payer.address)).owedPicoUsd).toBe(0n);
  });
});

describe('sessions that never paid are pruned by the collector', () => {
  test('a never-used session is deleted once expired or unused for 7 days; one with records stays', async () => {
    const gateway = await startOwnGateway({ local, anthropic });
    await authorize(gateway, await newPayer(local, 5, { salt: 70 }), { expiresInSeconds: 86_400 });
    const unused = await authorize(gateway, await newPayer(local, 5, { salt: 71 }), {
      expiresInSeconds: 20 * 86_400,
    });
    const usedPayer = await newPayer(local, 5, { salt: 72 });
    const used = await authorize(gateway, usedPayer, { expiresInSeconds: 86_400 });
    anthropic.script({ text: 'served, not paid yet', usage: SMALL });
    await chat(openaiFor(gateway, used.token));
    const collector = collectorOf(gateway);
    const sessionIds = async () =>
      (await gateway.store.db.selectFrom('sessions').select('id').execute()).map((row) => row.id).sort();
    const now = Date.now();

    expect((await collector.runOnce(new Date(now))).pruned).toBe(0);
    expect((await collector.runOnce(new Date(now + 2 * DAY_MS))).pruned).toBe(1);
    expect(await sessionIds()).toEqual([unused.sessionId, used.sessionId].sort());
    expect((await collector.runOnce(new Date(now + 8 * DAY_MS))).pruned).toBe(1);
    expect(await sessionIds()).toEqual([used.sessionId]);

    // Its token names a session that is gone.
    const refused = await chat(openaiFor(gateway, unused.token)).catch((error: unknown) => error);
    expect(refused).toMatchObject({ status: 401 });
  });
});
