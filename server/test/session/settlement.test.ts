import { SimpleFactory } from '@metamask/delegation-abis';
import { contracts } from '@metamask/smart-accounts-kit';
import {
  type Address,
  encodeFunctionData,
  getAddress,
  type Hash,
  type Hex,
  pad,
  parseErc6492Signature,
  parseEventLogs,
  serializeErc6492Signature,
} from 'viem';
import { describe, expect, test } from 'vitest';
import { emptyUsdc, type PayerAccount, testUsdcAbi, usdcBalance } from '../../devkit/chain/index.js';
import { artifact as gasHungryDelegator } from '../../devkit/contracts/artifacts/GasHungryDelegator.js';
import { artifact as inertDelegator } from '../../devkit/contracts/artifacts/InertDelegator.js';
import type { ContractArtifact } from '../../devkit/contracts/compile.js';
import { debtOf, recordUsage } from '../../src/billing/ledger.js';
import { type Settlement, settlementsOf } from '../../src/billing/settlements.js';
import type { AuthorizedSession } from '../../src/client/index.js';
import { completedRequest } from '../support/usage-entries.js';
import {
  authorize,
  chat,
  MODEL,
  newPayer,
  ODD,
  ODD_COST_PICO,
  openaiFor,
  SMALL,
  SMALL_COST_ATOMIC,
  useSessionGateway,
} from './harness.js';

const stack = useSessionGateway({ limits: { maxInFlightPerPayer: 2 } });

const balance = (address: Address) => usdcBalance(stack.local, address);

/**
 * A chat request sent by fetch, for the answers the openai client turns into exceptions. Its 2 output
 * tokens may cost 33 units: within what the 100-unit caps below have left, so the chain refuses them.
 */
