import { type Hex, keccak256, parseGwei, toHex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createLocalChain, type LocalChain } from '../../devkit/chain/index.js';
import { storeOnceSends } from '../../src/payments/chain/once-sends.js';
import { createRelayer } from '../../src/payments/chain/relayer.js';
import type { Store } from '../../src/store/database.js';
import { testDialects, withTestStore } from '../support/db.js';

// A transaction no settlement records (a smart account's deployment) is remembered in the store
// from before its broadcast until its nonce is used: a restarted gateway, or another instance,
// waits on it or replaces it instead of queueing a second one behind it.
const SENDER = '0x1111111111111111111111111111111111111111';
const OTHER = '0x2222222222222222222222222222222222222222';
const signed = (nonce: number) => {
  const raw = toHex(`tx ${nonce}`) as Hex;
  return { raw, hash: keccak256(raw), nonce };
};

describe.each(testDialects)('remembered sends on %s', (dialect) => {
  let store: Store;
  withTestStore(dialect, (opened) => {
    store = opened;
  });

  test('kept by sender and key, replaced by a later send under the key, forgotten once the nonce is used', async () => {
    const sends = storeOnceSends(store);
    expect(await sends.get(SENDER, 'deploy:a')).toBeUndefined();
    await sends.put(SENDER, 'deploy:a', { tx: signed(7), sentAt: 1_000 });
    await sends.put(SENDER, 'deploy:b', { tx: signed(8), sentAt: 2_000 });
    await sends.put(OTHER, 'deploy:a', { tx: signed(3), sentAt: 3_000 });
    expect(await sends.get(SENDER, 'deploy:a')).toEqual({ tx: signed(7), sentAt: 1_000 });

    const replacement = { ...signed(7), raw: '0xabcd' as Hex, hash: keccak256('0xabcd') };
    await sends.put(SENDER, 'deploy:a', { tx: replacement, sentAt: 4_000 });
    expect(await sends.get(SENDER, 'deploy:a')).toEqual({ tx: replacement, sentAt: 4_000 });

    // Nonce 8 used: only the sender's sends below it go.
    await sends.forgetBelow(SENDER, 8);
    expect(await sends.get(SENDER, 'deploy:a')).toBeUndefined();
    expect(await sends.get(SENDER, 'deploy:b')).toEqual({ tx: signed(8), sentAt: 2_000 });
    expect(await sends.get(OTHER, 'deploy:a')).toEqual({ tx: signed(3), sentAt: 3_000 });
  });
});

describe('a relayer restarted while its deployment is stuck', () => {
  let local: LocalChain;
  let store: Store;
  withTestStore('sqlite', (opened) => {
    store = opened;
  });
  beforeAll(async () => {
    local = await createLocalChain();
  });
  afterAll(() => local?.stop());

  test('replaces it under its nonce, where one remembering only in process would queue another behind it', async () => {
    const account = privateKeyToAccount(local.accounts.payers[5]!.privateKey);
    const start = () =>
      createRelayer(local.publicClient, account, local.chainId, { sends: storeOnceSends(store) });
    const call = { to: local.accounts.treasury.address, data: '0x' as Hex, gas: 21_000n };
    await local.testClient.setAutomine(false);
    await local.testClient.setIntervalMining({ interval: 0 });
    const first = await start().submitOnce('deploy:a', call, 60_000);

    // Stuck: a block comes at a base fee far above what it offers. Then the gateway restarts.
    await local.testClient.setNextBlockBaseFeePerGas({ baseFeePerGas: parseGwei('1000') });
    await local.testClient.mine({ blocks: 1 });
    const restarted = start();
    // Not stale yet: the same transaction, nothing sent.
    expect(await restarted.submitOnce('deploy:a', call, 60_000)).toEqual(first);
    // Stale: replaced under the same nonce, at the market's fees.
    const replaced = await restarted.submitOnce('deploy:a', call, 0);
    expect(replaced.nonce).toBe(first.nonce);
    expect(replaced.hash).not.toBe(first.hash);
    await local.testClient.mine({ blocks: 1 });
    expect(await local.publicClient.getTransactionReceipt({ hash: replaced.hash })).toMatchObject({
      status: 'success',
    });
    expect(await local.publicClient.getTransactionCount({ address: account.address })).toBe(first.nonce + 1);

    // Mined, it is forgotten: the next send under the key is a new transaction.
    await local.testClient.setAutomine(true);
    expect((await start().submitOnce('deploy:a', call, 60_000)).nonce).toBe(first.nonce + 1);
  });
});
