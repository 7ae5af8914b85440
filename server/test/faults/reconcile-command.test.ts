import { type Address, erc20Abi, keccak256, toHex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { expect, test } from 'vitest';
import { createLocalWalletClient } from '../../devkit/chain/index.js';
import { settlementsOf } from '../../src/billing/settlements.js';
import {
  type LedgerReconciliation,
  type MismatchKind,
  reconcileLedger,
} from '../../src/payments/outbox/reconcile-ledger.js';
import { transferAuthorization } from '../chain/authorizations.js';
import { runReconcileCommand } from '../support/reconcile-command.js';
import { chat, freshEoa, fundedEoa, landTransfer, useX402Stack } from '../x402/harness.js';

// `npm run reconcile` on a ledger the gateway kept (x402 payers: plain accounts that can also
// send USDC to the treasury by themselves), then on the same ledger deliberately broken.
const stack = useX402Stack();

/** `npm run reconcile` as an operator runs it, with the gateway's variables. */
function reconcileCommand(args: string[] = [], env: Record<string, string> = {}) {
  const { local, gateway } = stack;
  return runReconcileCommand(
    {
      DATABASE_URL: gateway.config.databaseUrl,
      CHAIN_RPC_URL: local.rpcUrl,
      CHAIN_ID: String(local.chainId),
      USDC_ADDRESS: local.usdc,
      TREASURY_ADDRESS: local.accounts.treasury.address,
      ...env,
    },
    args,
  );
}

const reconcile = (treasury: Address = stack.local.accounts.treasury.address) =>
  reconcileLedger(stack.gateway.store, {
    publicClient: stack.local.publicClient,
    usdc: stack.local.usdc,
    treasury,
  });

/** Payer key `index` sends `amount` USDC to the treasury itself, not through the gateway. */
async function transferToTreasury(index: number, amount: bigint) {
  const { local } = stack;
  const wallet = createLocalWalletClient(local.chain, local.accounts.payers[index]!.privateKey);
  const hash = await wallet.writeContract({
    address: local.usdc,
    abi: erc20Abi,
    functionName: 'transfer',
    args: [local.accounts.treasury.address, amount],
  });
  await local.publicClient.waitForTransactionReceipt({ hash });
  return hash;
}

/** Six payers, each with two answered requests: the first paid by the second's proof. */
async function payersWithOneSettlement(): Promise<Address[]> {
  const payers: Address[] = [];
  for (let index = 0; index < 6; index++) {
    const payer = await fundedEoa(stack, index, 1_000_000n);
    await chat(stack, payer);
    await chat(stack, payer);
    payers.push(payer.address);
  }
  return payers;
}

test('a consistent ledger: exit 0; deliberately broken: exit 1 naming each mismatch, and JSON on request', async () => {
  const { store } = stack.gateway;
  const payers = await payersWithOneSettlement();
  const consistent = await reconcile();
  expect(consistent).toMatchObject({ consistent: true, mismatches: [] });
  expect(consistent.checked).toMatchObject({
    payers: 6,
    settlements: 6,
    confirmedTransfers: 6,
    chainTransfers: 6,
  });
  const clean = await reconcileCommand();
  expect(clean.stdout).toMatch(/^The ledger matches the chain: 6 payers, 6 settlements/);
  expect(clean.code).toBe(0);

  // Transfers no settlement made leave it consistent: a payer tipping the treasury is noted, and a
  // stranger's transfer of 0 "from" a payer (anyone can make one) is not even that.
  const [tipper] = payers as [Address];
  const tip = await transferToTreasury(payers.indexOf(tipper), 3n);
  const zero = await stack.local.deployer.writeContract({
    address: stack.local.usdc,
    abi: erc20Abi,
    functionName: 'transferFrom',
    args: [tipper, stack.local.accounts.treasury.address, 0n],
  });
  await stack.local.publicClient.waitForTransactionReceipt({ hash: zero });
  const tipped = await reconcile();
  expect(tipped).toMatchObject({ consistent: true, mismatches: [] });
  expect(tipped.noted).toEqual([
    {
      kind: 'outside',
      payer: tipper,
      txHash: tip,
      message: expect.stringContaining("outside the gateway's settlements"),
    },
  ]);
  // A settlement still in flight whose transaction is mined: a note while the gateway finishes it.
  const [inFlight] = await settlementsOf(store, payers[1] as Address, { status: 'confirmed' });
  const setStatus = (status: 'sent' | 'confirmed') =>
    store.db.updateTable('settlements').set({ status }).where('id', '=', inFlight!.id).execute();
  await setStatus('sent');
  const finishing = await reconcile();
  expect(finishing).toMatchObject({ consistent: true, mismatches: [] });
  expect(finishing.noted).toContainEqual(
    expect.objectContaining({ kind: 'in_flight', payer: payers[1], settlementId: inFlight!.id }),
  );
  await setStatus('confirmed');
  const tippedReport = await reconcileCommand();
  expect(tippedReport.code).toBe(0);
  expect(tippedReport.stdout).toContain(`- (outside) transaction ${tip} moved 0.000003 USDC from ${tipper}`);

  const [amount, hash, direct, failed, credit, duplicate] = payers as [
    Address,
    Address,
    Address,
    Address,
    Address,
    Address,
  ];
  const settlementOf = async (payer: Address) =>
    (await settlementsOf(store, payer, { status: 'confirmed' }))[0]!;
  // The recorded amount is not what moved.
  await store.db
    .updateTable('settlements')
    .set((eb) => ({ amount_atomic: eb('amount_atomic', '+', 1n) }))
    .where('id', '=', (await settlementOf(amount)).id)
    .execute();
  // The recorded transaction is not the one that paid.
  await store.db
    .updateTable('settlements')
    .set({ tx_hash: keccak256(toHex('no such transaction')) })
    .where('id', '=', (await settlementOf(hash)).id)
    .execute();
  // A payer sends USDC to the treasury outside the gateway.
  await transferToTreasury(2, 5n);
  expect(privateKeyToAccount(stack.local.accounts.payers[2]!.privateKey).address).toBe(direct);
  // A paid settlement marked failed while its records stay claimed.
  await store.db
    .updateTable('settlements')
    .set({ status: 'failed' })
    .where('id', '=', (await settlementOf(failed)).id)
    .execute();
  // The payer's credit no longer balances its history.
  await store.db
    .updateTable('payers')
    .set((eb) => ({ credit_pico: eb('credit_pico', '+', 1n) }))
    .where('wallet', '=', credit)
    .execute();
  // One payment recorded as two settlements.
  const original = await store.db
    .selectFrom('settlements')
    .selectAll()
    .where('id', '=', (await settlementOf(duplicate)).id)
    .executeTakeFirstOrThrow();
  await store.db
    .insertInto('settlements')
    .values({ ...original, id: `${original.id.slice(0, -4)}dup0`, created_at: original.created_at + 1n })
    .execute();

  const broken = await reconcile();
  expect(broken.consistent).toBe(false);
  const found = broken.mismatches.map((mismatch) => `${mismatch.kind} ${mismatch.payer}`).sort();
  const expected: Array<[MismatchKind, Address]> = [
    ['amount_differs', amount],
    ['payer_unbalanced', amount],
    ['transfer_missing', hash],
    ['transfer_unrecorded', hash],
    ['records_stranded', failed],
    ['transfer_unrecorded', failed],
    ['payer_unbalanced', credit],
    ['transaction_reused', duplicate],
    ['records_differ', duplicate],
    ['payer_unbalanced', duplicate],
  ];
  expect(found).toEqual(expected.map(([kind, payer]) => `${kind} ${payer}`).sort());

  const report = await reconcileCommand();
  expect(report.code).toBe(1);
  const lines = report.stdout.trim().split('\n');
  expect(lines[0]).toMatch(/^The ledger does not match the chain \(10 mismatches\)/);
  for (const mismatch of broken.mismatches)
    expect(lines).toContain(`- [${mismatch.kind}] ${mismatch.message}`);
  expect(report.stdout).toContain(
    `moved 0.000005 USDC from ${direct} to the treasury outside the gateway's settlements`,
  );

  const json = await reconcileCommand(['--json']);
  expect(json.code).toBe(1);
  expect(JSON.parse(json.stdout)).toMatchObject({ consistent: false, mismatches: expect.any(Array) });
  expect(JSON.parse(json.stdout).mismatches).toHaveLength(10);
});

test("a transfer the gateway's key sent that no settlement records is a mismatch (a payment the ledger lost)", async () => {
  const { local } = stack;
  // A payer the ledger knows (one answered request).
  const payer = await freshEoa(stack, 1_000_000n);
  await chat(stack, payer);
  // As a settlement whose record was lost would be: the gateway's key lands a payer's authorization.
  const hash = await landTransfer(
    local,
    payer,
    transferAuthorization(payer.address, local.accounts.treasury.address, 25n),
    { sender: createLocalWalletClient(local.chain, local.accounts.gateway.privateKey) },
  );

  const withKey = await reconcileCommand(['--json'], {
    SESSION_KEY_PRIVATE_KEY: local.accounts.gateway.privateKey,
  });
  expect(withKey.code).toBe(1);
  expect(JSON.parse(withKey.stdout).mismatches).toContainEqual({
    kind: 'transfer_unrecorded',
    payer: payer.address,
    txHash: hash,
    message: expect.stringContaining(
      `in a transaction the gateway's key ${local.accounts.gateway.address} sent`,
    ),
  });
  // Without the gateway's key the command cannot tell it from a payer's own transfer: noted.
  const withoutKey = await reconcileCommand(['--json']);
  expect(JSON.parse(withoutKey.stdout).noted).toContainEqual(
    expect.objectContaining({ kind: 'outside', payer: payer.address, txHash: hash }),
  );
});

test('over a WebSocket RPC the command reports and exits, as over HTTP', async () => {
  const overHttp = await reconcileCommand(['--json']);
  const overWebSocket = await reconcileCommand(['--json'], {
    CHAIN_RPC_URL: stack.local.rpcUrl.replace(/^http/, 'ws'),
  });
  expect(overWebSocket.code).toBe(overHttp.code);
  expect(JSON.parse(overWebSocket.stdout).mismatches).toEqual(JSON.parse(overHttp.stdout).mismatches);
});

test('the command refuses a configuration it cannot use (exit 2, the variable named) and unknown options', async () => {
  const missing = await reconcileCommand([], { TREASURY_ADDRESS: '' });
  expect(missing.code).toBe(2);
  expect(missing.stderr.trim()).toBe('Invalid configuration: TREASURY_ADDRESS is required');
  const option = await reconcileCommand(['--from-block', 'latest']);
  expect(option.code).toBe(2);
  expect(option.stderr).toMatch(/^--from-block must be a block number, got "latest"/);
  const unknown = await reconcileCommand(['--from', '5']);
  expect(unknown.code).toBe(2);
  expect(unknown.stderr).toMatch(/Unknown option '--from'/);
  const price = await reconcileCommand(['--eth-usd', '3,000']);
  expect(price.code).toBe(2);
  expect(price.stderr).toMatch(/^--eth-usd must be a price in USD such as 3000 or 2450.75, got "3,000"/);
  const date = await reconcileCommand(['--since', 'yesterday']);
  expect(date.code).toBe(2);
  expect(date.stderr).toMatch(/^--since must be a date such as 2026-11-01/);
  const backwards = await reconcileCommand(['--since', '2026-11-02', '--until', '2026-11-01']);
  expect(backwards.code).toBe(2);
  expect(backwards.stderr).toMatch(/^--since must be before --until/);
});

test('blocks after --to-block are not searched: a later transfer outside the ledger goes unseen', async () => {
  // The broken ledger of the first test is still there: only its transfers up to this block count.
  const head = await stack.local.publicClient.getBlockNumber();
  await transferToTreasury(2, 7n);
  const bounded = await reconcileCommand(['--json', '--to-block', head.toString()]);
  const unbounded = await reconcileCommand(['--json']);
  const unrecorded = (output: string) =>
    (JSON.parse(output).noted as Array<{ kind: string; message: string }>).filter((transfer) =>
      transfer.message.includes('0.000007 USDC'),
    );
  expect(unrecorded(bounded.stdout)).toEqual([]);
  expect(unrecorded(unbounded.stdout)).toHaveLength(1);
});

test('each settlement is checked against the treasury it paid, which TREASURY_ADDRESS may no longer name', async () => {
  const { store } = stack.gateway;
  const earlier = stack.local.accounts.treasury.address;
  const payer = await freshEoa(stack, 1_000_000n);
  await chat(stack, payer);
  await chat(stack, payer);
  const [settlement] = await settlementsOf(store, payer.address, { status: 'confirmed' });
  expect(settlement?.payTo).toBe(earlier);
  // The earlier tests' broken ledger is still there: only this payer's findings count.
  const about = (result: LedgerReconciliation) =>
    [...result.mismatches, ...result.noted].filter((finding) => finding.payer === payer.address);
  const setSettlement = (values: { status?: 'failed' | 'confirmed'; pay_to?: null }) =>
    store.db.updateTable('settlements').set(values).where('id', '=', settlement!.id).execute();

  // The operator has moved the treasury since.
  const moved = privateKeyToAccount(generatePrivateKey()).address;
  expect(about(await reconcile(moved))).toEqual([]);
  const report = await reconcileCommand(['--json'], { TREASURY_ADDRESS: moved });
  const reported = JSON.parse(report.stdout) as LedgerReconciliation;
  expect(about(reported)).toEqual([]);

  // Its transfer to the earlier treasury is found on chain too: failed, its payment is reported.
  await setSettlement({ status: 'failed' });
  expect(about(await reconcile(moved))).toContainEqual(
    expect.objectContaining({
      kind: 'transfer_unrecorded',
      settlementId: settlement!.id,
      message: expect.stringContaining(`from ${payer.address} to the earlier treasury ${earlier}, but`),
    }),
  );
  await setSettlement({ status: 'confirmed' });

  // One opened before settlements recorded their treasury paid the treasury configured now.
  await setSettlement({ pay_to: null });
  expect(about(await reconcile(earlier))).toEqual([]);
  expect(about(await reconcile(moved)).map((finding) => finding.kind)).toContain('transfer_missing');
});

test('the command states commission earned against gas spent per rail over a period, in USD at a given ETH price', async () => {
  const { store } = stack.gateway;
  await payersWithOneSettlement();
  // What the ledger holds, added up here in plain JavaScript.
  const records = await store.db.selectFrom('usage_records').select(['commission_pico', 'rail']).execute();
  const settled = await store.db
    .selectFrom('settlements')
    .select(['gas_used', 'fee_gwei', 'fee_remainder_wei', 'tx_hash'])
    .where('status', '=', 'confirmed')
    .execute();
  expect(new Set(records.map((record) => record.rail))).toEqual(new Set(['x402']));
  const commission = records.reduce((sum, record) => sum + BigInt(record.commission_pico), 0n);
  const gas = settled.reduce((sum, row) => sum + BigInt(row.gas_used ?? 0n), 0n);
  const feeWei = settled.reduce(
    (sum, row) => sum + BigInt(row.fee_gwei ?? 0n) * 10n ** 9n + BigInt(row.fee_remainder_wei ?? 0n),
    0n,
  );
  expect(commission).toBeGreaterThan(0n);
  expect(gas).toBeGreaterThan(0n);

  const report = await reconcileCommand(['--json', '--eth-usd', '3000']);
  const { economics } = JSON.parse(report.stdout);
  const gasUsd = (feeWei * 3000n * 10n ** 12n + 10n ** 18n - 1n) / 10n ** 18n;
  expect(economics.ethUsd).toBe('3000');
  expect(economics.rails).toEqual([
    {
      rail: 'x402',
      requests: String(records.length),
      commissionPicoUsd: String(commission),
      settlements: settled.filter((row) => row.tx_hash !== null).length,
      gasUsed: String(gas),
      feeWei: String(feeWei),
      gasPicoUsd: String(gasUsd),
      netPicoUsd: String(commission - gasUsd),
    },
  ]);

  const text = await reconcileCommand(['--eth-usd', '3000']);
  expect(text.stdout).toContain('Commission against gas, ');
  expect(text.stdout).toMatch(
    new RegExp(
      `- x402 rail: ${records.length} requests, commission [0-9.]+ USD; \\d+ settlements, ${gas} gas, [0-9.]+ ETH \\([0-9.]+ USD at 3000 USD/ETH\\); net -?[0-9.]+ USD`,
    ),
  );
  // A period that ends before any of it: nothing.
  const before = await reconcileCommand(['--since', '2020-01-01', '--until', '2020-01-02']);
  expect(before.stdout).toContain(
    'Commission against gas, 2020-01-01T00:00:00.000Z to 2020-01-02T00:00:00.000Z: no requests and no settlements.',
  );
});
