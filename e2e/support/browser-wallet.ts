import type { Page } from '@playwright/test';

/**
 * Gives the page an EIP-1193 wallet (window.ethereum), as a browser extension would: it holds one
 * account, starts on `startChainId`, switches networks when asked (emitting `chainChanged`), and
 * passes everything else to the chain's JSON-RPC (anvil signs for its dev accounts).
 */
export async function installBrowserWallet(
  page: Page,
  wallet: { account: string; startChainId: number; rpcUrl: string },
): Promise<void> {
  await page.addInitScript((options) => {
    const listeners = new Map<string, Set<(value: unknown) => void>>();
    let chainId = `0x${options.startChainId.toString(16)}`;
    let id = 0;
    const emit = (event: string, value: unknown) => {
      for (const listener of listeners.get(event) ?? []) listener(value);
    };
    const provider = {
      isMetaMask: false,
      on(event: string, listener: (value: unknown) => void) {
        if (!listeners.has(event)) listeners.set(event, new Set());
        listeners.get(event)?.add(listener);
        return provider;
      },
      removeListener(event: string, listener: (value: unknown) => void) {
        listeners.get(event)?.delete(listener);
        return provider;
      },
      async request({ method, params }: { method: string; params?: unknown[] }): Promise<unknown> {
        switch (method) {
          case 'eth_requestAccounts':
          case 'eth_accounts':
            return [options.account];
          case 'eth_chainId':
            return chainId;
          case 'wallet_switchEthereumChain':
            chainId = (params as [{ chainId: string }])[0].chainId;
            emit('chainChanged', chainId);
            return null;
          case 'wallet_requestPermissions':
          case 'wallet_revokePermissions':
            return [{ parentCapability: 'eth_accounts' }];
        }
        const response = await fetch(options.rpcUrl, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ jsonrpc: '2.0', id: ++id, method, params: params ?? [] }),
        });
        const body = (await response.json()) as {
          result?: unknown;
          error?: { code: number; message: string };
        };
        if (body.error) throw Object.assign(new Error(body.error.message), { code: body.error.code });
        return body.result;
      },
    };
    Object.assign(window, { ethereum: provider });
  }, wallet);
}
