/**
 * Gas per payer settlement when the settlements of N payers share one `redeemDelegations` (the
 * session rail's batches): N fresh smart accounts, each with the client helper's delegation, settled
 * together twice (each payer's first settlement, then a later one), read from the receipts.
 */

import { randomBytes } from 'node:crypto';
import { encodeFunctionData, erc20Abi, type Hex, size, toHex } from 'viem';
import { generatePrivateKey } from 'viem/accounts';
import { createLocalWalletClient, createPayerAccount, type LocalChain } from '../devkit/chain/index.js';
import { buildSessionDelegation } from '../src/client/index.js';
import { redeemDelegationsCalldata } from '../src/payments/chain/delegation-framework.js';

/** One batch size's gas per payer settlement (the transaction's gas over its payers). */
export interface BatchedGas {
  payers: number;
  first: number;
  later: number;
  /** Calldata bytes per payer settlement. */
  calldataBytes: number;
}

const AMOUNT = 1_234n;

export async function batchedSettlementGas(
  local: LocalChain,
  sizes: readonly number[],
): Promise<BatchedGas[]> {
  // A key of its own as the delegate and sender: the gateway's key keeps its nonces to itself.
  const senderKey = generatePrivateKey();
  const sender = createLocalWalletClient(local.chain, senderKey);
  await local.testClient.setBalance({ address: sender.account.address, value: 10n ** 18n });
  const treasury = local.accounts.treasury.address;
  const transfer = encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [treasury, AMOUNT] });
  const results: BatchedGas[] = [];
  for (const payers of sizes) {
    const accounts = await Promise.all(
      Array.from({ length: payers }, (_, index) =>
        createPayerAccount(local, local.accounts.payers[index % local.accounts.payers.length]!.privateKey, {
          deploySalt: toHex(randomBytes(32)) as Hex,
          fundUsdc: 1_000_000n,
        }),
      ),
    );
    const delegations = await Promise.all(
      accounts.map(async (payer) => {
        const delegation = buildSessionDelegation({
          terms: {
            environment: local.environment,
            usdc: { address: local.usdc },
            treasury,
            sessionKey: sender.account.address,
          },
          delegator: payer.address,
          cap: 1_000_000n,
          expiresAt: new Date(Date.now() + 3_600_000),
        });
        return { ...delegation, signature: await payer.account.signDelegation({ delegation }) };
      }),
    );
    const data = redeemDelegationsCalldata(
      delegations.map((delegation) => ({ delegation, target: local.usdc, callData: transfer })),
    );
    const settle = async () => {
      const hash = await sender.sendTransaction({ to: local.environment.DelegationManager, data });
      const receipt = await local.publicClient.waitForTransactionReceipt({ hash });
      if (receipt.status !== 'success')
        throw new Error(`a batch of ${payers} settlements reverted (${hash})`);
      return Number(receipt.gasUsed / BigInt(payers));
    };
    const first = await settle();
    const later = await settle();
    results.push({ payers, first, later, calldataBytes: Math.ceil(size(data) / payers) });
  }
  return results;
}
