import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Address } from 'viem';
import { type PrivateKeyAccount, privateKeyToAccount } from 'viem/accounts';
import { afterAll, expect, test, vi } from 'vitest';
import { mintUsdc, usdcBalance } from '../../devkit/chain/index.js';
import { startGatewayProcess } from '../support/gateway-process.js';
import { confirmedAmount, reconcileWithChain } from '../support/ledger-checks.js';
import { chatBody, openaiClient, payingClient, payingFetch } from '../x402/harness.js';
import { SMALL_COST, SMALL_USAGE, useFaultStack } from './harness.js';

// The chain node loses an x402 settlement's transaction (a restart empties its pool) while the
// gateway settles it in process through the relayer it shares with the session rail.
const stack = useFaultStack();
const FUNDS = 1_000_000n;

async function x402Payer(index: number): Promise<PrivateKeyAccount> {
  const payer = privateKeyToAccount(stack.local.accounts.payers[index]!.privateKey);
  await mintUsdc(stack.local, payer.address, FUNDS);
  return payer;
}

/** One request paid with the stock x402 client: its status, or the error's. */
async function x402Chat(payer: PrivateKeyAccount): Promise<number> {
  stack.anthropic.script({ text: 'hi there', usage: SMALL_USAGE });
  const openai = openaiClient(stack.gateway.url, payingFetch(payingClient(stack.local, payer)));
  return openai.chat.completions.create(chatBody).then(
    () => 200,
    (error: { status?: number }) => error.status ?? 0,
  );
}

async function expectPaidOnce(payers: Address[], before: Map<Address, bigint>) {
  for (const payer of payers) {
    expect((await stack.settlementStates(payer)).filter((state) => state.startsWith('confirmed'))).toEqual([
      `confirmed ${SMALL_COST}`,
    ]);
    expect(await usdcBalance(stack.local, payer)).toBe(
      (before.get(payer) ?? 0n) - (await confirmedAmount(stack.store, payer)),
    );
  }
  expect((await reconcileWithChain(stack.store, stack.local)).mismatches).toEqual([]);
}

test('the node loses an x402 settlement: its authorization is sent again and pays once, and the next payer is not stuck', async () => {
  const [lost, next] = [await x402Payer(0), await x402Payer(1)];
  expect([await x402Chat(lost), await x402Chat(next)]).toEqual([200, 200]);
  const before = new Map<Address, bigint>();
  for (const payer of [lost, next]) before.set(payer.address, await usdcBalance(stack.local, payer.address));

  await stack.local.testClient.setAutomine(false);
  await stack.local.testClient.setIntervalMining({ interval: 0 });
  const request = x402Chat(lost);
  await vi.waitFor(
    async () => expect(await stack.settlementStates(lost.address)).toEqual([`sent ${SMALL_COST}`]),
    { timeout: 10_000, interval: 20 },
  );
  // Restarted from what was mined (with 0.2 s blocks again): the settlement's transaction is gone.
  await stack.restartChain();
  // The payer's proof is still valid: the same signed authorization is sent again, not held until it expires.
  expect(await request).toBe(200);
  // The relayer does not send behind the lost nonce, where nothing would be mined.
  expect(await x402Chat(next)).toBe(200);
  await expectPaidOnce([lost.address, next.address], before);
});

test('the node fails while an x402 settlement is in flight: 503, nothing forwarded, then it is paid once', async () => {
  const payer = await x402Payer(2);
  expect(await x402Chat(payer)).toBe(200);
  const before = new Map([[payer.address, await usdcBalance(stack.local, payer.address)]]);
  // Counted at the provider: these requests carry no ordering probe's marker.
  const forwarded = stack.anthropic.log.length;

  await stack.local.testClient.setAutomine(false);
  await stack.local.testClient.setIntervalMining({ interval: 0 });
  // Not mined within the receipt timeout: the request is refused, its settlement left sent.
  expect(await x402Chat(payer)).toBe(503);
  expect(await stack.settlementStates(payer.address)).toEqual([`sent ${SMALL_COST}`]);
  // The proof checks out, then the node fails as the settlement in flight is looked up.
  const failing = stack.rpc.downFrom('eth_getTransactionReceipt');
  try {
    expect(await x402Chat(payer)).toBe(503);
    await failing;
  } finally {
    stack.rpc.pass();
  }
  expect(stack.anthropic.log.length).toBe(forwarded);

  await stack.local.testClient.setAutomine(true);
  await stack.local.testClient.mine({ blocks: 1 });
  expect(await x402Chat(payer)).toBe(200);
  await expectPaidOnce([payer.address], before);
});

/** The gateway's log lines about a promise rejected with no one waiting for it. */
const unhandledRejections = () =>
  stack.gateway.logs.filter((log) => String(log.msg).startsWith('unhandled promise rejection'));

test('the node fails while a proof is verified: 503 with retry-after, and nothing x402 left running ends the gateway', async () => {
  const payer = await x402Payer(3);
  // A new process: once x402 found the asset to be a contract, it does not ask for 15 minutes.
  await stack.gateway.stop();
  await stack.restart();
  const failing = stack.rpc.downFrom('eth_getCode');
  try {
    expect(await x402Chat(payer)).toBe(503);
    await failing;
  } finally {
    stack.rpc.pass();
  }
  expect(await x402Chat(payer)).toBe(200);
  expect(unhandledRejections()).toEqual([]);
});

const preloads = mkdtempSync(join(tmpdir(), 'paygate-preload-'));
afterAll(() => rmSync(preloads, { recursive: true, force: true }));

test('a promise rejected with no one waiting for it (a library bug) is logged as an error, and the gateway serves on', async () => {
  // Such a bug on demand: SIGUSR2 rejects a promise no one handles.
  const preload = join(preloads, 'reject-on-sigusr2.mjs');
  writeFileSync(
    preload,
    "process.on('SIGUSR2', () => { Promise.reject(new Error('a rejection no one handles')); });\n",
  );
  await stack.gateway.stop();
  stack.gateway = await startGatewayProcess({
    ...stack.env,
    NODE_OPTIONS: `--import ${pathToFileURL(preload).href}`,
  });
  process.kill(stack.gateway.pid, 'SIGUSR2');
  await vi.waitFor(() => expect(unhandledRejections()).toHaveLength(1), { timeout: 5_000, interval: 20 });
  expect(unhandledRejections()[0]).toMatchObject({
    level: 50,
    err: { message: 'a rejection no one handles' },
  });
  expect(await x402Chat(await x402Payer(4))).toBe(200);
});
