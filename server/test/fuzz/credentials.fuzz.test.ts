import { createHmac, randomBytes } from 'node:crypto';
import { decodePaymentRequiredHeader, encodePaymentSignatureHeader } from '@x402/core/http';
import type { PaymentRequirements } from '@x402/core/types';
import fc from 'fast-check';
import type { LightMyRequestResponse } from 'fastify';
import type { Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createLocalChain, type LocalChain } from '../../devkit/chain/index.js';
import { type AnthropicStep, startAnthropicSimulator } from '../../devkit/simulators/anthropic.js';
import type { Simulator } from '../../devkit/simulators/simulator-server.js';
import {
  buildSessionDelegation,
  fetchTerms,
  type SessionTerms,
  signSessionDelegation,
} from '../../src/client/index.js';
import { signTransferAuthorization, transferAuthorization } from '../chain/authorizations.js';
import { authorize, newPayer } from '../session/harness.js';
import {
  chainGatewayConfig,
  type GatewayUnderTest,
  startGateway,
  temporaryDatabase,
} from '../support/chain-gateway.js';
import { expectAlive, expectNoServerFault, hostileJson, hostileString, mutated, RUNS } from './hostile.js';

/**
 * Hostile credentials against the whole gateway (buildApp, both payment rails) on a real local
 * chain: access tokens, x402 payment proofs, session authorizations. Never a 500, never a wrong
 * "unavailable" (the chain and the facilitator are up), always the envelope with a clear code.
 */
const ADMIN_TOKEN = 'fuzz-admin-token-0123456789';
const CHAT = '/v1/chat/completions';
const chatBody = {
  model: 'anthropic/claude-sonnet-4.5',
  messages: [{ role: 'user', content: 'hi' }],
  max_tokens: 8,
};

let local: LocalChain;
let anthropic: Simulator<AnthropicStep>;
let database: ReturnType<typeof temporaryDatabase>;
let gateway: GatewayUnderTest;
let jwtSecret: string;
/** A real session's access token, and the terms a real authorization is built from. */
let realToken: string;
let terms: SessionTerms;
let requirements: PaymentRequirements;

beforeAll(async () => {
  [local, anthropic] = await Promise.all([createLocalChain(), startAnthropicSimulator({ log: false })]);
  database = temporaryDatabase();
  const config = chainGatewayConfig(local, anthropic, {
    databaseUrl: database.url,
    limits: { rateLimitMax: 1_000_000, sessionMinCapAtomic: 1n, maxInFlightPerPayer: 1_000 },
  });
  jwtSecret = config.jwtSecret;
  gateway = await startGateway({ ...config, adminToken: ADMIN_TOKEN });
  terms = await fetchTerms(gateway.url);
  realToken = (await authorize(gateway, await newPayer(local, 0))).token;
  const refused = await gateway.app.inject({ method: 'POST', url: CHAT, payload: chatBody });
  requirements = decodePaymentRequiredHeader(String(refused.headers['payment-required']))
    .accepts[0] as PaymentRequirements;
});
afterAll(async () => {
  await gateway?.close();
  await Promise.all([anthropic?.close(), local?.stop()]);
  database?.remove();
});

/** The property, and no 503: the chain and the facilitator are up, so "unavailable" would be a lie. */
function expectRefusedOrServed(res: LightMyRequestResponse, path: string, sent: unknown) {
  expectNoServerFault(res, path, sent);
  expect(res.statusCode, `${res.body.slice(0, 300)}\nfor ${String(sent).slice(0, 300)}`).not.toBe(503);
}

const base64url = (value: string | Buffer) => Buffer.from(value).toString('base64url');

function jwt(header: object, claims: object, sign: 'right' | 'wrong' | 'none' | 'random'): string {
  const unsigned = `${base64url(JSON.stringify(header))}.${base64url(JSON.stringify(claims))}`;
  if (sign === 'none') return `${unsigned}.`;
  if (sign === 'random') return `${unsigned}.${base64url(randomBytes(32))}`;
  const secret = sign === 'right' ? jwtSecret : `${jwtSecret}x`;
  return `${unsigned}.${createHmac('sha256', secret).update(unsigned).digest('base64url')}`;
}

const now = () => Math.floor(Date.now() / 1000);
const wallet = '0x0000000000000000000000000000000000000aaa';

