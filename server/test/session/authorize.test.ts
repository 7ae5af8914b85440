import { ERC1967Proxy, SimpleFactory } from '@metamask/delegation-abis';
import { ERC1967Proxy as ERC1967ProxyBytecode } from '@metamask/delegation-abis/bytecode';
import { type Caveat, Implementation, toMetaMaskSmartAccount } from '@metamask/smart-accounts-kit';
import { APIError } from 'openai';
import {
  type Address,
  concat,
  decodeAbiParameters,
  decodeFunctionData,
  encodeDeployData,
  encodeFunctionData,
  getAddress,
  type Hex,
  pad,
  serializeErc6492Signature,
  toHex,
} from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { beforeAll, describe, expect, onTestFinished, test } from 'vitest';
import { mintUsdc, type PayerAccount, usdcBalance } from '../../devkit/chain/index.js';
import { artifact as inertDelegator } from '../../devkit/contracts/artifacts/InertDelegator.js';
import type { ContractArtifact } from '../../devkit/contracts/compile.js';
import { buildApp } from '../../src/app.js';
import { debtOf } from '../../src/billing/ledger.js';
import {
  authorizeWithSmartAccount,
  buildSessionDelegation,
  fetchTerms,
  GatewayError,
  type SessionTerms,
  signSessionDelegation,
  termsOfAccount,
  type UnsignedDelegation,
} from '../../src/client/index.js';
import { testConfig } from '../support/config.js';
import { authorize, chat, newPayer, openaiFor, useSessionGateway } from './harness.js';

let terms: SessionTerms;
let payer: PayerAccount;

const MAX_LIFETIME_SECONDS = 7 * 86_400;

const stack = useSessionGateway({
  limits: { sessionMaxLifetimeSeconds: MAX_LIFETIME_SECONDS, sessionMinCapAtomic: 10_000n },
});
beforeAll(async () => {
  terms = await fetchTerms(stack.gateway.url);
  payer = await newPayer(stack.local, 0);
});

/** POST /v1/authorize as any client would send it. */
async function post(body: unknown, signature?: Hex) {
  const res = await fetch(`${stack.gateway.url}/v1/authorize`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(signature !== undefined && { 'x-authorization-signature': signature }),
    },
    body: JSON.stringify(body),
  });
  // biome-ignore lint/suspicious/noExplicitAny: the assertions read the envelope freely
  return { status: res.status, body: (await res.json()) as { data: any; error: any } };
}

function delegationFor(account: PayerAccount, overrides: { cap?: bigint; expiresInSeconds?: number } = {}) {
  return buildSessionDelegation({
    terms,
    smartAccount: account.account,
    cap: overrides.cap ?? 1_000_000n,
    expiresAt: new Date(Date.now() + (overrides.expiresInSeconds ?? 3600) * 1000),
  });
}

const sign = (account: PayerAccount, delegation: UnsignedDelegation) =>
  signSessionDelegation(account.account, delegation, terms);

/** A contract of the devkit, deployed. */
async function deployedContract(contract: ContractArtifact): Promise<Address> {
  const hash = await stack.local.deployer.deployContract({ abi: contract.abi, bytecode: contract.bytecode });
  return (await stack.local.publicClient.waitForTransactionReceipt({ hash })).contractAddress as Address;
}

/** JWT claims, read the way any client can (no verification). */
function claimsOf(token: string): { sub: string; sid: string; exp: number } {
  return JSON.parse(Buffer.from(token.split('.')[1] as string, 'base64url').toString());
}

