import type { Migration } from 'kysely';
import * as ledger from './0001-ledger.js';
import * as settlementTransactions from './0002-settlement-transactions.js';
import * as x402SettlementLookup from './0003-x402-settlement-lookup.js';
import * as owedRecords from './0004-owed-records.js';
import * as claimedRecordsIndex from './0005-claimed-records-index.js';
import * as replacedTransactions from './0006-replaced-transactions.js';
import * as relayerSends from './0007-relayer-sends.js';
import * as relayerNonces from './0008-relayer-nonces.js';
import * as settlementPayee from './0009-settlement-payee.js';
import * as sessionExpiryIndex from './0010-session-expiry-index.js';
import * as sessionPaidTotals from './0011-session-paid-totals.js';
import * as x402ExtensionState from './0012-x402-extension-state.js';
import * as settlementGas from './0013-settlement-gas.js';

/**
 * Every migration of the store, applied in name order. To add one: a new file
 * `NNNN-what-it-does.ts` exporting `up` (and `down`), and one line here.
 */
export const migrations: Record<string, Migration> = {
  '0001-ledger': ledger,
  '0002-settlement-transactions': settlementTransactions,
  '0003-x402-settlement-lookup': x402SettlementLookup,
  '0004-owed-records': owedRecords,
  '0005-claimed-records-index': claimedRecordsIndex,
  '0006-replaced-transactions': replacedTransactions,
  '0007-relayer-sends': relayerSends,
  '0008-relayer-nonces': relayerNonces,
  '0009-settlement-payee': settlementPayee,
  '0010-session-expiry-index': sessionExpiryIndex,
  '0011-session-paid-totals': sessionPaidTotals,
  '0012-x402-extension-state': x402ExtensionState,
  '0013-settlement-gas': settlementGas,
};
