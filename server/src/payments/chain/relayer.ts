import { setTimeout as delay } from 'node:timers/promises';
import {
  type Address,
  BaseError,
  type Hash,
  type Hex,
  keccak256,
  type PrivateKeyAccount,
  type PublicClient,
  parseTransaction,
  TransactionNotFoundError,
  type TransactionReceipt,
  type WaitForTransactionReceiptParameters,
} from 'viem';
import type { Store } from '../../store/database.js';
import { KeyedMutex } from '../../store/payer-lock.js';
import { type OnceSends, processOnceSends } from './once-sends.js';

/** A transaction signed by the relayer, not necessarily broadcast. */
export interface SignedTransaction {
  raw: Hex;
  hash: Hash;
  nonce: number;
}

export interface RelayerCall {
  to: Address;
  data: Hex;
  gas: bigint;
}

/**
 * Serializes the sends of one sender address: in this process, or across every gateway instance
 * that sends from the same key, which then share the nonce after their last send (a load-balanced
 * RPC may not have seen another instance's transaction yet).
 */
export interface SendLock {
  run<T>(sender: Address, send: () => Promise<T>): Promise<T>;
  /** The nonce after the last send another holder of the lock made lately; undefined when none. */
  nextNonce(sender: Address): Promise<number | undefined>;
  /** Shares it, or (undefined) withdraws it: the node's pending count decides alone. Under `run`. */
  setNextNonce(sender: Address, next: number | undefined): Promise<void>;
}

/**
 * The gateway's session key as a transaction sender. Every transaction is signed, recorded and
 * broadcast in nonce order, one at a time (across instances with a shared `SendLock`), so concurrent
 * settlements never leave a gap that would stall the ones after it nor reuse a nonce.
 */
export interface Relayer {
  readonly address: Address;
  /**
   * Signs `call` under the next nonce, hands the signed transaction to `record` (the outbox write)
   * and only then broadcasts it. When `record` throws, nothing is sent and the nonce is reused.
   * Throws `BroadcastError` when the node refused or may not have received the transaction.
   */
  submit(call: RelayerCall, record: (tx: SignedTransaction) => Promise<void>): Promise<SignedTransaction>;
  /**
   * Replaces `raw` (a transaction it signed, not mined) when the market's fees are above what it
   * offers: signs it again under its own nonce at `replacementFees`, hands that to `record` (with
   * the hash it replaces) and only then broadcasts it. A node asking a larger raise than an eighth
   * (geth's `--txpool.pricebump` set higher) refuses it as underpriced: it is replaced in turn,
   * raised another eighth, up to `NONCE_ATTEMPTS` sends in all. Resolves with the replacement the
   * node took, or null when the market asks no more than `raw` offers. Throws `BroadcastError` as
   * `submit` does.
   */
  replaceIfUnderpriced(
    raw: Hex,
    record: (tx: SignedTransaction, replaced: Hash) => Promise<void>,
  ): Promise<SignedTransaction | null>;
  /**
   * `submit` for a transaction nothing records (a smart account's deployment), once per `key`: while
   * the one sent under `key` is not mined, it is returned instead of another queued behind it, and
   * once it waited `staleMs` it is replaced at the market's fees (or broadcast again, in case the
   * node lost it). Remembered in `RelayerOptions.sends` (stored before each broadcast).
   */
  submitOnce(key: string, call: RelayerCall, staleMs: number): Promise<SignedTransaction>;
  /** Broadcasts an already signed transaction again (recovery). Resolves when the node holds or mined it. */
  rebroadcast(raw: Hex): Promise<void>;
  /**
   * Waits for the receipt of a transaction it sent. When none comes (timeout, node unreachable) the
   * node may have lost transactions it had accepted (a restart): the nonce counted in process is
   * forgotten and the next send takes the chain's pending count, since sending after a lost one
   * would leave a gap that nothing is mined behind. Harmless when it lost nothing.
   */
  waitForReceipt(args: WaitForTransactionReceiptParameters): Promise<TransactionReceipt>;
}

/** EIP-1559 fees: what a transaction offers per gas, in wei. */
export interface TransactionFees {
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
}

