import { useQuery } from '@tanstack/react-query';
import { type FormEvent, useEffect, useId, useState } from 'react';
import { formatEther, formatUnits } from 'viem';
import { GatewayError } from '../gateway/api';
import { OPERATOR_QUERY, type OperatorSettlement, type OperatorView, queryLedger } from '../gateway/graphql';
import { Alert, Loading } from '../ui/Alert';
import { describeError } from '../ui/errors';
import { count, formatTime, usd } from '../ui/format';
import { useOperatorToken } from './operator-token';

const REFRESH_MS = 10_000;

/** The gateway refused the token itself, as opposed to failing to answer. */
const isRefusal = (error: unknown) =>
  error instanceof GatewayError && (error.code === 'UNAUTHENTICATED' || error.code === 'FORBIDDEN');

/** The operator's page: asks for the ADMIN_TOKEN, then shows the gateway's money as GraphQL states it. */
export function OperatorPage() {
  const { token, keep, forget } = useOperatorToken();
  const [refused, setRefused] = useState<string | null>(null);
  const view = useQuery({
    queryKey: ['operator', token],
    queryFn: () => queryLedger<OperatorView>(token as string, OPERATOR_QUERY),
    enabled: token !== null,
    refetchInterval: REFRESH_MS,
    retry: (failures, error) => !isRefusal(error) && failures < 1,
  });
  useEffect(() => {
    if (view.error && isRefusal(view.error)) {
      setRefused(describeError(view.error));
      forget();
    }
  }, [view.error, forget]);

  if (token === null)
    return (
      <TokenForm
        refused={refused}
        onToken={(value) => {
          setRefused(null);
          keep(value);
        }}
      />
    );
  return (
    <div className="grid">
      <section className="card wide" aria-labelledby="operator-heading">
        <h2 id="operator-heading">Operator</h2>
        <p className="muted">
          What the gateway earned against the gas it paid, and the state of the money, from its GraphQL
          <code> operator</code> query. Refreshed every {REFRESH_MS / 1000} seconds.
        </p>
        <div className="actions">
          <button type="button" className="secondary" onClick={forget}>
            Forget the token
          </button>
        </div>
        {view.isPending && <Loading what="the operator view" />}
        {view.error && !isRefusal(view.error) && (
          <Alert tone="error" title="The operator view could not be read">
            {describeError(view.error)}
          </Alert>
        )}
      </section>
      {view.data && <OperatorSections view={view.data.operator} />}
    </div>
  );
}

function TokenForm({ refused, onToken }: { refused: string | null; onToken: (token: string) => void }) {
  const [value, setValue] = useState('');
  const id = useId();
  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (value.trim()) onToken(value.trim());
  };
  return (
    <section className="card wide" aria-labelledby="operator-heading">
      <h2 id="operator-heading">Operator</h2>
      {refused && (
        <Alert tone="error" title="The gateway refused this token">
          {refused}
        </Alert>
      )}
      <form onSubmit={submit} className="form-grid">
        <label htmlFor={id}>Operator token (ADMIN_TOKEN)</label>
        <input
          id={id}
          type="password"
          autoComplete="off"
          value={value}
          onChange={(event) => setValue(event.target.value)}
        />
        <p className="hint">Kept in this tab only, and sent to this gateway's /graphql only.</p>
        <div className="actions">
          <button type="submit" disabled={!value.trim()}>
            Open the operator view
          </button>
        </div>
      </form>
    </section>
  );
}

