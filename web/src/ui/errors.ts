import { BaseError, UserRejectedRequestError } from 'viem';
import { GatewayError } from '../gateway/api';

/** A sentence a user can act on, for any error the dashboard meets. */
export function describeError(error: unknown): string {
  if (isUserRejection(error)) return 'You declined the request in your wallet. Nothing was signed or sent.';
  if (error instanceof GatewayError) return error.message;
  // fetch rejects with a TypeError when nothing answers (connection refused, offline)
  if (error instanceof TypeError && /fetch/i.test(error.message))
    return 'The gateway is not answering. Is it running?';
  if (error instanceof BaseError) return error.shortMessage;
  if (error instanceof Error) return error.message;
  return String(error);
}

export function isUserRejection(error: unknown): boolean {
  if (!(error instanceof BaseError)) return (error as { code?: unknown } | null)?.code === 4001;
  return Boolean(
    error.walk(
      (cause) =>
        cause instanceof UserRejectedRequestError || (cause as { code?: unknown } | null)?.code === 4001,
    ),
  );
}
