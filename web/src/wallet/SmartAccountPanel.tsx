import { useMutation } from '@tanstack/react-query';
import { formatUnits } from 'viem';
import { useConnection, usePublicClient, useWalletClient } from 'wagmi';
import { LOCAL_CHAIN_ID, type Terms } from '../gateway/terms';
import { Address } from '../ui/Address';
import { Alert, Loading } from '../ui/Alert';
import { describeError } from '../ui/errors';
import { requestTestMoney } from './faucet';
import { type AccountKind, type AccountState, type SmartAccount, upgradedTo7702 } from './smart-account';

/** Test money the local faucet grants per click. */
const TEST_USDC = '100';
const TEST_ETH = '1';

export function SmartAccountPanel({
  terms,
  kind,
  onKind,
  account,
  state,
  loading,
  error,
}: {
  terms: Terms;
  kind: AccountKind;
  onKind: (kind: AccountKind) => void;
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
      <KindChoice kind={kind} onKind={onKind} />
      {loading && <Loading what="your smart account" />}
      {error && (
        <Alert tone="error" title="The smart account could not be derived">
          {describeError(error)}
        </Alert>
      )}
      {account && kind === 'eip7702' && (
        <OwnAddress terms={terms} address={account.address} state={state} faucetUrl={faucetUrl} />
      )}
      {account && kind === 'hybrid' && (
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

function KindChoice({ kind, onKind }: { kind: AccountKind; onKind: (kind: AccountKind) => void }) {
  return (
    <fieldset className="choice">
      <legend>Pay from</legend>
      <label>
        <input
          type="radio"
          name="account-kind"
          checked={kind === 'eip7702'}
          onChange={() => onKind('eip7702')}
        />{' '}
        My own address (EIP-7702)
      </label>
      <label>
        <input
          type="radio"
          name="account-kind"
          checked={kind === 'hybrid'}
          onChange={() => onKind('hybrid')}
        />{' '}
        A new smart account (HybridDeleGator)
      </label>
    </fieldset>
  );
}

/** The owner's own address as the payer: the USDC it holds pays, once it is a 7702 smart account. */
function OwnAddress({
  terms,
  address,
  state,
  faucetUrl,
}: {
  terms: Terms;
  address: `0x${string}`;
  state: AccountState;
  faucetUrl: string | undefined;
}) {
  const upgraded = upgradedTo7702(terms, state);
  const fund = useMutation({
    mutationFn: async () => {
      if (!faucetUrl) throw new Error('no faucet on this chain');
      await requestTestMoney(faucetUrl, { address, usdc: TEST_USDC, eth: '0' });
      await state.refetch();
    },
  });
  return (
    <>
      <p>
        Your own address pays, with the USDC it already holds: no new address to fund. It must be a MetaMask
        smart account through EIP-7702 (your address delegating to the Delegation Framework's
        EIP7702StatelessDeleGator); your wallet keeps its key.
      </p>
      <dl className="facts">
        <dt>Address</dt>
        <dd>
          <Address value={address} label="paying address" testId="smart-account-address" />
        </dd>
        <dt>Smart account (EIP-7702)</dt>
        <dd data-testid="account-upgraded">
          {upgraded === undefined
            ? 'checking…'
            : upgraded
              ? 'Yes'
              : state.deployed
                ? 'No: it delegates to another contract'
                : 'Not yet'}
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
      {upgraded === false && (
        <p className="hint">
          A wallet granting ERC-7715 permissions (MetaMask) upgrades your address as it grants one. Otherwise
          switch it to a smart account in your wallet first (MetaMask: account details, "Switch to smart
          account").
        </p>
      )}
      {faucetUrl && (
        <div className="actions">
          <button type="button" onClick={() => fund.mutate()} disabled={fund.isPending}>
            Add {TEST_USDC} test USDC
          </button>
          <span className="hint">Local chain: test USDC from the faucet, to your address.</span>
        </div>
      )}
      {fund.error && (
        <Alert tone="error" title="The faucet did not pay">
          {describeError(fund.error)}
        </Alert>
      )}
    </>
  );
}
