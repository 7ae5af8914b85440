import type { Address } from 'viem';
import type { GatewayError } from '../../src/errors.js';
import type {
  AdmissionRequest,
  PaymentGate,
  StatedCost,
  UsageEntry,
  UsageRecorder,
} from '../../src/services/chat-contracts.js';

export const TEST_PAYER: Address = '0x00000000000000000000000000000000000000aa';

/** A gate that lets every request through (or refuses with `refusal`) and counts its slots. */
export interface GateDouble extends PaymentGate {
  admitted: AdmissionRequest[];
  released: number;
  /** Thrown by the next `admit` calls while set. */
  refusal?: GatewayError;
  /** While set, the headers stating what is owed once a request's usage is recorded (as x402's). */
  owed?: Record<string, string>;
  /** While set, the output token limit admissions decide (as the real gate does for a payer who can pay for less). */
  outputTokens?: number;
}

export function gateDouble(responseHeaders: Record<string, string> = {}): GateDouble {
  const gate: GateDouble = {
    admitted: [],
    released: 0,
    async admit(request) {
      if (gate.refusal) throw gate.refusal;
      gate.admitted.push(request);
      let released = false;
      return {
        payer: TEST_PAYER,
        rail: 'session',
        // Unless set, the client's limit, else the model's maximum (a double knows no payer to clamp to).
        outputTokens:
          gate.outputTokens ??
          request.request.max_completion_tokens ??
          request.request.max_tokens ??
          request.model.maxOutputTokens,
        responseHeaders,
        ...(gate.owed && { owedHeaders: async () => gate.owed ?? {} }),
        release() {
          if (released) throw new Error('an admission was released twice');
          released = true;
          gate.released += 1;
        },
      };
    },
  };
  return gate;
}

/** Keeps every usage entry; states a cost of 1 micro-USD per token (plus 10% commission). */
export interface RecorderDouble extends UsageRecorder {
  entries: UsageEntry[];
  /** While set, `record` throws it instead of recording. */
  failure?: Error;
}

export function recorderDouble(): RecorderDouble {
  const recorder: RecorderDouble = {
    entries: [],
    async record(entry) {
      if (recorder.failure) throw recorder.failure;
      recorder.entries.push(entry);
      return statedCost(entry);
    },
  };
  return recorder;
}

/** The cost the recorder double states for an entry. */
export function statedCost({ usage }: UsageEntry): StatedCost {
  const tokens =
    usage.inputTokens +
    usage.cacheReadTokens +
    usage.cacheWriteTokens +
    usage.outputTokens +
    usage.reasoningTokens;
  const provider = BigInt(tokens) * 1_000_000n;
  const commission = provider / 10n;
  const total = provider + commission;
  const usd = (pico: bigint) => `${pico / 10n ** 12n}.${(pico % 10n ** 12n).toString().padStart(12, '0')}`;
  return {
    total: usd(total),
    provider: usd(provider),
    commission: usd(commission),
    totalPicoUsd: total.toString(),
    providerPicoUsd: provider.toString(),
    commissionPicoUsd: commission.toString(),
  };
}
