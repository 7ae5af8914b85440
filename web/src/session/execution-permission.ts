import { erc7715ProviderActions } from '@metamask/smart-accounts-kit/actions';
import { decodeDelegations } from '@metamask/smart-accounts-kit/utils';
import { type AuthorizedSession, authorizeSession } from '@paygate/server/client';
import type { Address, Client } from 'viem';
import type { Terms } from '../gateway/terms';

/** What the payer grants the session key from its own address: USDC per period, until an expiry. */
export interface PeriodicGrant {
  amountAtomic: bigint;
  periodSeconds: number;
  expiresAt: Date;
}

/** How the wallet grants the permission: ERC-7715, and whether it can pin the recipient (`payee` rule). */
export interface PermissionSupport {
  payee: boolean;
}

/** The period starts a minute back, so a wallet clock a little ahead of the gateway's is not "in the future". */
const CLOCK_SKEW_SECONDS = 60;
const JUSTIFICATION = 'Pays the LLM gateway for your requests, after each one completes.';

/** An EIP-1193 "unsupported method" (4200) or JSON-RPC "method not found" (-32601), however viem wraps it. */
export function isUnsupportedMethod(error: unknown): boolean {
  for (
    let cause = error as { code?: unknown; cause?: unknown } | undefined;
    cause;
    cause = cause.cause as never
  )
    if (cause.code === 4200 || cause.code === -32601) return true;
  return false;
}

/**
 * Whether the wallet grants ERC-7715 `erc20-token-periodic` permissions on the gateway's chain
 * (`wallet_getSupportedExecutionPermissions`); undefined when it does not know the method or the chain.
 */
export async function permissionSupport(
  wallet: Client,
  chainId: number,
): Promise<PermissionSupport | undefined> {
  try {
    const supported = await wallet.extend(erc7715ProviderActions()).getSupportedExecutionPermissions();
    const periodic = supported['erc20-token-periodic'];
    if (!periodic?.chainIds.includes(chainId)) return undefined;
    return { payee: periodic.ruleTypes.includes('payee') };
  } catch (error) {
    if (isUnsupportedMethod(error)) return undefined;
    throw error;
  }
}

/**
 * Asks the wallet for an ERC-7715 `erc20-token-periodic` USDC permission to the gateway's session key
 * (recipient pinned to the treasury where the wallet can), then, once `upgraded` resolves (the wallet may
 * upgrade the address as it grants), hands the delegation it signed (the permission's `context`, one
 * delegation from the owner's address) to `POST /v1/authorize`.
 */
export async function authorizeWithPermission(
  wallet: Client,
  terms: Terms,
  owner: Address,
  grant: PeriodicGrant,
  support: PermissionSupport,
  upgraded: () => Promise<void>,
): Promise<AuthorizedSession> {
  const [granted] = await wallet.extend(erc7715ProviderActions()).requestExecutionPermissions([
    {
      chainId: terms.chainId,
      from: owner,
      to: terms.sessionKey,
      expiry: Math.floor(grant.expiresAt.getTime() / 1000),
      ...(support.payee && { payee: [terms.treasury] }),
      permission: {
        type: 'erc20-token-periodic',
        // what the page showed is what is granted
        isAdjustmentAllowed: false,
        data: {
          tokenAddress: terms.usdc.address,
          periodAmount: grant.amountAtomic,
          periodDuration: grant.periodSeconds,
          startTime: Math.floor(Date.now() / 1000) - CLOCK_SKEW_SECONDS,
          justification: JUSTIFICATION,
        },
      },
    },
  ]);
  if (!granted) throw new Error('the wallet granted no permission');
  const chain = decodeDelegations(granted.context);
  const [delegation] = chain;
  if (chain.length !== 1 || !delegation)
    throw new Error(
      `the wallet granted a chain of ${chain.length} delegations; the gateway takes one, straight from your address`,
    );
  const { signature, ...unsigned } = delegation;
  await upgraded();
  return authorizeSession({
    gatewayUrl: window.location.origin,
    delegation: unsigned,
    signature,
    chainId: terms.chainId,
  });
}
