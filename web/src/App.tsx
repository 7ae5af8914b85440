import { useQuery } from '@tanstack/react-query';
import { useCallback, useEffect, useMemo, useState } from 'react';
import { useConnection, WagmiProvider } from 'wagmi';
import { callGateway, GatewayError } from './gateway/api';
import { LOCAL_CHAIN_ID, type Terms, useTerms } from './gateway/terms';
import { OperatorPage } from './operator/OperatorPage';
import { SessionPanel } from './session/SessionPanel';
import { useStoredSession } from './session/session-store';
import { Alert, Loading } from './ui/Alert';
import { describeError } from './ui/errors';
import { PendingStep } from './ui/PendingStep';
import { UsagePanel } from './usage/UsagePanel';
import { SmartAccountPanel } from './wallet/SmartAccountPanel';
import { type AccountKind, upgradedTo7702, useAccountState, useSmartAccount } from './wallet/smart-account';
import { WalletPanel } from './wallet/WalletPanel';
import { createWalletConfig, gatewayChains } from './wallet/wallet-config';

const OPERATOR_ROUTE = '#/operator';

/** The page's route: the operator view at #/operator, the wallet's dashboard otherwise. */
function useRoute(): string {
  const [hash, setHash] = useState(() => window.location.hash);
  useEffect(() => {
    const changed = () => setHash(window.location.hash);
    window.addEventListener('hashchange', changed);
    return () => window.removeEventListener('hashchange', changed);
  }, []);
  return hash;
}

export function App() {
  const operator = useRoute() === OPERATOR_ROUTE;
  const terms = useTerms();
  return (
    <>
      <header className="top">
        <div>
          <h1>paygate</h1>
          <p className="tagline">Pay-per-use LLM gateway: every request paid in USDC, after it is used.</p>
        </div>
        <nav className="pages" aria-label="Pages">
          <a href="#/" aria-current={operator ? undefined : 'page'}>
            Wallet
          </a>
          <a href={OPERATOR_ROUTE} aria-current={operator ? 'page' : undefined}>
            Operator
          </a>
        </nav>
        {terms.data && <NetworkBadge terms={terms.data} />}
      </header>
      <main>{operator ? <OperatorPage /> : <WalletPage terms={terms} />}</main>
    </>
  );
}

function WalletPage({ terms }: { terms: ReturnType<typeof useTerms> }) {
  return (
    <>
      {terms.isPending && <Loading what="the gateway's payment terms" />}
      {terms.error && (
        <Alert
          tone="error"
          title={
            terms.error instanceof GatewayError && !terms.error.unreachable
              ? "The gateway's payment terms could not be read"
              : 'Cannot reach the gateway'
          }
        >
          <p>{describeError(terms.error)}</p>
          <button type="button" onClick={() => terms.refetch()}>
            Try again
          </button>
        </Alert>
      )}
      {terms.data && <WalletRoot terms={terms.data} />}
    </>
  );
}

function NetworkBadge({ terms }: { terms: Terms }) {
  const health = useQuery({
    queryKey: ['health'],
    queryFn: () => callGateway<{ status: string }>('/health'),
    refetchInterval: 10_000,
    retry: false,
  });
  const chain = gatewayChains(terms)[0];
  const status = health.error ? 'not answering' : (health.data?.status ?? '…');
  return (
    <p className="badges">
      <span className={`badge ${terms.chainId === LOCAL_CHAIN_ID ? 'badge-local' : ''}`}>{chain.name}</span>
      <span className={`badge ${health.error ? 'badge-down' : ''}`} role="status">
        Gateway: {status}
      </span>
    </p>
  );
}

function WalletRoot({ terms }: { terms: Terms }) {
  const config = useMemo(() => createWalletConfig(terms), [terms]);
  return (
    <WagmiProvider config={config}>
      <Dashboard terms={terms} />
    </WagmiProvider>
  );
}

function Dashboard({ terms }: { terms: Terms }) {
  const connection = useConnection();
  const onChain = connection.isConnected && connection.chainId === terms.chainId;
  const [kind, setKind] = useState<AccountKind>('hybrid');
  const smartAccount = useSmartAccount(terms, kind);
  const account = onChain ? smartAccount.data : undefined;
  const state = useAccountState(terms, account?.address);
  const store = useStoredSession(terms.chainId, account?.address);
  const { session, end } = store;
  const onSessionRefused = useCallback((message: string) => end({ reason: 'refused', message }), [end]);
  return (
    <div className="grid">
      <WalletPanel terms={terms} />
      {onChain ? (
        <SmartAccountPanel
          terms={terms}
          kind={kind}
          onKind={setKind}
          account={account}
          state={state}
          loading={smartAccount.isPending}
          error={smartAccount.error}
        />
      ) : (
        <PendingStep id="account-heading" title="2. Smart account">
          Connect a wallet on the gateway's network first.
        </PendingStep>
      )}
      <SessionPanel
        terms={terms}
        kind={kind}
        account={account}
        deployed={kind === 'eip7702' ? upgradedTo7702(terms, state) : state.deployed}
        onChainOk={onChain}
        store={store}
      />
      {session ? (
        <UsagePanel token={session.token} chainId={terms.chainId} onSessionRefused={onSessionRefused} />
      ) : (
        <PendingStep id="usage-heading" title="4. Usage and payments" wide>
          Authorize a session to see every request's cost and the transaction that paid it.
        </PendingStep>
      )}
    </div>
  );
}
