import { useChains, useConnect, useConnection, useConnectors, useDisconnect, useSwitchChain } from 'wagmi';
import type { Terms } from '../gateway/terms';
import { Address } from '../ui/Address';
import { Alert } from '../ui/Alert';
import { describeError } from '../ui/errors';
import { LOCAL_TEST_ACCOUNT, rpcFromWallet, TEST_ACCOUNT_CONNECTOR } from './wallet-config';

/** Connects the owner's wallet and keeps it on the gateway's chain. */
export function WalletPanel({ terms }: { terms: Terms }) {
  const connection = useConnection();
  const connectors = useConnectors();
  const connect = useConnect();
  const disconnect = useDisconnect();
  const switchChain = useSwitchChain();
  const chains = useChains();
  const gatewayChain = chains.find((chain) => chain.id === terms.chainId);
  const browserWallet = connectors.find((connector) => connector.type === 'injected');
  const testAccount = connectors.find((connector) => connector.id === TEST_ACCOUNT_CONNECTOR);
  const hasBrowserWallet = typeof window !== 'undefined' && 'ethereum' in window;
  const walletRpcNote = gatewayChain && rpcFromWallet(gatewayChain) && (
    <p className="hint" data-testid="wallet-rpc-note">
      This dashboard knows no RPC endpoint for {gatewayChain.name}: it reads the chain through your browser
      wallet, which must have that network (chain id {terms.chainId}) added and selected.
    </p>
  );

  if (!connection.isConnected)
    return (
      <section className="card" aria-labelledby="wallet-heading">
        <h2 id="wallet-heading">1. Connect a wallet</h2>
        <p>
          Your wallet owns a smart account that pays the gateway. It signs once, to let the gateway's session
          key collect what your requests cost; it never hands over a key.
        </p>
        <div className="actions">
          {browserWallet && (
            <button
              type="button"
              // no chainId: a wallet on another network connects as it is, and the user switches it knowingly
              onClick={() => connect.mutate({ connector: browserWallet })}
              disabled={connect.isPending || !hasBrowserWallet}
            >
              Connect browser wallet
            </button>
          )}
          {testAccount && (
            <button
              type="button"
              className="secondary"
              onClick={() => connect.mutate({ connector: testAccount, chainId: terms.chainId })}
              disabled={connect.isPending}
            >
              Use test account
            </button>
          )}
        </div>
        {!hasBrowserWallet && <p className="hint">No browser wallet (EIP-1193) was found in this browser.</p>}
        {walletRpcNote}
        {testAccount && (
          <p className="hint">
            The test account is anvil's development account <code className="hex">{LOCAL_TEST_ACCOUNT}</code>:
            the local chain signs for it. It exists on the local chain only.
          </p>
        )}
        {connect.isPending && <p role="status">Waiting for the wallet…</p>}
        {connect.error && (
          <Alert tone="error" title="The wallet did not connect">
            {describeError(connect.error)}
          </Alert>
        )}
      </section>
    );

  const wrongChain = connection.chainId !== terms.chainId;
  return (
    <section className="card" aria-labelledby="wallet-heading">
      <h2 id="wallet-heading">1. Wallet</h2>
      <dl className="facts">
        <dt>Owner</dt>
        <dd>{connection.address && <Address value={connection.address} label="owner address" />}</dd>
        <dt>Network</dt>
        <dd>{connection.chain?.name ?? `chain ${connection.chainId}`}</dd>
        <dt>Connected with</dt>
        <dd>
          {connection.connector?.id === TEST_ACCOUNT_CONNECTOR
            ? 'Test account (anvil signs for it)'
            : connection.connector?.id === 'injected'
              ? 'Browser wallet'
              : connection.connector?.name}
        </dd>
      </dl>
      {wrongChain && (
        <Alert tone="warning" title="Wrong network">
          <p>
            Your wallet is on {connection.chain?.name ?? `chain ${connection.chainId}`}; this gateway settles
            on {gatewayChain?.name ?? `chain ${terms.chainId}`}.
          </p>
          <button
            type="button"
            onClick={() => switchChain.mutate({ chainId: terms.chainId })}
            disabled={switchChain.isPending}
          >
            Switch to {gatewayChain?.name ?? `chain ${terms.chainId}`}
          </button>
          {switchChain.error && <p>{describeError(switchChain.error)}</p>}
        </Alert>
      )}
      {walletRpcNote}
      <div className="actions">
        <button type="button" className="secondary" onClick={() => disconnect.mutate({})}>
          Disconnect
        </button>
      </div>
    </section>
  );
}
