import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { describe, expect, test, vi } from 'vitest';
import { emptyUsdc, mintUsdc, usdcBalance } from '../../devkit/chain/index.js';
import { debtOf, recordUsages } from '../../src/billing/ledger.js';
import { markSettlementSent, openSettlement, settlementsOf } from '../../src/billing/settlements.js';
import { createChainClient } from '../../src/payments/chain/chain-client.js';
import { type CollectorOptions, createCollector } from '../../src/payments/session/collector.js';
import { settlementBatcher } from '../../src/payments/session/settlement-batch.js';
import { completedRequest } from '../support/usage-entries.js';
import {
  authorize,
  chat,
  type GatewayUnderTest,
  newPayer,
  openaiFor,
  SMALL,
  SMALL_COST_ATOMIC,
  startOwnGateway,
  useSessionGateway,
} from './harness.js';

const stack = useSessionGateway({
  limits: { collectorIdleMs: 300, collectorIntervalMs: 100 },
  // The real /health checks: the collector's among them.
  parts: {},
});

interface CollectorHealth {
  status: string;
  state: {
    running: boolean;
    collected: number;
    failing: Array<{ payer: string; failures: number; lastError: string }>;
  };
}

async function collectorHealth(): Promise<CollectorHealth> {
  const res = await fetch(`${stack.gateway.url}/health`);
  const body = (await res.json()) as { data: { dependencies: { collector: CollectorHealth } } };
  return body.data.dependencies.collector;
}

const waitLong = { timeout: 20_000, interval: 100 };

/** A payer (kit key `owner`) owing one answered request it cannot pay: it emptied its account since. */
async function payerOwingUnpaid(on: GatewayUnderTest, owner: number) {
  const payer = await newPayer(stack.local, owner);
  const session = await authorize(on, payer);
  stack.anthropic.script({ text: 'unpaid', usage: SMALL });
  await chat(openaiFor(on, session.token));
  await emptyUsdc(stack.local, payer.address);
  return { payer, session };
}

/**
 * A collector of the gateway's database and chain, run by the test (`runOnce`): debts idle 0.3 s
 * (or `idleMs`) are due; runs are a minute apart, receipts awaited 5 s.
 */
function collectorOf(
  of: GatewayUnderTest,
  options: Partial<Pick<CollectorOptions, 'backoffMs' | 'batchSize' | 'idleMs'>> & { batched?: boolean },
) {
  const chain = createChainClient(of.config.chain);
  return createCollector({
    store: of.store,
    chain,
    // As the gateway's: the settlements of payers falling due together share transactions.
    batcher: options.batched ? settlementBatcher({ store: of.store, chain, maxWaitMs: 5_000 }) : undefined,
    receiptTimeoutMs: 5_000,
    withPayerLock: of.store.withPayerLock,
    idleMs: 300,
    intervalMs: 60_000,
    log: { warn: () => {}, error: () => {} },
    ...options,
  });
}

test('the last request of a payer who went quiet is paid by the collector', async () => {
  const payer = await newPayer(stack.local, 0);
  const session = await authorize(stack.gateway, payer);
  const [payerBefore, treasuryBefore] = await Promise.all([
    usdcBalance(stack.local, payer.address),
    usdcBalance(stack.local, stack.local.accounts.treasury.address),
  ]);
  stack.anthropic.script({ text: 'last words', usage: SMALL });
  const answer = await chat(openaiFor(stack.gateway, session.token));
  expect(answer.headers.get('x-settlement-tx')).toBeNull();

  await vi.waitFor(async () => {
    const [settlement] = await settlementsOf(stack.gateway.store, payer.address);
    expect(settlement).toMatchObject({ status: 'confirmed', amountAtomic: SMALL_COST_ATOMIC });
  }, waitLong);
  expect(await usdcBalance(stack.local, payer.address)).toBe(payerBefore - SMALL_COST_ATOMIC);
  expect(await usdcBalance(stack.local, stack.local.accounts.treasury.address)).toBe(
    treasuryBefore + SMALL_COST_ATOMIC,
  );
  expect((await debtOf(stack.gateway.store, payer.address)).owedPicoUsd).toBe(0n);
  const health = await collectorHealth();
  expect(health.status).toBe('up');
  expect(health.state.running).toBe(true);
  expect(health.state.collected).toBeGreaterThanOrEqual(1);
});