describe('GET /v1/authorize', () => {
  test('publishes what a client needs to build the delegation', async () => {
    const res = await fetch(`${stack.gateway.url}/v1/authorize`);
    expect(res.status).toBe(200);
    const { data } = (await res.json()) as { data: SessionTerms };
    expect(data).toMatchObject({
      chainId: stack.local.chainId,
      network: `eip155:${stack.local.chainId}`,
      sessionKey: stack.local.accounts.gateway.address,
      treasury: stack.local.accounts.treasury.address,
      usdc: { address: getAddress(stack.local.usdc), name: 'USD Coin', version: '2', decimals: 6 },
      delegationManager: getAddress(stack.local.environment.DelegationManager),
      domain: {
        name: 'DelegationManager',
        version: '1',
        chainId: stack.local.chainId,
        verifyingContract: getAddress(stack.local.environment.DelegationManager),
      },
      policy: {
        authority: `0x${'f'.repeat(64)}`,
        minCapAtomic: '10000',
        recipient: { startIndex: 4, value: pad(stack.local.accounts.treasury.address, { size: 32 }) },
        expiry: { maxSeconds: MAX_LIFETIME_SECONDS },
      },
    });
    for (const name of [
      'ERC20TransferAmountEnforcer',
      'ERC20PeriodTransferEnforcer',
      'TimestampEnforcer',
    ] as const)
      expect(data.enforcers[name]).toBe(getAddress(stack.local.environment.caveatEnforcers[name] as Address));
  });

  test('/v1/models carries the same terms', async () => {
    const res = await fetch(`${stack.gateway.url}/v1/models`);
    const body = (await res.json()) as { gateway: { authorize: SessionTerms } };
    expect(body.gateway.authorize).toEqual(terms);
  });
});

describe('with the chain out of reach', () => {
  test('GET /v1/authorize is 503, and /v1/models still lists the models', async () => {
    const app = await buildApp(testConfig());
    onTestFinished(() => app.close());
    const terms = await app.inject({ method: 'GET', url: '/v1/authorize' });
    expect(terms.statusCode).toBe(503);
    expect(terms.json().error).toMatchObject({ code: 'payments_unavailable' });
    const models = await app.inject({ method: 'GET', url: '/v1/models' });
    expect(models.statusCode).toBe(200);
    expect(models.json().gateway).toEqual({ authorize: null });
  });
});