/**
 * The fees a replacement of a transaction offering `offered` needs when the market asks `market`:
 * null while the market asks no more than it offers (a replacement would not be mined sooner). Else
 * each fee is the market's, and at least an eighth above the offer: nodes accept a replacement only
 * with both fees raised (geth: by a tenth). Neither fee exceeds `cap`; null when that leaves no
 * such raise.
 */
export function replacementFees(
  offered: TransactionFees,
  market: TransactionFees,
  cap?: bigint,
): TransactionFees | null {
  if (
    market.maxFeePerGas <= offered.maxFeePerGas &&
    market.maxPriorityFeePerGas <= offered.maxPriorityFeePerGas
  )
    return null;
  return raisedFees(offered, market, cap);
}

/** Each fee at least `floor`'s and an eighth above `offered`'s, neither above `cap` (null when that leaves no raise). */
function raisedFees(offered: TransactionFees, floor: TransactionFees, cap?: bigint): TransactionFees | null {
  const raised = (fee: bigint) => fee + fee / 8n + 1n;
  const max = (a: bigint, b: bigint) => (a > b ? a : b);
  const maxPriorityFeePerGas = capped(
    max(floor.maxPriorityFeePerGas, raised(offered.maxPriorityFeePerGas)),
    cap,
  );
  const maxFeePerGas = capped(
    max(max(floor.maxFeePerGas, raised(offered.maxFeePerGas)), maxPriorityFeePerGas),
    cap,
  );
  if (
    maxFeePerGas < raised(offered.maxFeePerGas) ||
    maxPriorityFeePerGas < raised(offered.maxPriorityFeePerGas)
  )
    return null;
  return { maxFeePerGas, maxPriorityFeePerGas };
}

/** The market's fees for a new transaction, neither above `cap`. */
export function offeredFees(market: TransactionFees, cap?: bigint): TransactionFees {
  return {
    maxFeePerGas: capped(market.maxFeePerGas, cap),
    maxPriorityFeePerGas: capped(market.maxPriorityFeePerGas, cap),
  };
}

const capped = (fee: bigint, cap: bigint | undefined) => (cap === undefined || fee < cap ? fee : cap);

export interface RelayerOptions {
  /** Serializes the sends of the key (default: within this process). */
  lock?: SendLock;
  /**
   * The most it offers per gas, in wei (RELAYER_MAX_FEE_PER_GAS_WEI): a transaction is sent at most
   * at this fee, and a stuck one is not replaced above it. Unset: the market's fees.
   */
  maxFeePerGas?: bigint;
  /** Where `submitOnce` remembers what it sent (default: this process only). */
  sends?: OnceSends;
}

/** A refused nonce means another transaction took it: sign again with the next one, a few times. */
export const NONCE_ATTEMPTS = 3;

/**
 * `nonce`: the node refused the transaction's nonce (used or taken by another pending one): it
 * cannot be mined. `unknown`: the call failed on the way; the node may or may not hold it.
 */
export class BroadcastError extends Error {
  /** The nonce is held by a pending transaction that this one, as a replacement, does not outbid enough. */
  readonly replacementUnderpriced: boolean;

  constructor(
    readonly kind: 'nonce' | 'unknown',
    readonly hash: Hash,
    cause: unknown,
  ) {
    const message = describeError(cause);
    super(`broadcast of ${hash} failed: ${message}`, { cause });
    this.name = 'BroadcastError';
    this.replacementUnderpriced = REPLACEMENT_UNDERPRICED.test(message);
  }
}

// Node wording differs (geth, reth, anvil): these mean "the pool already holds this very transaction".
const ALREADY_KNOWN = /already known|known transaction|already imported|transaction already exists/i;
const REPLACEMENT_UNDERPRICED = /replacement transaction underpriced/i;
const NONCE_REFUSED =
  /nonce too low|nonce has already been used|replacement transaction underpriced|nonce.*too high/i;