test('the idle debts of several payers collected in one run share transactions', async () => {
  const quiet = await startOwnGateway(stack);
  const payers = await Promise.all([0, 1, 2, 3].map((owner) => newPayer(stack.local, owner, { salt: 40 })));
  for (const payer of payers) {
    const session = await authorize(quiet, payer);
    stack.anthropic.script({ text: 'last words', usage: SMALL });
    expect((await chat(openaiFor(quiet, session.token))).status).toBe(200);
  }
  const treasuryBefore = await usdcBalance(stack.local, stack.local.accounts.treasury.address);

  const run = await collectorOf(quiet, { batched: true }).runOnce(new Date(Date.now() + 1_000));

  const addresses = payers.map((payer) => payer.address);
  expect(run.collected.toSorted()).toEqual(addresses.toSorted());
  const settlements = await Promise.all(
    addresses.map(async (address) => (await settlementsOf(quiet.store, address))[0]),
  );
  for (const settlement of settlements)
    expect(settlement).toMatchObject({ status: 'confirmed', amountAtomic: SMALL_COST_ATOMIC });
  // The first goes out at once; those falling due while it is mined go together behind it.
  expect(new Set(settlements.map((settlement) => settlement?.txHash)).size).toBeLessThan(payers.length);
  expect(await usdcBalance(stack.local, stack.local.accounts.treasury.address)).toBe(
    treasuryBefore + 4n * SMALL_COST_ATOMIC,
  );
});

test("a debt the newest session's cap cannot pay is collected through an older session of the payer", async () => {
  const quiet = await startOwnGateway(stack);
  const payer = await newPayer(stack.local, 3, { salt: 23 });
  const older = await authorize(quiet, payer);
  stack.anthropic.script({ text: 'last words', usage: SMALL });
  expect((await chat(openaiFor(quiet, older.token))).status).toBe(200);
  // Signed since, with a cap below the debt.
  await authorize(quiet, payer, { cap: 10n });
  const before = await usdcBalance(stack.local, payer.address);

  const run = await collectorOf(quiet, {}).runOnce(new Date(Date.now() + 1_000));

  expect(run).toMatchObject({ collected: [payer.address], failed: [] });
  const [paid, refused] = await settlementsOf(quiet.store, payer.address);
  expect(paid).toMatchObject({ status: 'confirmed', amountAtomic: SMALL_COST_ATOMIC });
  expect(refused).toMatchObject({ status: 'failed', amountAtomic: SMALL_COST_ATOMIC });
  expect(await usdcBalance(stack.local, payer.address)).toBe(before - SMALL_COST_ATOMIC);
  expect((await debtOf(quiet.store, payer.address)).owedAtomic).toBe(0n);
});

test('a collection that fails is retried, shown in /health and as failed settlements in GraphQL', async () => {
  const { payer, session } = await payerOwingUnpaid(stack.gateway, 1);

  await vi.waitFor(async () => {
    const failing = (await collectorHealth()).state.failing.find((entry) => entry.payer === payer.address);
    expect(failing?.failures).toBeGreaterThanOrEqual(2);
    expect(failing?.lastError).toMatch(/less USDC than it owes/);
  }, waitLong);

  const res = await fetch(`${stack.gateway.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${session.token}` },
    body: JSON.stringify({
      query: '{ settlements(status: failed) { edges { node { status amountAtomic failureReason } } } }',
    }),
  });
  const { data } = (await res.json()) as {
    data: {
      settlements: {
        edges: Array<{ node: { status: string; amountAtomic: string; failureReason: string } }>;
      };
    };
  };
  expect(data.settlements.edges.length).toBeGreaterThanOrEqual(2);
  expect(data.settlements.edges[0]?.node).toMatchObject({ status: 'failed', amountAtomic: '66' });
  expect(data.settlements.edges[0]?.node.failureReason).toMatch(/less USDC than it owes/);
  // Nothing moved, and the debt is still owed.
  expect(await usdcBalance(stack.local, payer.address)).toBe(0n);
  expect((await debtOf(stack.gateway.store, payer.address)).owedAtomic).toBe(SMALL_COST_ATOMIC);
});

