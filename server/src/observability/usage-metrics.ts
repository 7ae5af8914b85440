import type { UsageRecorder } from '../services/chat-contracts.js';
import type { GatewayMetrics } from './metrics.js';

/** The recorder, counting each written record's tokens and cost by model. */
export function meteredRecorder(recorder: UsageRecorder, metrics: GatewayMetrics): UsageRecorder {
  return {
    async record(entry) {
      const cost = await recorder.record(entry);
      const { usage } = entry;
      metrics.usageRecorded(
        entry.model.id,
        {
          input: usage.inputTokens,
          cache_read: usage.cacheReadTokens,
          cache_write: usage.cacheWriteTokens,
          output: usage.outputTokens,
          reasoning: usage.reasoningTokens,
        },
        BigInt(cost.totalPicoUsd),
      );
      return cost;
    },
  };
}
