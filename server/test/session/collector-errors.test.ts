import { HttpRequestError, keccak256, parseGwei } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { describe, expect, test } from 'vitest';
import { recordUsage } from '../../src/billing/ledger.js';
import { markSettlementSent, openSettlement } from '../../src/billing/settlements.js';
import { createCollector } from '../../src/payments/session/collector.js';
import type { Store } from '../../src/store/database.js';
import { testDialects, withTestStore } from '../support/db.js';
import { completedRequest } from '../support/usage-entries.js';

// What the collector shows operators (/health) when the chain's RPC fails: what failed, never the
// RPC URL, which may carry an API key.

const SECRET_RPC = 'https://base-mainnet.example/v2/SECRET-API-KEY';

describe.each(testDialects)('the collector on %s', (dialect) => {
  let store: Store;
  withTestStore(dialect, (opened) => {
    store = opened;
  });

  test('an RPC failure while it finishes a settlement is reported without the RPC URL', async () => {
    const payer = privateKeyToAccount(generatePrivateKey()).address;
    await recordUsage(store, completedRequest(payer, 66_000_000n));
    // A settlement sent and not confirmed: the collector reconciles it with the chain.
    const settlement = await openSettlement(store, payer, 'session');
    const relayer = privateKeyToAccount(generatePrivateKey());
    const raw = await relayer.signTransaction({
      type: 'eip1559',
      chainId: 8453,
      nonce: 0,
      to: payer,
      gas: 100_000n,
      maxFeePerGas: parseGwei('1'),
      maxPriorityFeePerGas: parseGwei('1'),
    });
    await markSettlementSent(store, settlement!.id, keccak256(raw), raw);

    const rpcDown = () => {
      throw new HttpRequestError({
        url: SECRET_RPC,
        status: 503,
        body: { method: 'eth_getTransactionCount' },
      });
    };
    const collector = createCollector({
      store,
      chain: {
        relayer: { address: relayer.address },
        publicClient: {
          getTransactionCount: rpcDown,
          getTransaction: rpcDown,
          getTransactionReceipt: rpcDown,
        },
      } as never,
      receiptTimeoutMs: 0,
      withPayerLock: store.withPayerLock,
      idleMs: 3_600_000,
      intervalMs: 60_000,
      log: { warn: () => {}, error: () => {} },
    });
    await collector.runOnce(new Date(Date.now() + 1_000));
    const shown = JSON.stringify(collector.state());
    expect(collector.state().lastRunError).toBe('HTTP request failed.');
    expect(shown).not.toContain('SECRET-API-KEY');
  });
});
