import type { Keyset } from '../billing/settlements.js';

/** Opaque to clients: base64url of "<epoch ms>:<id>" of the last item seen. */
export function encodeCursor(keyset: Keyset): string {
  return Buffer.from(`${keyset.createdAt.getTime()}:${keyset.id}`).toString('base64url');
}

/**
 * The keyset a cursor names, or undefined when it is not one of ours. Ours never hold NUL, which
 * PostgreSQL's text cannot.
 */
export function decodeCursor(cursor: string): Keyset | undefined {
  const match = /^(\d{1,15}):([^\0]+)$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (!match) return undefined;
  return { createdAt: new Date(Number(match[1])), id: match[2]! };
}