/** Access tokens: random, truncated, tampered, unsigned, wrongly signed, expired, ill-typed, huge. */
const accessToken: fc.Arbitrary<string> = fc.oneof(
  hostileString,
  fc
    .array(fc.uint8Array({ maxLength: 64 }), { minLength: 1, maxLength: 4 })
    .map((parts) => parts.map((p) => base64url(Buffer.from(p))).join('.')),
  fc.nat().map((cut) => realToken.slice(0, cut % realToken.length)),
  fc.tuple(fc.nat(), fc.constantFrom('A', '-', '_', '.', '=')).map(([at, char]) => {
    const i = at % realToken.length;
    return `${realToken.slice(0, i)}${char}${realToken.slice(i + 1)}`;
  }),
  fc
    .tuple(
      fc.constantFrom(
        { alg: 'HS256', typ: 'JWT' },
        { alg: 'none', typ: 'JWT' },
        { alg: 'RS256' },
        { alg: 'ES256K' },
        { alg: 'HS512' },
        {},
        { alg: 'HS256', crit: ['x'] },
      ),
      fc.oneof(
        fc.constant({ sub: wallet, sid: 'no-such-session', exp: now() + 3600 }),
        fc.constant({ sub: wallet, sid: 'no-such-session', exp: now() - 10 }),
        fc.constant({ sub: wallet, sid: 'no-such-session', exp: now() + 3600, nbf: now() + 3600 }),
        fc.record(
          { sub: hostileJson, sid: hostileJson, exp: fc.oneof(hostileJson, fc.constant(now() + 60)) },
          { requiredKeys: [] },
        ),
      ),
      fc.constantFrom('right' as const, 'wrong' as const, 'none' as const, 'random' as const),
    )
    .map(([header, claims, sign]) => jwt(header, claims as object, sign)),
  fc.integer({ min: 4_000, max: 60_000 }).map((size) => `${realToken}${'A'.repeat(size)}`),
  fc.constantFrom(ADMIN_TOKEN, `${ADMIN_TOKEN}x`, ADMIN_TOKEN.slice(1)),
);

/** What Node lets a header carry: tab, printable ASCII and obs-text. */
const headerSafe = (text: string) => text.replace(/[^\t\x20-\x7e\x80-\xff]/g, '');

const authorization: fc.Arbitrary<string> = fc
  .oneof(
    accessToken.map((token) => `Bearer ${token}`),
    fc
      .tuple(fc.constantFrom('bearer', 'BEARER', 'Bearer  ', 'Basic', 'Token', ''), accessToken)
      .map(([scheme, token]) => `${scheme} ${token}`),
    hostileString,
  )
  .map(headerSafe);

/** Whether the header carries a credential that really is valid (a tampering can land on the same character). */
function isValidCredential(header: string): boolean {
  const token = /^Bearer\s+(\S+)\s*$/i.exec(header)?.[1];
  return token === realToken || token === ADMIN_TOKEN;
}

describe('hostile access tokens', () => {
  test('on chat, revocation, GraphQL and metrics: refused with 401/402, never a fault', async () => {
    const targets = [
      { method: 'POST' as const, url: CHAT, payload: chatBody },
      { method: 'DELETE' as const, url: '/v1/authorize' },
      { method: 'GET' as const, url: '/metrics' },
    ];
    await fc.assert(
      fc.asyncProperty(authorization, fc.constantFrom(...targets), async (header, target) => {
        const valid = isValidCredential(header);
        // Revoking the real session would end the suite's own credential.
        fc.pre(!(valid && target.method === 'DELETE'));
        const res = await gateway.app.inject({ ...target, headers: { authorization: header } });
        expectRefusedOrServed(res, target.url, header);
        if (!valid && target.url !== '/metrics')
          expect([401, 402], header.slice(0, 300)).toContain(res.statusCode);
      }),
      { numRuns: RUNS },
    );
  });

  test('on GraphQL: the GraphQL error format with UNAUTHENTICATED', async () => {
    await fc.assert(
      fc.asyncProperty(authorization, async (header) => {
        const res = await gateway.app.inject({
          method: 'POST',
          url: '/graphql',
          headers: { authorization: header },
          payload: { query: '{ me { wallet } }' },
        });
        expect(res.statusCode, res.body).toBe(200);
        const body = res.json();
        if (isValidCredential(header)) return;
        expect(body.errors?.[0]?.extensions?.code, `${res.body}\nfor ${header.slice(0, 200)}`).toBe(
          'UNAUTHENTICATED',
        );
      }),
      { numRuns: Math.ceil(RUNS / 2) },
    );
  });
});

/** A well-formed v2 proof of a zero-value authorization by a fresh EOA, as the stock client makes it. */
async function zeroValueProof() {
  const signer = privateKeyToAccount(`0x${randomBytes(32).toString('hex')}` as Hex);
  // Within the gateway's maxTimeoutSeconds, so that the proof reaches signature verification.
  const transfer = {
    ...transferAuthorization(signer.address, requirements.payTo as Hex, 0n),
    validBefore: BigInt(now() + requirements.maxTimeoutSeconds - 10),
  };
  const signature = await signTransferAuthorization(local, signer, transfer);
  return {
    x402Version: 2,
    accepted: { ...requirements, amount: '0' },
    payload: {
      signature,
      authorization: {
        ...transfer,
        value: transfer.value.toString(),
        validAfter: transfer.validAfter.toString(),
        validBefore: transfer.validBefore.toString(),
      },
    },
  };
}

