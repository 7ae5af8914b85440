import { ERC1967Proxy } from '@metamask/delegation-abis/bytecode';
import {
  createDelegation,
  createExecution,
  type Delegation,
  ExecutionMode,
  ScopeType,
} from '@metamask/smart-accounts-kit';
import { DelegationManager } from '@metamask/smart-accounts-kit/contracts';
import { SIGNABLE_DELEGATION_TYPED_DATA, toDelegationStruct } from '@metamask/smart-accounts-kit/utils';
import {
  type Address,
  concat,
  encodeAbiParameters,
  encodeFunctionData,
  erc20Abi,
  type Hex,
  keccak256,
} from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  createLocalChain,
  createLocalWalletClient,
  createPayerAccount,
  type LocalChain,
  type LocalWalletClient,
  type PayerAccount,
  usdcBalance,
} from '../../devkit/chain/index.js';
import { DELEGATOR_PROXY_CODE_HASH } from '../../src/payments/chain/delegator-account.js';

let local: LocalChain;
let gateway: LocalWalletClient;
let payer: PayerAccount;
let treasury: Address;
const cap = 5_000_000n;

beforeAll(async () => {
  local = await createLocalChain();
  gateway = createLocalWalletClient(local.chain, local.accounts.gateway.privateKey);
  treasury = local.accounts.treasury.address;
  payer = await createPayerAccount(local, local.accounts.payers[0]!.privateKey, { fundUsdc: 20_000_000n });
});
afterAll(() => local?.stop());

/** The session-key grant: USDC transfers up to `cap` in total, until `expiresAt`, redeemable by the gateway only. */
async function signedGrant(expiresAt = Math.floor(Date.now() / 1000) + 3600): Promise<Delegation> {
  const delegation = createDelegation({
    environment: local.environment,
    from: payer.address,
    to: gateway.account.address,
    scope: { type: ScopeType.Erc20TransferAmount, tokenAddress: local.usdc, maxAmount: cap },
    caveats: [
      { type: 'timestamp', afterThreshold: 0, beforeThreshold: expiresAt },
      { type: 'redeemer', redeemers: [gateway.account.address] },
    ],
  });
  return { ...delegation, signature: await payer.account.signDelegation({ delegation }) };
}

/** Redeems `delegation` to pay `amount` USDC to the treasury, sent by `redeemer`; resolves with the receipt. */
async function redeem(delegation: Delegation, amount: bigint, redeemer = gateway) {
  const hash = await DelegationManager.execute.redeemDelegations({
    client: redeemer,
    delegationManagerAddress: local.environment.DelegationManager,
    delegations: [[delegation]],
    modes: [ExecutionMode.SingleDefault],
    executions: [
      [
        createExecution({
          target: local.usdc,
          callData: encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [treasury, amount] }),
        }),
      ],
    ],
  });
  return local.publicClient.waitForTransactionReceipt({ hash });
}

const balances = async () => ({
  payer: await usdcBalance(local, payer.address),
  treasury: await usdcBalance(local, treasury),
});

describe('a delegation from a payer smart account to the gateway key', () => {
  test('its signature verifies off chain against the smart account (ERC-1271)', async () => {
    const delegation = await signedGrant();
    const valid = await local.publicClient.verifyTypedData({
      address: payer.address,
      domain: {
        name: 'DelegationManager',
        version: '1',
        chainId: local.chainId,
        verifyingContract: local.environment.DelegationManager,
      },
      types: SIGNABLE_DELEGATION_TYPED_DATA,
      primaryType: 'Delegation',
      message: toDelegationStruct({ ...delegation, signature: '0x' }),
      signature: delegation.signature,
    });
    expect(valid).toBe(true);
  });

  test('redeemed by the gateway, it moves exactly the amount to the treasury, up to the cap and not beyond', async () => {
    const delegation = await signedGrant();
    const before = await balances();

    const receipt = await redeem(delegation, 1_234_567n);

    expect(receipt.status).toBe('success');
    expect(await balances()).toEqual({
      payer: before.payer - 1_234_567n,
      treasury: before.treasury + 1_234_567n,
    });

    await redeem(delegation, cap - 1_234_567n);
    expect(await balances()).toEqual({ payer: before.payer - cap, treasury: before.treasury + cap });

    await expect(redeem(delegation, 1n)).rejects.toThrow('ERC20TransferAmountEnforcer:allowance-exceeded');
    expect(await balances()).toEqual({ payer: before.payer - cap, treasury: before.treasury + cap });
  });

  test('a single redemption over the cap reverts and moves nothing', async () => {
    const before = await balances();
    await expect(redeem(await signedGrant(), cap + 1n)).rejects.toThrow(
      'ERC20TransferAmountEnforcer:allowance-exceeded',
    );
    expect(await balances()).toEqual(before);
  });

  test('nobody but the named redeemer can redeem it', async () => {
    const intruder = createLocalWalletClient(local.chain, local.accounts.payers[3]!.privateKey);
    await expect(redeem(await signedGrant(), 1n, intruder)).rejects.toThrow(
      /InvalidDelegate|RedeemerEnforcer/,
    );
  });

  test('an expired delegation cannot be redeemed', async () => {
    const expired = await signedGrant(Math.floor(Date.now() / 1000) - 60);
    await expect(redeem(expired, 1n)).rejects.toThrow('TimestampEnforcer:expired-delegation');
  });
});

describe('a MetaMask smart account, deployed', () => {
  test("is the kit's ERC-1967 proxy, whose code hash the gateway checks accounts against", async () => {
    const implementation = local.environment.implementations.HybridDeleGatorImpl as Address;
    // Creation code run without a target: the node answers with the code it would deploy.
    const { data: proxyCode } = await local.publicClient.call({
      data: concat([
        ERC1967Proxy as Hex,
        encodeAbiParameters([{ type: 'address' }, { type: 'bytes' }], [implementation, '0x']),
      ]),
    });
    expect(keccak256(proxyCode as Hex)).toBe(DELEGATOR_PROXY_CODE_HASH);
    const deployed = await local.publicClient.getCode({ address: payer.address });
    expect(keccak256(deployed as Hex)).toBe(DELEGATOR_PROXY_CODE_HASH);
  });
});
