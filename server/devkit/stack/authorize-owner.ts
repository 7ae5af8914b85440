import { readFile } from 'node:fs/promises';
import {
  Implementation,
  type MetaMaskSmartAccount,
  type SmartAccountsEnvironment,
  toMetaMaskSmartAccount,
} from '@metamask/smart-accounts-kit';
import {
  type Address,
  createPublicClient,
  defineChain,
  type Hex,
  http,
  isHex,
  type PublicClient,
  parseUnits,
} from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import {
  authorizeWithSmartAccount,
  fetchTerms,
  GatewayError,
  type SessionTerms,
} from '../../src/client/index.js';
import { deployedEnvironment } from '../../src/payments/chain/delegation-framework.js';
import type { LocalStackFacts } from './facts.js';
import { defaultDataDir, stackFactsPath } from './paths.js';

/** A mistake the user can fix (bad argument, gateway down, wrong chain): printed without a stack trace. */
export class CliError extends Error {
  override name = 'CliError';
}

export interface AuthorizeRequest {
  gatewayUrl: string;
  ownerKey: string;
  rpcUrl?: string;
  /** USDC, decimal. */
  cap: string;
  /** `90s`, `30m`, `24h`, `7d`, or seconds. */
  expiresIn: string;
  /** USDC minted to the smart account on the local chain, decimal. */
  fund: string;
}

export interface AuthorizeResult {
  token: string;
  wallet: Address;
  sessionId: string;
  expiresAt: string;
}

const LOCAL_CHAIN_ID = 31337;
const DURATION = /^(\d+)(s|m|h|d)?$/;
const SECONDS_PER: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400 };

/** Parses `90s`, `30m`, `24h`, `7d` or plain seconds. */
function parseDuration(text: string): number {
  const match = DURATION.exec(text.trim());
  const seconds = match ? Number(match[1]) * (SECONDS_PER[match[2] ?? 's'] ?? 1) : Number.NaN;
  if (!Number.isSafeInteger(seconds) || seconds <= 0)
    throw new CliError(`--expires-in must be a duration like 90s, 30m, 24h or 7d, got "${text}"`);
  return seconds;
}

function parseUsdc(name: string, text: string, allowZero: boolean): bigint {
  if (!/^\d{1,12}(\.\d{1,6})?$/.test(text.trim()))
    throw new CliError(
      `--${name} must be an amount of USDC like 100 or 2.5 (at most 6 decimals), got "${text}"`,
    );
  const units = parseUnits(text.trim(), 6);
  if (units === 0n && !allowZero) throw new CliError(`--${name} must be more than 0`);
  return units;
}

function parseOwnerKey(text: string): Hex {
  if (!isHex(text) || text.length !== 66)
    throw new CliError('--owner-key must be a 0x-prefixed 32-byte hex private key');
  try {
    privateKeyToAccount(text);
  } catch {
    throw new CliError('--owner-key is not a valid secp256k1 private key');
  }
  return text;
}

