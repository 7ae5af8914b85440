import { type Kysely, sql } from 'kysely';
import {
  type Address,
  type Chain,
  getAddress,
  type Hash,
  type PublicClient,
  parseAbiItem,
  parseEventLogs,
  TransactionReceiptNotFoundError,
  type Transport,
} from 'viem';
import { formatUsd, formatUsdcAtomic, PICO_PER_ATOMIC } from '../../billing/money.js';
import type { Store } from '../../store/database.js';
import { exactSum, readSum } from '../../store/exact-sum.js';
import type { Database, SettlementStatusColumn } from '../../store/schema.js';

/** What the ledger and the chain disagree on. */
export type MismatchKind =
  /** A confirmed settlement whose transaction moved nothing from its payer to its treasury. */
  | 'transfer_missing'
  /** A confirmed settlement whose transfer moved another amount. */
  | 'amount_differs'
  /** A transfer from a payer to a treasury that no confirmed settlement records. */
  | 'transfer_unrecorded'
  /** One transaction recorded as the payment of several settlements of a payer. */
  | 'transaction_reused'
  /** A settlement's claimed records do not add up to what it says it pays. */
  | 'records_differ'
  /** Records claimed by a failed settlement, or by one that does not exist: never paid, never released. */
  | 'records_stranded'
  /** sum(confirmed amounts) * 1e6 - credit differs from the cost of the payer's paid records. */
  | 'payer_unbalanced';

export interface Mismatch {
  kind: MismatchKind;
  payer?: Address;
  settlementId?: string;
  txHash?: Hash;
  /** One readable sentence. */
  message: string;
}

/**
 * A transfer from a known payer to the treasury that is not a mismatch: one whose settlement is
 * still in flight (`in_flight`: the gateway is finishing it), or one that no settlement flow of the
 * gateway made (`outside`: the payer paid the treasury directly, e.g. a tip; no recorded transaction,
 * no x402 authorization the gateway saw). Listed for the operator; the ledger stays consistent.
 */
export interface NotedTransfer {
  kind: 'in_flight' | 'outside';
  payer: Address;
  txHash: Hash;
  settlementId?: string;
  message: string;
}

export interface LedgerReconciliation {
  consistent: boolean;
  mismatches: Mismatch[];
  noted: NotedTransfer[];
  /** What was looked at. */
  checked: {
    payers: number;
    settlements: number;
    confirmedTransfers: number;
    /** Transfers from payers to the treasuries (TREASURY_ADDRESS, those settlements paid) found on chain in the block range. */
    chainTransfers: number;
    fromBlock: bigint;
    toBlock: bigint;
  };
}

export interface ReconcileChain {
  publicClient: PublicClient<Transport, Chain | undefined>;
  usdc: Address;
  /** TREASURY_ADDRESS: whom settlements that record no treasury of their own paid. */
  treasury: Address;
  /**
   * The gateway's sender of settlements (its session key): a transfer it sent that no settlement
   * records is a payment the ledger lost (charged, and owed again). Unknown: such a transfer is noted.
   */
  relayer?: Address;
}

export interface ReconcileOptions {
  /** First block searched for transfers to the treasury; settlements confirmed before it are not looked up. */
  fromBlock?: bigint;
  /** Last block searched; the chain's head when absent. */
  toBlock?: bigint;
  /** Blocks per log query (RPC providers cap the range). Default 10,000. */
  blockRange?: bigint;
}

const transferEvent = parseAbiItem('event Transfer(address indexed from, address indexed to, uint256 value)');
const authorizationUsed = parseAbiItem(
  'event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce)',
);

interface SettlementRow {
  id: string;
  payer: Address;
  status: SettlementStatusColumn;
  amount: bigint;
  recordsTotal: bigint;
  recordCount: bigint;
  txHash: Hash | null;
  /** Transactions sent for it before `txHash` replaced them (same nonce). */
  replacedTxHashes: Hash[];
  /** The treasury it pays: the one configured when it was opened. */
  payTo: Address;
  blockNumber: bigint | null;
}

/**
 * Compares the ledger with the chain: every confirmed settlement against the USDC transfer of its
 * transaction to its own treasury (TREASURY_ADDRESS may have changed since), every transfer from a
 * known payer to any of those treasuries against the settlements, every settlement against the
 * records it claims, and each payer's history as a whole. Read-only.
 */
