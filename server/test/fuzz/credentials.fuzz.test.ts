import { createHmac, randomBytes } from 'node:crypto';
import { maxHeaderSize } from 'node:http';
import { connect } from 'node:net';
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
import { MAX_BODY_NESTING } from '../../src/http/json-shape-scan.js';
import { signTransferAuthorization, transferAuthorization } from '../chain/authorizations.js';
import { authorize, newPayer } from '../session/harness.js';
import {
  chainGatewayConfig,
  type GatewayUnderTest,
  startGateway,
  temporaryDatabase,
} from '../support/chain-gateway.js';
import {
  expectAlive,
  expectNoServerFault,
  hostileJson,
  hostileString,
  mutate,
  mutated,
  nestedJson,
  POISON_KEYS,
  pathsOf,
  RUNS,
  withRawJsonAt,
} from './hostile.js';

/**
 * Hostile credentials against the whole gateway (buildApp, both payment rails) on a real local
 * chain: access tokens, x402 payment proofs, session authorizations. Never a 500, never a wrong
 * "unavailable" (the chain and the facilitator are up), always the envelope with a clear code.
 */
const ADMIN_TOKEN = 'fuzz-admin-token-0123456789';
const CHAT = '/v1/chat/completions';
const chatBody = {
  model: 'anthropic/claude-sonnet-5.5',
  messages: [{ role: 'user', content: 'hi' }],
  max_tokens: 8,
};

let local: LocalChain;
let anthropic: Simulator<AnthropicStep>;
let database: ReturnType<typeof temporaryDatabase>;
let gateway: GatewayUnderTest;
let jwtSecret: string;
/** The gateway's BODY_LIMIT_BYTES. */
let bodyLimit: number;
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
  bodyLimit = config.limits.bodyLimitBytes;
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
const base64 = (value: string | Buffer) => Buffer.from(value).toString('base64');

/** A refusal of a body, a header or a field is a 4xx naming it: the message begins with the field. */
function expectNamed(res: LightMyRequestResponse, field: string | undefined, sent: unknown) {
  const error = res.json().error as { field?: string; message: string };
  const context = `${res.body.slice(0, 300)}\nfor ${String(sent).slice(0, 300)}`;
  expect(error.field, context).toEqual(field === undefined ? expect.any(String) : field);
  expect(error.message.startsWith(String(error.field)), context).toBe(true);
}

/** What an answer's headers may add to a request's: the x402 terms (with their two extensions' declarations), ids, rate limits. */
const ANSWER_HEAD_ALLOWANCE = 4 * 1024;
const answerHeadBytes = (res: LightMyRequestResponse) =>
  Object.entries(res.headers).reduce(
    (total, [name, value]) => total + name.length + 4 + Buffer.byteLength([value].flat().join(', ')),
    0,
  );

/** Kinds of nesting: arrays, objects, objects keyed `__proto__` (which a JSON parser must not take as a prototype). */
const nestingKind = fc.constantFrom('array' as const, 'object' as const, 'proto' as const);
/** A kind of nesting and a depth of 1 up to what fills `bytes` of JSON text (thousands of levels). */
const nesting = (bytes: number) =>
  nestingKind.chain((kind) =>
    fc.tuple(
      fc.constant(kind),
      fc.integer({ min: 1, max: Math.floor(bytes / nestedJson(1, kind, '').length) }),
    ),
  );

/** Object.prototype as the process started: nothing a payload carries may add to it. */
function expectPrototypesClean(sent: unknown) {
  for (const key of ['polluted', 'x402Version', 'payload', 'isAdmin'])
    expect(Object.hasOwn(Object.prototype, key), String(sent).slice(0, 300)).toBe(false);
  expect(({} as Record<string, unknown>).polluted).toBeUndefined();
}

/**
 * Writes a whole request to the gateway's socket; resolves with everything that came back before
 * the socket closed (or went quiet for a while).
 */