function parseHttpUrl(name: string, text: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new CliError(`--${name} must be a URL, got "${text}"`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new CliError(`--${name} must be an http(s) URL`);
  return text.replace(/\/+$/, '');
}

/** The running local stack's facts, when `gatewayUrl` is its gateway. */
async function localStackFacts(gatewayUrl: string): Promise<LocalStackFacts | undefined> {
  const path = stackFactsPath(process.env.DATA_DIR || defaultDataDir);
  try {
    const facts = JSON.parse(await readFile(path, 'utf8')) as LocalStackFacts;
    return facts.gatewayUrl === gatewayUrl ? facts : undefined;
  } catch {
    return undefined;
  }
}

async function connectChain(rpcUrl: string, expectedChainId: number): Promise<PublicClient> {
  const chain = defineChain({
    id: expectedChainId,
    name: `chain ${expectedChainId}`,
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  });
  const client = createPublicClient({
    chain,
    transport: http(rpcUrl, { retryCount: 0 }),
    pollingInterval: 100,
  });
  let chainId: number;
  try {
    chainId = await client.getChainId();
  } catch (error) {
    throw new CliError(`the RPC at ${rpcUrl} does not answer (${(error as Error).message.split('\n')[0]})`);
  }
  if (chainId !== expectedChainId)
    throw new CliError(
      `wrong chain: ${rpcUrl} is chain ${chainId}, but the gateway settles on chain ${expectedChainId}`,
    );
  return client;
}

async function postFaucet(faucetUrl: string, path: string, body: unknown): Promise<unknown> {
  let res: Response;
  try {
    res = await fetch(`${faucetUrl}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  } catch (error) {
    throw new CliError(`the dev faucet at ${faucetUrl} is not reachable (${(error as Error).message})`);
  }
  const answer = (await res.json().catch(() => ({}))) as { data?: unknown; error?: { message?: string } };
  if (!res.ok) throw new CliError(`the dev faucet refused ${path}: ${answer.error?.message ?? res.status}`);
  return answer.data;
}

/** Local chain: the account exists and holds test USDC before the delegation is signed. */
async function deployAndFund(
  faucetUrl: string,
  account: MetaMaskSmartAccount,
  { fundUnits, fundText }: Pick<ParsedRequest, 'fundUnits' | 'fundText'>,
  log: (message: string) => void,
): Promise<void> {
  if (!(await account.isDeployed())) {
    const { factory, factoryData } = await account.getFactoryArgs();
    await postFaucet(faucetUrl, '/deploy-smart-account', { address: account.address, factory, factoryData });
    log(`deployed smart account ${account.address}`);
  }
  if (fundUnits > 0n) {
    await postFaucet(faucetUrl, '/fund', { address: account.address, usdc: fundText, eth: '0' });
    log(`funded ${account.address} with ${fundText} test USDC`);
  }
}

interface ParsedRequest {
  gatewayUrl: string;
  ownerKey: Hex;
  rpcUrl?: string;
  capUnits: bigint;
  lifetimeSeconds: number;
  fundUnits: bigint;
  fundText: string;
}

function parseRequest(request: AuthorizeRequest): ParsedRequest {
  return {
    gatewayUrl: parseHttpUrl('gateway', request.gatewayUrl),
    ownerKey: parseOwnerKey(request.ownerKey),
    rpcUrl: request.rpcUrl === undefined ? undefined : parseHttpUrl('rpc', request.rpcUrl),
    capUnits: parseUsdc('cap', request.cap, false),
    lifetimeSeconds: parseDuration(request.expiresIn),
    fundUnits: parseUsdc('fund', request.fund, true),
    fundText: request.fund.trim(),
  };
}

/** What a gateway failure means to the person running the command. */
function gatewayFailure(gatewayUrl: string, what: string) {
  return (error: unknown): never => {
    if (error instanceof GatewayError)
      throw new CliError(
        `the gateway at ${gatewayUrl} refused ${what} (${error.status} ${error.code}): ${error.message}`,
      );
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    throw new CliError(
      `the gateway at ${gatewayUrl} is not reachable (${cause?.code ?? cause?.message ?? (error as Error).message})`,
    );
  };
}

/**
 * Authorizes a session for the owner's smart account and returns its access token. On the local chain the account
 * is deployed and funded through the dev faucet first. `log` receives progress (the CLI prints it on stderr).
 */
export async function authorizeOwner(
  request: AuthorizeRequest,
  log: (message: string) => void,
): Promise<AuthorizeResult> {
  const parsed = parseRequest(request);
  const { gatewayUrl } = parsed;
  const terms = (await fetchTerms(gatewayUrl).catch(
    gatewayFailure(gatewayUrl, 'GET /v1/authorize'),
  )) as SessionTerms & {
    devFaucetUrl?: string;
  };
  const facts = await localStackFacts(gatewayUrl);
  const rpcUrl = parsed.rpcUrl ?? facts?.rpcUrl;
  if (!rpcUrl)
    throw new CliError(
      `--rpc is required: a JSON-RPC URL of chain ${terms.chainId}, where the gateway settles`,
    );
  const client = await connectChain(rpcUrl, terms.chainId);
  const account = await ownerSmartAccount(client, parsed.ownerKey, trustedEnvironment(terms, log));
  log(
    `smart account ${account.address} (owner ${privateKeyToAccount(parsed.ownerKey).address}, chain ${terms.chainId})`,
  );

  if (terms.chainId === LOCAL_CHAIN_ID) {
    const faucetUrl = terms.devFaucetUrl ?? facts?.faucetUrl;
    if (!faucetUrl)
      throw new CliError(
        'the gateway names no dev faucet for the local chain: is it the local stack (npm start)?',
      );
    await deployAndFund(faucetUrl, account, parsed, log);
  } else if (!(await account.isDeployed())) {
    log('the smart account is not deployed yet: the delegation is signed for it (ERC-6492) all the same');
  }

  const session = await authorizeWithSmartAccount({
    gatewayUrl,
    smartAccount: account,
    cap: parsed.capUnits,
    expiresAt: new Date(Date.now() + parsed.lifetimeSeconds * 1000),
  }).catch(gatewayFailure(gatewayUrl, 'the session'));
  log(`session ${session.sessionId} authorized until ${session.expiresAt}`);
  return {
    token: session.token,
    wallet: session.wallet,
    sessionId: session.sessionId,
    expiresAt: session.expiresAt,
  };
}

/**
 * The contracts the owner's account is derived from, and the gateway's terms checked against: the
 * Delegation Framework's own deployment on the chain. Taken from the gateway, the client's check of
 * the gateway's caveat enforcers would compare them with themselves, and a gateway naming no-op
 * enforcers would get a delegation that restricts nothing. Only a chain with no known deployment
 * (the local stack's) takes what the gateway names.
 */
export function trustedEnvironment(
  terms: SessionTerms,
  log: (line: string) => void,
): SmartAccountsEnvironment {
  try {
    return deployedEnvironment(terms.chainId);
  } catch {
    if (terms.chainId !== LOCAL_CHAIN_ID)
      log(
        `chain ${terms.chainId} has no known Delegation Framework deployment: the contracts the gateway names are used`,
      );
    return terms.environment;
  }
}

/** The smart account an owner key controls: HybridDeleGator with deploy salt 0x, as the dashboard derives it. */
function ownerSmartAccount(client: PublicClient, ownerKey: Hex, environment: SmartAccountsEnvironment) {
  return toMetaMaskSmartAccount({
    client,
    implementation: Implementation.Hybrid,
    deployParams: [privateKeyToAccount(ownerKey).address, [], [], []],
    deploySalt: '0x',
    signer: { account: privateKeyToAccount(ownerKey) },
    environment,
  });
}
