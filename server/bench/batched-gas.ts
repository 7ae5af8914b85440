/**
 * Gas per payer settlement when the settlements of N payers share one transaction, read from the
 * receipts. Session rail: one `redeemDelegations` of N fresh smart accounts, each with the client
 * helper's delegation, settled together twice (each payer's first settlement, then a later one).
 * x402: N fresh EOAs' EIP-3009 authorizations in one Multicall3 `aggregate3`, as the gateway batches them.
 */

import { randomBytes } from 'node:crypto';
import { encodeFunctionData, erc20Abi, type Hex, size, toHex } from 'viem';
import { generatePrivateKey } from 'viem/accounts';
import { createLocalWalletClient, createPayerAccount, type LocalChain } from '../devkit/chain/index.js';
import { buildSessionDelegation } from '../src/client/index.js';
import { redeemDelegationsCalldata } from '../src/payments/chain/delegation-framework.js';
import { settleFreshAuthorizations } from '../test/chain/authorizations.js';

/** One batch size's gas per payer settlement (the transaction's gas over its payers). */
export interface BatchedGas {
  payers: number;
  first: number;
  later: number;
  /** Calldata bytes per payer settlement. */
  calldataBytes: number;
}

/** One batch size's gas per x402 settlement; each authorization has a fresh nonce, so a payer's later one costs as its first. */
export interface X402BatchedGas {
  payers: number;
  gas: number;
  /** Calldata bytes per payer settlement. */
  calldataBytes: number;
}

const AMOUNT = 1_234n;

/** A key of its own as the sender (and session delegate): the gateway's key keeps its nonces to itself. */
async function freshSender(local: LocalChain) {
  const sender = createLocalWalletClient(local.chain, generatePrivateKey());
  await local.testClient.setBalance({ address: sender.account.address, value: 10n ** 18n });
  return sender;
}

export async function batchedSettlementGas(
  local: LocalChain,
  sizes: readonly number[],
): Promise<BatchedGas[]> {
  const sender = await freshSender(local);
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

/** x402 `exact` settlements of fresh EOA payers: one sent alone to the token, several in one `aggregate3`. */
export async function x402BatchedSettlementGas(
  local: LocalChain,
  sizes: readonly number[],
): Promise<X402BatchedGas[]> {
  const sender = await freshSender(local);
  const results: X402BatchedGas[] = [];
  for (const payers of sizes) {
    const { receipt, data } = await settleFreshAuthorizations(
      local,
      sender,
      payers,
      local.accounts.treasury.address,
      AMOUNT,
    );
    results.push({
      payers,
      gas: Number(receipt.gasUsed / BigInt(payers)),
      calldataBytes: Math.ceil(size(data) / payers),
    });
  }
  return results;
}