describe('POST /v1/authorize', () => {
  test('201 with a token for the smart account, expiring with the delegation', async () => {
    const other = await newPayer(stack.local, 1);
    const expiresAt = new Date(Date.now() + 2 * 3600 * 1000);
    const delegation = buildSessionDelegation({
      terms,
      smartAccount: other.account,
      cap: 2_500_000n,
      expiresAt,
    });
    const res = await post({ chainId: stack.local.chainId, delegation }, await sign(other, delegation));
    expect(res.status).toBe(201);
    const expirySeconds = Math.floor(expiresAt.getTime() / 1000);
    expect(res.body.data).toEqual({
      token: expect.any(String),
      sessionId: expect.any(String),
      wallet: other.address,
      expiresAt: new Date(expirySeconds * 1000).toISOString(),
      limits: {
        token: getAddress(stack.local.usdc),
        recipient: stack.local.accounts.treasury.address,
        expiresAt: new Date(expirySeconds * 1000).toISOString(),
        totalCapAtomic: '2500000',
      },
    });
    expect(claimsOf(res.body.data.token)).toMatchObject({
      sub: other.address,
      sid: res.body.data.sessionId,
      exp: expirySeconds,
    });
    const stored = await stack.gateway.store.db
      .selectFrom('sessions')
      .selectAll()
      .where('id', '=', res.body.data.sessionId)
      .executeTakeFirstOrThrow();
    expect(stored.wallet).toBe(other.address);
    expect(JSON.parse(stored.delegation)).toMatchObject({ delegator: other.address, salt: delegation.salt });
  });

  test('a per-period cap is accepted and reported', async () => {
    const session = await authorize(stack.gateway, await newPayer(stack.local, 2), {
      cap: 50_000n,
      period: { seconds: 86_400 },
    });
    expect(session.limits.period).toEqual({
      amountAtomic: '50000',
      periodSeconds: 86_400,
      startsAt: expect.any(String),
    });
    expect(session.limits.totalCapAtomic).toBeUndefined();
  });

  test('401 when the signature is not the smart account’s, or missing', async () => {
    const stranger = await newPayer(stack.local, 3);
    const delegation = delegationFor(payer);
    const signedByStranger = await signSessionDelegation(
      stranger.account,
      { ...delegation, delegator: stranger.address },
      terms,
    );
    const forged = await post({ chainId: stack.local.chainId, delegation }, signedByStranger);
    expect(forged.status).toBe(401);
    expect(forged.body.error).toMatchObject({ code: 'unauthorized' });

    const otherSalt = await sign(payer, { ...delegation, salt: '0x01' });
    expect((await post({ chainId: stack.local.chainId, delegation }, otherSalt)).status).toBe(401);
    expect((await post({ chainId: stack.local.chainId, delegation })).status).toBe(401);
  });

  const setCaveat = (delegation: UnsignedDelegation, index: number, caveat: Partial<Caveat>) => ({
    ...delegation,
    caveats: delegation.caveats.map((current, i) => (i === index ? { ...current, ...caveat } : current)),
  });
  const dropCaveat = (delegation: UnsignedDelegation, index: number) => ({
    ...delegation,
    caveats: delegation.caveats.filter((_, i) => i !== index),
  });
  const enforcer = (name: string) => stack.local.environment.caveatEnforcers[name] as Address;
  const seconds = (fromNow: number) => BigInt(Math.floor(Date.now() / 1000) + fromNow);
  const timestampTerms = (before: bigint) => pad(toHex(before), { size: 32 });
  const capTerms = (token: Address, amount: bigint) => concat([token, pad(toHex(amount), { size: 32 })]);
  // buildSessionDelegation's caveats: [0] ERC20TransferAmount, [1] AllowedCalldata, [2] Timestamp.
  const policyCases: Array<
    [string, (d: UnsignedDelegation) => UnsignedDelegation | Record<string, unknown>, string]
  > = [
    [
      'the delegate is not the session key',
      (d) => ({ ...d, delegate: stack.local.accounts.treasury.address }),
      'delegation.delegate',
    ],
    [
      'the authority is a parent delegation',
      (d) => ({ ...d, authority: `0x${'0'.repeat(63)}1` }),
      'delegation.authority',
    ],
    [
      'an enforcer outside the policy',
      (d) =>
        setCaveat(d, 0, { enforcer: enforcer('LimitedCallsEnforcer'), terms: pad('0x05', { size: 32 }) }),
      'delegation.caveats[0].enforcer',
    ],
    [
      'the cap is on another token',
      (d) => setCaveat(d, 0, { terms: capTerms(stack.local.accounts.deployer.address, 1_000_000n) }),
      'delegation.caveats[0].terms',
    ],
    [
      'the cap terms are truncated',
      (d) => setCaveat(d, 0, { terms: '0x1234' }),
      'delegation.caveats[0].terms',
    ],
    [
      'the cap is below the minimum',
      (d) => setCaveat(d, 0, { terms: capTerms(stack.local.usdc, 100n) }),
      'delegation.caveats[0].terms',
    ],
    ['no amount cap', (d) => dropCaveat(d, 0), 'delegation.caveats'],
    [
      'transfers to another recipient',
      (d) =>
        setCaveat(d, 1, {
          terms:
            `${pad('0x04', { size: 32 })}${pad(stack.local.accounts.deployer.address, { size: 32 }).slice(2)}` as Hex,
        }),
      'delegation.caveats[1].terms',
    ],
    [
      'an expiry beyond SESSION_MAX_LIFETIME_SECONDS',
      (d) => setCaveat(d, 2, { terms: timestampTerms(seconds(MAX_LIFETIME_SECONDS + 3600)) }),
      'delegation.caveats[2].terms',
    ],
    [
      'an expiry in the past',
      (d) => setCaveat(d, 2, { terms: timestampTerms(seconds(-10)) }),
      'delegation.caveats[2].terms',
    ],
    ['no expiry', (d) => dropCaveat(d, 2), 'delegation.caveats'],
    [
      'another redeemer',
      (d) => ({
        ...d,
        caveats: [
          ...d.caveats,
          {
            enforcer: enforcer('RedeemerEnforcer'),
            terms: stack.local.accounts.deployer.address,
            args: '0x' as Hex,
          },
        ],
      }),
      'delegation.caveats[3].terms',
    ],
    [
      'a malformed enforcer',
      (d) => setCaveat(d, 0, { enforcer: '0x1234' as Address }),
      'delegation.caveats[0].enforcer',
    ],
    ['no salt', ({ salt: _salt, ...rest }) => rest, 'delegation.salt'],
    [
      // The enforcer refuses any value shorter than a byte (invalid-terms-size): nothing could be paid.
      'the recipient pin has an empty value',
      (d) => setCaveat(d, 1, { terms: pad('0x04', { size: 32 }) }),
      'delegation.caveats[1].terms',
    ],
    [
      // The period enforcer refuses every transfer under a zero start date (invalid-zero-start-date).
      'a period cap starting at 0',
      (d) =>
        setCaveat(d, 0, {
          enforcer: enforcer('ERC20PeriodTransferEnforcer'),
          terms: concat([
            stack.local.usdc,
            pad(toHex(1_000_000n), { size: 32 }),
            pad(toHex(86_400n), { size: 32 }),
            pad('0x00', { size: 32 }),
          ]),
        }),
      'delegation.caveats[0].terms',
    ],
  ];

  test.each(policyCases)('400 naming the field when %s', async (_case, mutate, field) => {
    const valid = delegationFor(payer);
    const delegation = mutate(valid) as UnsignedDelegation;
    // A body the kit cannot even sign is refused before its signature is looked at.
    const signature = await sign(payer, delegation).catch(() => sign(payer, valid));
    const res = await post({ chainId: stack.local.chainId, delegation }, signature);
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'validation_error', field });
  });

  test('401, not a 500 or a 503, for a signature ending in the ERC-6492 or ERC-8010 suffix around nothing', async () => {
    const delegation = delegationFor(payer);
    for (const magic of ['6492', '8010']) {
      const res = await post({ chainId: stack.local.chainId, delegation }, `0x${magic.repeat(16)}`);
      expect(`${res.status} ${res.body.error?.code}`).toBe('401 unauthorized');
    }
  });

  test('the client helper backdates a period cap a minute, so a payer clock running ahead is accepted', async () => {
    const session = await authorize(stack.gateway, await newPayer(stack.local, 2, { salt: 9 }), {
      cap: 50_000n,
      period: { seconds: 86_400 },
    });
    const startsAt = Date.parse(session.limits.period?.startsAt ?? '');
    expect(Date.now() - startsAt).toBeGreaterThanOrEqual(59_000);
  });

  test('the client helper refuses terms naming enforcers other than its smart account uses', async () => {
    const hostile = {
      ...terms,
      enforcers: { ...terms.enforcers, ERC20TransferAmountEnforcer: stack.local.accounts.deployer.address },
    };
    expect(() => termsOfAccount(hostile, payer.account)).toThrow(/ERC20TransferAmountEnforcer/);
    const otherManager = {
      ...terms,
      domain: { ...terms.domain, verifyingContract: stack.local.accounts.deployer.address },
    };
    expect(() => termsOfAccount(otherManager, payer.account)).toThrow(/DelegationManager/);
    expect(termsOfAccount(terms, payer.account).environment).toBe(payer.account.environment);
  });

  test('400 on another chain id, or a signature that is not hex', async () => {
    const delegation = delegationFor(payer);
    const signature = await sign(payer, delegation);
    const wrongChain = await post({ chainId: 8453, delegation }, signature);
    expect(wrongChain.status).toBe(400);
    expect(wrongChain.body.error.field).toBe('chainId');
    const notHex = await post({ chainId: stack.local.chainId, delegation }, 'signed' as Hex);
    expect(notHex.body.error.field).toBe('x-authorization-signature');
  });

  test('a delegation authorizes one session only: a replay is refused', async () => {
    const fresh = await newPayer(stack.local, 4);
    const delegation = delegationFor(fresh);
    const signature = await sign(fresh, delegation);
    expect((await post({ chainId: stack.local.chainId, delegation }, signature)).status).toBe(201);
    const replay = await post({ chainId: stack.local.chainId, delegation }, signature);
    expect(replay.status).toBe(400);
    expect(replay.body.error).toMatchObject({ code: 'validation_error', field: 'delegation.salt' });
  });

  test('an account not deployed yet authorizes with ERC-6492; its raw signature is refused', async () => {
    const undeployed = await newPayer(stack.local, 5, { deploy: false });
    expect(await stack.local.publicClient.getCode({ address: undeployed.address })).toBeUndefined();
    const raw = delegationFor(undeployed);
    const rawSignature = await undeployed.account.signDelegation({ delegation: raw });
    const refused = await post({ chainId: stack.local.chainId, delegation: raw }, rawSignature);
    expect(refused.status).toBe(400);
    expect(refused.body.error.field).toBe('delegation.delegator');

    const session = await authorize(stack.gateway, undeployed);
    expect(session.wallet).toBe(undeployed.address);
  });

  test('400 for an ERC-6492 signature deploying anything but a DeleGator proxy through the factory', async () => {
    const undeployed = await newPayer(stack.local, 5, { salt: 3, deploy: false });
    const delegation = delegationFor(undeployed);
    const raw = await undeployed.account.signDelegation({ delegation });
    const { factory, factoryData } = await undeployed.account.getFactoryArgs();
    const [creationCode, salt] = decodeFunctionData({ abi: SimpleFactory, data: factoryData as Hex }).args;
    const [implementation, initialization] = decodeAbiParameters(
      [{ type: 'address' }, { type: 'bytes' }],
      `0x${creationCode.slice(ERC1967ProxyBytecode.length)}`,
    );
    const proxy = (over: Address, init: Hex) =>
      encodeDeployData({ abi: ERC1967Proxy, bytecode: ERC1967ProxyBytecode, args: [over, init] });
    const deploying = (code: Hex) =>
      encodeFunctionData({ abi: SimpleFactory, functionName: 'deploy', args: [code, salt] });
    const forged: Array<[string, Hex]> = [
      ['any bytecode', deploying('0x600a600c600039600a6000f3602a60005260206000f3')],
      [
        'a proxy over another contract',
        deploying(proxy(stack.local.environment.DelegationManager, initialization)),
      ],
      ['a DeleGator proxy not initialized', deploying(proxy(implementation, '0x'))],
      [
        'not a deploy call',
        encodeFunctionData({ abi: SimpleFactory, functionName: 'computeAddress', args: [salt, salt] }),
      ],
    ];
    for (const [what, data] of forged) {
      const signature = serializeErc6492Signature({ address: factory as Address, data, signature: raw });
      const res = await post({ chainId: stack.local.chainId, delegation }, signature);
      expect(`${what}: ${res.status} ${res.body.error?.field}`).toBe(
        `${what}: 400 x-authorization-signature`,
      );
      expect(res.body.error.message).toMatch(/DeleGator proxy/);
    }
    const genuine = serializeErc6492Signature({
      address: factory as Address,
      data: factoryData as Hex,
      signature: raw,
    });
    expect((await post({ chainId: stack.local.chainId, delegation }, genuine)).status).toBe(201);
  });

  test('400 for an account whose deployment would cost more than 1,000,000 gas (20 passkeys); one passkey is fine', async () => {
    const costly = await newPayer(stack.local, 5, { salt: 12, deploy: false, passkeys: 20 });
    const error = await authorize(stack.gateway, costly).catch((caught: unknown) => caught);
    expect(error).toMatchObject({ status: 400, field: 'x-authorization-signature' });
    expect((error as Error).message).toMatch(/needing \d+ gas to deploy/);
    const usual = await newPayer(stack.local, 5, { salt: 13, deploy: false, passkeys: 1 });
    expect((await authorize(stack.gateway, usual)).wallet).toBe(usual.address);
  });

  test('400 for a deployed contract that is not a MetaMask smart account, or a DeleGator proxy over another contract', async () => {
    // It answers any signature: the signature check alone would let it in.
    const inert = await deployedContract(inertDelegator);
    const inertDelegation = buildSessionDelegation({
      terms,
      delegator: inert,
      cap: 1_000_000n,
      expiresAt: new Date(Date.now() + 3_600_000),
    });
    const anyCode = await post(
      { chainId: stack.local.chainId, delegation: inertDelegation },
      `0x${'00'.repeat(65)}`,
    );
    expect(`${anyCode.status} ${anyCode.body.error.field}`).toBe('400 delegation.delegator');
    expect(anyCode.body.error.message).toMatch(/must be a MetaMask smart account/);

    const upgraded = await newPayer(stack.local, 3, { salt: 31 });
    await stack.local.testClient.setStorageAt({
      address: upgraded.address,
      index: '0x360894a13ba1a3210667c828492db98dca3e2076cc3735a920a3ca505d382bbc',
      value: pad(inert, { size: 32 }),
    });
    const delegation = delegationFor(upgraded);
    const overOther = await post(
      { chainId: stack.local.chainId, delegation },
      await sign(upgraded, delegation),
    );
    expect(`${overOther.status} ${overOther.body.error.field}`).toBe('400 delegation.delegator');
  });

  test('a delegation pinning no recipient is accepted, still bounded to USDC, its cap and its expiry (what ERC-7715 grants carry)', async () => {
    const delegation = dropCaveat(delegationFor(payer), 1);
    const res = await post({ chainId: stack.local.chainId, delegation }, await sign(payer, delegation));
    expect(res.status).toBe(201);
    expect(res.body.data.limits).toMatchObject({
      token: stack.local.usdc,
      recipient: terms.treasury,
      totalCapAtomic: '1000000',
    });
  });

  test("an EOA delegating (EIP-7702) to the framework's stateless DeleGator authorizes a session and pays from it; one delegating elsewhere is refused", async () => {
    const owner = privateKeyToAccount(stack.local.accounts.payers[6]!.privateKey);
    const delegateTo = (contract: Address) =>
      stack.local.testClient.setCode({ address: owner.address, bytecode: concat(['0xef0100', contract]) });
    onTestFinished(() => stack.local.testClient.setCode({ address: owner.address, bytecode: '0x' }));
    await delegateTo(stack.local.environment.implementations.EIP7702StatelessDeleGatorImpl as Address);
    await mintUsdc(stack.local, owner.address, 1_000_000n);
    const account = await toMetaMaskSmartAccount({
      client: stack.local.publicClient,
      implementation: Implementation.Stateless7702,
      address: owner.address,
      signer: { account: owner },
      environment: stack.local.environment,
    });
    const session = await authorizeWithSmartAccount({
      gatewayUrl: stack.gateway.url,
      smartAccount: account,
      cap: 1_000_000n,
      // Far from its end: each debt is left to the next request, not settled on completion.
      expiresAt: new Date(Date.now() + 86_400_000),
    });
    expect(session.wallet).toBe(owner.address);
    const client = openaiFor(stack.gateway, session.token);
    stack.anthropic.script({ text: 'one', usage: { input_tokens: 10, output_tokens: 2 } }, { text: 'two' });
    await chat(client);
    const paid = await client.chat.completions
      .create({ model: 'anthropic/claude-sonnet-4.5', messages: [{ role: 'user', content: 'hi' }] })
      .withResponse();
    expect(paid.response.headers.get('x-settlement-amount')).toBe('66');

    // The owner clears its delegation (EIP-7702 to the zero address): what it owes cannot be
    // collected, so nothing more is forwarded.
    await stack.local.testClient.setCode({ address: owner.address, bytecode: '0x' });
    const calls = stack.anthropic.log.length;
    const cleared = await chat(client).catch((error: unknown) => error);
    expect(cleared).toBeInstanceOf(APIError);
    expect(cleared).toMatchObject({ status: 402, code: 'payment_required' });
    expect((cleared as APIError).message).toMatch(/no code on chain any more/);
    expect(stack.anthropic.log.length).toBe(calls);

    await delegateTo(stack.local.environment.DelegationManager);
    const delegation = buildSessionDelegation({
      terms,
      delegator: owner.address,
      cap: 1_000_000n,
      expiresAt: new Date(Date.now() + 3_600_000),
    });
    const elsewhere = await post({ chainId: stack.local.chainId, delegation }, `0x${'00'.repeat(65)}`);
    expect(`${elsewhere.status} ${elsewhere.body.error.field}`).toBe('400 delegation.delegator');
  });

  test('the client helper reports refusals as GatewayError with the field', async () => {
    const error = await authorize(stack.gateway, payer, { cap: 5n }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(GatewayError);
    expect(error).toMatchObject({
      status: 400,
      code: 'validation_error',
      field: 'delegation.caveats[0].terms',
    });
  });
});

