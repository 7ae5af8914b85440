/** `$` and the gateway's exact decimal string, untouched: amounts are never parsed into floats. */
export function usd(amount: string): string {
  return amount.startsWith('-') ? `-$${amount.slice(1)}` : `$${amount}`;
}

const dateTime = new Intl.DateTimeFormat(undefined, {
  month: 'short',
  day: 'numeric',
  hour: '2-digit',
  minute: '2-digit',
  second: '2-digit',
  hourCycle: 'h23',
});
const dateOnly = new Intl.DateTimeFormat(undefined, { dateStyle: 'long', timeStyle: 'short' });

export function formatTime(iso: string): string {
  return dateTime.format(new Date(iso));
}

export function formatInstant(date: Date): string {
  return dateOnly.format(date);
}

/** Integer token counts, grouped for reading (they are integers, so this is exact). */
export function count(value: number | string): string {
  return BigInt(value).toLocaleString();
}

/** A duration in seconds as words: 86400 -> "1 day", 3600 -> "1 hour". */
export function duration(seconds: number): string {
  const units: Array<[number, string]> = [
    [86_400 * 7, 'week'],
    [86_400, 'day'],
    [3_600, 'hour'],
    [60, 'minute'],
  ];
  for (const [size, name] of units)
    if (seconds % size === 0 && seconds >= size) {
      const n = seconds / size;
      return `${n} ${name}${n === 1 ? '' : 's'}`;
    }
  return `${seconds} seconds`;
}
