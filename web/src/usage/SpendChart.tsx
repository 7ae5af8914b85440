import type { SpendBucket } from '../gateway/graphql';
import { usd } from '../ui/format';

/** Bar length as a share of the largest, computed on integer pico-USD (never floats of money). */
function share(value: string, max: bigint): number {
  if (max === 0n) return 0;
  return Number((BigInt(value) * 10_000n) / max) / 10_000;
}

function largest(buckets: SpendBucket[]): bigint {
  return buckets.reduce((max, bucket) => {
    const value = BigInt(bucket.usage.cost.picoUsd);
    return value > max ? value : max;
  }, 0n);
}

const WIDTH = 560;
const HEIGHT = 180;
const AXIS = 24;
/** Up to this many days, each column carries its amount. */
const LABELLED_DAYS = 7;

/** Spend per UTC day: one column per day that had requests. */
export function SpendPerDay({ buckets }: { buckets: SpendBucket[] }) {
  const days = [...buckets].sort((a, b) => a.key.localeCompare(b.key));
  const max = largest(days);
  const slot = days.length > 0 ? (WIDTH - 8) / days.length : 0;
  const bar = Math.min(48, slot * 0.7);
  const summary = days.map((day) => `${day.key}: ${usd(day.usage.cost.usd)}`).join('; ');
  return (
    <figure className="chart">
      <figcaption>Spend per day (UTC)</figcaption>
      <svg viewBox={`0 0 ${WIDTH} ${HEIGHT + AXIS}`} role="img" aria-label={`Spend per day. ${summary}`}>
        <line x1="0" x2={WIDTH} y1={HEIGHT} y2={HEIGHT} className="axis" />
        {days.map((day, index) => {
          const height = Math.max(2, share(day.usage.cost.picoUsd, max) * (HEIGHT - 28));
          const x = 4 + index * slot + (slot - bar) / 2;
          return (
            <g key={day.key}>
              <rect x={x} y={HEIGHT - height} width={bar} height={height} rx="3" className="bar">
                <title>{`${day.key}: ${usd(day.usage.cost.usd)} (${day.usage.requests} requests)`}</title>
              </rect>
              <text x={x + bar / 2} y={HEIGHT + 16} textAnchor="middle" className="tick">
                {day.key.slice(5)}
              </text>
              {days.length <= LABELLED_DAYS && (
                <text x={x + bar / 2} y={HEIGHT - height - 6} textAnchor="middle" className="tick">
                  {usd(day.usage.cost.usd)}
                </text>
              )}
            </g>
          );
        })}
      </svg>
    </figure>
  );
}

/** Spend per model: one row per model, the exact amount beside its bar. */
export function SpendPerModel({ buckets }: { buckets: SpendBucket[] }) {
  const models = [...buckets].sort((a, b) => {
    const diff = BigInt(b.usage.cost.picoUsd) - BigInt(a.usage.cost.picoUsd);
    return diff > 0n ? 1 : diff < 0n ? -1 : a.key.localeCompare(b.key);
  });
  const max = largest(models);
  const row = 30;
  const label = 200;
  const track = WIDTH - label - 8;
  const summary = models.map((model) => `${model.key}: ${usd(model.usage.cost.usd)}`).join('; ');
  return (
    <figure className="chart">
      <figcaption>Spend per model</figcaption>
      <svg
        viewBox={`0 0 ${WIDTH} ${Math.max(row, models.length * row)}`}
        role="img"
        aria-label={`Spend per model. ${summary}`}
      >
        {models.map((model, index) => {
          const y = index * row;
          const width = Math.max(2, share(model.usage.cost.picoUsd, max) * track);
          return (
            <g key={model.key}>
              <text x="0" y={y + 19} className="tick">
                {model.key}
              </text>
              <rect x={label} y={y + 6} width={width} height={row - 12} rx="3" className="bar">
                <title>{`${model.key}: ${usd(model.usage.cost.usd)} (${model.usage.requests} requests)`}</title>
              </rect>
            </g>
          );
        })}
      </svg>
      <ul className="legend">
        {models.map((model) => (
          <li key={model.key}>
            <span>{model.key}</span> <span className="amount">{usd(model.usage.cost.usd)}</span>
          </li>
        ))}
      </ul>
    </figure>
  );
}
