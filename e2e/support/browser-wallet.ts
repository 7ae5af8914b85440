import type { Page } from '@playwright/test';

/** The ERC-7715 methods a wallet with Advanced Permissions answers. */
const PERMISSION_METHODS = ['wallet_getSupportedExecutionPermissions', 'wallet_requestExecutionPermissions'];
const PERMISSION_BINDING = 'paygateTestWalletPermissions';

/** Answers an ERC-7715 method in the test (Node), where the account's key is: its result, or an error to throw. */
export type PermissionHandler = (method: string, params: unknown[]) => Promise<unknown>;

/**
 * Gives the page an EIP-1193 wallet (window.ethereum), as a browser extension would: it holds one
 * account, starts on `startChainId`, switches networks when asked (emitting `chainChanged`), and
 * passes everything else to the chain's JSON-RPC (anvil signs for its dev accounts). With
 * `permissions`, it also answers ERC-7715 (`wallet_getSupportedExecutionPermissions`,
 * `wallet_requestExecutionPermissions`) through that handler; without, those are "method not found".
 */
export async function installBrowserWallet(
  page: Page,
  wallet: { account: string; startChainId: number; rpcUrl: string; permissions?: PermissionHandler },
): Promise<void> {
  const { permissions, ...options } = wallet;
  if (permissions)
    await page.exposeFunction(PERMISSION_BINDING, async (method: string, params: unknown[]) => {
      try {
        return { result: await permissions(method, params) };
      } catch (error) {
        const { code = -32603, message } = error as { code?: number; message: string };
        return { error: { code, message } };
      }
    });
  await page.addInitScript(
    (options) => {
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
          if (options.permissionMethods.includes(method)) {
            const answer = (
              window as unknown as Record<string, (m: string, p: unknown[]) => Promise<unknown>>
            )[options.permissionBinding];
            if (!options.permissions || !answer)
              throw Object.assign(new Error(`The method "${method}" does not exist / is not available.`), {
                code: -32601,
              });
            const outcome = (await answer(method, params ?? [])) as {
              result?: unknown;
              error?: { code: number; message: string };
            };
            if (outcome.error)
              throw Object.assign(new Error(outcome.error.message), { code: outcome.error.code });
            return outcome.result;
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
    },
    {
      ...options,
      permissions: Boolean(permissions),
      permissionMethods: PERMISSION_METHODS,
      permissionBinding: PERMISSION_BINDING,
    },
  );
}
