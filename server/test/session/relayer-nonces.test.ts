import { createPublicClient, custom, type Hash, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { rpc } from '../../devkit/chain/anvil.js';
import { createLocalChain, type LocalChain } from '../../devkit/chain/index.js';
import { createRelayer, storeSendLock } from '../../src/payments/chain/relayer.js';
import type { Store } from '../../src/store/database.js';
import { testDialects, withTestStore } from '../support/db.js';

// Gateway instances send from one relayer key, each through its own RPC node (a load-balanced
// provider): the nonce after the last send is kept in the store under the sender's lock.
let local: LocalChain;
beforeAll(async () => {
  local = await createLocalChain();
  // Blocks only when a test mines one: transactions wait in the pool.
  await local.testClient.setAutomine(false);
  await local.testClient.setIntervalMining({ interval: 0 });
});
afterAll(() => local?.stop());

/** A node that has not seen the pool yet: its pending count is the mined one. */
function laggingNode() {
  return createPublicClient({
    chain: local.publicClient.chain,
    transport: custom({
      request: ({ method, params }: { method: string; params?: unknown[] }) =>
        rpc(
          local.rpcUrl,
          method,
          method === 'eth_getTransactionCount' ? [params?.[0], 'latest'] : (params ?? []),
        ),
    }),
  });
}

const minedOk = async (hash: Hash) =>
  (await local.publicClient.getTransactionReceipt({ hash })).status === 'success';

test("one instance behind a lagging node: a slow transaction's receipt timeout keeps its own count", async () => {
  const relayer = createRelayer(
    laggingNode(),
    privateKeyToAccount(local.accounts.payers[4]!.privateKey),
    local.chainId,
  );
  const call = { to: local.accounts.treasury.address, data: '0x' as Hex, gas: 21_000n };
  const first = await relayer.submit(call, async () => {});
  await expect(relayer.waitForReceipt({ hash: first.hash, timeout: 300 })).rejects.toThrow();
  const second = await relayer.submit(call, async () => {});
  expect(second.nonce).toBe(first.nonce + 1);
  await local.testClient.mine({ blocks: 1 });
  expect([await minedOk(first.hash), await minedOk(second.hash)]).toEqual([true, true]);
});

describe.each(testDialects)('relayer nonces kept in the store on %s', (dialect) => {
  let store: Store;
  withTestStore(dialect, (opened) => {
    store = opened;
  });
  const key = dialect === 'sqlite' ? 5 : 6;
  const call = () => ({ to: local.accounts.treasury.address, data: '0x' as Hex, gas: 21_000n });
  const instance = (client = local.publicClient) =>
    createRelayer(client, privateKeyToAccount(local.accounts.payers[key]!.privateKey), local.chainId, {
      lock: storeSendLock(store, local.chainId),
    });

  test("an instance whose node has not seen the other's send yet takes the next nonce, not the same", async () => {
    const first = await instance().submit(call(), async () => {});
    const second = await instance(laggingNode()).submit(call(), async () => {});
    expect(second.nonce).toBe(first.nonce + 1);
    await local.testClient.mine({ blocks: 1 });
    expect([await minedOk(first.hash), await minedOk(second.hash)]).toEqual([true, true]);
  });

  test("a slow transaction's receipt timeout does not withdraw the shared nonce: the node still holds it", async () => {
    const first = await instance().submit(call(), async () => {});
    await expect(instance().waitForReceipt({ hash: first.hash, timeout: 300 })).rejects.toThrow();
    const second = await instance(laggingNode()).submit(call(), async () => {});
    expect(second.nonce).toBe(first.nonce + 1);
    await local.testClient.mine({ blocks: 1 });
    expect([await minedOk(first.hash), await minedOk(second.hash)]).toEqual([true, true]);
  });

  test("another instance's rebroadcast of a transaction the node holds does not withdraw the shared nonce", async () => {
    const first = await instance().submit(call(), async () => {});
    // Recovery on another instance sends a transaction again that the node already holds.
    await instance().rebroadcast(first.raw);
    const second = await instance(laggingNode()).submit(call(), async () => {});
    expect(second.nonce).toBe(first.nonce + 1);
    await local.testClient.mine({ blocks: 1 });
    expect([await minedOk(first.hash), await minedOk(second.hash)]).toEqual([true, true]);
  });

  test('a shared nonce from longer ago than a node takes to catch up (before a restart) is ignored', async () => {
    const sender = privateKeyToAccount(local.accounts.payers[key]!.privateKey).address;
    const pending = await local.publicClient.getTransactionCount({ address: sender, blockTag: 'pending' });
    await store.db
      .insertInto('relayer_nonces')
      .values({ chain_id: local.chainId, sender, next_nonce: pending + 5, updated_at: Date.now() - 60_000 })
      .onConflict((conflict) =>
        conflict
          .columns(['chain_id', 'sender'])
          .doUpdateSet({ next_nonce: pending + 5, updated_at: Date.now() - 60_000 }),
      )
      .execute();
    const sent = await instance().submit(call(), async () => {});
    expect(sent.nonce).toBe(pending);
    await local.testClient.mine({ blocks: 1 });
    expect(await minedOk(sent.hash)).toBe(true);
  });

  test('a send whose receipt never comes (the node lost it) is forgotten: the next send fills its nonce, leaving no gap', async () => {
    const relayer = instance();
    const lost = await relayer.submit(call(), async () => {});
    await rpc(local.rpcUrl, 'anvil_dropTransaction', [lost.hash]);
    await expect(relayer.waitForReceipt({ hash: lost.hash, timeout: 300 })).rejects.toThrow();

    const next = await instance().submit(call(), async () => {});
    expect(next.nonce).toBe(lost.nonce);
    await local.testClient.mine({ blocks: 1 });
    expect(await minedOk(next.hash)).toBe(true);
  });
});
