import type { AuthorizedSession } from '@paygate/server/client';
import { useCallback, useMemo, useSyncExternalStore } from 'react';
import type { Address } from 'viem';

/** What `POST /v1/authorize` answered, kept in the browser until it expires or is revoked. */
export type StoredSession = AuthorizedSession;

const CHANGED = 'paygate:session-changed';

function storageKey(chainId: number, wallet: Address): string {
  return `paygate.session.v1:${chainId}:${wallet.toLowerCase()}`;
}

/** A stored session still worth using: readable and not expired. */
function parse(raw: string | null): StoredSession | null {
  if (!raw) return null;
  try {
    const session = JSON.parse(raw) as StoredSession;
    return Date.parse(session.expiresAt) > Date.now() ? session : null;
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

/** The wallet's session on this chain (shared by every tab), and how to keep or forget one. */
export function useStoredSession(chainId: number, wallet: Address | undefined) {
  const key = wallet ? storageKey(chainId, wallet) : undefined;
  const raw = useSyncExternalStore(subscribe, () => (key ? localStorage.getItem(key) : null));
  const session = useMemo(() => parse(raw), [raw]);
  const save = useCallback(
    (next: StoredSession | null) => {
      if (!key) return;
      if (next) localStorage.setItem(key, JSON.stringify(next));
      else localStorage.removeItem(key);
      window.dispatchEvent(new Event(CHANGED));
    },
    [key],
  );
  return { session, save };
}