test('a failing payer is retried after 1, 2, 4 ... backoff periods, not on every run', async () => {
  // A gateway whose own collector stays quiet, and a collector driven with explicit clock readings.
  const quiet = await startOwnGateway(stack);
  const { payer } = await payerOwingUnpaid(quiet, 2);
  const collector = collectorOf(quiet, { backoffMs: 1_000 });
  const start = Date.now() + 1_000;
  const attempted = async (offsetMs: number) => {
    const run = await collector.runOnce(new Date(start + offsetMs));
    return run.failed.includes(payer.address);
  };
  expect(await attempted(0)).toBe(true);
  expect(await attempted(999)).toBe(false);
  expect(await attempted(1_000)).toBe(true);
  expect(await attempted(2_999)).toBe(false);
  expect(await attempted(3_000)).toBe(true);
  expect(await attempted(6_999)).toBe(false);
  expect(await attempted(7_000)).toBe(true);
  expect(collector.state().failing.find((entry) => entry.payer === payer.address)?.failures).toBe(4);
});

test('a failing payer that paid its debt with a request leaves the failure list at the end of the next pass', async () => {
  const quiet = await startOwnGateway(stack);
  const { payer, session } = await payerOwingUnpaid(quiet, 4);
  const collector = collectorOf(quiet, { backoffMs: 1_000 });
  expect((await collector.runOnce(new Date(Date.now() + 1_000))).failed).toEqual([payer.address]);
  expect(collector.state().failing.map((entry) => entry.payer)).toEqual([payer.address]);

  await mintUsdc(stack.local, payer.address, 1_000_000n);
  stack.anthropic.script({ text: 'paid', usage: SMALL });
  const paying = await chat(openaiFor(quiet, session.token));
  expect(paying.headers.get('x-settlement-amount')).toBe(SMALL_COST_ATOMIC.toString());
  // Its new debt is not idle yet: the pass over the idle debtors no longer meets it.
  await collector.runOnce(new Date());
  expect(collector.state().failing).toEqual([]);
});

test('a failing payer whose settlement is in flight stays on the failure list, though not an idle debtor then', async () => {
  const quiet = await startOwnGateway(stack);
  const { payer } = await payerOwingUnpaid(quiet, 5);
  const collector = collectorOf(quiet, { backoffMs: 60_000 });
  const later = new Date(Date.now() + 1_000);
  expect((await collector.runOnce(later)).failed).toEqual([payer.address]);
  expect(await openSettlement(quiet.store, payer.address, 'session')).toMatchObject({ status: 'pending' });
  await collector.runOnce(later);
  expect(collector.state().failing.map((entry) => entry.payer)).toEqual([payer.address]);
});

test('a settlement the node fails on does not keep idle debts from being collected in the same run', async () => {
  const quiet = await startOwnGateway(stack);
  // In flight with a transaction hash the node refuses to look up.
  const stuck = privateKeyToAddress(generatePrivateKey());
  await recordUsages(quiet.store, [completedRequest(stuck, 66_000_000n)]);
  const inFlight = await openSettlement(quiet.store, stuck, 'session');
  await markSettlementSent(quiet.store, inFlight!.id, '0xabc');
  const payer = await newPayer(stack.local, 6);
  const session = await authorize(quiet, payer);
  stack.anthropic.script({ text: 'last words', usage: SMALL });
  await chat(openaiFor(quiet, session.token));
  const collector = collectorOf(quiet, {});

  const run = await collector.runOnce(new Date(Date.now() + 10_000));
  expect(run.collected).toEqual([payer.address]);
  expect(collector.state().lastRunError).not.toBeNull();
  const [settlement] = await settlementsOf(quiet.store, payer.address);
  expect(settlement).toMatchObject({ status: 'confirmed', amountAtomic: SMALL_COST_ATOMIC });
});

