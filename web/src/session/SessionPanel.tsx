import { useMutation, useQuery } from '@tanstack/react-query';
import { useId, useState } from 'react';
import { formatUnits, parseUnits } from 'viem';
import { usePublicClient, useWalletClient } from 'wagmi';
import { callGateway } from '../gateway/api';
import type { Terms } from '../gateway/terms';
import { Address } from '../ui/Address';
import { Alert } from '../ui/Alert';
import { CopyButton } from '../ui/Copy';
import { describeError, isUserRejection } from '../ui/errors';
import { duration, formatInstant } from '../ui/format';
import { type AccountKind, type SmartAccount, untilUpgraded } from '../wallet/smart-account';
import { authorizeSession, revokeSession, type SessionGrant } from './authorize';
import { authorizeWithPermission, permissionSupport } from './execution-permission';
import { type SessionEnd, type SessionStore, type StoredSession, sessionRefusal } from './session-store';
import { clientSnippets } from './snippets';

const MINUTE = 60;
const HOUR = 3_600;
const DAY = 86_400;
const PERIODS = [
  { label: 'over the whole session', seconds: undefined },
  { label: 'per hour', seconds: HOUR },
  { label: 'per day', seconds: DAY },
  { label: 'per week', seconds: 7 * DAY },
] as const;
const LIFETIMES = [5 * MINUTE, 15 * MINUTE, HOUR, DAY, 7 * DAY, 30 * DAY];
/**
 * Kept below the gateway's longest lifetime: it measures the expiry from its own clock, so a browser
 * clock a little ahead would otherwise have the maximum refused.
 */
const CLOCK_MARGIN_SECONDS = 30;
const DEFAULT_CAP = '50';

/**
 * The lifetimes a session may be given: the standard ones the gateway's bounds admit, and its maximum
 * (less a margin for clock drift), so that there is always one to choose.
 */
export function lifetimeOptions(expiry: { minSeconds: number; maxSeconds: number }) {
  const margin = Math.min(
    CLOCK_MARGIN_SECONDS,
    Math.max(0, Math.floor((expiry.maxSeconds - expiry.minSeconds) / 2)),
  );
  const longest = expiry.maxSeconds - margin;
  const options = LIFETIMES.filter((seconds) => seconds >= expiry.minSeconds && seconds <= longest).map(
    (seconds) => ({ seconds, label: duration(seconds) }),
  );
  if (longest >= expiry.minSeconds && (options.at(-1)?.seconds ?? 0) < longest)
    options.push({ seconds: longest, label: `${duration(expiry.maxSeconds)} (the gateway's maximum)` });
  return options;
}

export function SessionPanel({
  store,
  ...props
}: {
  terms: Terms;
  kind: AccountKind;
  account: SmartAccount | undefined;
  /** Deployed (HybridDeleGator), or upgraded with EIP-7702 (own address); undefined until known. */
  deployed: boolean | undefined;
  onChainOk: boolean;
  /** The wallet's stored session (App.tsx owns it: the usage panel reports a refused token to it). */
  store: SessionStore;
}) {
  const { terms, account } = props;
  const { session, ended, save, end } = store;
  return (
    <section className="card wide" aria-labelledby="session-heading">
      <h2 id="session-heading">3. Session key</h2>
      {!account ? (
        <p className="muted">Connect a wallet on the gateway's network first.</p>
      ) : session ? (
        <ActiveSession session={session} terms={terms} onEnded={end} />
      ) : (
        <>
          {ended && <SessionEnded ended={ended} />}
          <GrantForm {...props} account={account} onAuthorized={save} />
        </>
      )}
    </section>
  );
}

/** Why the form is back: the session expired, the gateway refused its token, or it was revoked here. */
function SessionEnded({ ended }: { ended: SessionEnd }) {
  if (ended.reason === 'revoked')
    return (
      <Alert tone="info" title="Session revoked">
        The gateway refuses its token from now on. Authorize a new session to make more requests.
      </Alert>
    );
  if (ended.reason === 'expired')
    return (
      <Alert tone="warning" title="Your session has expired">
        It ended {formatInstant(new Date(ended.at))}, and the gateway refuses its token. Authorize a new
        session below to make more requests.
      </Alert>
    );
  return (
    <Alert tone="warning" title="The gateway no longer accepts your session">
      <p>The gateway said: {ended.message}</p>
      <p>
        The session was revoked (on another page or with <code>DELETE /v1/authorize</code>), has expired, or
        the gateway was restarted with a new <code>JWT_SECRET</code>. Its token was removed from this browser;
        authorize a new session below.
      </p>
    </Alert>
  );
}