describe('DELETE /v1/authorize', () => {
  test('revokes the session: its token gets 401 from then on', async () => {
    const revoked = await newPayer(stack.local, 6);
    const session = await authorize(stack.gateway, revoked);
    stack.anthropic.script({ text: 'before', usage: { input_tokens: 10, output_tokens: 2 } });
    expect((await chat(openaiFor(stack.gateway, session.token))).status).toBe(200);

    const res = await fetch(`${stack.gateway.url}/v1/authorize`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${session.token}` },
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { data: unknown }).data).toEqual({
      sessionId: session.sessionId,
      wallet: revoked.address,
      revoked: true,
      owedAtomic: '66',
    });

    const calls = stack.anthropic.log.length;
    const after = await chat(openaiFor(stack.gateway, session.token)).then(
      () => {
        throw new Error('served');
      },
      (error: APIError) => error,
    );
    expect(after.status).toBe(401);
    // What is still owed is said, as the revocation said it.
    expect(after.error).toMatchObject({
      code: 'unauthorized',
      details: { owedAtomic: '66' },
      message:
        'the session of this access token was revoked or has expired; authorize again; 0.000066 USDC is still owed and is settled first',
    });
    expect(stack.anthropic.log.length).toBe(calls);
    const again = await fetch(`${stack.gateway.url}/v1/authorize`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${session.token}` },
    });
    expect(again.status).toBe(401);
  });

  test('a request waiting on the payer lock as its session is revoked is not served: 401, once it paid the debt the revocation reported', async () => {
    const revoking = await newPayer(stack.local, 6, { salt: 1 });
    const session = await authorize(stack.gateway, revoking);
    const client = openaiFor(stack.gateway, session.token);
    stack.anthropic.script({ text: 'before', usage: { input_tokens: 10, output_tokens: 2 } });
    expect((await chat(client)).status).toBe(200);
    const treasury = stack.local.accounts.treasury.address;
    const [payerBefore, treasuryBefore] = await Promise.all([
      usdcBalance(stack.local, revoking.address),
      usdcBalance(stack.local, treasury),
    ]);
    const calls = stack.anthropic.log.length;

    let waiting!: Promise<APIError>;
    let revoked!: Response;
    // Held as a settlement of the collector holds it: the next request, owing, waits on it.
    await stack.gateway.store.withPayerLock(revoking.address, async () => {
      waiting = chat(client).then(
        () => {
          throw new Error('served');
        },
        (error: APIError) => error,
      );
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      revoked = await fetch(`${stack.gateway.url}/v1/authorize`, {
        method: 'DELETE',
        headers: { authorization: `Bearer ${session.token}` },
      });
    });

    expect(((await revoked.json()) as { data: unknown }).data).toMatchObject({
      revoked: true,
      owedAtomic: '66',
    });
    const refused = await waiting;
    expect(refused.status).toBe(401);
    expect(refused.error).toMatchObject({ code: 'unauthorized' });
    expect(stack.anthropic.log.length).toBe(calls);
    // What the revocation reported owed is paid, and nothing more is owed.
    expect(await usdcBalance(stack.local, revoking.address)).toBe(payerBefore - 66n);
    expect(await usdcBalance(stack.local, treasury)).toBe(treasuryBefore + 66n);
    expect((await debtOf(stack.gateway.store, revoking.address)).owedAtomic).toBe(0n);
  });

  test("a validly signed token pairing one wallet with another wallet's session is 401", async () => {
    const owner = await newPayer(stack.local, 0, { salt: 7 });
    const session = await authorize(stack.gateway, owner);
    const other = await newPayer(stack.local, 0, { salt: 8 });
    // Signed with the gateway's own secret: only the pairing of subject and session is wrong.
    const forged = stack.gateway.app.jwt.sign({
      sub: other.address,
      sid: session.sessionId,
      exp: Math.floor(Date.now() / 1000) + 3600,
    });
    const calls = stack.anthropic.log.length;
    const refused = await chat(openaiFor(stack.gateway, forged)).catch((error: { status: number }) => error);
    expect(refused.status).toBe(401);
    expect(stack.anthropic.log.length).toBe(calls);
    const genuine = stack.gateway.app.jwt.sign({
      sub: owner.address,
      sid: session.sessionId,
      exp: Math.floor(Date.now() / 1000) + 3600,
    });
    stack.anthropic.script({ text: 'ok', usage: { input_tokens: 1, output_tokens: 1 } });
    expect((await chat(openaiFor(stack.gateway, genuine))).status).toBe(200);
  });

  test('an invalid token is 401, never 402', async () => {
    const refused = await chat(openaiFor(stack.gateway, 'not-a-token')).catch(
      (error: { status: number }) => error,
    );
    expect(refused.status).toBe(401);
  });
});