export function createRelayer(
  client: PublicClient,
  account: PrivateKeyAccount,
  chainId: number,
  options: RelayerOptions = {},
): Relayer {
  const { lock = processSendLock(), maxFeePerGas: cap, sends = processOnceSends() } = options;
  const sender = account.address;
  const pendingCount = () => client.getTransactionCount({ address: sender, blockTag: 'pending' });
  // The nonce after this process's last send: a floor under a node that lags behind it.
  let counted: number | undefined;
  // Under the lock. Not shared, the others take their node's count: a store that cannot be written
  // must not turn a broadcast that went out into a failure (its settlement would be failed).
  const remember = async (next: number | undefined) => {
    counted = next;
    await lock.setNextNonce(sender, next).catch(() => undefined);
  };

  const broadcast = async (raw: Hex): Promise<'sent' | 'known'> => {
    const hash = keccak256(raw);
    try {
      await client.sendRawTransaction({ serializedTransaction: raw });
      return 'sent';
    } catch (error) {
      const message = describeError(error);
      if (ALREADY_KNOWN.test(message)) return 'known';
      throw new BroadcastError(NONCE_REFUSED.test(message) ? 'nonce' : 'unknown', hash, error);
    }
  };

  /** Signs an EIP-1559 transaction and hands it to `record`: nothing is broadcast before that resolves. */
  const signRecorded = async (
    tx: TransactionFees & { to: Address; data?: Hex; gas: bigint; value?: bigint; nonce: number },
    record: (tx: SignedTransaction) => Promise<void>,
  ): Promise<SignedTransaction> => {
    const raw = await account.signTransaction({ type: 'eip1559', chainId, ...tx });
    const signed = { raw, hash: keccak256(raw), nonce: tx.nonce };
    await record(signed);
    return signed;
  };

  const relayer: Relayer = {
    address: account.address,

    async submit(call, record) {
      const fees = offeredFees(await client.estimateFeesPerGas(), cap);
      return lock.run(sender, async () => {
        // The remembered nonce is a floor under a node that lags behind the last send; the node's
        // count is one under a send made from the key elsewhere.
        const [shared, pending] = await Promise.all([lock.nextNonce(sender), pendingCount()]);
        const nonce = Math.max(counted ?? 0, shared ?? 0, pending);
        const signed = await signRecorded({ ...call, ...fees, nonce }, record);
        try {
          await broadcast(signed.raw);
        } catch (error) {
          // Whatever the node holds now, its pending count says where the next nonce is.
          await remember(undefined);
          throw error;
        }
        await remember(nonce + 1);
        return signed;
      });
    },

    async replaceIfUnderpriced(raw, record) {
      const sent = parseTransaction(raw);
      const { nonce, to, data, gas, value, maxFeePerGas, maxPriorityFeePerGas } = sent;
      if (
        sent.type !== 'eip1559' ||
        !to ||
        nonce === undefined ||
        gas === undefined ||
        maxFeePerGas === undefined ||
        maxPriorityFeePerGas === undefined
      )
        throw new Error('only an EIP-1559 transaction this relayer signed can be replaced');
      const first = replacementFees(
        { maxFeePerGas, maxPriorityFeePerGas },
        await client.estimateFeesPerGas(),
        cap,
      );
      if (!first) return null;
      return lock.run(sender, async () => {
        let fees = first;
        let replaced = keccak256(raw);
        for (let attempt = 1; ; attempt++) {
          const signed = await signRecorded({ to, data, gas, value, ...fees, nonce }, (tx) =>
            record(tx, replaced),
          );
          try {
            await broadcast(signed.raw);
            return signed;
          } catch (error) {
            const outbid = error instanceof BroadcastError && error.replacementUnderpriced;
            const raised = outbid && attempt < NONCE_ATTEMPTS ? raisedFees(fees, fees, cap) : null;
            if (!raised) throw error;
            fees = raised;
            replaced = signed.hash;
          }
        }
      });
    },

    async submitOnce(key, call, staleMs) {
      await sends.forgetBelow(
        sender,
        await client.getTransactionCount({ address: sender, blockTag: 'latest' }),
      );
      const earlier = await sends.get(sender, key);
      if (earlier && Date.now() - earlier.sentAt < staleMs) return earlier.tx;
      const keep = (tx: SignedTransaction) => sends.put(sender, key, { tx, sentAt: Date.now() });
      if (!earlier) return relayer.submit(call, keep);
      const replacement = await relayer.replaceIfUnderpriced(earlier.tx.raw, keep);
      if (replacement) return replacement;
      await relayer.rebroadcast(earlier.tx.raw);
      // Its wait starts again.
      await keep(earlier.tx);
      return earlier.tx;
    },

    async waitForReceipt(args) {
      try {
        return await client.waitForTransactionReceipt(args);
      } catch (error) {
        // A transaction the node lost leaves a gap under the counted nonces; a slow one does not.
        // Unknown (the node cannot be reached) counts as lost: a gap is worse than a refused nonce.
        if (!(await nodeHolds(client, args.hash).catch(() => false)))
          await lock.run(sender, () => remember(undefined));
        throw error;
      }
    },

    async rebroadcast(raw) {
      await lock.run(sender, async () => {
        try {
          await broadcast(raw);
        } catch (error) {
          // Refused or lost on the way: the node's pending count says where the next nonce is. Taken
          // (sent, or already known), it changes nothing below the nonce the instances last counted,
          // which another instance behind a lagging node would otherwise send under again.
          await remember(undefined);
          throw error;
        }
      });
    },
  };
  return relayer;
}

