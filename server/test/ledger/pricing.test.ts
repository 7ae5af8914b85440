import { describe, expect, test } from 'vitest';
import { atomicCovering, formatUsd, formatUsdcAtomic } from '../../src/billing/money.js';
import { costOf, picoPerToken, pricesFor, tokenPrices } from '../../src/billing/pricing.js';
import type { ModelPricing } from '../../src/catalog/catalog.js';
import type { TokenUsage } from '../../src/providers/types.js';

const none: TokenUsage = {
  inputTokens: 0,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  outputTokens: 0,
  reasoningTokens: 0,
};

describe('catalog prices become whole pico-USD per token', () => {
  test.each([
    ['3', 3_000_000n],
    ['3.75', 3_750_000n],
    ['0.075', 75_000n],
    ['0.30', 300_000n],
    ['0.000001', 1n],
    ['15', 15_000_000n],
    ['0', 0n],
    ['123456789.123456', 123_456_789_123_456n],
  ])('$%s per million tokens = %s pico-USD per token', (price, pico) => {
    expect(picoPerToken(price)).toBe(pico);
  });

  test.each(['1.2345678', '-1', '1e3', '', '.5', '3.'])('"%s" is refused', (price) => {
    expect(() => picoPerToken(price)).toThrow(RangeError);
  });

  test('cache prices default to input, reasoning to output', () => {
    expect(tokenPrices({ input: '0.075', output: '0.30' })).toEqual({
      input: 75_000n,
      output: 300_000n,
      cacheRead: 75_000n,
      cacheWrite: 75_000n,
      reasoning: 300_000n,
    });
  });
});

describe('cost of a request', () => {
  const sonnet = tokenPrices({ input: '3', output: '15', cacheRead: '0.30', cacheWrite: '3.75' });
  const flash = tokenPrices({ input: '0.075', output: '0.30', reasoning: '3.5' });

  test('one token at $3.75 per million', () => {
    const prices = tokenPrices({ input: '3.75', output: '3.75' });
    expect(costOf({ ...none, inputTokens: 1 }, prices, 1000)).toEqual({
      providerPicoUsd: 3_750_000n,
      commissionPicoUsd: 375_000n,
      totalPicoUsd: 4_125_000n,
    });
  });

  test('odd counts in every bucket at awkward prices', () => {
    const usage = {
      inputTokens: 1001,
      cacheReadTokens: 333,
      cacheWriteTokens: 7,
      outputTokens: 99,
      reasoningTokens: 13,
    };
    // 1001*3e6 + 333*3e5 + 7*3.75e6 + 99*15e6 + 13*15e6 (reasoning at the output price)
    expect(costOf(usage, sonnet, 1000)).toEqual({
      providerPicoUsd: 4_809_150_000n,
      commissionPicoUsd: 480_915_000n,
      totalPicoUsd: 5_290_065_000n,
    });
    // 7*75e3 + 3*300e3 + 5*3.5e6
    expect(costOf({ ...none, inputTokens: 7, outputTokens: 3, reasoningTokens: 5 }, flash, 1000)).toEqual({
      providerPicoUsd: 18_925_000n,
      commissionPicoUsd: 1_892_500n,
      totalPicoUsd: 20_817_500n,
    });
  });

  test('commission is rounded down to the pico', () => {
    const prices = tokenPrices({ input: '0.000001', output: '0.000001' });
    expect(costOf({ ...none, inputTokens: 7 }, prices, 1000)).toEqual({
      providerPicoUsd: 7n,
      commissionPicoUsd: 0n,
      totalPicoUsd: 7n,
    });
    expect(costOf({ ...none, inputTokens: 19 }, prices, 1234).commissionPicoUsd).toBe(2n);
    expect(costOf({ ...none, inputTokens: 3 }, flash, 0).commissionPicoUsd).toBe(0n);
  });

  test('no tokens cost nothing', () => {
    expect(costOf(none, sonnet, 1000).totalPicoUsd).toBe(0n);
  });

  test('fractional or negative token counts are refused', () => {
    expect(() => costOf({ ...none, outputTokens: 1.5 }, sonnet, 1000)).toThrow(/outputTokens/);
    expect(() => costOf({ ...none, inputTokens: -1 }, sonnet, 1000)).toThrow(/inputTokens/);
  });
});

