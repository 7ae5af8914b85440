import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { useId, useState } from 'react';
import { GatewayError } from '../gateway/api';
import {
  ACCOUNT_QUERY,
  type Account,
  queryLedger,
  SPEND_QUERY,
  type Spend,
  USAGE_QUERY,
  type UsagePage,
} from '../gateway/graphql';
import { Alert, Loading } from '../ui/Alert';
import { describeError } from '../ui/errors';
import { usd } from '../ui/format';
import { SpendPerDay, SpendPerModel } from './SpendChart';
import { UsageTable } from './UsageTable';

/** New requests show up without a reload. */
const LIVE_REFRESH_MS = 2_000;
const PAGE_SIZE = 10;

interface Filters {
  model: string;
  /** YYYY-MM-DD, UTC, inclusive. */
  from: string;
  to: string;
}

/** The filter's dates as the ledger's [from, to) instants. */
function range(filters: Filters) {
  const nextDay = (date: string) => new Date(Date.parse(`${date}T00:00:00Z`) + 86_400_000).toISOString();
  return {
    from: filters.from ? `${filters.from}T00:00:00Z` : null,
    to: filters.to ? nextDay(filters.to) : null,
  };
}

export function UsagePanel({ token, chainId }: { token: string; chainId: number }) {
  const [filters, setFilters] = useState<Filters>({ model: '', from: '', to: '' });
  // cursors[i] is the `after` of page i+1; page 1 has none
  const [cursors, setCursors] = useState<string[]>([]);
  const { from, to } = range(filters);
  const live = { refetchInterval: LIVE_REFRESH_MS, refetchIntervalInBackground: false };

  const account = useQuery({
    queryKey: ['ledger', token, 'account'],
    queryFn: () => queryLedger<Account>(token, ACCOUNT_QUERY),
    ...live,
  });
  const spend = useQuery({
    queryKey: ['ledger', token, 'spend', from, to],
    queryFn: () => queryLedger<Spend>(token, SPEND_QUERY, { from, to }),
    ...live,
  });
  const after = cursors[cursors.length - 1] ?? null;
  const usage = useQuery({
    queryKey: ['ledger', token, 'usage', filters.model, from, to, after],
    queryFn: () =>
      queryLedger<UsagePage>(token, USAGE_QUERY, {
        first: PAGE_SIZE,
        after,
        model: filters.model || null,
        from,
        to,
      }),
    placeholderData: keepPreviousData,
    ...live,
  });

  const filter = (change: Partial<Filters>) => {
    setFilters({ ...filters, ...change });
    setCursors([]);
  };
  const models = [...new Set([...(spend.data?.byModel.map((bucket) => bucket.key) ?? []), filters.model])]
    .filter(Boolean)
    .sort();
  const rows = usage.data?.usage.edges.map((edge) => edge.node) ?? [];
  const pageInfo = usage.data?.usage.pageInfo;
  const ids = { model: useId(), from: useId(), to: useId() };
  const error = account.error ?? usage.error ?? spend.error;

  return (
    <section className="card wide" aria-labelledby="usage-heading">
      <h2 id="usage-heading">4. Usage and payments</h2>
      {error && (
        <Alert
          tone="error"
          title={
            error instanceof GatewayError && error.code === 'UNAUTHENTICATED'
              ? 'This session has ended (revoked or expired): authorize a new one above'
              : 'The ledger could not be read'
          }
        >
          {describeError(error)}
        </Alert>
      )}
      {account.isPending ? <Loading what="your balance with the gateway" /> : null}
      {account.data && <DebtSummary account={account.data} />}

      <div className="charts">
        {spend.data && spend.data.byDay.length > 0 && <SpendPerDay buckets={spend.data.byDay} />}
        {spend.data && spend.data.byModel.length > 0 && <SpendPerModel buckets={spend.data.byModel} />}
      </div>

      <fieldset className="filters">
        <legend>Filter requests</legend>
        <label htmlFor={ids.model}>Model</label>
        <select
          id={ids.model}
          value={filters.model}
          onChange={(event) => filter({ model: event.target.value })}
        >
          <option value="">All models</option>
          {models.map((model) => (
            <option key={model} value={model}>
              {model}
            </option>
          ))}
        </select>
        <label htmlFor={ids.from}>From (UTC)</label>
        <input
          id={ids.from}
          type="date"
          value={filters.from}
          max={filters.to || undefined}
          onChange={(event) => filter({ from: event.target.value })}
        />
        <label htmlFor={ids.to}>To (UTC)</label>
        <input
          id={ids.to}
          type="date"
          value={filters.to}
          min={filters.from || undefined}
          onChange={(event) => filter({ to: event.target.value })}
        />
        {(filters.model || filters.from || filters.to) && (
          <button type="button" className="secondary" onClick={() => filter({ model: '', from: '', to: '' })}>
            Clear filters
          </button>
        )}
      </fieldset>

      {usage.isPending && <Loading what="requests" />}
      {usage.isSuccess && rows.length === 0 && (
        <p className="empty" role="status">
          {cursors.length === 0 && !filters.model && !filters.from && !filters.to
            ? 'No requests yet. Call the gateway with the token above: each request appears here within seconds.'
            : 'No requests match these filters.'}
        </p>
      )}
      {rows.length > 0 && <UsageTable rows={rows} chainId={chainId} />}

      <nav className="pagination" aria-label="Usage pages">
        <button
          type="button"
          className="secondary"
          disabled={cursors.length === 0}
          onClick={() => setCursors(cursors.slice(0, -1))}
        >
          Previous page
        </button>
        <span aria-live="polite">Page {cursors.length + 1}</span>
        <button
          type="button"
          className="secondary"
          disabled={!pageInfo?.hasNextPage || !pageInfo.endCursor}
          onClick={() => pageInfo?.endCursor && setCursors([...cursors, pageInfo.endCursor])}
        >
          Next page
        </button>
      </nav>
    </section>
  );
}

function DebtSummary({ account }: { account: Account }) {
  const { debt, totals } = account.me;
  return (
    <dl className="summary">
      <div>
        <dt>Owed now</dt>
        <dd className="amount" data-testid="owed-now">
          {usd(debt.owed.usd)}
        </dd>
        <dd className="hint">settled before your next request is forwarded</dd>
      </div>
      <div>
        <dt>Unpaid requests</dt>
        <dd className="amount" data-testid="unpaid">
          {usd(debt.unpaid.usd)}
        </dd>
        {debt.credit.picoUsd !== '0' && (
          <dd className="hint">less {usd(debt.credit.usd)} credit from rounding</dd>
        )}
      </div>
      <div>
        <dt>Spent in total</dt>
        <dd className="amount" data-testid="spent-total">
          {usd(totals.usage.cost.usd)}
        </dd>
        <dd className="hint">
          {totals.usage.requests} requests: {usd(totals.usage.providerCost.usd)} provider +{' '}
          {usd(totals.usage.commission.usd)} commission
        </dd>
      </div>
      <div>
        <dt>Paid on chain</dt>
        <dd className="amount" data-testid="paid-on-chain">
          {usd(totals.settledUsd)}
        </dd>
        <dd className="hint">
          {totals.settlements} settlement{totals.settlements === 1 ? '' : 's'}
        </dd>
      </div>
    </dl>
  );
}