function GrantForm({
  terms,
  kind,
  account,
  deployed,
  onChainOk,
  onAuthorized,
}: {
  terms: Terms;
  kind: AccountKind;
  account: SmartAccount;
  deployed: boolean | undefined;
  onChainOk: boolean;
  onAuthorized: (session: StoredSession) => void;
}) {
  const { expiry, minPeriodSeconds } = terms.policy;
  const minCap = BigInt(terms.policy.minCapAtomic);
  const lifetimes = lifetimeOptions(expiry);
  const ownAddress = kind === 'eip7702';
  // ERC-7715 grants an amount per period: from the own address, the cap is always per period
  const periods = PERIODS.filter((option) =>
    option.seconds === undefined ? !ownAddress : option.seconds >= minPeriodSeconds,
  );
  const [cap, setCap] = useState(DEFAULT_CAP);
  const [periodLabel, setPeriodLabel] = useState<string>('per day');
  const [lifetime, setLifetime] = useState(
    lifetimes.some((option) => option.seconds === 7 * DAY)
      ? 7 * DAY
      : (lifetimes.at(-1)?.seconds ?? expiry.maxSeconds),
  );
  const ids = { cap: useId(), period: useId(), lifetime: useId(), capHint: useId() };

  const capAtomic = parseCap(cap, terms.usdc.decimals);
  const capProblem =
    capAtomic === undefined
      ? `Enter an amount of USDC, e.g. ${DEFAULT_CAP} or 12.5 (at most ${terms.usdc.decimals} decimals).`
      : capAtomic < minCap
        ? `The gateway asks for a cap of at least ${formatUnits(minCap, terms.usdc.decimals)} USDC.`
        : undefined;
  const period = periods.find((option) => option.label === periodLabel) ?? periods[0] ?? PERIODS[0];
  const expiresAt = new Date(Date.now() + lifetime * 1000);
  const { data: walletClient } = useWalletClient({ chainId: terms.chainId });
  const publicClient = usePublicClient({ chainId: terms.chainId });

  const authorize = useMutation({
    mutationFn: async (grant: SessionGrant) => {
      if (!ownAddress) return authorizeSession(account, grant);
      if (!walletClient || !publicClient || grant.periodSeconds === undefined)
        throw new Error('connect a wallet first');
      // ERC-7715 where the wallet grants it; otherwise the wallet signs the delegation itself
      const support = await permissionSupport(walletClient, terms.chainId);
      if (support)
        return authorizeWithPermission(
          walletClient,
          terms,
          account.address,
          {
            amountAtomic: grant.capAtomic,
            periodSeconds: grant.periodSeconds,
            expiresAt: new Date(Date.now() + grant.lifetimeSeconds * 1000),
          },
          support,
          () => untilUpgraded(publicClient, terms, account.address),
        );
      if (!deployed)
        throw new Error(
          'Your wallet grants no ERC-7715 permissions, and your address is not a smart account (EIP-7702) yet: switch it to a smart account in your wallet, then sign here.',
        );
      return authorizeSession(account, grant);
    },
    onSuccess: onAuthorized,
  });
  const ready = onChainOk && deployed !== undefined && capProblem === undefined && !authorize.isPending;
  const from = ownAddress ? 'your own address' : 'your smart account';

  return (
    <form
      onSubmit={(event) => {
        event.preventDefault();
        if (ready && capAtomic !== undefined)
          authorize.mutate({ capAtomic, periodSeconds: period.seconds, lifetimeSeconds: lifetime });
      }}
      className="split"
    >
      <div>
        <p>
          Let the gateway collect what your requests cost, from {from}, without asking you each time.{' '}
          {ownAddress
            ? 'Your wallet grants it once (an ERC-7715 permission where it can, else a delegation you sign); you can revoke the session whenever you like.'
            : 'You sign once; you can revoke it whenever you like.'}
        </p>
        <div className="form-grid">
          <label htmlFor={ids.cap}>{ownAddress ? 'Amount per period (USDC)' : 'Spending cap (USDC)'}</label>
          <input
            id={ids.cap}
            inputMode="decimal"
            value={cap}
            onChange={(event) => setCap(event.target.value.trim())}
            aria-invalid={capProblem !== undefined}
            aria-describedby={ids.capHint}
          />
          <label htmlFor={ids.period}>{ownAddress ? 'Period' : 'The cap applies'}</label>
          <select
            id={ids.period}
            value={period.label}
            onChange={(event) => setPeriodLabel(event.target.value)}
          >
            {periods.map((option) => (
              <option key={option.label} value={option.label}>
                {option.label}
              </option>
            ))}
          </select>
          <label htmlFor={ids.lifetime}>Session lasts</label>
          <select
            id={ids.lifetime}
            value={lifetime}
            onChange={(event) => setLifetime(Number(event.target.value))}
          >
            {lifetimes.map((option) => (
              <option key={option.seconds} value={option.seconds}>
                {option.label}
              </option>
            ))}
          </select>
        </div>
        <p id={ids.capHint} className={capProblem ? 'field-error' : 'hint'}>
          {capProblem ?? 'The gateway can never take more than this, whatever it is asked to settle.'}
        </p>
      </div>

      <div>
        <h3 className="first">{ownAddress ? 'What you are granting' : 'What you are signing'}</h3>
        <p className="plain-words" data-testid="delegation-summary">
          The gateway's session key may transfer <strong>{terms.usdc.name}</strong> from {from} to the
          operator's treasury, at most{' '}
          <strong>
            {capAtomic === undefined ? '…' : formatUnits(capAtomic, terms.usdc.decimals)} USDC {period.label}
          </strong>
          , until <strong>{formatInstant(expiresAt)}</strong>.{' '}
          {ownAddress
            ? "It cannot move any other token, or let anyone but the gateway's key use it. Your wallet pins the recipient to the treasury where it can; where it cannot, the gateway still only ever pays its treasury, and the amount per period bounds what its key could move."
            : "It cannot move any other token, pay anyone else, or let anyone but the gateway's key use it."}
        </p>
        <dl className="facts">
          <dt>From</dt>
          <dd>
            <Address value={account.address} label="paying address" />
          </dd>
          <dt>Token</dt>
          <dd>
            <Address value={terms.usdc.address} label={`${terms.usdc.name} token address`} />
          </dd>
          <dt>{ownAddress ? 'Amount per period' : 'Cap'}</dt>
          <dd>{capAtomic === undefined ? '…' : `${formatUnits(capAtomic, terms.usdc.decimals)} USDC`}</dd>
          <dt>Period</dt>
          <dd>
            {period.seconds === undefined ? 'none: one cap for the whole session' : duration(period.seconds)}
          </dd>
          <dt>Expires</dt>
          <dd>{formatInstant(expiresAt)}</dd>
          <dt>Pays to (treasury)</dt>
          <dd>
            <Address value={terms.treasury} label="treasury address" />
          </dd>
          <dt>Spender (gateway key)</dt>
          <dd>
            <Address value={terms.sessionKey} label="gateway session key" />
          </dd>
        </dl>

        {!onChainOk && <p className="hint">Switch your wallet to the gateway's network to sign.</p>}
        {onChainOk && deployed === false && !ownAddress && (
          <p className="hint">
            Your smart account is not deployed yet. You can sign now (ERC-6492): the gateway deploys it before
            the first payment. It needs USDC to pay for requests.
          </p>
        )}
        <div className="actions">
          <button type="submit" disabled={!ready}>
            {authorize.isPending
              ? 'Waiting for your wallet…'
              : ownAddress
                ? 'Grant and authorize'
                : 'Sign and authorize'}
          </button>
        </div>
        {authorize.error && (
          <Alert
            tone="error"
            title={isUserRejection(authorize.error) ? 'Signature rejected' : 'The session was not authorized'}
          >
            {describeError(authorize.error)}
          </Alert>
        )}
      </div>
    </form>
  );
}

function parseCap(value: string, decimals: number): bigint | undefined {
  if (!/^\d+(\.\d+)?$/.test(value) || (value.split('.')[1]?.length ?? 0) > decimals) return undefined;
  return parseUnits(value, decimals);
}

function ActiveSession({
  session,
  terms,
  onEnded,
}: {
  session: StoredSession;
  terms: Terms;
  onEnded: (why?: SessionEnd) => void;
}) {
  const tokenId = useId();
  const revoke = useMutation({
    mutationFn: () => revokeSession(session.token),
    onSuccess: () => onEnded({ reason: 'revoked' }),
    // a token the gateway refuses has no session left to revoke: forget it, and say why
    onError: (error) => {
      const refused = sessionRefusal(error);
      if (refused !== undefined) onEnded({ reason: 'refused', message: refused });
    },
  });
  const models = useQuery({
    queryKey: ['models'],
    queryFn: () => callGateway<Array<{ id: string }>>('/v1/models'),
    staleTime: Number.POSITIVE_INFINITY,
  });
  const baseUrl = `${window.location.origin}/v1`;
  const model = models.data?.[0]?.id ?? 'anthropic/claude-sonnet-5.5';
  const { limits } = session;
  const decimals = terms.usdc.decimals;
  return (
    <>
      <Alert tone="success" title="Session authorized">
        Use the token below as the API key of any OpenAI client. It expires{' '}
        {formatInstant(new Date(session.expiresAt))}.
      </Alert>
      <div className="split">
        <div>
          <dl className="facts">
            <dt>Paying account</dt>
            <dd>
              <Address value={session.wallet} label="paying smart account" />
            </dd>
            <dt>Cap</dt>
            <dd>
              {limits.totalCapAtomic !== undefined &&
                `${formatUnits(BigInt(limits.totalCapAtomic), decimals)} USDC in total`}
              {limits.totalCapAtomic !== undefined && limits.period && '; '}
              {limits.period &&
                `${formatUnits(BigInt(limits.period.amountAtomic), decimals)} USDC per ${duration(limits.period.periodSeconds).replace(/^1 /, '')}`}
            </dd>
            <dt>Session id</dt>
            <dd>
              <code>{session.sessionId}</code>
            </dd>
          </dl>
          <label htmlFor={tokenId} className="token-label">
            Access token
          </label>
          <div className="token-row">
            <textarea id={tokenId} readOnly value={session.token} rows={3} spellCheck={false} />
            <CopyButton text={session.token} label="Copy access token" />
          </div>
          <div className="actions">
            <button
              type="button"
              className="danger"
              onClick={() => revoke.mutate()}
              disabled={revoke.isPending}
            >
              {revoke.isPending ? 'Revoking…' : 'Revoke session'}
            </button>
            <button type="button" className="secondary" onClick={() => onEnded()}>
              Forget token in this browser
            </button>
          </div>
          {revoke.error && (
            <Alert tone="error" title="The session was not revoked">
              {describeError(revoke.error)}
            </Alert>
          )}
        </div>
        <div>
          <h3 className="first">Use it with the openai client</h3>
          <Snippets snippets={clientSnippets(baseUrl, session.token, model)} />
        </div>
      </div>
    </>
  );
}

/** The client examples as tabs (WAI-ARIA tabs pattern: arrow keys move between them). */
function Snippets({ snippets }: { snippets: Array<{ language: string; code: string }> }) {
  const [selected, setSelected] = useState(0);
  const baseId = useId();
  const move = (index: number) => {
    const next = (index + snippets.length) % snippets.length;
    setSelected(next);
    document.getElementById(`${baseId}-tab-${next}`)?.focus();
  };
  return (
    <div className="snippets">
      <div role="tablist" aria-label="Client examples" className="tabs">
        {snippets.map((snippet, index) => (
          <button
            key={snippet.language}
            id={`${baseId}-tab-${index}`}
            type="button"
            role="tab"
            aria-selected={index === selected}
            aria-controls={`${baseId}-panel-${index}`}
            tabIndex={index === selected ? 0 : -1}
            className="tab"
            onClick={() => setSelected(index)}
            onKeyDown={(event) => {
              if (event.key === 'ArrowRight') move(index + 1);
              if (event.key === 'ArrowLeft') move(index - 1);
            }}
          >
            {snippet.language}
          </button>
        ))}
      </div>
      {snippets.map((snippet, index) => (
        <div
          key={snippet.language}
          id={`${baseId}-panel-${index}`}
          role="tabpanel"
          aria-labelledby={`${baseId}-tab-${index}`}
          hidden={index !== selected}
          className="snippet"
        >
          <CopyButton text={snippet.code} label={`Copy ${snippet.language} example`} />
          <pre>
            <code>{snippet.code}</code>
          </pre>
        </div>
      ))}
    </div>
  );
}
