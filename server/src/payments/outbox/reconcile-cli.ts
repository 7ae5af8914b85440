import { parseArgs } from 'node:util';
import { BaseError, createPublicClient, http, webSocket } from 'viem';
import { economicsReport, formatEconomics, picoUsdPerEth } from '../../billing/economics-report.js';
import { defaultEconomicsFrom } from '../../billing/operator-reports.js';
import { ConfigError, loadReconcileConfig } from '../../config.js';
import { openStore } from '../../store/database.js';
import { formatReconciliation, reconcileLedger } from './reconcile-ledger.js';

const USAGE = `npm run reconcile -- [--from-block N] [--to-block N] [--since DATE] [--until DATE] [--eth-usd PRICE] [--json]
Compares the ledger (DATABASE_URL) with the USDC transfers on CHAIN_RPC_URL to the treasury
each settlement paid (TREASURY_ADDRESS for those that recorded none). With the gateway's
SESSION_KEY_PRIVATE_KEY, a transfer its key sent that no settlement records is a mismatch.
Then states commission earned against gas spent per rail from --since (default: 30 days, today's
included) until --until (default: now), with the gas valued in USD when --eth-usd is given.
Exit 0: consistent. 1: mismatches (listed). 2: the check could not run.`;

/** `npm run reconcile`: the ledger against the chain, as a report and an exit code. */
async function reconcile(): Promise<number> {
  const { values } = parseOptions();
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  const ethUsd = values['eth-usd'];
  if (ethUsd !== undefined && picoUsdPerEth(ethUsd) === undefined)
    throw new UsageError(`--eth-usd must be a price in USD such as 3000 or 2450.75, got "${ethUsd}"`);
  const config = loadReconcileConfig();
  const rpcUrl = config.chain.rpcUrl;
  const overWebSocket = /^wss?:/.test(rpcUrl);
  const publicClient = createPublicClient({ transport: overWebSocket ? webSocket(rpcUrl) : http(rpcUrl) });
  // Not exclusive: it only reads, in one snapshot, while the gateway runs on the same SQLite file.
  const store = openStore(config.databaseUrl);
  try {
    const result = await reconcileLedger(
      store,
      {
        publicClient,
        usdc: config.chain.usdcAddress,
        treasury: config.chain.treasuryAddress,
        relayer: config.relayer,
      },
      {
        fromBlock: blockOption(values['from-block'], '--from-block'),
        toBlock: blockOption(values['to-block'], '--to-block'),
      },
    );
    const until = dateOption(values.until, '--until') ?? new Date();
    const since = dateOption(values.since, '--since') ?? defaultEconomicsFrom(until);
    if (since.getTime() >= until.getTime()) throw new UsageError('--since must be before --until');
    const economics = await economicsReport(store, { from: since, to: until }, values['eth-usd']);
    console.log(
      values.json
        ? JSON.stringify(
            { ...result, economics },
            (_key, value) => (typeof value === 'bigint' ? value.toString() : value),
            2,
          )
        : `${formatReconciliation(result)}\n\n${formatEconomics(economics)}`,
    );
    return result.consistent ? 0 : 1;
  } finally {
    await store.close();
    // An open WebSocket (and its keep-alive pings) would keep the command from ever exiting.
    if (overWebSocket) (await (publicClient.transport as WebSocketTransportValue).getRpcClient()).close();
  }
}

type WebSocketTransportValue = NonNullable<ReturnType<ReturnType<typeof webSocket>>['value']>;

function parseOptions() {
  try {
    return parseArgs({
      options: {
        'from-block': { type: 'string' },
        'to-block': { type: 'string' },
        since: { type: 'string' },
        until: { type: 'string' },
        'eth-usd': { type: 'string' },
        json: { type: 'boolean', default: false },
        help: { type: 'boolean', default: false },
      },
    });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

function blockOption(value: string | undefined, name: string): bigint | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value)) throw new UsageError(`${name} must be a block number, got "${value}"`);
  return BigInt(value);
}

function dateOption(value: string | undefined, name: string): Date | undefined {
  if (value === undefined) return undefined;
  const date = /^\d{4}-\d{2}-\d{2}([T ][\d:.]+(Z|[+-]\d{2}:?\d{2})?)?$/.test(value)
    ? new Date(value)
    : undefined;
  if (!date || Number.isNaN(date.getTime()))
    throw new UsageError(`${name} must be a date such as 2026-11-01 or 2026-11-01T12:00:00Z, got "${value}"`);
  return date;
}

class UsageError extends Error {}

reconcile().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    if (error instanceof UsageError) console.error(`${error.message}\n${USAGE}`);
    else if (error instanceof ConfigError) console.error(error.message);
    else
      console.error(
        `reconciliation failed: ${error instanceof BaseError ? error.shortMessage : (error as Error).message}`,
      );
    process.exitCode = 2;
  },
);
