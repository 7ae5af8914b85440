import type { Address } from 'viem';
import type { Store } from '../../store/database.js';
import type { SignedTransaction } from './relayer.js';

/** What the relayer's `submitOnce` sent under a key, and when. */
export interface OnceSent {
  tx: SignedTransaction;
  sentAt: number;
}

/**
 * Where `submitOnce` keeps what it sent, by sender and key, until the transaction's nonce is used:
 * in this process, or in the ledger's store (which outlives a restart and is shared by instances).
 */
export interface OnceSends {
  get(sender: Address, key: string): Promise<OnceSent | undefined>;
  /** Stored before the transaction is broadcast; replaces what the key held. */
  put(sender: Address, key: string, sent: OnceSent): Promise<void>;
  /** Forgets the sender's transactions whose nonce is below `nonce`: mined, or their nonce taken. */
  forgetBelow(sender: Address, nonce: number): Promise<void>;
}

export function processOnceSends(): OnceSends {
  const sends = new Map<string, OnceSent>();
  const id = (sender: Address, key: string) => `${sender}:${key}`;
  return {
    get: async (sender, key) => sends.get(id(sender, key)),
    put: async (sender, key, sent) => {
      sends.set(id(sender, key), sent);
    },
    forgetBelow: async (sender, nonce) => {
      for (const [known, { tx }] of sends)
        if (known.startsWith(`${sender}:`) && tx.nonce < nonce) sends.delete(known);
    },
  };
}

export function storeOnceSends(store: Pick<Store, 'db'>): OnceSends {
  return {
    async get(sender, key) {
      const row = await store.db
        .selectFrom('relayer_sends')
        .selectAll()
        .where('sender', '=', sender)
        .where('key', '=', key)
        .executeTakeFirst();
      return (
        row && {
          tx: { raw: row.tx_raw, hash: row.tx_hash, nonce: Number(row.nonce) },
          sentAt: Number(row.sent_at),
        }
      );
    },
    async put(sender, key, { tx, sentAt }) {
      const values = { tx_hash: tx.hash, tx_raw: tx.raw, nonce: tx.nonce, sent_at: sentAt };
      await store.db
        .insertInto('relayer_sends')
        .values({ sender, key, ...values })
        .onConflict((conflict) => conflict.columns(['sender', 'key']).doUpdateSet(values))
        .execute();
    },
    async forgetBelow(sender, nonce) {
      await store.db
        .deleteFrom('relayer_sends')
        .where('sender', '=', sender)
        .where('nonce', '<', BigInt(nonce))
        .execute();
    },
  };
}