async function rawChat(token: string) {
  const res = await fetch(`${stack.gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }),
  });
  return {
    status: res.status,
    headers: res.headers,
    body: (await res.json()) as { error: Record<string, unknown> },
  };
}

async function newSession(owner: number, options: Parameters<typeof newPayer>[2] & { cap?: bigint } = {}) {
  const payer = await newPayer(stack.local, owner, options);
  const session = await authorize(stack.gateway, payer, { cap: options.cap });
  return { payer, session, client: openaiFor(stack.gateway, session.token) };
}

/** The payer's newest settlement. */
async function lastSettlement(payer: Address): Promise<Settlement> {
  const [settlement] = await settlementsOf(stack.gateway.store, payer, { limit: 1 });
  if (!settlement) throw new Error(`no settlement of ${payer}`);
  return settlement;
}

/** A contract of the devkit, deployed. */
async function deployed(contract: ContractArtifact, args: readonly unknown[]): Promise<Address> {
  const hash = await stack.local.deployer.deployContract({
    abi: contract.abi,
    bytecode: contract.bytecode,
    args,
  });
  return (await stack.local.publicClient.waitForTransactionReceipt({ hash })).contractAddress as Address;
}

/** What an upgrade by the account's owner does: its ERC-1967 proxy now runs `implementation`. */
async function upgradeTo(account: Address, implementation: Address): Promise<void> {
  await stack.local.testClient.setStorageAt({
    address: account,
    index: '0x360894a13ba1a3210667c828492db98dca3e2076cc3735a920a3ca505d382bbc',
    value: pad(implementation, { size: 32 }),
  });
}

/** The USDC transfers a transaction made. */
async function transfersIn(hash: Hash) {
  const receipt = await stack.local.publicClient.getTransactionReceipt({ hash });
  expect(receipt.status).toBe('success');
  const logs = parseEventLogs({ abi: testUsdcAbi, logs: receipt.logs, eventName: 'Transfer' });
  return {
    receipt,
    transfers: logs.map(({ args }) => args as { from: Address; to: Address; value: bigint }),
  };
}

describe('the ordering rule with the official openai client', () => {
  test('the first request moves nothing; request N moves exactly what N-1 cost, carry included', async () => {
    const { payer, client } = await newSession(0);
    // 3.3, 3.3 and 66 units: request 2 pays 4 (0.7 carried), request 3 pays 3 (2.6 owed), request 4 pays 66 (65.6 owed).
    stack.anthropic.script(
      { text: 'one', usage: ODD },
      { text: 'two', usage: ODD },
      { text: 'three', usage: SMALL },
      { text: 'four', usage: SMALL },
    );
    const expectedAmounts = [4n, 3n, 66n];

    const [payerBefore, treasuryBefore] = await Promise.all([
      balance(payer.address),
      balance(stack.treasury),
    ]);
    const first = await chat(client);
    expect(first.status).toBe(200);
    expect(first.headers.get('x-settlement-tx')).toBeNull();
    expect(await balance(payer.address)).toBe(payerBefore);
    expect(await balance(stack.treasury)).toBe(treasuryBefore);
    expect((await debtOf(stack.gateway.store, payer.address)).unpaidPicoUsd).toBe(ODD_COST_PICO);

    let paid = 0n;
    for (const expected of expectedAmounts) {
      const owedBefore = await debtOf(stack.gateway.store, payer.address);
      const logIndex = stack.anthropic.log.length;
      const answer = await chat(client);
      expect(answer.status).toBe(200);

      const settlement = await lastSettlement(payer.address);
      expect(settlement).toMatchObject({ status: 'confirmed', rail: 'session', amountAtomic: expected });
      // amount = ceil((unpaid - credit) / 1e6): what the ledger owed just before.
      expect(settlement.amountAtomic).toBe(owedBefore.owedAtomic);
      expect(settlement.recordsTotalPicoUsd - settlement.creditBeforePicoUsd).toBe(owedBefore.owedPicoUsd);
      expect(answer.headers.get('x-settlement-amount')).toBe(expected.toString());
      expect(answer.headers.get('x-settlement-tx')).toBe(settlement.txHash);
      expect(answer.headers.get('x-settlement-id')).toBe(settlement.id);

      const { receipt, transfers } = await transfersIn(settlement.txHash as Hash);
      expect(transfers).toEqual([{ from: payer.address, to: stack.treasury, value: expected }]);
      paid += expected;
      expect(await balance(payer.address)).toBe(payerBefore - paid);
      expect(await balance(stack.treasury)).toBe(treasuryBefore + paid);

      // The provider saw request N only after N-1's payment was mined and recorded.
      const block = await stack.local.publicClient.getBlock({ blockNumber: receipt.blockNumber });
      const forwardedAt = performance.timeOrigin + (stack.anthropic.log[logIndex]?.receivedAt ?? Number.NaN);
      const confirmedAt = settlement.confirmedAt?.getTime() ?? Number.NaN;
      expect(Number(block.timestamp) * 1000).toBeLessThanOrEqual(confirmedAt);
      expect(confirmedAt).toBeLessThanOrEqual(forwardedAt);
    }
    // Over the whole history: settled - credit = sum of the paid records' costs.
    const debt = await debtOf(stack.gateway.store, payer.address);
    expect(paid * 1_000_000n - debt.creditPicoUsd).toBe(2n * ODD_COST_PICO + SMALL_COST_ATOMIC * 1_000_000n);
  });

  test('a streamed request pays the previous one too, and names its settlement in the headers', async () => {
    const { payer, client } = await newSession(1);
    stack.anthropic.script({ text: 'first', usage: SMALL }, { text: ['stre', 'amed'], usage: SMALL });
    await chat(client);
    const treasuryBefore = await balance(stack.treasury);
    const { data: stream, response } = await client.chat.completions
      .create({ model: MODEL, messages: [{ role: 'user', content: 'x' }], stream: true })
      .withResponse();
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    expect(text).toBe('streamed');
    expect(response.headers.get('x-settlement-amount')).toBe(SMALL_COST_ATOMIC.toString());
    expect(response.headers.get('x-settlement-tx')).toBe((await lastSettlement(payer.address)).txHash);
    expect(await balance(stack.treasury)).toBe(treasuryBefore + SMALL_COST_ATOMIC);
  });

  test('a request the provider cannot express is refused (400) before any payment work: nothing settled, nothing forwarded', async () => {
    const { payer, session, client } = await newSession(0, { salt: 3 });
    stack.anthropic.script({ text: 'first', usage: SMALL }, { text: 'third', usage: SMALL });
    await chat(client);
    const owed = await debtOf(stack.gateway.store, payer.address);
    const [payerBefore, forwardedBefore] = [await balance(payer.address), stack.anthropic.log.length];

    const res = await fetch(`${stack.gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${session.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: MODEL,
        messages: [
          { role: 'user', content: [{ type: 'image_url', image_url: { url: 'ftp://example.com/a.png' } }] },
        ],
      }),
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({
      error: { code: 'validation_error', field: 'messages[0].content[0].image_url.url' },
    });
    expect(res.headers.get('x-settlement-tx')).toBeNull();
    expect(stack.anthropic.log.length).toBe(forwardedBefore);
    expect(await balance(payer.address)).toBe(payerBefore);
    expect(await debtOf(stack.gateway.store, payer.address)).toEqual(owed);
    expect(await settlementsOf(stack.gateway.store, payer.address)).toEqual([]);

    // The next request the provider can take pays the debt as usual.
    const next = await chat(client);
    expect(next.status).toBe(200);
    expect(next.headers.get('x-settlement-amount')).toBe(SMALL_COST_ATOMIC.toString());
  });

  test('concurrent requests of one payer settle its debt once, in one transaction', async () => {
    const { payer, client } = await newSession(2);
    stack.anthropic.script({ text: 'debt', usage: SMALL });
    await chat(client);
    const treasuryBefore = await balance(stack.treasury);
    stack.anthropic.script(
      { text: 'a', usage: SMALL, delayMs: 100 },
      { text: 'b', usage: SMALL, delayMs: 100 },
    );

    const answers = await Promise.all([chat(client), chat(client)]);
    expect(answers.map((answer) => answer.status)).toEqual([200, 200]);
    const settledBy = answers.filter((answer) => answer.headers.get('x-settlement-tx') !== null);
    expect(settledBy).toHaveLength(1);
    const settlements = await settlementsOf(stack.gateway.store, payer.address);
    expect(settlements.map((settlement) => [settlement.status, settlement.amountAtomic])).toEqual([
      ['confirmed', SMALL_COST_ATOMIC],
    ]);
    expect(await balance(stack.treasury)).toBe(treasuryBefore + SMALL_COST_ATOMIC);
  });

  test('payers settling at once: each answer names a transaction moving its own payment, under distinct relayer nonces', async () => {
    const sessions = await Promise.all([
      newSession(0, { salt: 1 }),
      newSession(1, { salt: 1 }),
      newSession(2, { salt: 1 }),
    ]);
    stack.anthropic.script(...sessions.map(() => ({ text: 'debt', usage: SMALL })));
    for (const { client } of sessions) await chat(client);
    const treasuryBefore = await balance(stack.treasury);
    stack.anthropic.script(...sessions.map(() => ({ text: 'next', usage: SMALL })));
    const answers = await Promise.all(sessions.map(({ client }) => chat(client)));
    const hashes = answers.map((answer) => answer.headers.get('x-settlement-tx') as Hash);
    // Those falling due while another was mined share one transaction (a batch); each carries its payer's transfer.
    for (const [index, hash] of hashes.entries())
      expect((await transfersIn(hash)).transfers).toContainEqual({
        from: sessions[index]?.payer.address,
        to: stack.treasury,
        value: SMALL_COST_ATOMIC,
      });
    const distinct = [...new Set(hashes)];
    const nonces = await Promise.all(
      distinct.map(async (hash) => (await stack.local.publicClient.getTransaction({ hash })).nonce),
    );
    expect(new Set(nonces).size).toBe(distinct.length);
    expect(await balance(stack.treasury)).toBe(treasuryBefore + 3n * SMALL_COST_ATOMIC);
  });

  test('requests beyond MAX_IN_FLIGHT_PER_PAYER get 429 and never reach the provider', async () => {
    const { session } = await newSession(3);
    stack.anthropic.script(
      { text: 'slow', usage: SMALL, delayMs: 500 },
      { text: 'slow', usage: SMALL, delayMs: 500 },
    );
    const calls = stack.anthropic.log.length;
    const answers = await Promise.all([
      rawChat(session.token),
      rawChat(session.token),
      rawChat(session.token),
    ]);
    expect(answers.map((answer) => answer.status).sort()).toEqual([200, 200, 429]);
    expect(answers.find((answer) => answer.status === 429)?.body.error).toMatchObject({
      code: 'too_many_in_flight',
    });
    expect(stack.anthropic.log.length - calls).toBe(2);
  });
});

