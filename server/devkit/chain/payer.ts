import { generateKeyPairSync } from 'node:crypto';
import {
  Implementation,
  type MetaMaskSmartAccount,
  toMetaMaskSmartAccount,
} from '@metamask/smart-accounts-kit';
import type { Address, Hex, PrivateKeyAccount } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import type { LocalChain } from './local-chain.js';
import { confirm, mintUsdc } from './usdc.js';

export interface PayerAccountOptions {
  /** Deploy the smart account now (default true). A delegation can only be redeemed once it exists. */
  deploy?: boolean;
  /** USDC atomic units minted to the smart account. */
  fundUsdc?: bigint;
  /** Wei added to the smart account's ETH balance (it needs none to be paid from). */
  fundEth?: bigint;
  /** CREATE2 salt of the account; with the owner it fixes the address. Default `0x` (zero). */
  deploySalt?: Hex;
  /** P256 keys (passkeys) the account holds besides its owner, each a fresh key. Default none. */
  passkeys?: number;
}

/** A payer: an owner key and its HybridDeleGator smart account. */
export interface PayerAccount {
  owner: PrivateKeyAccount;
  account: MetaMaskSmartAccount<Implementation.Hybrid>;
  address: Address;
  /** Deploys the account through its factory, paid by the chain's deployer. No-op once deployed. */
  deploy(): Promise<void>;
}

export async function createPayerAccount(
  chain: LocalChain,
  ownerKey: Hex,
  options: PayerAccountOptions = {},
): Promise<PayerAccount> {
  const owner = privateKeyToAccount(ownerKey);
  const account = await toMetaMaskSmartAccount({
    client: chain.publicClient,
    implementation: Implementation.Hybrid,
    deployParams: [owner.address, ...passkeys(options.passkeys ?? 0)],
    deploySalt: options.deploySalt ?? '0x',
    signer: { account: owner },
    environment: chain.environment,
  });
  const deploy = () => deploySmartAccount(chain, account);
  await Promise.all([
    options.deploy === false ? undefined : deploy(),
    options.fundUsdc ? mintUsdc(chain, account.address, options.fundUsdc) : undefined,
    options.fundEth ? addEth(chain, account.address, options.fundEth) : undefined,
  ]);
  return { owner, account, address: account.address, deploy };
}

/** `count` fresh P256 public keys as HybridDeleGator's `initialize` takes them: ids, x and y values. */
function passkeys(count: number): [string[], bigint[], bigint[]] {
  const keys = Array.from({ length: count }, () => {
    const { x, y } = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ format: 'jwk' });
    return [x, y].map((coordinate) =>
      BigInt(`0x${Buffer.from(coordinate ?? '', 'base64url').toString('hex')}`),
    );
  });
  return [
    keys.map((_, i) => `passkey-${i}`),
    keys.map(([x]) => x as bigint),
    keys.map(([, y]) => y as bigint),
  ];
}

// No bundler locally: the factory call (what a first user operation's initCode would do) is a plain
// transaction from a funded EOA.
async function deploySmartAccount(chain: LocalChain, account: MetaMaskSmartAccount): Promise<void> {
  if (await chain.publicClient.getCode({ address: account.address })) return;
  const { factory, factoryData } = await account.getFactoryArgs();
  if (!factory || !factoryData) throw new Error(`no factory data for smart account ${account.address}`);
  const hash = await chain.deployer.sendTransaction({ to: factory, data: factoryData });
  await confirm(chain, hash, `deployment of smart account ${account.address}`);
}

async function addEth(chain: LocalChain, address: Address, wei: bigint): Promise<void> {
  const balance = await chain.publicClient.getBalance({ address });
  await chain.testClient.setBalance({ address, value: balance + wei });
}
