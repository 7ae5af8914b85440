import type { AuthorizedSession } from '@paygate/server/client';
import { useCallback, useEffect, useMemo, useSyncExternalStore } from 'react';
import type { Address } from 'viem';
import { GatewayError } from '../gateway/api';

/** What `POST /v1/authorize` answered, kept in the browser until it expires or is revoked. */
export type StoredSession = AuthorizedSession;

/** Why the stored session was let go, for the page to say so (absent: the user forgot it). */
export type SessionEnd =
  | { reason: 'expired'; at: string }
  /** The gateway refused the token (401, GraphQL UNAUTHENTICATED): revoked elsewhere, or a new JWT_SECRET. */
  | { reason: 'refused'; message: string }
  /** Revoked from this page. */
  | { reason: 'revoked' };

const CHANGED = 'paygate:session-changed';
/** setTimeout's longest delay (~24.8 days); a longer wait is made of several. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Why each session of this tab ended, by storage key (not shared: other tabs find out for themselves). */
const endings = new Map<string, SessionEnd>();

function storageKey(chainId: number, wallet: Address): string {
  return `paygate.session.v1:${chainId}:${wallet.toLowerCase()}`;
}

/** A stored session the page can show: readable, with a token and a valid expiry (passed or not). */
function parse(raw: string | null): StoredSession | null {
  if (!raw) return null;
  try {
    const session = JSON.parse(raw) as StoredSession;
    return typeof session?.token === 'string' && Number.isFinite(Date.parse(session.expiresAt))
      ? session
      : null;
  } catch {
    return null;
  }
}

function subscribe(onChange: () => void): () => void {
  window.addEventListener('storage', onChange);
  window.addEventListener(CHANGED, onChange);
  return () => {
    window.removeEventListener('storage', onChange);
    window.removeEventListener(CHANGED, onChange);
  };
}

function write(key: string, session: StoredSession | null, ending?: SessionEnd): void {
  if (session) localStorage.setItem(key, JSON.stringify(session));
  else localStorage.removeItem(key);
  if (ending) endings.set(key, ending);
  else endings.delete(key);
  window.dispatchEvent(new Event(CHANGED));
}

/**
 * The gateway's own words when it refused a session's token: a 401 from a REST route, or
 * UNAUTHENTICATED from the ledger. Undefined for any other failure (the gateway down, a bad query).
 */
export function sessionRefusal(error: unknown): string | undefined {
  if (!(error instanceof Error)) return undefined;
  // the web client's GatewayError (code, status) and the server client's (status) alike
  const { code, status } = error as { code?: unknown; status?: unknown };
  if (status === 401 || (error instanceof GatewayError && code === 'UNAUTHENTICATED')) return error.message;
  return undefined;
}

export interface SessionStore {
  /** The wallet's live session on this chain, or null (none, expired, or ended). */
  session: StoredSession | null;
  /** Why the last session of this tab ended, until a new one is saved. */
  ended: SessionEnd | undefined;
  save(session: StoredSession): void;
  /** Forgets the session in this browser (every tab), saying why when `why` is given. */
  end(why?: SessionEnd): void;
}

/**
 * The wallet's session on this chain (shared by every tab), and how to keep or forget one. A session
 * is forgotten, with the reason, the moment it expires (a timer, not only when the stored value changes).
 */
export function useStoredSession(chainId: number, wallet: Address | undefined): SessionStore {
  const key = wallet ? storageKey(chainId, wallet) : undefined;
  const raw = useSyncExternalStore(subscribe, () => (key ? localStorage.getItem(key) : null));
  const ended = useSyncExternalStore(subscribe, () => (key ? endings.get(key) : undefined));
  const stored = useMemo(() => parse(raw), [raw]);

  useEffect(() => {
    if (!key || raw === null) return;
    if (!stored) {
      write(key, null);
      return;
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    const check = () => {
      const left = Date.parse(stored.expiresAt) - Date.now();
      if (left <= 0) write(key, null, { reason: 'expired', at: stored.expiresAt });
      else timer = setTimeout(check, Math.min(left + 1, MAX_TIMER_MS));
    };
    check();
    return () => clearTimeout(timer);
  }, [key, raw, stored]);

  const save = useCallback(
    (next: StoredSession) => {
      if (key) write(key, next);
    },
    [key],
  );
  const end = useCallback(
    (why?: SessionEnd) => {
      if (key) write(key, null, why);
    },
    [key],
  );
  const live = stored !== null && Date.parse(stored.expiresAt) > Date.now();
  return { session: live ? stored : null, ended, save, end };
}
