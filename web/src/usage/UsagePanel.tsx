import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { useEffect, useId, useState } from 'react';
import {
  ACCOUNT_QUERY,
  type Account,
  queryLedger,
  SPEND_QUERY,
  type Spend,
  USAGE_QUERY,
  type UsagePage,
} from '../gateway/graphql';
import { sessionRefusal } from '../session/session-store';
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

/** The dates the filter takes: what the ledger's DateTime reads (four-digit years), nothing before 1970. */
const FIRST_DATE = '1970-01-01';
const LAST_DATE = '9999-12-31';

/**
 * A date input's value when it is a day the filter can use, else undefined. Date inputs accept years of
 * five or six digits ("20245-01-01"), which `Date.parse` does not read: such a date is ignored, not used.
 */
function validDate(value: string): string | undefined {
  return /^\d{4}-\d{2}-\d{2}$/.test(value) &&
    Number.isFinite(Date.parse(`${value}T00:00:00Z`)) &&
    value >= FIRST_DATE &&
    value <= LAST_DATE
    ? value
    : undefined;
}

/** The filter's dates as the ledger's [from, to) instants; an invalid date sets no bound. */
function range(filters: Filters) {
  const from = validDate(filters.from);
  const to = validDate(filters.to);
  // the day after 9999-12-31 has a five-digit year: up to then is no bound at all
  const nextDay = (date: string) =>
    date === LAST_DATE ? null : new Date(Date.parse(`${date}T00:00:00Z`) + 86_400_000).toISOString();
  return {
    from: from ? `${from}T00:00:00Z` : null,
    to: to ? nextDay(to) : null,
    invalid: {
      from: filters.from !== '' && from === undefined,
      to: filters.to !== '' && to === undefined,
    },
  };
}

export function UsagePanel({
  token,
  chainId,
  onSessionRefused,
}: {
  token: string;
  chainId: number;
  /** The gateway refused the token (revoked, expired, or signed with another JWT_SECRET): its words. */
  onSessionRefused: (message: string) => void;
}) {
  const [filters, setFilters] = useState<Filters>({ model: '', from: '', to: '' });
  // cursors[i] is the `after` of page i+1; page 1 has none
  const [cursors, setCursors] = useState<string[]>([]);
  const { from, to, invalid } = range(filters);
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
  const ids = { model: useId(), from: useId(), to: useId(), dateHint: useId() };
  const error = account.error ?? usage.error ?? spend.error;
  const refused = sessionRefusal(error);
  useEffect(() => {
    if (refused !== undefined) onSessionRefused(refused);
  }, [refused, onSessionRefused]);

  return (
    <section className="card wide" aria-labelledby="usage-heading">
      <h2 id="usage-heading">4. Usage and payments</h2>
      {error && (
        <Alert
          tone="error"
          title={
            refused !== undefined
              ? 'The gateway no longer accepts this session'
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
          min={FIRST_DATE}
          max={validDate(filters.to) ?? LAST_DATE}
          onChange={(event) => filter({ from: event.target.value })}
          aria-invalid={invalid.from}
          aria-describedby={invalid.from || invalid.to ? ids.dateHint : undefined}
        />
        <label htmlFor={ids.to}>To (UTC)</label>
        <input
          id={ids.to}
          type="date"
          value={filters.to}
          min={validDate(filters.from) ?? FIRST_DATE}
          max={LAST_DATE}
          onChange={(event) => filter({ to: event.target.value })}
          aria-invalid={invalid.to}
          aria-describedby={invalid.from || invalid.to ? ids.dateHint : undefined}
        />
        {(filters.model || filters.from || filters.to) && (
          <button type="button" className="secondary" onClick={() => filter({ model: '', from: '', to: '' })}>
            Clear filters
          </button>
        )}
        {(invalid.from || invalid.to) && (
          <p id={ids.dateHint} className="field-error" role="alert">
            {invalid.from && invalid.to
              ? 'Both dates are'
              : invalid.from
                ? 'The From date is'
                : 'The To date is'}{' '}
            not a day between {FIRST_DATE} and {LAST_DATE}, so it is ignored.
          </p>
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
