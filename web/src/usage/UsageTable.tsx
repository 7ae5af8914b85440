import type { UsageRow } from '../gateway/graphql';
import { CopyButton } from '../ui/Copy';
import { count, formatTime, usd } from '../ui/format';

const EXPLORERS: Record<number, string> = {
  8453: 'https://basescan.org/tx/',
  84532: 'https://sepolia.basescan.org/tx/',
};

function paymentState(row: UsageRow): string {
  switch (row.settlement?.status) {
    case 'confirmed':
      return 'Paid';
    case 'pending':
    case 'sent':
      return 'Settling';
    case 'failed':
      return 'Owed (settlement failed)';
    default:
      return 'Owed';
  }
}

function SettlementTx({ row, chainId }: { row: UsageRow; chainId: number }) {
  const hash = row.settlement?.txHash;
  if (!hash) return <span className="muted">none yet</span>;
  const explorer = EXPLORERS[chainId];
  const text = (
    <code className="hex" title={hash} data-tx={hash}>
      {`${hash.slice(0, 10)}…${hash.slice(-8)}`}
    </code>
  );
  return (
    <span className="address">
      {explorer ? (
        <a href={`${explorer}${hash}`} target="_blank" rel="noreferrer" aria-label={`Transaction ${hash}`}>
          {text}
        </a>
      ) : (
        text
      )}
      <CopyButton text={hash} label="Copy transaction hash" />
    </span>
  );
}

export function UsageTable({ rows, chainId }: { rows: UsageRow[]; chainId: number }) {
  return (
    <div className="table-scroll">
      <table>
        <caption>Requests, newest first. Amounts in USD, exact.</caption>
        <thead>
          <tr>
            <th scope="col">Time</th>
            <th scope="col">Model</th>
            <th scope="col" className="num">
              Tokens in
            </th>
            <th scope="col" className="num">
              Cached
            </th>
            <th scope="col" className="num">
              Tokens out
            </th>
            <th scope="col" className="num">
              Provider cost
            </th>
            <th scope="col" className="num">
              Commission
            </th>
            <th scope="col" className="num">
              Total
            </th>
            <th scope="col">Payment</th>
            <th scope="col">Settlement tx</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((row) => (
            <tr key={row.requestId} data-request-id={row.requestId}>
              <td>
                <time dateTime={row.createdAt}>{formatTime(row.createdAt)}</time>
              </td>
              <td>{row.model}</td>
              <td className="num">{count(row.tokens.prompt)}</td>
              <td className="num">{count(row.tokens.cacheRead)}</td>
              <td className="num">{count(row.tokens.completion)}</td>
              <td className="num amount">{usd(row.cost.provider.usd)}</td>
              <td className="num amount">{usd(row.cost.commission.usd)}</td>
              <td className="num amount">
                {usd(row.cost.total.usd)}
                {!row.exact && (
                  <span className="badge" title="The request ended before the provider's final count">
                    partial
                  </span>
                )}
              </td>
              <td>
                <span className={`state state-${paymentState(row).split(' ')[0]?.toLowerCase()}`}>
                  {paymentState(row)}
                </span>
              </td>
              <td>
                <SettlementTx row={row} chainId={chainId} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
