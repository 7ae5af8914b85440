import type { ColumnType } from 'kysely';
import type { Address, Hex } from 'viem';

/**
 * Every integer column is int8 and comes back as `bigint` in both dialects (better-sqlite3 with
 * safe integers, pg with an int8 parser), so money never passes through a JS number.
 * One row holds at most 2^63 - 1 pico-USD (9.2 million USD); sums use `exactSum` instead.
 */
export type Int = ColumnType<bigint, bigint | number, bigint | number>;
export type NullableInt = ColumnType<bigint | null, bigint | number | null, bigint | number | null>;
/** An integer column with a default: optional on insert. */
export type DefaultedInt = ColumnType<bigint, bigint | number | undefined, bigint | number>;
/** Epoch milliseconds, so ordering and day arithmetic are the same in SQLite and PostgreSQL. */
export type Millis = Int;
export type NullableMillis = NullableInt;

/** Addresses are stored checksummed (viem `getAddress`) everywhere. */
export interface PayersTable {
  wallet: Address;
  /** Pico-USD paid in excess by confirmed settlements (rounded up to whole USDC units), owed back. */
  credit_pico: Int;
  created_at: Millis;
}

export interface SessionsTable {
  id: string;
  wallet: Address;
  /** The signed delegation as JSON. */
  delegation: string;
  delegation_hash: Hex;
  signature: Hex;
  /** The caveats the gateway accepted (caps, periods) as JSON. */
  limits: string;
  expires_at: Millis;
  revoked_at: NullableMillis;
  created_at: Millis;
  /** USDC atomic units its confirmed settlements moved through its delegation (0 when stored). */
  paid_atomic: DefaultedInt;
  /** The part of `paid_atomic` confirmed in period `paid_period` of its per-period cap. */
  period_paid_atomic: DefaultedInt;
  /** The index of the period `period_paid_atomic` counts, from the cap's start (null: none yet). */
  paid_period: ColumnType<bigint | null, bigint | number | null | undefined, bigint | number | null>;
}

export type RailColumn = 'session' | 'x402';

export interface UsageRecordsTable {
  request_id: string;
  payer: Address;
  rail: RailColumn;
  model: string;
  input_tokens: Int;
  cache_read_tokens: Int;
  cache_write_tokens: Int;
  output_tokens: Int;
  reasoning_tokens: Int;
  provider_cost_pico: Int;
  commission_pico: Int;
  total_pico: Int;
  /** 1 when the provider reported the final count, 0 for cancelled or failed streams. */
  exact: Int;
  created_at: Millis;
  /** The settlement claiming this record; paid once that settlement is confirmed. */
  settlement_id: string | null;
}

export type SettlementStatusColumn = 'pending' | 'sent' | 'confirmed' | 'failed';

export interface SettlementsTable {
  id: string;
  payer: Address;
  rail: RailColumn;
  status: SettlementStatusColumn;
  /** USDC atomic units moved on chain. */
  amount_atomic: Int;
  /** Sum of the claimed records' totals. */
  records_total_pico: Int;
  record_count: Int;
  /** The payer's credit when the settlement was opened. */
  credit_before_pico: Int;
  /** Credit after it: amount_atomic * 1e6 + credit_before_pico - records_total_pico. */
  carried_pico: Int;
  tx_hash: Hex | null;
  /** Session rail: the signed transaction, stored before it is broadcast (rebroadcast on recovery). */
  tx_raw: Hex | null;
  /** Hashes of the transactions `tx_raw` replaced (same nonce, lower fees), oldest first, comma-separated. */
  replaced_tx_hashes: string | null;
  /** The treasury it pays (null: opened before this was recorded). */
  pay_to: Address | null;
  /** The session whose delegation pays it (null: x402, or opened before this was recorded). */
  session_id: ColumnType<string | null, string | null | undefined, string | null>;
  block_number: NullableInt;
  /** Gas its transaction used, when the gateway's relayer sent it (null: a remote facilitator did, or none was sent). */
  gas_used: ColumnType<bigint | null, bigint | null | undefined, bigint | null>;
  /** Whole gwei the relayer paid for it, L1 data fee included (0: a remote facilitator paid; null: not known). */
  fee_gwei: ColumnType<bigint | null, bigint | null | undefined, bigint | null>;
  /** The rest of that fee, below a gwei, in wei: in wei alone a fee passes int8 at 9.2 ETH. */
  fee_remainder_wei: ColumnType<bigint | null, bigint | null | undefined, bigint | null>;
  failure_reason: string | null;
  created_at: Millis;
  updated_at: Millis;
  sent_at: NullableMillis;
  confirmed_at: NullableMillis;
  failed_at: NullableMillis;
}

/** EIP-3009 authorizations seen by the x402 rail: the replay guard. */
export interface X402AuthorizationsTable {
  asset: Address;
  payer: Address;
  nonce: Hex;
  value_atomic: Int;
  valid_before: Int;
  settlement_id: string | null;
  tx_hash: Hex | null;
  created_at: Millis;
  /** The chain's head when the proof went to the facilitator: where reconciliation looks for its use. */
  from_block: NullableInt;
}

/**
 * A payment identifier (x402 `payment-identifier`) a payer chose, and the request it paid for.
 * `cost_pico` is set once that request's usage is recorded; until then it is in flight, and its
 * claim lapses at `lease_until` (a request refused or failed before its usage leaves it unpaid).
 */
export interface X402PaymentIdsTable {
  payer: Address;
  payment_id: string;
  /** sha256 of the request body: the same id on another request is a conflict. */
  request_hash: string;
  request_id: string;
  cost_pico: NullableInt;
  lease_until: Millis;
  expires_at: Millis;
  created_at: Millis;
}

/** Sign-in-with-x nonces already used: a signed sign-in identifies its wallet once. */
export interface SiwxNoncesTable {
  nonce: string;
  address: Address;
  expires_at: Millis;
}

/** A relayer transaction no settlement records (a deployment), until its nonce is used. */
export interface RelayerSendsTable {
  sender: Address;
  key: string;
  tx_hash: Hex;
  tx_raw: Hex;
  nonce: Int;
  sent_at: Millis;
}

export interface RelayerNoncesTable {
  chain_id: Int;
  sender: Address;
  next_nonce: Int;
  updated_at: Millis;
}

export interface Database {
  payers: PayersTable;
  sessions: SessionsTable;
  usage_records: UsageRecordsTable;
  settlements: SettlementsTable;
  x402_authorizations: X402AuthorizationsTable;
  relayer_sends: RelayerSendsTable;
  relayer_nonces: RelayerNoncesTable;
  x402_payment_ids: X402PaymentIdsTable;
  siwx_nonces: SiwxNoncesTable;
}