function exchangeOnSocket(url: string, bytes: Buffer): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const socket = connect(Number(port), hostname, () => socket.write(bytes));
    const done = () => resolve(Buffer.concat(chunks).toString('latin1'));
    socket.on('data', (chunk) => {
      chunks.push(chunk);
      const text = Buffer.concat(chunks).toString('latin1');
      const head = text.indexOf('\r\n\r\n');
      const length = /\r\ncontent-length: *(\d+)/i.exec(text)?.[1];
      // One whole answer is enough: keep-alive would otherwise hold the socket open.
      if (head >= 0 && length !== undefined && Buffer.byteLength(text, 'latin1') >= head + 4 + Number(length))
        socket.destroy();
    });
    socket.on('error', done);
    socket.on('close', done);
    socket.setTimeout(5_000, () => socket.destroy());
  });
}

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

  const proofHeaderName = fc.constantFrom('payment-signature', 'x-payment');
  /** The gateway sets no maxHeaderSize: Node's own (--max-http-header-size, 16 KiB by default) holds. */
  const headersLimit = () =>
    (gateway.app.server as { maxHeaderSize?: number }).maxHeaderSize ?? maxHeaderSize;
  /** The property for a proof header: refused as a 400 naming the header, or a 402, or served. */
  async function sendProof(name: string, value: string, sent: unknown = value) {
    const res = await gateway.app.inject({
      method: 'POST',
      url: CHAT,
      headers: { [name]: value },
      payload: chatBody,
    });
    const context = `${res.body.slice(0, 300)}\nfor ${name}: ${String(sent).slice(0, 300)} (${value.length} chars)`;
    expectRefusedOrServed(res, CHAT, `${name}: ${String(sent).slice(0, 600)}`);
    expect([200, 400, 402], context).toContain(res.statusCode);
    if (res.statusCode === 400) expectNamed(res, name.toUpperCase(), sent);
    // An answer's headers no bigger than the proof sent, but for a fixed allowance: a refusal echoes
    // (in PAYMENT-REQUIRED) a field of the proof at most once, so an answer to a request Node took
    // (16 KiB of headers) stays readable by a client with the same limit (Node's fetch).
    expect(answerHeadBytes(res), context).toBeLessThan(value.length + ANSWER_HEAD_ALLOWANCE);
    expectPrototypesClean(sent);
    return res;
  }
  /** A valid proof, fresh, as a plain object (the v2 template) or in x402 v1's shape. */
  const proofShape = fc.constantFrom('v2' as const, 'v1' as const);
  function proofOf(template: unknown, shape: 'v1' | 'v2'): Record<string, unknown> {
    const proof = freshNonce(template) as { accepted: { scheme: string; network: string }; payload: unknown };
    if (shape === 'v2') return proof as unknown as Record<string, unknown>;
    return {
      x402Version: 1,
      scheme: proof.accepted.scheme,
      network: proof.accepted.network,
      payload: proof.payload,
    };
  }
  /** Where a hostile value goes in a proof: anywhere it has a value, or a key of its own. */
  const spotIn = (proof: unknown) =>
    fc.oneof(
      fc.nat().map((pick) => {
        const paths = pathsOf(proof);
        return paths[pick % paths.length] as Array<string | number>;
      }),
      fc.constantFrom(
        [],
        ['payload'],
        // The fields a refusal names (scheme, network, asset, amount), in either version's place.
        ['scheme'],
        ['network'],
        ['accepted', 'scheme'],
        ['accepted', 'network'],
        ['accepted', 'asset'],
        ['accepted', 'amount'],
        ['extension'],
        ['payload', 'extra'],
        ['payload', 'authorization', 'extra'],
        ['accepted', 'extra', 'x'],
      ),
    );
  /** A fresh proof in the header of its version (v2 in PAYMENT-SIGNATURE, v1 in X-PAYMENT), and a spot in it. */
  const proofAndSpot = fc.tuple(fc.nat({ max: 11 }), proofShape).chain(([index, shape]) => {
    const proof = proofOf(templates[index], shape);
    const name = shape === 'v2' ? 'payment-signature' : 'x-payment';
    return fc.tuple(fc.constant(name), fc.constant(proof), spotIn(proof));
  });

  test('proof headers of 8 KB to 60 KB: padded proofs, long base64, long JSON', async () => {
    const size = fc.integer({ min: 8 * 1024, max: 60 * 1024 });
    const largeHeader = fc.oneof(
      fc.tuple(proofAndSpot, size).map(([[name, proof, spot], bytes]) => {
        const padding = JSON.stringify('A'.repeat(Math.floor((bytes * 3) / 4)));
        return [name, base64(withRawJsonAt(proof, spot, padding))] as const;
      }),
      fc
        .tuple(proofHeaderName, size)
        .map(([name, bytes]) => [name, base64(randomBytes(Math.floor((bytes * 3) / 4)))] as const),
      fc
        .tuple(proofHeaderName, size, fc.constantFrom('A', '=', '/', '+', '{', '0'))
        .map(([name, bytes, unit]) => [name, unit.repeat(bytes)] as const),
      fc
        .tuple(proofHeaderName, size)
        .map(
          ([name, bytes]) => [name, base64(JSON.stringify('x'.repeat(Math.floor((bytes * 3) / 4))))] as const,
        ),
    );
    await fc.assert(
      fc.asyncProperty(largeHeader, async ([name, value]) => {
        await sendProof(name, value);
      }),
      { numRuns: Math.ceil(RUNS / 6) },
    );
  });

  test('proof headers of 8 KB to 60 KB on the wire: 431 in the envelope past the headers limit, else an answer', async () => {
    const limit = headersLimit();
    const body = JSON.stringify(chatBody);
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 8 * 1024, max: 60 * 1024 }),
        proofHeaderName,
        async (bytes, name) => {
          const value = base64(randomBytes(Math.floor((bytes * 3) / 4)));
          const head =
            `POST ${CHAT} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n` +
            `content-length: ${Buffer.byteLength(body)}\r\n${name}: ${value}\r\n\r\n`;
          const answer = await exchangeOnSocket(gateway.url, Buffer.from(`${head}${body}`));
          const context = `${answer.slice(0, 400)}\nfor ${name} of ${value.length} chars`;
          const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1]);
          const envelope = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4));
          expect(envelope, context).toMatchObject({ data: null, error: { code: expect.any(String) } });
          expect(envelope.error.message.length, context).toBeGreaterThan(0);
          // Node counts the head a little differently from its bytes (line ends): a band either way.
          if (head.length > limit + 64 || (status === 431 && head.length > limit - 64)) {
            expect(status, context).toBe(431);
            expect(envelope.error.code, context).toBe('payload_too_large');
          } else {
            // Random base64 is no proof: refused naming the header.
            expect(status, context).toBe(400);
            expect(envelope.error.field, context).toBe(name.toUpperCase());
          }
        },
      ),
      { numRuns: 40 },
    );
    expect((await fetch(`${gateway.url}/v1/models`)).status).toBe(200);
  });

  test('a long field the refusal names, up to past the headers limit: fetch reads the answer (402, or 431 past it)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(
          ['accepted', 'scheme'],
          ['accepted', 'network'],
          ['accepted', 'asset'],
          ['accepted', 'amount'],
        ),
        // A header of 6 KB up to past the headers limit (16 KiB by default).
        fc.integer({ min: 4 * 1024, max: 12 * 1024 }),
        async (spot, length) => {
          const proof = withRawJsonAt(proofOf(templates[0], 'v2'), spot, JSON.stringify('9'.repeat(length)));
          const header = base64(proof);
          const sent = `${spot.join('.')} of ${length} chars (a header of ${header.length})`;
          // Node's fetch refuses an answer whose headers pass its limit (UND_ERR_HEADERS_OVERFLOW), as
          // a proxy would (with a 502): a refusal echoing the field must stay within what was sent.
          const res = await fetch(`${gateway.url}${CHAT}`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'payment-signature': header },
            body: JSON.stringify(chatBody),
          }).catch((error: Error & { cause?: { code?: string } }) => {
            throw new Error(`fetch failed (${error.cause?.code ?? error.message}) for ${sent}`);
          });
          const body = await res.json();
          const context = `${JSON.stringify(body).slice(0, 300)}\nfor ${sent}`;
          expect(body, context).toMatchObject({ data: null, error: { code: expect.any(String) } });
          // fetch's own headers (user-agent, accept…) count too: near the limit, either answer.
          if (header.length >= headersLimit()) expect(res.status, context).toBe(431);
          else if (header.length < headersLimit() - 1_024) expect([400, 402], context).toContain(res.status);
          else expect([400, 402, 431], context).toContain(res.status);
        },
      ),
      { numRuns: 12 },
    );
  });

  test('base64 of JSON nested thousands of levels deep, at the top and anywhere inside the proof', async () => {
    await fc.assert(
      fc.asyncProperty(
        proofAndSpot,
        // Up to a 60 KB header, once in base64.
        nesting((60 * 1024 * 3) / 4 - 1_000),
        async ([name, proof, spot], [kind, depth]) => {
          const json = withRawJsonAt(proof, spot, nestedJson(depth, kind));
          await sendProof(name, base64(json), json);
        },
      ),
      { numRuns: Math.ceil(RUNS / 3) },
    );
  });

  test('base64 of huge arrays, at the top and anywhere inside the proof', async () => {
    const hugeArray = fc
      .tuple(
        fc.integer({ min: 1_000, max: 20_000 }),
        fc.constantFrom('0', '{}', '[]', '"0x"', 'null', '1e308'),
      )
      .map(([length, item]) => `[${Array.from({ length }, () => item).join(',')}]`);
    await fc.assert(
      fc.asyncProperty(proofAndSpot, fc.boolean(), hugeArray, async ([name, proof, spot], atTop, array) => {
        const json = atTop ? array : withRawJsonAt(proof, spot, array);
        await sendProof(name, base64(json), json);
      }),
      { numRuns: Math.ceil(RUNS / 6) },
    );
  });

  test('__proto__, constructor and prototype keys anywhere in the proof: no prototype is touched', async () => {
    const poison = fc.oneof(
      fc.constant({ polluted: 'yes', x402Version: 2, isAdmin: true }),
      fc.constant({ prototype: { polluted: 'yes' } }),
      fc.constantFrom(...templates).map((template) => ({ ...(template as object), polluted: 'yes' })),
      hostileJson,
    );
    await fc.assert(
      fc.asyncProperty(
        proofAndSpot,
        fc.constantFrom(...POISON_KEYS),
        poison,
        async ([name, proof, spot], key, value) => {
          const json = JSON.stringify(mutate(proof, spot, { op: 'add', key, value }));
          await sendProof(name, base64(json), json);
          // And the poison as the whole proof, its real fields beside it.
          const top = `{"${key}":${JSON.stringify(proof)},${JSON.stringify(proof).slice(1)}`;
          await sendProof(name, base64(top), top);
        },
      ),
      { numRuns: Math.ceil(RUNS / 3) },
    );
    await expectAlive(gateway.app);
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

  const AUTHORIZE = '/v1/authorize';
  const postAuthorize = (payload: string | Buffer, contentType: string | undefined = 'application/json') =>
    gateway.app.inject({
      method: 'POST',
      url: AUTHORIZE,
      headers: {
        'x-authorization-signature': signature,
        ...(contentType === undefined ? {} : { 'content-type': contentType }),
      },
      payload,
    });
  /** The field a refusal of a value at `path` names: the path itself, or a part of it, or inside it. */
  const fieldOf = (path: Array<string | number>) =>
    path.reduce<string>(
      (field, key) => (typeof key === 'number' ? `${field}[${key}]` : field ? `${field}.${key}` : key),
      '',
    );

  test('POST /v1/authorize: JSON nested thousands of levels deep, at the top and inside the delegation', async () => {
    const spots: Array<Array<string | number>> = [
      ...pathsOf(body),
      ['extra'],
      ['delegation', 'extra'],
      ['delegation', 'signature'],
      ['delegation', 'caveats', 0, 'args'],
      ['delegation', 'caveats', 0, 'extra'],
    ];
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...spots),
        // Up to past the body limit (64 KiB in the tests).
        nesting(96 * 1024),
        async (spot, [kind, depth]) => {
          const payload = withRawJsonAt(body, spot, nestedJson(depth, kind));
          const res = await postAuthorize(payload);
          const context = `${res.body.slice(0, 300)}\nfor ${kind} x ${depth} at ${fieldOf(spot) || 'the top'}`;
          expectRefusedOrServed(res, AUTHORIZE, context);
          if (Buffer.byteLength(payload) > bodyLimit) {
            expect(res.statusCode, context).toBe(413);
            expect(res.json().error.code, context).toBe('payload_too_large');
          } else if (kind === 'proto' && spot.length + depth <= MAX_BODY_NESTING) {
            // Deeper, it is refused for its nesting as it arrives, before any key is looked at.
            expect(res.statusCode, context).toBe(400);
            expect(res.json().error.code, context).toBe('invalid_json');
          } else {
            expect(res.statusCode, context).toBe(400);
            expect(res.json().error.code, context).toBe('validation_error');
            expectNamed(res, undefined, context);
            const named = res.json().error.field as string;
            const at = fieldOf(spot);
            if (spot.length > 0)
              expect(named === 'body' || at.startsWith(named) || named.startsWith(at), context).toBe(true);
          }
        },
      ),
      { numRuns: Math.ceil(RUNS / 3) },
    );
  });

  test('POST /v1/authorize: bodies around and far past BODY_LIMIT_BYTES are 413', async () => {
    const overhead = Buffer.byteLength(withRawJsonAt(body, ['delegation', 'pad'], '""'));
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.integer({ min: -128, max: 128 }), fc.integer({ min: 129, max: 4 * 64 * 1024 })),
        fc.constantFrom('x', 'é', '€', '😀'),
        async (delta, unit) => {
          const units = Math.max(0, Math.floor((bodyLimit - overhead + delta) / Buffer.byteLength(unit)));
          const payload = withRawJsonAt(body, ['delegation', 'pad'], JSON.stringify(unit.repeat(units)));
          const res = await postAuthorize(payload);
          const context = `${res.body.slice(0, 300)}\nfor ${Buffer.byteLength(payload)} bytes (limit ${bodyLimit})`;
          expectRefusedOrServed(res, AUTHORIZE, context);
          if (Buffer.byteLength(payload) > bodyLimit) {
            expect(res.statusCode, context).toBe(413);
            expect(res.json().error.code, context).toBe('payload_too_large');
          } else {
            expect(res.statusCode, context).toBe(400);
            expectNamed(res, 'delegation.pad', context);
          }
        },
      ),
      { numRuns: Math.ceil(RUNS / 6) },
    );
  });

  test('POST /v1/authorize: bytes that are not JSON, under any content type', async () => {
    const jsonTypes = new Set(['application/json', 'application/json; charset=utf-8', 'Application/JSON']);
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.uint8Array({ maxLength: 2048 }).map((bytes) => Buffer.from(bytes)),
          fc
            .constantFrom(
              '{',
              '{"chainId":1,',
              '\ufeff{}',
              'chainId=1&delegation=x',
              '<xml/>',
              "{'a':1}",
              'NaN',
              '\u0000',
            )
            .map((text) => Buffer.from(text)),
        ),
        fc.constantFrom(
          ...jsonTypes,
          'application/json; charset=utf-16',
          'application/json; charset=latin1',
          'application/merge-patch+json',
          'application/x-www-form-urlencoded',
          'text/plain',
          'application/octet-stream',
          'multipart/form-data; boundary=x',
        ),
        async (bytes, contentType) => {
          const res = await postAuthorize(bytes, contentType);
          const sent = `${contentType}: ${bytes.toString('hex').slice(0, 200)}`;
          const context = `${res.body.slice(0, 300)}\nfor ${sent}`;
          expectRefusedOrServed(res, AUTHORIZE, sent);
          const code = res.json().error.code;
          if (!jsonTypes.has(contentType)) {
            expect(res.statusCode, context).toBe(415);
            expect(code, context).toBe('unsupported_media_type');
            return;
          }
          expect(res.statusCode, context).toBe(400);
          let parses = true;
          try {
            JSON.parse(bytes.toString('utf8').replace(/^\ufeff/, ''));
          } catch {
            parses = false;
          }
          expect(code, context).toBe(parses ? 'validation_error' : 'invalid_json');
        },
      ),
      { numRuns: RUNS },
    );
  });

  test('POST /v1/authorize: arrays, strings, numbers, booleans and null as the body', async () => {
    const notAnObject = fc.oneof(
      fc.array(hostileJson, { maxLength: 8 }),
      fc.constantFrom([body], [[body]], [body.delegation]),
      hostileString,
      fc.double(),
      fc.integer(),
      fc.bigInt().map((n) => n.toString()),
      fc.constantFrom(true, false, null),
    );
    await fc.assert(
      fc.asyncProperty(notAnObject, async (value) => {
        const payload =
          typeof value === 'string' && /^-?\d+$/.test(value) ? value : (JSON.stringify(value) ?? 'null');
        const res = await postAuthorize(payload);
        const context = `${res.body.slice(0, 300)}\nfor ${payload.slice(0, 300)}`;
        expectRefusedOrServed(res, AUTHORIZE, payload);
        expect(res.statusCode, context).toBe(400);
        // A prototype-poisoning key is refused as the JSON parser reads it, before the schema.
        if (/"(__proto__|constructor)":/.test(payload) && res.json().error.code === 'invalid_json') return;
        expect(res.json().error, context).toMatchObject({ code: 'validation_error', field: 'body' });
        expect(res.json().error.message, context).toBe('body must be an object');
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
