import { useMutation } from '@tanstack/react-query';
import { formatUnits } from 'viem';
import { useConnection, usePublicClient, useWalletClient } from 'wagmi';
import { LOCAL_CHAIN_ID, type Terms } from '../gateway/terms';
import { Address } from '../ui/Address';
import { Alert, Loading } from '../ui/Alert';
import { describeError } from '../ui/errors';
import { requestTestMoney } from './faucet';
import type { AccountState, SmartAccount } from './smart-account';

/** Test money the local faucet grants per click. */
const TEST_USDC = '100';
const TEST_ETH = '1';

export function SmartAccountPanel({
  terms,
  account,
  state,
  loading,
  error,
}: {
  terms: Terms;
  account: SmartAccount | undefined;
  state: AccountState;
  loading: boolean;
  error: Error | null;
}) {
  const { address: owner } = useConnection();
  const publicClient = usePublicClient({ chainId: terms.chainId });
  const { data: walletClient } = useWalletClient({ chainId: terms.chainId });
  const faucetUrl = terms.chainId === LOCAL_CHAIN_ID ? terms.devFaucetUrl : undefined;

  const deploy = useMutation({
    mutationFn: async ({ fund }: { fund: boolean }) => {
      if (!account || !owner || !walletClient || !publicClient) throw new Error('connect a wallet first');
      if (fund && faucetUrl)
        // ETH for the owner pays the deployment; the USDC is what requests will be paid with.
        await Promise.all([
          requestTestMoney(faucetUrl, { address: owner, usdc: '0', eth: TEST_ETH }),
          requestTestMoney(faucetUrl, { address: account.address, usdc: TEST_USDC, eth: '0' }),
        ]);
      if (!(await account.isDeployed())) {
        const { factory, factoryData } = await account.getFactoryArgs();
        if (!factory || !factoryData) throw new Error('the kit gave no factory call for this account');
        const hash = await walletClient.sendTransaction({
          to: factory,
          data: factoryData,
          chain: walletClient.chain,
        });
        const receipt = await publicClient.waitForTransactionReceipt({ hash });
        if (receipt.status !== 'success') throw new Error(`the deployment transaction ${hash} reverted`);
      }
      await state.refetch();
    },
  });

  return (
    <section className="card" aria-labelledby="account-heading">
      <h2 id="account-heading">2. Smart account</h2>
      {loading && <Loading what="your smart account" />}
      {error && (
        <Alert tone="error" title="The smart account could not be derived">
          {describeError(error)}
        </Alert>
      )}
      {account && (
        <>
          <p>
            A MetaMask smart account (HybridDeleGator) owned by your wallet. Requests are paid from it, in
            USDC, after they complete.
          </p>
          <dl className="facts">
            <dt>Address</dt>
            <dd>
              <Address value={account.address} label="smart account address" testId="smart-account-address" />
            </dd>
            <dt>Deployed</dt>
            <dd data-testid="account-deployed">
              {state.deployed === undefined ? 'checking…' : state.deployed ? 'Yes' : 'Not yet'}
            </dd>
            <dt>USDC balance</dt>
            <dd data-testid="usdc-balance">
              {state.balance === undefined
                ? 'checking…'
                : `${formatUnits(state.balance, terms.usdc.decimals)} ${terms.usdc.name}`}
            </dd>
          </dl>
          {state.error && (
            <Alert tone="error" title="The chain did not answer">
              {describeError(state.error)}
            </Alert>
          )}
          <AccountActions
            faucet={Boolean(faucetUrl)}
            deployed={state.deployed}
            pending={deploy.isPending}
            onDeploy={(fund) => deploy.mutate({ fund })}
          />
          {deploy.isPending && <p role="status">Working: confirm in your wallet if it asks…</p>}
          {deploy.error && (
            <Alert tone="error" title="Could not set up the account">
              {describeError(deploy.error)}
            </Alert>
          )}
          {deploy.isSuccess && <Alert tone="success" title="The smart account is ready" />}
        </>
      )}
    </section>
  );
}

function AccountActions(props: {
  faucet: boolean;
  deployed: boolean | undefined;
  pending: boolean;
  onDeploy: (fund: boolean) => void;
}) {
  if (props.deployed === undefined) return null;
  if (props.faucet)
    return (
      <div className="actions">
        <button type="button" onClick={() => props.onDeploy(true)} disabled={props.pending}>
          {props.deployed ? `Add ${TEST_USDC} test USDC` : 'Create and fund'}
        </button>
        <span className="hint">
          Local chain: test USDC from the faucet{props.deployed ? '' : ', then deploy'}.
        </span>
      </div>
    );
  if (props.deployed) return null;
  return (
    <div className="actions">
      <button type="button" onClick={() => props.onDeploy(false)} disabled={props.pending}>
        Deploy smart account
      </button>
      <span className="hint">
        One transaction from your wallet (it pays the gas). Fund it with USDC afterwards.
      </span>
    </div>
  );
}
