import { useCallback, useState } from 'react';

/** Kept for this tab only, and sent nowhere but the gateway's /graphql. */
const KEY = 'paygate.operatorToken';

function stored(): string | null {
  try {
    return sessionStorage.getItem(KEY);
  } catch {
    return null;
  }
}

/** The operator token (ADMIN_TOKEN) entered on the operator page. */
export function useOperatorToken() {
  const [token, setToken] = useState<string | null>(stored);
  const keep = useCallback((value: string) => {
    try {
      sessionStorage.setItem(KEY, value);
    } catch {
      // Storage refused (private mode): the token lasts as long as the page.
    }
    setToken(value);
  }, []);
  const forget = useCallback(() => {
    try {
      sessionStorage.removeItem(KEY);
    } catch {
      // Nothing was stored.
    }
    setToken(null);
  }, []);
  return { token, keep, forget };
}