export async function reconcileLedger(
  store: Store,
  chain: ReconcileChain,
  options: ReconcileOptions = {},
): Promise<LedgerReconciliation> {
  const usdc = getAddress(chain.usdc);
  const treasury = getAddress(chain.treasury);
  const fromBlock = options.fromBlock ?? 0n;
  const toBlock = options.toBlock ?? (await chain.publicClient.getBlockNumber());
  const mismatches: Mismatch[] = [];
  const report = (mismatch: Mismatch) => mismatches.push(mismatch);

  // One snapshot: a settlement the gateway finishes between two reads would otherwise show as a
  // payer out of balance, or records claimed by a settlement that does not exist.
  const [settlements, claims, credits, x402Nonces] = await inOneSnapshot(store, (db) =>
    Promise.all([readSettlements(db, treasury), readClaims(db), readCredits(db), readX402Nonces(db)]),
  );
  const payers = new Set([...credits.keys(), ...settlements.map((s) => s.payer)]);
  const treasuries = new Set([treasury, ...settlements.map((s) => s.payTo)]);

  checkClaims(settlements, claims, report);
  checkPayers(settlements, claims, credits, report);

  // Transfers on chain, keyed by transaction, payer and treasury (one transaction may pay several payers).
  const onChain = await transfersToTreasuries(chain, usdc, treasuries, payers, fromBlock, toBlock, options);
  const byTransfer = new Map<string, SettlementRow[]>();
  for (const settlement of settlements) {
    // Every transaction sent for it: at most one was mined, the others were replaced by it.
    for (const txHash of [settlement.txHash, ...settlement.replacedTxHashes]) {
      if (!txHash) continue;
      const key = transferKey(txHash, settlement.payer, settlement.payTo);
      byTransfer.set(key, [...(byTransfer.get(key) ?? []), settlement]);
    }
  }

  let confirmedTransfers = 0;
  for (const settlement of settlements) {
    if (settlement.status !== 'confirmed' || settlement.amount === 0n) continue;
    if (settlement.blockNumber !== null && settlement.blockNumber < fromBlock) continue;
    confirmedTransfers++;
    const about = { payer: settlement.payer, settlementId: settlement.id };
    if (!settlement.txHash) {
      report({
        ...about,
        kind: 'transfer_missing',
        message: `confirmed settlement ${settlement.id} names no transaction`,
      });
      continue;
    }
    const key = transferKey(settlement.txHash, settlement.payer, settlement.payTo);
    const moved = onChain.get(key) ?? (await transferredIn(chain, usdc, settlement));
    if (moved === undefined || moved === 0n) {
      report({
        ...about,
        txHash: settlement.txHash,
        kind: 'transfer_missing',
        message: `confirmed settlement ${settlement.id} of ${formatUsdcAtomic(settlement.amount)} USDC: its transaction ${settlement.txHash} ${moved === undefined ? 'is not on chain or reverted' : `moved no USDC from the payer to ${treasuryName(settlement.payTo, treasury)}`}`,
      });
    } else if (moved !== settlement.amount) {
      report({
        ...about,
        txHash: settlement.txHash,
        kind: 'amount_differs',
        message: `confirmed settlement ${settlement.id} records ${formatUsdcAtomic(settlement.amount)} USDC but its transaction ${settlement.txHash} moved ${formatUsdcAtomic(moved)} USDC`,
      });
    }
    const sharing = (byTransfer.get(key) ?? []).filter((other) => other.status === 'confirmed');
    if (sharing.length > 1 && sharing[0]?.id === settlement.id)
      report({
        ...about,
        txHash: settlement.txHash,
        kind: 'transaction_reused',
        message: `transaction ${settlement.txHash} is recorded as the payment of ${sharing.length} confirmed settlements (${sharing.map((s) => s.id).join(', ')})`,
      });
  }

  const noted: NotedTransfer[] = [];
  for (const [key, value] of onChain) {
    const recorded = byTransfer.get(key) ?? [];
    if (recorded.some((settlement) => settlement.status === 'confirmed')) continue;
    const [txHash, payer, payTo] = key.split(':') as [Hash, Address, Address];
    const moved = `transaction ${txHash} moved ${formatUsdcAtomic(value)} USDC from ${payer} to ${treasuryName(payTo, treasury)}`;
    // Failed while its transaction paid: the records were owed again, and may be paid twice.
    const failed = recorded.find((settlement) => settlement.status === 'failed');
    const unfinished = recorded.find((settlement) => settlement.status !== 'failed');
    if (failed) {
      report({
        kind: 'transfer_unrecorded',
        payer,
        txHash,
        settlementId: failed.id,
        message: `${moved}, but its settlement ${failed.id} is failed`,
      });
    } else if (unfinished) {
      noted.push({
        kind: 'in_flight',
        payer,
        txHash,
        settlementId: unfinished.id,
        message: `${moved}; its settlement ${unfinished.id} is ${unfinished.status} (being finished)`,
      });
    } else {
      const made = await madeByGateway(chain, usdc, txHash, payer, x402Nonces);
      if (made)
        report({
          kind: 'transfer_unrecorded',
          payer,
          txHash,
          message: `${moved} ${made}, and no settlement records it`,
        });
      else
        noted.push({
          kind: 'outside',
          payer,
          txHash,
          message: `${moved} outside the gateway's settlements (no settlement sent it, no x402 authorization the gateway took)`,
        });
    }
  }

  return {
    consistent: mismatches.length === 0,
    mismatches,
    noted,
    checked: {
      payers: payers.size,
      settlements: settlements.length,
      confirmedTransfers,
      chainTransfers: onChain.size,
      fromBlock,
      toBlock,
    },
  };
}