test('payers that can never be collected, more than a batch of them, do not keep another from being collected', async () => {
  const quiet = await startOwnGateway(stack);
  // Idle longer than anyone else, with no session left to collect with.
  const longGone = Array.from({ length: 100 }, () => privateKeyToAddress(generatePrivateKey()));
  const anHourAgo = new Date(Date.now() - 3_600_000);
  await recordUsages(
    quiet.store,
    longGone.map((payer) => completedRequest(payer, 66_000_000n, { createdAt: anHourAgo })),
  );
  const payer = await newPayer(stack.local, 3);
  const session = await authorize(quiet, payer);
  stack.anthropic.script({ text: 'last words', usage: SMALL });
  await chat(openaiFor(quiet, session.token));
  const payerBefore = await usdcBalance(stack.local, payer.address);
  const collector = collectorOf(quiet, { batchSize: 10 });

  const start = Date.now() + 1_000;
  const runs = [];
  // Enough runs of 10 to reach each of the 101 idle payers once.
  for (let i = 0; i < 11; i++) runs.push(await collector.runOnce(new Date(start + i * 1_000)));

  expect(runs.flatMap((run) => run.collected)).toEqual([payer.address]);
  expect(new Set(runs.flatMap((run) => run.failed))).toEqual(new Set(longGone));
  for (const run of runs) expect(run.collected.length + run.failed.length).toBeLessThanOrEqual(10);
  const [settlement] = await settlementsOf(quiet.store, payer.address);
  expect(settlement).toMatchObject({ status: 'confirmed', amountAtomic: SMALL_COST_ATOMIC });
  expect(await usdcBalance(stack.local, payer.address)).toBe(payerBefore - SMALL_COST_ATOMIC);
  expect(collector.state().failing).toHaveLength(100);
});

