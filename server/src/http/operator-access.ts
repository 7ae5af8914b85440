import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/**
 * Who may see what is the operator's business (metrics, the collector's failing payers): a bearer of
 * one of `tokens` (METRICS_TOKEN, ADMIN_TOKEN), from anywhere; when there are none, callers on this
 * machine only.
 */
export function operatorAccess(
  tokens: ReadonlyArray<string | undefined>,
): (request: FastifyRequest) => boolean {
  const known = tokens.filter((token): token is string => token !== undefined);
  // Digests of equal length: the comparison takes the same time whatever the token's length.
  const digest = (value: string) => createHash('sha256').update(value).digest();
  return (request) => {
    if (known.length === 0) return isLoopback(request.ip);
    const given = BEARER.exec(request.headers.authorization ?? '')?.[1];
    if (given === undefined) return false;
    return known.some((token) => timingSafeEqual(digest(given), digest(token)));
  };
}

/** `request.ip` honours TRUST_PROXY: behind a trusted proxy it is the original caller's address. */
function isLoopback(ip: string): boolean {
  return ip === '::1' || /^(::ffff:)?127\./.test(ip);
}
