import {
  decodeDelegations,
  SIGNABLE_DELEGATION_TYPED_DATA,
  toDelegationStruct,
} from '@metamask/smart-accounts-kit/utils';
import { type Address, getAddress, type Hex, numberToHex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { beforeAll, describe, expect, test } from 'vitest';
import { mintUsdc, usdcBalance } from '../../devkit/chain/index.js';
import { upgradeEoa } from '../../devkit/wallet/eip7702.js';
import {
  type Erc20PeriodicPermissionRequest,
  type GrantedPermission,
  grantErc20PeriodicPermission,
} from '../../devkit/wallet/execution-permissions.js';
import { authorizeSession, fetchTerms, type SessionTerms } from '../../src/client/index.js';
import { chat, openaiFor, SMALL, SMALL_COST_ATOMIC, useSessionGateway } from './harness.js';

/**
 * ERC-7715: what a wallet's `wallet_requestExecutionPermissions` grants (MetaMask's
 * erc20-token-periodic caveat set, from an EOA upgraded with EIP-7702) is a delegation the gateway
 * verifies, accepts and redeems; sets that leave out the token, the cap or the expiry are refused.
 */

let terms: SessionTerms;

const stack = useSessionGateway({
  limits: { sessionMaxLifetimeSeconds: 7 * 86_400, sessionMinCapAtomic: 10_000n },
});
beforeAll(async () => {
  terms = await fetchTerms(stack.gateway.url);
});

const nowSeconds = () => Math.floor(Date.now() / 1000);

/** A payer key of the chain, its EOA upgraded to the stateless DeleGator and holding USDC. */
async function upgradedOwner(index: number, usdc = 1_000_000n) {
  const owner = privateKeyToAccount(stack.local.accounts.payers[index]!.privateKey);
  await upgradeEoa({
    owner,
    implementation: stack.local.environment.implementations.EIP7702StatelessDeleGatorImpl as Address,
    sponsor: stack.local.deployer,
    client: stack.local.publicClient,
  });
  await mintUsdc(stack.local, owner.address, usdc);
  return owner;
}

/** The request the dashboard sends: USDC per day to the session key, expiring, optionally paying the treasury only. */
function periodicRequest(
  owner: Address,
  overrides: { token?: Address; expiry?: number | null; payee?: Address; periodAmount?: bigint } = {},
): Erc20PeriodicPermissionRequest {
  const expiry = overrides.expiry === undefined ? nowSeconds() + 86_400 : overrides.expiry;
  return {
    chainId: numberToHex(stack.local.chainId),
    from: owner,
    to: terms.sessionKey,
    permission: {
      type: 'erc20-token-periodic',
      isAdjustmentAllowed: false,
      data: {
        tokenAddress: overrides.token ?? terms.usdc.address,
        periodAmount: numberToHex(overrides.periodAmount ?? 1_000_000n),
        periodDuration: 86_400,
        startTime: nowSeconds() - 60,
        justification: 'Pays for your LLM requests after each one completes',
      },
    },
    rules: [
      ...(expiry === null ? [] : [{ type: 'expiry' as const, data: { timestamp: expiry } }]),
      ...(overrides.payee ? [{ type: 'payee' as const, data: { addresses: [overrides.payee] } }] : []),
    ],
  };
}

async function grant(
  owner: ReturnType<typeof privateKeyToAccount>,
  request: Erc20PeriodicPermissionRequest,
  nonce?: bigint,
) {
  return grantErc20PeriodicPermission({
    request,
    owner,
    client: stack.local.publicClient,
    environment: stack.local.environment,
    nonce,
  });
}

/** What the dashboard posts: the single delegation of the permission's context, and its signature. */
async function postGrant(granted: GrantedPermission) {
  const [delegation, ...more] = decodeDelegations(granted.context);
  expect(more).toHaveLength(0);
  const { signature, ...unsigned } = delegation!;
  return authorizeSession({
    gatewayUrl: stack.gateway.url,
    delegation: unsigned,
    signature: signature as Hex,
  }).then(
    (session) => ({ session, error: undefined }),
    (error: { status: number; field?: string; message: string }) => ({ session: undefined, error }),
  );
}

describe("MetaMask's erc20-token-periodic grant", () => {
  let owner: ReturnType<typeof privateKeyToAccount>;
  beforeAll(async () => {
    owner = await upgradedOwner(0);
  });

  test('carries the caveats MetaMask grants: period cap, no native value, expiry, nonce; no recipient pin', async () => {
    const granted = await grant(owner, periodicRequest(owner.address));
    const [delegation] = decodeDelegations(granted.context);
    const names = new Map(
      Object.entries(stack.local.environment.caveatEnforcers).map(([name, address]) => [
        address.toLowerCase(),
        name,
      ]),
    );
    expect(delegation!.caveats.map((caveat) => names.get(caveat.enforcer.toLowerCase()))).toEqual([
      'ERC20PeriodTransferEnforcer',
      'ValueLteEnforcer',
      'TimestampEnforcer',
      'NonceEnforcer',
    ]);
    expect(getAddress(delegation!.delegator)).toBe(owner.address);
  });

  test("authorizes a session for the EOA's own address; three requests, each earlier one paid from its own USDC", async () => {
    const { session, error } = await postGrant(await grant(owner, periodicRequest(owner.address)));
    expect(error).toBeUndefined();
    expect(session!.wallet).toBe(owner.address);
    expect(session!.limits).toMatchObject({
      token: terms.usdc.address,
      recipient: terms.treasury,
      period: { amountAtomic: '1000000', periodSeconds: 86_400 },
    });

    const client = openaiFor(stack.gateway, session!.token);
    const [ownerBefore, treasuryBefore] = await Promise.all([
      usdcBalance(stack.local, owner.address),
      usdcBalance(stack.local, terms.treasury),
    ]);
    stack.anthropic.script(
      { text: 'one', usage: SMALL },
      { text: 'two', usage: SMALL },
      { text: 'three', usage: SMALL },
    );
    const settled: Array<string | null> = [];
    const transactions: Hex[] = [];
    for (const content of ['one', 'two', 'three']) {
      const { headers } = await chat(client, content);
      settled.push(headers.get('x-settlement-amount'));
      if (headers.get('x-settlement-tx')) transactions.push(headers.get('x-settlement-tx') as Hex);
    }
    // The first request owes nothing before it; each later one settles the one before.
    expect(settled).toEqual([null, `${SMALL_COST_ATOMIC}`, `${SMALL_COST_ATOMIC}`]);
    expect(await usdcBalance(stack.local, owner.address)).toBe(ownerBefore - 2n * SMALL_COST_ATOMIC);
    expect(await usdcBalance(stack.local, terms.treasury)).toBe(treasuryBefore + 2n * SMALL_COST_ATOMIC);
    // Four caveats, the period enforcer's state stored on the first: 304,961 then 190,323 gas here.
    const gas = await Promise.all(
      transactions.map(
        async (hash) => (await stack.local.publicClient.getTransactionReceipt({ hash })).gasUsed,
      ),
    );
    expect(gas).toHaveLength(2);
    for (const used of gas) expect(used).toBeLessThan(320_000n);
  });

  test('with a payee rule naming the treasury the recipient is pinned, and accepted', async () => {
    const granted = await grant(owner, periodicRequest(owner.address, { payee: terms.treasury }));
    expect(decodeDelegations(granted.context)[0]!.caveats).toHaveLength(5);
    const { session, error } = await postGrant(granted);
    expect(error).toBeUndefined();
    expect(session!.wallet).toBe(owner.address);
  });
});

describe('grants the policy refuses (400 naming the field)', () => {
  let owner: ReturnType<typeof privateKeyToAccount>;
  beforeAll(async () => {
    owner = await upgradedOwner(1);
  });

  const refusals: Array<
    [string, (owner: Address) => Erc20PeriodicPermissionRequest, string, RegExp, bigint?]
  > = [
    [
      'no expiry (the user removed the expiry rule in the wallet)',
      (from) => periodicRequest(from, { expiry: null }),
      'delegation.caveats',
      /must set an expiry/,
    ],
    [
      'another token than USDC',
      (from) => periodicRequest(from, { token: stack.local.accounts.deployer.address }),
      'delegation.caveats[0].terms',
      /must name USDC/,
    ],
    [
      'a payee other than the treasury',
      (from) => periodicRequest(from, { payee: stack.local.accounts.deployer.address }),
      'delegation.caveats[3].terms',
      /must pin calldata of transfer/,
    ],
    [
      'an amount per period below SESSION_MIN_CAP_ATOMIC',
      (from) => periodicRequest(from, { periodAmount: 9_999n }),
      'delegation.caveats[0].terms',
      /periodAmount must be at least 10000/,
    ],
    [
      "a nonce other than the delegator's (revoked with incrementNonce)",
      (from) => periodicRequest(from),
      'delegation.caveats',
      /NonceEnforcer nonce 1 but the delegator's is 0/,
      1n,
    ],
  ];

  test.each(refusals)('%s', async (_case, request, field, message, nonce) => {
    const { session, error } = await postGrant(await grant(owner, request(owner.address), nonce));
    expect(session).toBeUndefined();
    expect(error).toMatchObject({ status: 400, field });
    expect(error!.message).toMatch(message);
  });

  test('no amount cap: only no-native-value, expiry and nonce', async () => {
    const granted = await grant(owner, periodicRequest(owner.address));
    const [delegation] = decodeDelegations(granted.context);
    const { signature: _signature, ...unsigned } = delegation!;
    const withoutCap = { ...unsigned, caveats: unsigned.caveats.slice(1) };
    // Signed as the wallet signs: the refusal is the policy's, not the signature's.
    const signature = await owner.signTypedData({
      domain: terms.domain,
      types: SIGNABLE_DELEGATION_TYPED_DATA,
      primaryType: 'Delegation',
      message: toDelegationStruct({ ...withoutCap, signature: '0x' }),
    });
    const refused = await authorizeSession({
      gatewayUrl: stack.gateway.url,
      delegation: withoutCap,
      signature,
    }).catch((error: unknown) => error);
    expect(refused).toMatchObject({ status: 400, field: 'delegation.caveats' });
    expect((refused as Error).message).toMatch(/must cap the amount/);
  });
});