describe('debts a session would outlive are collected without waiting for the idle time', () => {
  // Idle 15 minutes (the default), runs a minute apart, receipts awaited 5 s: a debt is due at once
  // when the payer's sessions all end within 16 minutes 5 seconds.
  const FIFTEEN_MINUTES = 15 * 60_000;

  /**
   * A payer with a session expiring in `expiresInSeconds`, owing one answered request; `emptied`:
   * it emptied its account while the request was served.
   */
  async function owingOne(
    on: GatewayUnderTest,
    owner: number,
    salt: number,
    expiresInSeconds: number,
    emptied = false,
  ) {
    const payer = await newPayer(stack.local, owner, { salt });
    const session = await authorize(on, payer, { expiresInSeconds });
    stack.anthropic.script({ text: 'last words', usage: SMALL, delayMs: emptied ? 1_000 : 0 });
    const calls = stack.anthropic.log.length;
    const answer = chat(openaiFor(on, session.token));
    if (emptied) {
      await vi.waitFor(() => expect(stack.anthropic.log.length).toBe(calls + 1), waitLong);
      await emptyUsdc(stack.local, payer.address);
    }
    expect((await answer).status).toBe(200);
    return { payer, session, balanceBefore: await usdcBalance(stack.local, payer.address) };
  }

  test('the debt of a session expiring in 10 minutes, unpaid on completion, is collected at once; one of a lasting session waits', async () => {
    const quiet = await startOwnGateway(stack);
    // Settled as its request completes (its session ends soon), when the account held nothing.
    const ending = await owingOne(quiet, 0, 21, 600, true);
    await vi.waitFor(async () => {
      const [settlement] = await settlementsOf(quiet.store, ending.payer.address);
      expect(settlement?.status).toBe('failed');
    }, waitLong);
    await mintUsdc(stack.local, ending.payer.address, 1_000_000n);
    const endingBefore = await usdcBalance(stack.local, ending.payer.address);
    const lasting = await owingOne(quiet, 1, 21, 86_400);
    const collector = collectorOf(quiet, { idleMs: FIFTEEN_MINUTES });

    const run = await collector.runOnce(new Date());

    expect(run.collected).toEqual([ending.payer.address]);
    expect(run.failed).toEqual([]);
    const [settlement] = await settlementsOf(quiet.store, ending.payer.address);
    expect(settlement).toMatchObject({ status: 'confirmed', amountAtomic: SMALL_COST_ATOMIC });
    expect(await usdcBalance(stack.local, ending.payer.address)).toBe(endingBefore - SMALL_COST_ATOMIC);
    expect((await debtOf(quiet.store, ending.payer.address)).owedAtomic).toBe(0n);
    // Its next request pays it, or the collector once it is idle.
    expect(await usdcBalance(stack.local, lasting.payer.address)).toBe(lasting.balanceBefore);
    expect((await debtOf(quiet.store, lasting.payer.address)).owedAtomic).toBe(SMALL_COST_ATOMIC);
  });

  test('the debt a revocation reports is paid at once, through the revoked delegation', async () => {
    const quiet = await startOwnGateway(stack);
    const { payer, session, balanceBefore } = await owingOne(quiet, 2, 21, 86_400);
    const revoked = await fetch(`${quiet.url}/v1/authorize`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${session.token}` },
    });
    expect(((await revoked.json()) as { data: unknown }).data).toMatchObject({
      revoked: true,
      owedAtomic: SMALL_COST_ATOMIC.toString(),
    });
    const collector = collectorOf(quiet, { idleMs: FIFTEEN_MINUTES });

    expect((await collector.runOnce(new Date())).collected).toEqual([payer.address]);
    const [settlement] = await settlementsOf(quiet.store, payer.address);
    expect(settlement).toMatchObject({ status: 'confirmed', amountAtomic: SMALL_COST_ATOMIC });
    expect(await usdcBalance(stack.local, payer.address)).toBe(balanceBefore - SMALL_COST_ATOMIC);
    expect((await debtOf(quiet.store, payer.address)).owedAtomic).toBe(0n);
  });
});

describe('a request completed near the end of its session', () => {
  test("is paid at once: the collector's next run would come after the session's delegation can pay", async () => {
    // SETTLE_ON_COMPLETION is off, and the gateway's collector ran at start-up and runs again in an
    // hour: after the session's end, when its delegation no longer pays.
    const quiet = await startOwnGateway(stack);
    const ending = await newPayer(stack.local, 0, { salt: 31 });
    const lasting = await newPayer(stack.local, 1, { salt: 31 });
    const endingSession = await authorize(quiet, ending, { expiresInSeconds: 120 });
    const lastingSession = await authorize(quiet, lasting);
    const [endingBefore, lastingBefore] = await Promise.all([
      usdcBalance(stack.local, ending.address),
      usdcBalance(stack.local, lasting.address),
    ]);

    stack.anthropic.script({ text: 'last words', usage: SMALL }, { text: 'more to come', usage: SMALL });
    const last = await chat(openaiFor(quiet, endingSession.token));
    expect((await chat(openaiFor(quiet, lastingSession.token))).status).toBe(200);
    // Nothing was owed when it arrived: its own debt is paid after its answer, with no further request.
    expect(last.headers.get('x-settlement-tx')).toBeNull();

    await vi.waitFor(async () => {
      const [settlement] = await settlementsOf(quiet.store, ending.address);
      expect(settlement).toMatchObject({ status: 'confirmed', amountAtomic: SMALL_COST_ATOMIC });
    }, waitLong);
    expect(await usdcBalance(stack.local, ending.address)).toBe(endingBefore - SMALL_COST_ATOMIC);
    expect((await debtOf(quiet.store, ending.address)).owedAtomic).toBe(0n);
    // Far from its session's end, a debt waits for the payer's next request (or the collector), as before.
    expect(await settlementsOf(quiet.store, lasting.address)).toEqual([]);
    expect(await usdcBalance(stack.local, lasting.address)).toBe(lastingBefore);
    expect((await debtOf(quiet.store, lasting.address)).owedAtomic).toBe(SMALL_COST_ATOMIC);
    // The collector's first run after the session's end finds nothing left that it could not pay.
    const afterEnd = new Date(Date.parse(endingSession.expiresAt) + 1_000);
    expect(await collectorOf(quiet, {}).runOnce(afterEnd)).toMatchObject({ failed: [] });
  });
});