/**
 * `look`'s answer, asked again a block (at least two polling intervals) later when it found nothing
 * (a falsy answer).
 * Before the gateway concludes that a transaction is gone (and fails a settlement it may pay, whose
 * records a second settlement would then pay again): behind a load balancer, the node asked may be
 * a block behind the one that took or mined it, and answer that it knows no such transaction.
 */
export async function onSecondLook<T>(
  client: Pick<PublicClient, 'pollingInterval' | 'getBlock'>,
  look: () => Promise<T>,
): Promise<T> {
  const first = await look();
  if (first) return first;
  await delay(Math.max(2 * client.pollingInterval, await blockInterval(client)));
  return look();
}

/** Milliseconds between the chain's last two blocks (timestamps have whole seconds: 0 when faster). */
async function blockInterval(client: Pick<PublicClient, 'getBlock'>): Promise<number> {
  const latest = await client.getBlock({ blockTag: 'latest' });
  if (latest.number === 0n) return 0;
  const previous = await client.getBlock({ blockNumber: latest.number - 1n });
  return Number(latest.timestamp - previous.timestamp) * 1000;
}

/** Whether the node holds the transaction: waiting in its pool, or mined. Throws when it cannot tell. */
export async function nodeHolds(client: Pick<PublicClient, 'getTransaction'>, hash: Hash): Promise<boolean> {
  try {
    await client.getTransaction({ hash });
    return true;
  } catch (error) {
    if (error instanceof TransactionNotFoundError) return false;
    throw error;
  }
}

/** One gateway process sends from the key: nonces are counted in it, nothing is shared. */
export function processSendLock(): SendLock {
  const mutex = new KeyedMutex();
  return {
    run: (sender, send) => mutex.run(sender, send),
    nextNonce: async () => undefined,
    setNextNonce: async () => {},
  };
}

/**
 * How long a shared nonce is taken over the node's count: long enough for a load-balanced RPC's
 * nodes to see a transaction, short enough that one a node lost (a floor above the chain's
 * count, a gap nothing is mined behind) or one from before a restart is soon ignored.
 */
const SHARED_NONCE_TTL_MS = 30_000;

/** Sends serialized through the ledger's store (across every gateway instance on PostgreSQL), the nonce shared in it. */
export function storeSendLock(store: Pick<Store, 'db' | 'withLock'>, chainId: number): SendLock {
  return {
    run: (sender, send) => store.withLock(`paygate:sender:${sender}`, send),
    async nextNonce(sender) {
      const row = await store.db
        .selectFrom('relayer_nonces')
        .select('next_nonce')
        .where('chain_id', '=', BigInt(chainId))
        .where('sender', '=', sender)
        .where('updated_at', '>=', BigInt(Date.now() - SHARED_NONCE_TTL_MS))
        .executeTakeFirst();
      return row && Number(row.next_nonce);
    },
    async setNextNonce(sender, next) {
      if (next === undefined) {
        await store.db
          .deleteFrom('relayer_nonces')
          .where('chain_id', '=', BigInt(chainId))
          .where('sender', '=', sender)
          .execute();
        return;
      }
      const values = { next_nonce: BigInt(next), updated_at: BigInt(Date.now()) };
      await store.db
        .insertInto('relayer_nonces')
        .values({ chain_id: chainId, sender, ...values })
        .onConflict((conflict) => conflict.columns(['chain_id', 'sender']).doUpdateSet(values))
        .execute();
    },
  };
}

function describeError(error: unknown): string {
  if (error instanceof BaseError) return error.details || error.shortMessage;
  return error instanceof Error ? error.message : String(error);
}