describe('a long-prompt tier prices every token of a longer prompt', () => {
  // Gemini 2.5 Pro as Google bills it: the prompt is input + cache read (+ cache write) tokens.
  const gemini25Pro: ModelPricing = {
    input: '1.25',
    output: '10',
    cacheRead: '0.125',
    longPrompt: { aboveTokens: 200_000, input: '2.50', output: '15', cacheRead: '0.25' },
  };
  const costAt = (usage: TokenUsage, pricing = gemini25Pro) => costOf(usage, pricesFor(pricing, usage), 1000);

  test('a prompt of exactly the threshold is at the base prices', () => {
    const usage = {
      ...none,
      inputTokens: 150_000,
      cacheReadTokens: 50_000,
      outputTokens: 2_000,
      reasoningTokens: 1_000,
    };
    // 150000*1.25e6 + 50000*0.125e6 + 2000*10e6 + 1000*10e6
    expect(costAt(usage)).toEqual({
      providerPicoUsd: 223_750_000_000n,
      commissionPicoUsd: 22_375_000_000n,
      totalPicoUsd: 246_125_000_000n,
    });
  });

  test('one token more and every bucket is at the tier prices, reasoning at its output price', () => {
    const usage = {
      ...none,
      inputTokens: 150_001,
      cacheReadTokens: 50_000,
      outputTokens: 2_000,
      reasoningTokens: 1_000,
    };
    // 150001*2.5e6 + 50000*0.25e6 + 2000*15e6 + 1000*15e6
    expect(costAt(usage)).toEqual({
      providerPicoUsd: 432_502_500_000n,
      commissionPicoUsd: 43_250_250_000n,
      totalPicoUsd: 475_752_750_000n,
    });
  });

  test('a 300k-token prompt with 2k output costs what Google charges: $0.78, plus commission', () => {
    expect(costAt({ ...none, inputTokens: 300_000, outputTokens: 2_000 })).toEqual({
      providerPicoUsd: 780_000_000_000n,
      commissionPicoUsd: 78_000_000_000n,
      totalPicoUsd: 858_000_000_000n,
    });
  });

  test('cache writes count toward the prompt, output and reasoning do not', () => {
    const tier = gemini25Pro.longPrompt!;
    expect(pricesFor(gemini25Pro, { ...none, inputTokens: 199_999, cacheWriteTokens: 2 })).toEqual(
      tokenPrices(tier),
    );
    expect(
      pricesFor(gemini25Pro, { ...none, inputTokens: 1, outputTokens: 300_000, reasoningTokens: 300_000 }),
    ).toEqual(tokenPrices(gemini25Pro));
  });

  test("a tier's missing prices fall back to its own input and output, not to the base sheet's", () => {
    const pricing: ModelPricing = {
      input: '3',
      output: '15',
      cacheRead: '0.30',
      cacheWrite: '3.75',
      reasoning: '20',
      longPrompt: { aboveTokens: 200_000, input: '6', output: '22.50' },
    };
    expect(pricesFor(pricing, { ...none, inputTokens: 200_001 })).toEqual({
      input: 6_000_000n,
      output: 22_500_000n,
      cacheRead: 6_000_000n,
      cacheWrite: 6_000_000n,
      reasoning: 22_500_000n,
    });
  });

  test('a model without a tier keeps its prices at any prompt length', () => {
    const flat: ModelPricing = { input: '0.30', output: '2.50', cacheRead: '0.03' };
    expect(pricesFor(flat, { ...none, inputTokens: 1_000_000 })).toEqual(tokenPrices(flat));
  });
});

describe('money formatting is exact', () => {
  test.each([
    [0n, '0'],
    [1n, '0.000000000001'],
    [4_125_000n, '0.000004125'],
    [5_290_065_000n, '0.005290065'],
    [1_000_000_000_000n, '1'],
    [12_500_000_000_000n, '12.5'],
    [123_456_789_012_345_678_901n, '123456789.012345678901'],
    [-500_000_000_000n, '-0.5'],
  ])('%s pico-USD is $%s', (pico, usd) => {
    expect(formatUsd(pico)).toBe(usd);
  });

  test('USDC atomic units', () => {
    expect(formatUsdcAtomic(1n)).toBe('0.000001');
    expect(formatUsdcAtomic(2_500_000n)).toBe('2.5');
  });

  test('a debt is paid by the fewest atomic units that cover it', () => {
    expect(atomicCovering(0n)).toBe(0n);
    expect(atomicCovering(1n)).toBe(1n);
    expect(atomicCovering(1_000_000n)).toBe(1n);
    expect(atomicCovering(1_000_001n)).toBe(2n);
    expect(atomicCovering(-5n)).toBe(0n);
  });
});