/** The report `npm run reconcile` prints. */
export function formatReconciliation(result: LedgerReconciliation): string {
  const { checked } = result;
  const scope = `${counted(checked.payers, 'payer')}, ${counted(checked.settlements, 'settlement')} (${counted(checked.confirmedTransfers, 'confirmed transfer')} checked), ${counted(checked.chainTransfers, 'transfer')} to the treasury in blocks ${checked.fromBlock}-${checked.toBlock}`;
  const notes = result.noted.map((transfer) => `- (${transfer.kind}) ${transfer.message}`);
  const noted = notes.length > 0 ? ['Noted, not mismatches:', ...notes] : [];
  if (result.consistent) return [`The ledger matches the chain: ${scope}.`, ...noted].join('\n');
  const lines = result.mismatches.map((mismatch) => `- [${mismatch.kind}] ${mismatch.message}`);
  return [
    `The ledger does not match the chain (${counted(result.mismatches.length, 'mismatch', 'mismatches')}): ${scope}.`,
    ...lines,
    ...noted,
  ].join('\n');
}

function counted(count: number, one: string, many = `${one}s`): string {
  return `${count} ${count === 1 ? one : many}`;
}

type Reader = Kysely<Database>;

/**
 * Runs the reads in one read-only transaction on one connection: one snapshot of the ledger
 * (PostgreSQL's repeatable read; SQLite's deferred transaction, which takes no write lock).
 */
async function inOneSnapshot<T>(store: Store, read: (db: Reader) => Promise<T>): Promise<T> {
  return store.db.connection().execute(async (db) => {
    await sql
      .raw(store.dialect === 'postgres' ? 'begin isolation level repeatable read read only' : 'begin')
      .execute(db);
    let result: T;
    try {
      result = await read(db);
    } catch (error) {
      await sql
        .raw('rollback')
        .execute(db)
        .catch(() => undefined);
      throw error;
    }
    await sql.raw('commit').execute(db);
    return result;
  });
}

function transferKey(txHash: Hash, payer: Address, payTo: Address): string {
  return `${txHash.toLowerCase()}:${getAddress(payer)}:${getAddress(payTo)}`;
}

/** The configured treasury as "the treasury"; an earlier one by its address. */
function treasuryName(payTo: Address, treasury: Address): string {
  return payTo === treasury ? 'the treasury' : `the earlier treasury ${payTo}`;
}

/** Settlements opened before they recorded their treasury (`pay_to`) paid `treasury`. */
async function readSettlements(db: Reader, treasury: Address): Promise<SettlementRow[]> {
  const rows = await db
    .selectFrom('settlements')
    .select([
      'id',
      'payer',
      'status',
      'amount_atomic',
      'records_total_pico',
      'record_count',
      'tx_hash',
      'replaced_tx_hashes',
      'block_number',
      'pay_to',
    ])
    .orderBy('created_at')
    .orderBy('id')
    .execute();
  return rows.map((row) => ({
    id: row.id,
    payer: getAddress(row.payer),
    status: row.status,
    amount: row.amount_atomic,
    recordsTotal: row.records_total_pico,
    recordCount: row.record_count,
    txHash: row.tx_hash,
    replacedTxHashes: row.replaced_tx_hashes ? (row.replaced_tx_hashes.split(',') as Hash[]) : [],
    blockNumber: row.block_number,
    payTo: row.pay_to ? getAddress(row.pay_to) : treasury,
  }));
}

