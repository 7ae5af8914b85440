/** 1 USD in pico-USD, the gateway's unit of account. */
export const PICO_PER_USD = 10n ** 12n;
/** 1 USDC atomic unit (1e-6 USD) in pico-USD. */
export const PICO_PER_ATOMIC = 10n ** 6n;

/** Exact USD decimal string of a pico-USD amount, without trailing zeros ("0.0000375", "12", "-0.5"). */
export function formatUsd(pico: bigint): string {
  return formatDecimal(pico, 12);
}

/** Exact USD decimal string of a USDC atomic amount. */
export function formatUsdcAtomic(atomic: bigint): string {
  return formatDecimal(atomic, 6);
}

/** The fewest USDC atomic units that pay `pico` in full (rounds up; 0 for nothing owed). */
export function atomicCovering(pico: bigint): bigint {
  if (pico <= 0n) return 0n;
  return (pico + PICO_PER_ATOMIC - 1n) / PICO_PER_ATOMIC;
}

function formatDecimal(value: bigint, decimals: number): string {
  const sign = value < 0n ? '-' : '';
  const digits = (value < 0n ? -value : value).toString().padStart(decimals + 1, '0');
  const whole = digits.slice(0, -decimals);
  const fraction = digits.slice(-decimals).replace(/0+$/, '');
  return `${sign}${whole}${fraction ? `.${fraction}` : ''}`;
}