describe('settlement refused on chain: 402 with the reason, the request not forwarded', () => {
  /** One paid-for request, then one the chain refuses to settle; returns the refusal. */
  async function refusedAfterDebt(
    session: AuthorizedSession,
    payer: PayerAccount,
    prepare?: () => Promise<void>,
  ) {
    stack.anthropic.script({ text: 'debt', usage: SMALL });
    expect((await rawChat(session.token)).status).toBe(200);
    await prepare?.();
    const [treasuryBefore, calls] = [await balance(stack.treasury), stack.anthropic.log.length];
    const refused = await rawChat(session.token);
    expect(refused.status).toBe(402);
    expect(stack.anthropic.log.length).toBe(calls);
    expect(await balance(stack.treasury)).toBe(treasuryBefore);
    // The debt stands, released for the next attempt; the failure is on record.
    const debt = await debtOf(stack.gateway.store, payer.address);
    expect(debt.owedAtomic).toBeGreaterThan(0n);
    const failed = await lastSettlement(payer.address);
    expect(failed.status).toBe('failed');
    expect(failed.failureReason).toBeTruthy();
    return refused;
  }

  // The exposure budget keeps a payer's debt within what it can pay; a debt beyond it arises only
  // when what it can pay moved after admission (its funds moved within a block, say): written here.
  const owingBeyond = (payer: PayerAccount, atomic: bigint) => async () => {
    await recordUsage(stack.gateway.store, completedRequest(payer.address, atomic * 1_000_000n));
  };

  test('the cap is used up', async () => {
    const { payer, session } = await newSession(4, { cap: 20_000n });
    // 66 owed, then 20,000 more: beyond the cap.
    const refused = await refusedAfterDebt(session, payer, owingBeyond(payer, 20_000n));
    expect(refused.body.error).toMatchObject({
      code: 'payment_required',
      details: {
        reason: 'cap_reached',
        owedAtomic: '20066',
        revert: 'ERC20TransferAmountEnforcer:allowance-exceeded',
      },
    });
    expect(refused.body.error.message).toMatch(/cap/);
    // The payer may pay by x402 instead: the requirements ask for what it owes.
    expect(refused.headers.get('payment-required')).toBeTruthy();
  });

  test('the per-period cap is used up', async () => {
    const payer = await newPayer(stack.local, 3, { salt: 2 });
    const session = await authorize(stack.gateway, payer, { cap: 20_000n, period: { seconds: 86_400 } });
    const refused = await refusedAfterDebt(session, payer, owingBeyond(payer, 20_000n));
    expect(refused.body.error).toMatchObject({
      details: { reason: 'cap_reached', revert: 'ERC20PeriodTransferEnforcer:transfer-amount-exceeded' },
    });
  });

  test('the smart account lacks the USDC', async () => {
    const { payer, session } = await newSession(5);
    // Admitted while it held USDC, then emptied its account.
    const refused = await refusedAfterDebt(session, payer, () => emptyUsdc(stack.local, payer.address));
    expect(refused.body.error).toMatchObject({
      details: { reason: 'insufficient_balance', owedAtomic: '66' },
    });
  });

  test('the payer disabled the delegation in the DelegationManager', async () => {
    const { payer, session } = await newSession(6);
    const refused = await refusedAfterDebt(session, payer, async () => {
      const stored = await stack.gateway.store.db
        .selectFrom('sessions')
        .select(['delegation', 'signature'])
        .where('id', '=', session.sessionId)
        .executeTakeFirstOrThrow();
      // The account itself calls disableDelegation (as its owner would through a user operation).
      await stack.local.testClient.impersonateAccount({ address: payer.address });
      await stack.local.testClient.setBalance({ address: payer.address, value: 10n ** 18n });
      const hash = await stack.local.testClient.sendUnsignedTransaction({
        from: payer.address,
        to: stack.local.environment.DelegationManager,
        data: contracts.DelegationManager.encode.disableDelegation({
          delegation: { ...JSON.parse(stored.delegation), signature: stored.signature },
        }),
      });
      await stack.local.publicClient.waitForTransactionReceipt({ hash });
      await stack.local.testClient.stopImpersonatingAccount({ address: payer.address });
    });
    expect(refused.body.error).toMatchObject({ details: { reason: 'revoked' } });
  });

  /**
   * A payer owing a request, whose account's owner then points it at `implementation`: its next
   * request is refused (402 invalid_delegation) and nothing is sent.
   */
  async function refusedUnsentAfterUpgrade(owner: number, salt: number, implementation: Address) {
    const { payer, session } = await newSession(owner, { salt });
    const relayer = stack.local.accounts.gateway.address;
    const sent = await stack.local.publicClient.getTransactionCount({ address: relayer });
    const refused = await refusedAfterDebt(session, payer, () => upgradeTo(payer.address, implementation));
    expect(refused.body.error).toMatchObject({
      code: 'payment_required',
      details: { reason: 'invalid_delegation', owedAtomic: '66' },
    });
    expect(await stack.local.publicClient.getTransactionCount({ address: relayer })).toBe(sent);
    expect(await lastSettlement(payer.address)).toMatchObject({ status: 'failed', txHash: null });
    return refused;
  }

  test('an account whose implementation its owner changed since authorization, to one outside the framework: refused before anything is sent', async () => {
    // It answers any signature and executes nothing: a redemption would succeed and pay nothing.
    const refused = await refusedUnsentAfterUpgrade(5, 21, await deployed(inertDelegator, []));
    expect(refused.body.error.message).toMatch(/no longer a MetaMask smart account/);
  });

  test('an account whose signature check burns more gas than a settlement may cost is refused before anything is sent', async () => {
    const refused = await refusedUnsentAfterUpgrade(6, 22, await deployed(gasHungryDelegator, [30_000n]));
    expect(refused.body.error.message).toMatch(/its redemption needs \d+ gas/);
  });
});