describe('hostile x402 payment proofs', () => {
  /** Valid proofs, each of its own payer: the first use of one is served, a second is a replay. */
  let templates: unknown[];
  beforeAll(async () => {
    templates = await Promise.all(Array.from({ length: 12 }, zeroValueProof));
  });

  const encoded = (payload: unknown) => encodePaymentSignatureHeader(payload as never);
  /** A nonce never seen, so that the replay guard lets the proof on to signature verification. */
  const freshNonce = (payload: unknown) => {
    const copy = structuredClone(payload) as { payload?: { authorization?: { nonce?: unknown } } } | null;
    const authorization = copy?.payload?.authorization;
    if (authorization !== null && typeof authorization === 'object' && 'nonce' in authorization)
      authorization.nonce = `0x${randomBytes(32).toString('hex')}`;
    return copy;
  };

  test('PAYMENT-SIGNATURE and X-PAYMENT: random, truncated, wrong JSON, mutated, forged', async () => {
    const proofHeader = fc.oneof(
      hostileString.map(headerSafe),
      fc.uint8Array({ maxLength: 512 }).map((bytes) => Buffer.from(bytes).toString('base64')),
      hostileJson.map((value) => Buffer.from(JSON.stringify(value) ?? 'null').toString('base64')),
      fc.nat().map((cut) => {
        const full = encoded(templates[0]);
        return full.slice(0, cut % full.length);
      }),
      mutated(templates).map((payload) => encoded(freshNonce(payload))),
      fc
        .tuple(fc.constantFrom(...templates), fc.uint8Array({ minLength: 0, maxLength: 200 }))
        .map(([template, bytes]) => {
          const forged = freshNonce(template) as { payload: { signature: string } };
          forged.payload.signature = `0x${Buffer.from(bytes).toString('hex')}`;
          return encoded(forged);
        }),
      fc.constantFrom(...templates).map((template) => encoded(template).replace(/=+$/, '')),
      fc.constantFrom(...templates).map(encoded),
    );
    await fc.assert(
      fc.asyncProperty(
        proofHeader,
        fc.constantFrom('payment-signature', 'x-payment', 'both'),
        async (value, name) => {
          const headers =
            name === 'both' ? { 'payment-signature': value, 'x-payment': value } : { [name]: value };
          const res = await gateway.app.inject({ method: 'POST', url: CHAT, headers, payload: chatBody });
          expectRefusedOrServed(res, CHAT, `${name}: ${value}`);
          expect([200, 400, 402], `${res.body.slice(0, 300)}\nfor ${value.slice(0, 300)}`).toContain(
            res.statusCode,
          );
        },
      ),
      { numRuns: RUNS },
    );
  });
});

describe('hostile session authorizations', () => {
  let body: { chainId: number; delegation: object };
  let signature: Hex;
  beforeAll(async () => {
    const payer = await newPayer(local, 1);
    const delegation = buildSessionDelegation({
      terms,
      smartAccount: payer.account,
      cap: 1_000_000n,
      expiresAt: new Date(Date.now() + 86_400_000),
    });
    signature = await signSessionDelegation(payer.account, delegation, terms);
    const { signature: _unsigned, ...unsigned } = delegation;
    body = { chainId: terms.chainId, delegation: unsigned };
  });

  const signatureHeader = () =>
    fc.oneof(
      fc.constant(signature),
      hostileString.map(headerSafe),
      fc.uint8Array({ maxLength: 3_000 }).map((bytes) => `0x${Buffer.from(bytes).toString('hex')}`),
      fc.nat().map((at) => {
        const i = 2 + (at % (signature.length - 2));
        return `${signature.slice(0, i)}${signature[i] === 'f' ? '0' : 'f'}${signature.slice(i + 1)}`;
      }),
      fc.constantFrom('0x', '0x0', 'deadbeef', `${signature}00`, signature.toUpperCase()),
    );

  test('POST /v1/authorize: mutated delegations and hostile signature headers', async () => {
    await fc.assert(
      fc.asyncProperty(fc.oneof(mutated([body]), hostileJson), signatureHeader(), async (sent, header) => {
        const res = await gateway.app.inject({
          method: 'POST',
          url: '/v1/authorize',
          headers: { 'x-authorization-signature': header, 'content-type': 'application/json' },
          payload: JSON.stringify(sent) ?? 'null',
        });
        expectRefusedOrServed(res, '/v1/authorize', { sent, header });
      }),
      { numRuns: RUNS },
    );
  });

  test('the gateway still authorizes, serves and refuses as before', async () => {
    await expectAlive(gateway.app);
    const res = await gateway.app.inject({
      method: 'POST',
      url: CHAT,
      headers: { authorization: `Bearer ${realToken}` },
      payload: chatBody,
    });
    expect(res.statusCode, res.body).toBe(200);
  });
});
