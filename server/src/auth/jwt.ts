import { timingSafeEqual } from 'node:crypto';
import fastifyJwt, { type JWT } from '@fastify/jwt';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { type Address, getAddress, isAddress } from 'viem';
import { GatewayError } from '../errors.js';

/** Claims of a session's access token: the payer's smart account and the session it authorized. */
export interface AccessClaims {
  sub: Address;
  sid: string;
  exp: number;
}

declare module '@fastify/jwt' {
  interface FastifyJWT {
    payload: AccessClaims;
  }
}

/**
 * Who is calling: a payer through its session's access token, or the operator. The token expires
 * with its session, so it tells when the session ends without a lookup (to the second, never later).
 */
export type Caller =
  | { kind: 'wallet'; wallet: Address; sessionId: string; sessionExpiresAt: Date }
  | { kind: 'admin' };

export interface CallerChecks {
  /** ADMIN_TOKEN; operator access is off when unset. */
  adminToken?: string;
  /** Whether the session behind a token still stands: exists for that wallet, not revoked, not expired. */
  isSessionActive(sessionId: string, wallet: Address): Promise<boolean>;
}

/** Registers @fastify/jwt at the root: HS256 with JWT_SECRET, and nothing else accepted. */
export async function installJwt(app: FastifyInstance, secret: string): Promise<void> {
  await app.register(fastifyJwt, {
    secret,
    sign: { algorithm: 'HS256' },
    verify: { algorithms: ['HS256'] },
  });
}

/** A verified token's claims, and the checksummed wallet its subject names (null: not an address). */
interface VerifiedToken {
  claims: AccessClaims;
  wallet: Address | null;
}

/** Tokens verified lately, by their exact text. Bounded: started over when full. */
const verifiedTokens = new WeakMap<JWT, Map<string, VerifiedToken>>();
const MAX_VERIFIED_TOKENS = 10_000;

/**
 * Verifies a token's signature and expiry (throws fast-jwt's error when it fails). Each chat
 * request reads its token twice (rate-limit key, then the gate) and a client reuses it for many
 * requests, so a verified token is remembered until its `exp`; only valid tokens are remembered.
 */
function verifiedToken(jwt: JWT, token: string): VerifiedToken {
  let verified = verifiedTokens.get(jwt);
  if (!verified) {
    verified = new Map();
    verifiedTokens.set(jwt, verified);
  }
  const known = verified.get(token);
  if (known && known.claims.exp * 1000 > Date.now()) return known;
  const claims = jwt.verify<AccessClaims>(token);
  const checked = { claims, wallet: walletOfClaims(claims) };
  if (typeof claims.exp === 'number') {
    if (verified.size >= MAX_VERIFIED_TOKENS) verified.clear();
    verified.set(token, checked);
  }
  return checked;
}

/** An access token for a session: subject the checksummed wallet, expiring with the session. */
export function issueAccessToken(
  app: FastifyInstance,
  session: { wallet: Address; sessionId: string; expiresAt: Date },
): string {
  return app.jwt.sign({
    sub: getAddress(session.wallet),
    sid: session.sessionId,
    exp: Math.floor(session.expiresAt.getTime() / 1000),
  });
}

/**
 * The caller named by `Authorization: Bearer <token>`, or null when there is none.
 * Throws GatewayError 401 when a token is given but is not valid, expired, or its session is over.
 */
export async function authenticateCaller(
  request: FastifyRequest,
  checks: CallerChecks,
): Promise<Caller | null> {
  const caller = verifiedCaller(request.server.jwt, request.headers.authorization, checks.adminToken);
  if (caller?.kind === 'wallet' && !(await checks.isSessionActive(caller.sessionId, caller.wallet)))
    throw sessionOver();
  return caller;
}

/**
 * The caller a validly signed, unexpired token names, WITHOUT asking whether its session still
 * stands: for the payment gate, which reads that together with the payer's debt once it holds the
 * payer's in-flight slot, and answers `sessionOver()` itself. Throws GatewayError 401 otherwise.
 */
export function verifiedCaller(jwt: JWT, header: string | undefined, adminToken?: string): Caller | null {
  if (header === undefined) return null;
  const token = bearerToken(header);
  if (token === undefined) throw unauthorized('send the token as "Authorization: Bearer <token>"');
  if (adminToken !== undefined && sameSecret(token, adminToken)) return { kind: 'admin' };

  let verified: VerifiedToken;
  try {
    verified = verifiedToken(jwt, token);
  } catch (error) {
    const expired = (error as { code?: string }).code === 'FAST_JWT_EXPIRED';
    throw unauthorized(
      expired ? 'the access token has expired; authorize again' : 'the access token is not valid',
    );
  }
  const { claims, wallet } = verified;
  if (wallet === null || typeof claims.sid !== 'string' || typeof claims.exp !== 'number')
    throw unauthorized('the access token is not valid');
  return { kind: 'wallet', wallet, sessionId: claims.sid, sessionExpiresAt: new Date(claims.exp * 1000) };
}

/** 401 for a validly signed token whose session was revoked or has expired. */
export function sessionOver(): GatewayError {
  return unauthorized('the session of this access token was revoked or has expired; authorize again');
}

/**
 * The wallet a validly signed, unexpired access token names, or null: no session lookup, so it is
 * cheap enough to key rate limits on. Never use it to let a request through.
 */
export function walletOfToken(jwt: JWT, header: string | undefined): Address | null {
  const token = header === undefined ? undefined : bearerToken(header);
  if (token === undefined) return null;
  try {
    return verifiedToken(jwt, token).wallet;
  } catch {
    return null;
  }
}

function bearerToken(header: string): string | undefined {
  return /^Bearer\s+(\S+)\s*$/i.exec(header)?.[1];
}

/** The checksummed wallet a verified token names, or null when its subject is not an address. */
function walletOfClaims(claims: AccessClaims): Address | null {
  return typeof claims.sub === 'string' && isAddress(claims.sub, { strict: false })
    ? getAddress(claims.sub)
    : null;
}

function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

function unauthorized(message: string): GatewayError {
  return new GatewayError('unauthorized', message, { headers: { 'www-authenticate': 'Bearer' } });
}