function OperatorSections({ view }: { view: OperatorView['operator'] }) {
  const { relayer, exposure, collector } = view;
  const inTrouble = [...view.pending.edges, ...view.sent.edges, ...view.failed.edges].map(
    (edge) => edge.node,
  );
  return (
    <>
      <section className="card wide" aria-labelledby="economics-heading">
        <h2 id="economics-heading">Commission and gas, last 30 days</h2>
        <p className="muted">
          Commission by the day its requests were recorded; gas by the day its settlements were confirmed. ETH
          has no price on chain, so gas is in ETH.
        </p>
        {view.economics.length === 0 ? (
          <p className="empty">No requests or settlements in the last 30 days.</p>
        ) : (
          <div className="table-scroll">
            <table data-testid="economics">
              <thead>
                <tr>
                  <th scope="col">Day (UTC)</th>
                  <th scope="col">Rail</th>
                  <th scope="col">Requests</th>
                  <th scope="col">Commission</th>
                  <th scope="col">Settlements</th>
                  <th scope="col">Gas used</th>
                  <th scope="col">Gas spent (ETH)</th>
                </tr>
              </thead>
              <tbody>
                {view.economics.map((day) => (
                  <tr key={`${day.day} ${day.rail}`}>
                    <td>{day.day}</td>
                    <td>{day.rail}</td>
                    <td className="num">{count(day.requests)}</td>
                    <td className="amount" data-commission-pico={day.commission.picoUsd}>
                      {usd(day.commission.usd)}
                    </td>
                    <td className="num">{day.settlements}</td>
                    <td className="num">{count(day.gasUsed)}</td>
                    <td className="amount" data-gas-wei={day.gasSpentWei}>
                      {day.gasSpentEth}
                    </td>
                  </tr>
                ))}
              </tbody>
              <EconomicsTotals economics={view.economics} />
            </table>
          </div>
        )}
      </section>

      <section className="card" aria-labelledby="relayer-heading">
        <h2 id="relayer-heading">Relayer</h2>
        {relayer ? (
          <dl className="facts">
            <dt>Address</dt>
            <dd>
              <code className="hex">{relayer.address}</code>
            </dd>
            <dt>Balance</dt>
            <dd data-testid="relayer-balance" data-wei={relayer.balanceWei}>
              {relayer.balanceEth} ETH
            </dd>
            <dt>Runway</dt>
            <dd data-testid="settlements-left">
              {relayer.settlementsLeft === null
                ? 'gas is free'
                : `about ${count(relayer.settlementsLeft)} settlements of ${count(relayer.settlementGas)} gas`}
            </dd>
            <dt>Gas price</dt>
            <dd>{count(relayer.gasPriceWei)} wei</dd>
          </dl>
        ) : (
          <p className="muted">The chain cannot be read: the relayer's balance is unknown.</p>
        )}
      </section>

      <section className="card" aria-labelledby="exposure-heading">
        <h2 id="exposure-heading">Unpaid exposure</h2>
        <dl className="facts">
          <dt>Served, not paid yet</dt>
          <dd className="amount" data-testid="outstanding">
            {usd(exposure.outstanding.usd)}
          </dd>
          <dt>Of it, payers never proven</dt>
          <dd className="amount" data-testid="unproven-outstanding">
            {usd(exposure.unprovenOutstanding.usd)}
          </dd>
          <dt>Settlements in flight</dt>
          <dd>{exposure.unfinishedSettlements}</dd>
        </dl>
      </section>

      <section className="card" aria-labelledby="collector-heading">
        <h2 id="collector-heading">Collector</h2>
        {collector ? (
          <>
            <dl className="facts">
              <dt>State</dt>
              <dd data-testid="collector-state">
                {!collector.running ? 'not running' : collector.leading ? 'collecting' : 'standing by'}
              </dd>
              <dt>Last run</dt>
              <dd>{collector.lastRunAt ? formatTime(collector.lastRunAt) : 'not yet'}</dd>
              <dt>Idle debts collected</dt>
              <dd>{collector.collected}</dd>
            </dl>
            {collector.lastRunError && (
              <Alert tone="error" title="Its last run failed">
                {collector.lastRunError}
              </Alert>
            )}
            {collector.failing.length > 0 && (
              <ul>
                {collector.failing.map((failure) => (
                  <li key={failure.payer}>
                    <code className="hex">{failure.payer}</code>: {failure.failures} failures, next at{' '}
                    {formatTime(failure.nextAttemptAt)}: {failure.lastError}
                  </li>
                ))}
              </ul>
            )}
          </>
        ) : (
          <p className="muted">This gateway runs no collector.</p>
        )}
      </section>

      <section className="card" aria-labelledby="debtors-heading">
        <h2 id="debtors-heading">Payers who owe most</h2>
        {view.topDebtors.length === 0 ? (
          <p className="empty">Nobody owes anything.</p>
        ) : (
          <table data-testid="top-debtors">
            <thead>
              <tr>
                <th scope="col">Wallet</th>
                <th scope="col">Owed</th>
                <th scope="col">Proven</th>
              </tr>
            </thead>
            <tbody>
              {view.topDebtors.map((debtor) => (
                <tr key={debtor.wallet}>
                  <td>
                    <code className="hex">{debtor.wallet}</code>
                  </td>
                  <td className="amount">{usd(debtor.owed.usd)}</td>
                  <td>{debtor.proven ? 'yes' : 'never paid'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </section>

      <section className="card wide" aria-labelledby="trouble-heading">
        <h2 id="trouble-heading">Settlements pending or failed</h2>
        {inTrouble.length === 0 ? (
          <p className="empty">None: every settlement was confirmed.</p>
        ) : (
          <SettlementTable settlements={inTrouble} />
        )}
      </section>
    </>
  );
}

/** The period's sums, added as integers (pico-USD, wei) and shown exactly. */
function EconomicsTotals({ economics }: { economics: OperatorView['operator']['economics'] }) {
  const sum = (values: string[]) => values.reduce((total, value) => total + BigInt(value), 0n);
  const commission = sum(economics.map((day) => day.commission.picoUsd));
  const gasWei = sum(economics.map((day) => day.gasSpentWei));
  return (
    <tfoot>
      <tr data-testid="economics-total">
        <th scope="row" colSpan={2}>
          Total
        </th>
        <td className="num">{count(sum(economics.map((day) => day.requests)).toString())}</td>
        <td className="amount">{usd(formatUnits(commission, 12))}</td>
        <td className="num">{economics.reduce((total, day) => total + day.settlements, 0)}</td>
        <td className="num">{count(sum(economics.map((day) => day.gasUsed)).toString())}</td>
        <td className="amount">{formatEther(gasWei)}</td>
      </tr>
    </tfoot>
  );
}

function SettlementTable({ settlements }: { settlements: OperatorSettlement[] }) {
  return (
    <div className="table-scroll">
      <table data-testid="settlements-in-trouble">
        <thead>
          <tr>
            <th scope="col">Opened</th>
            <th scope="col">Status</th>
            <th scope="col">Rail</th>
            <th scope="col">Payer</th>
            <th scope="col">Amount</th>
            <th scope="col">Why</th>
          </tr>
        </thead>
        <tbody>
          {settlements.map((settlement) => (
            <tr key={settlement.id}>
              <td>{formatTime(settlement.createdAt)}</td>
              <td>{settlement.status}</td>
              <td>{settlement.rail}</td>
              <td>
                <code className="hex">{settlement.payer}</code>
              </td>
              <td className="amount">{usd(settlement.amountUsd)}</td>
              <td>
                {settlement.failureReason ?? (settlement.txHash ? `waiting for ${settlement.txHash}` : '')}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