/** The x402 authorizations the gateway took, as `payer:nonce`. */
async function readX402Nonces(db: Reader): Promise<Set<string>> {
  const rows = await db.selectFrom('x402_authorizations').select(['payer', 'nonce']).execute();
  return new Set(rows.map((row) => `${getAddress(row.payer)}:${row.nonce.toLowerCase()}`));
}

/**
 * How a transfer no settlement records came from the gateway, if it did: sent by its own relayer,
 * or using an x402 authorization of the payer the gateway took. Undefined: made outside it.
 */
async function madeByGateway(
  chain: ReconcileChain,
  usdc: Address,
  txHash: Hash,
  payer: Address,
  x402Nonces: Set<string>,
): Promise<string | undefined> {
  const receipt = await chain.publicClient.getTransactionReceipt({ hash: txHash });
  if (chain.relayer && getAddress(receipt.from) === getAddress(chain.relayer))
    return `in a transaction the gateway's key ${chain.relayer} sent`;
  const spendsKnownAuthorization = parseEventLogs({ abi: [authorizationUsed], logs: receipt.logs }).some(
    (log) =>
      getAddress(log.address) === usdc &&
      getAddress(log.args.authorizer) === payer &&
      x402Nonces.has(`${payer}:${log.args.nonce.toLowerCase()}`),
  );
  return spendsKnownAuthorization ? 'with an x402 authorization the gateway took' : undefined;
}

/** Per claiming settlement: how many records it holds and their total cost. */
async function readClaims(
  db: Reader,
): Promise<Map<string, { count: bigint; total: bigint; payers: Set<Address> }>> {
  const rows = await db
    .selectFrom('usage_records')
    .select((eb) => [
      'settlement_id',
      'payer',
      eb.fn.countAll().as('count'),
      ...exactSum('total_pico', 'total'),
    ])
    .where('settlement_id', 'is not', null)
    .groupBy(['settlement_id', 'payer'])
    .execute();
  const claims = new Map<string, { count: bigint; total: bigint; payers: Set<Address> }>();
  for (const row of rows) {
    const id = row.settlement_id as string;
    const claim = claims.get(id) ?? { count: 0n, total: 0n, payers: new Set<Address>() };
    claim.count += BigInt(row.count as number | bigint | string);
    claim.total += readSum(row, 'total');
    claim.payers.add(getAddress(row.payer));
    claims.set(id, claim);
  }
  return claims;
}

async function readCredits(db: Reader): Promise<Map<Address, bigint>> {
  const rows = await db.selectFrom('payers').select(['wallet', 'credit_pico']).execute();
  return new Map(rows.map((row) => [getAddress(row.wallet), row.credit_pico]));
}

/** Each settlement against the records claiming it; records claimed by nothing that can pay them. */
function checkClaims(
  settlements: SettlementRow[],
  claims: Map<string, { count: bigint; total: bigint; payers: Set<Address> }>,
  report: (mismatch: Mismatch) => void,
): void {
  const known = new Map(settlements.map((settlement) => [settlement.id, settlement]));
  for (const [id, claim] of claims) {
    const settlement = known.get(id);
    if (settlement && settlement.status !== 'failed') continue;
    report({
      kind: 'records_stranded',
      payer: settlement?.payer ?? [...claim.payers][0],
      settlementId: id,
      message: settlement
        ? `${records(claim.count)} (${picoUsd(claim.total)}) claimed by settlement ${id}, which failed: neither paid nor owed`
        : `${records(claim.count)} (${picoUsd(claim.total)}) claimed by settlement ${id}, which does not exist`,
    });
  }
  for (const settlement of settlements) {
    if (settlement.status === 'failed') continue;
    const claim = claims.get(settlement.id) ?? { count: 0n, total: 0n, payers: new Set<Address>() };
    const foreign = [...claim.payers].filter((payer) => payer !== settlement.payer);
    if (
      claim.count === settlement.recordCount &&
      claim.total === settlement.recordsTotal &&
      foreign.length === 0
    )
      continue;
    report({
      kind: 'records_differ',
      payer: settlement.payer,
      settlementId: settlement.id,
      message: `settlement ${settlement.id} (${settlement.status}) pays ${records(settlement.recordCount)} of ${picoUsd(settlement.recordsTotal)}, but ${records(claim.count)} of ${picoUsd(claim.total)} claim it${foreign.length > 0 ? `, some of other payers (${foreign.join(', ')})` : ''}`,
    });
  }
}