describe('an account authorized before it was deployed (ERC-6492)', () => {
  test('is deployed by the gateway before its first settlement, which then pays', async () => {
    const payer = await newPayer(stack.local, 0, { salt: 7, deploy: false });
    const session = await authorize(stack.gateway, payer);
    const client = openaiFor(stack.gateway, session.token);
    stack.anthropic.script({ text: 'one', usage: SMALL }, { text: 'two', usage: SMALL });
    await chat(client);
    expect(await stack.local.publicClient.getCode({ address: payer.address })).toBeUndefined();
    const treasuryBefore = await balance(stack.treasury);
    const second = await chat(client);
    expect(second.headers.get('x-settlement-amount')).toBe(SMALL_COST_ATOMIC.toString());
    expect(await stack.local.publicClient.getCode({ address: payer.address })).toBeTruthy();
    expect(await balance(stack.treasury)).toBe(treasuryBefore + SMALL_COST_ATOMIC);
  });

  test('one authorized before the deployment checks, deploying more than the gas cap or not a DeleGator, is refused at settlement', async () => {
    const costly = await newPayer(stack.local, 0, { salt: 11, deploy: false, passkeys: 20 });
    const costlyDeployment = await costly.account.getFactoryArgs();
    const forged = encodeFunctionData({
      abi: SimpleFactory,
      functionName: 'deploy',
      args: ['0x600a600c600039600a6000f3602a60005260206000f3', pad('0x01', { size: 32 })],
    });
    for (const [salt, data] of [
      [8, costlyDeployment.factoryData],
      [10, forged],
    ] as const) {
      const payer = await newPayer(stack.local, 0, { salt, deploy: false });
      const session = await authorize(stack.gateway, payer);
      // As a gateway without the checks stored it: the signature deploys something else.
      const stored = await stack.gateway.store.db
        .selectFrom('sessions')
        .select('signature')
        .where('id', '=', session.sessionId)
        .executeTakeFirstOrThrow();
      const { signature } = parseErc6492Signature(stored.signature as Hex);
      const replaced = serializeErc6492Signature({
        address: stack.local.environment.SimpleFactory,
        data: data as Hex,
        signature,
      });
      await stack.gateway.store.db
        .updateTable('sessions')
        .set({ signature: replaced })
        .where('id', '=', session.sessionId)
        .execute();
      stack.anthropic.script({ text: 'on credit', usage: SMALL });
      expect((await rawChat(session.token)).status).toBe(200);
      const calls = stack.anthropic.log.length;
      const refused = await rawChat(session.token);
      expect(refused.status).toBe(402);
      expect(refused.body.error.details).toMatchObject({ reason: 'account_not_deployed' });
      expect(stack.anthropic.log.length).toBe(calls);
      expect(await stack.local.publicClient.getCode({ address: payer.address })).toBeUndefined();
    }
  });
});

