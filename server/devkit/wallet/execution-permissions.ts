import {
  Implementation,
  ROOT_AUTHORITY,
  type SmartAccountsEnvironment,
  toMetaMaskSmartAccount,
} from '@metamask/smart-accounts-kit';
import { createCaveatBuilder, encodeDelegations, generateSalt } from '@metamask/smart-accounts-kit/utils';
import { type Address, type Hex, hexToNumber, numberToHex, type PublicClient } from 'viem';
import type { PrivateKeyAccount } from 'viem/accounts';
import { currentDelegatorNonce } from '../../src/payments/chain/delegation-framework.js';

/**
 * An ERC-7715 `wallet_requestExecutionPermissions` request for an `erc20-token-periodic` permission, in
 * its JSON-RPC shape (hex chain id and amount), as `@metamask/smart-accounts-kit`'s
 * `requestExecutionPermissions` sends it.
 */
export interface Erc20PeriodicPermissionRequest {
  chainId: Hex;
  from?: Address;
  /** The grantee: the account that will redeem (here, the gateway's session key). */
  to: Address;
  permission: {
    type: 'erc20-token-periodic';
    isAdjustmentAllowed: boolean;
    data: {
      tokenAddress: Address;
      periodAmount: Hex;
      periodDuration: number;
      startTime?: number;
      justification?: string;
    };
  };
  rules?: Array<
    | { type: 'expiry'; data: { timestamp: number } }
    | { type: 'redeemer' | 'payee'; data: { addresses: Address[] } }
  >;
}

/** The wallet's answer: the request as granted, with the signed delegation chain as `context`. */
export type GrantedPermission = Erc20PeriodicPermissionRequest & {
  from: Address;
  context: Hex;
  dependencies: Array<{ factory: Address; factoryData: Hex }>;
  delegationManager: Address;
};

/** `wallet_getSupportedExecutionPermissions` of such a wallet. */
export function supportedExecutionPermissions(chainId: number) {
  return {
    'erc20-token-periodic': { chainIds: [numberToHex(chainId)], ruleTypes: ['expiry', 'redeemer', 'payee'] },
  };
}

/**
 * Grants an `erc20-token-periodic` permission the way MetaMask's Advanced Permissions do (its
 * gator-permissions snap): a delegation from the EOA, upgraded with EIP-7702 to the framework's
 * EIP7702StatelessDeleGator, to `to`, with the caveats in the snap's order: ERC20PeriodTransferEnforcer,
 * ValueLteEnforcer (no native value), then TimestampEnforcer for an `expiry` rule, RedeemerEnforcer for a
 * `redeemer` rule, AllowedCalldataEnforcer (the `transfer` recipient) for a `payee` rule, and always
 * NonceEnforcer at the account's current nonce. The EOA's key signs it (EIP-712, as a 7702 account's
 * `signDelegation` does) and the chain of one delegation is ABI-encoded into `context`.
 */
export async function grantErc20PeriodicPermission(options: {
  request: Erc20PeriodicPermissionRequest;
  owner: PrivateKeyAccount;
  client: PublicClient;
  environment: SmartAccountsEnvironment;
  /** Default: the delegator's current NonceEnforcer nonce, read from the chain as the wallet does. */
  nonce?: bigint;
  now?: Date;
}): Promise<GrantedPermission> {
  const { request, owner, environment } = options;
  const { data } = request.permission;
  if (request.permission.type !== 'erc20-token-periodic')
    throw new Error(
      `this wallet grants erc20-token-periodic permissions only, not ${request.permission.type}`,
    );
  if (request.from && request.from.toLowerCase() !== owner.address.toLowerCase())
    throw new Error(`the request is for ${request.from}; this wallet holds ${owner.address}`);
  const startTime = data.startTime ?? Math.floor((options.now ?? new Date()).getTime() / 1000);
  const rule = <T extends string>(type: T) => request.rules?.find((candidate) => candidate.type === type);

  const builder = createCaveatBuilder(environment)
    .addCaveat('erc20PeriodTransfer', {
      tokenAddress: data.tokenAddress,
      periodAmount: BigInt(data.periodAmount),
      periodDuration: data.periodDuration,
      startDate: startTime,
    })
    .addCaveat('valueLte', { maxValue: 0n });
  const expiry = rule('expiry');
  if (expiry && 'timestamp' in expiry.data)
    builder.addCaveat('timestamp', { afterThreshold: 0, beforeThreshold: expiry.data.timestamp });
  const redeemer = rule('redeemer');
  if (redeemer && 'addresses' in redeemer.data)
    builder.addCaveat('redeemer', { redeemers: redeemer.data.addresses });
  const payee = rule('payee');
  if (payee && 'addresses' in payee.data) {
    const [address, ...more] = payee.data.addresses;
    if (!address || more.length > 0) throw new Error('an ERC-20 permission takes exactly one payee');
    builder.addCaveat('allowedCalldata', {
      startIndex: 4,
      value: `0x${address.slice(2).toLowerCase().padStart(64, '0')}`,
    });
  }
  const nonce =
    options.nonce ??
    (await currentDelegatorNonce(
      options.client,
      environment.caveatEnforcers.NonceEnforcer as Address,
      environment.DelegationManager,
      owner.address,
    ));
  builder.addCaveat('nonce', { nonce: numberToHex(nonce, { size: 32 }) });

  const account = await toMetaMaskSmartAccount({
    client: options.client,
    implementation: Implementation.Stateless7702,
    address: owner.address,
    signer: { account: owner },
    environment,
  });
  const delegation = {
    delegate: request.to,
    delegator: owner.address,
    authority: ROOT_AUTHORITY,
    caveats: builder.build(),
    salt: generateSalt(),
  } as const;
  const signature = await account.signDelegation({
    delegation,
    chainId: hexToNumber(request.chainId),
  });
  return {
    ...request,
    from: owner.address,
    permission: { ...request.permission, data: { ...data, startTime } },
    context: encodeDelegations([{ ...delegation, signature }]),
    dependencies: [],
    delegationManager: environment.DelegationManager,
  };
}