/** Over each payer's history: confirmed amounts less the credit left equal the cost of its paid records. */
function checkPayers(
  settlements: SettlementRow[],
  claims: Map<string, { count: bigint; total: bigint }>,
  credits: Map<Address, bigint>,
  report: (mismatch: Mismatch) => void,
): void {
  const balances = new Map<Address, { paid: bigint; records: bigint }>();
  for (const settlement of settlements) {
    if (settlement.status !== 'confirmed') continue;
    const balance = balances.get(settlement.payer) ?? { paid: 0n, records: 0n };
    balance.paid += settlement.amount * PICO_PER_ATOMIC;
    balance.records += claims.get(settlement.id)?.total ?? 0n;
    balances.set(settlement.payer, balance);
  }
  for (const payer of new Set([...balances.keys(), ...credits.keys()])) {
    const { paid, records } = balances.get(payer) ?? { paid: 0n, records: 0n };
    const credit = credits.get(payer) ?? 0n;
    if (paid - credit === records) continue;
    report({
      kind: 'payer_unbalanced',
      payer,
      message: `payer ${payer}: confirmed settlements paid ${picoUsd(paid)} and ${picoUsd(credit)} is credited back, but its paid records cost ${picoUsd(records)} (off by ${picoUsd(paid - credit - records)})`,
    });
  }
}

/** USDC moved from known payers to the treasuries, per transaction, payer and treasury, in the block range. */
async function transfersToTreasuries(
  chain: ReconcileChain,
  usdc: Address,
  treasuries: Set<Address>,
  payers: Set<Address>,
  fromBlock: bigint,
  toBlock: bigint,
  options: ReconcileOptions,
): Promise<Map<string, bigint>> {
  const step = options.blockRange ?? 10_000n;
  const transfers = new Map<string, bigint>();
  for (let start = fromBlock; start <= toBlock; start += step) {
    const end = start + step - 1n < toBlock ? start + step - 1n : toBlock;
    const logs = await chain.publicClient.getLogs({
      address: usdc,
      event: transferEvent,
      args: { to: [...treasuries] },
      fromBlock: start,
      toBlock: end,
    });
    for (const log of logs) {
      const from = getAddress(log.args.from as Address);
      // A transfer of 0 moves nothing, and anyone can make one from any address (transferFrom).
      if (!payers.has(from) || log.removed || !log.args.value) continue;
      const key = transferKey(log.transactionHash, from, log.args.to as Address);
      transfers.set(key, (transfers.get(key) ?? 0n) + (log.args.value ?? 0n));
    }
  }
  return transfers;
}

/**
 * USDC the settlement's transaction moved from its payer to its treasury, read from its receipt
 * (when the log search did not find it: outside the range, or missing); undefined when the
 * transaction is not on chain or reverted.
 */
async function transferredIn(
  chain: ReconcileChain,
  usdc: Address,
  settlement: SettlementRow,
): Promise<bigint | undefined> {
  if (!settlement.txHash) return undefined;
  let receipt: Awaited<ReturnType<PublicClient['getTransactionReceipt']>>;
  try {
    receipt = await chain.publicClient.getTransactionReceipt({ hash: settlement.txHash });
  } catch (error) {
    if (error instanceof TransactionReceiptNotFoundError) return undefined;
    throw error;
  }
  if (receipt.status !== 'success') return undefined;
  return parseEventLogs({ abi: [transferEvent], logs: receipt.logs })
    .filter(
      (log) =>
        getAddress(log.address) === usdc &&
        getAddress(log.args.from) === settlement.payer &&
        getAddress(log.args.to) === settlement.payTo,
    )
    .reduce((sum, log) => sum + log.args.value, 0n);
}

function records(count: bigint): string {
  return count === 1n ? '1 record' : `${count} records`;
}

function picoUsd(amount: bigint): string {
  return `${formatUsd(amount)} USD`;
}