// Moves the chain's clock forward: keep it last in this file.
describe('the delegation expired on chain', () => {
  test('402 expired, and the request is not forwarded', async () => {
    const payer = await newPayer(stack.local, 1, { salt: 9 });
    // Far from its end: its debt is left to the next request, not settled on completion.
    const session = await authorize(stack.gateway, payer, { expiresInSeconds: 3 * 3600 });
    const refused = await refusedAfterDebtExpiring(session, payer);
    expect(refused.body.error).toMatchObject({ details: { reason: 'expired', owedAtomic: '66' } });
  });

  async function refusedAfterDebtExpiring(session: AuthorizedSession, payer: PayerAccount) {
    stack.anthropic.script({ text: 'debt', usage: SMALL });
    expect((await rawChat(session.token)).status).toBe(200);
    // The gateway's clock still sees the session valid; the chain's is past the delegation's expiry.
    await stack.local.testClient.increaseTime({ seconds: 3 * 3600 + 100 });
    await stack.local.testClient.mine({ blocks: 1 });
    const calls = stack.anthropic.log.length;
    const refused = await rawChat(session.token);
    expect(refused.status).toBe(402);
    expect(stack.anthropic.log.length).toBe(calls);
    expect((await lastSettlement(payer.address)).status).toBe('failed');
    expect(getAddress(session.wallet)).toBe(payer.address);
    return refused;
  }
});
