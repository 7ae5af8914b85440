import cors from '@fastify/cors';
import Fastify, { type FastifyInstance } from 'fastify';
import {
  type Address,
  type BaseError,
  formatEther,
  formatUnits,
  getAddress,
  type Hash,
  type Hex,
  isAddressEqual,
  parseEther,
  parseUnits,
} from 'viem';
import { success } from '../src/http/envelope.js';
import { installErrorHandling } from '../src/http/error-handling.js';
import { validationError } from '../src/http/errors.js';
import { type LocalChain, mintUsdc, usdcBalance } from './chain/index.js';

/** A running dev faucet: `POST /fund` and `POST /deploy-smart-account` on 127.0.0.1. */
export interface Faucet {
  url: string;
  close(): Promise<void>;
}

export interface FaucetOptions {
  /** Default: a free port. */
  port?: number;
}

type FaucetChain = Pick<LocalChain, 'publicClient' | 'testClient' | 'deployer' | 'usdc' | 'environment'>;

const USDC_DECIMALS = 6;
const DEFAULT_USDC = '100';
const DEFAULT_ETH = '1';
const address = {
  type: 'string',
  pattern: '^0x[0-9a-fA-F]{40}$',
  description: 'must be a 0x-prefixed 20-byte address',
} as const;

const fundSchema = {
  body: {
    type: 'object',
    required: ['address'],
    additionalProperties: false,
    properties: {
      address,
      usdc: {
        type: 'string',
        pattern: '^\\d{1,7}(\\.\\d{1,6})?$',
        description: 'must be a decimal string of USDC to mint (at most 9999999.999999, 6 decimals)',
      },
      eth: {
        type: 'string',
        pattern: '^\\d{1,3}(\\.\\d{1,18})?$',
        description: 'must be a decimal string of ETH to add (at most 999.999999999999999999)',
      },
    },
  },
} as const;

const deploySchema = {
  body: {
    type: 'object',
    required: ['address', 'factory', 'factoryData'],
    additionalProperties: false,
    properties: {
      address,
      factory: address,
      factoryData: {
        type: 'string',
        pattern: '^0x([0-9a-fA-F]{2})+$',
        description: 'must be 0x-prefixed hex bytes',
      },
    },
  },
} as const;

/**
 * Serves test money on a local chain only: it mints the test USDC and sets ETH balances with anvil cheat codes.
 * Browsers call it from the dashboard's origin, hence CORS.
 */
export async function startFaucet(chain: FaucetChain, options: FaucetOptions = {}): Promise<Faucet> {
  const app = await buildFaucet(chain);
  await app.listen({ host: '127.0.0.1', port: options.port ?? 0 });
  const { port } = app.server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}`, close: () => app.close() };
}

async function buildFaucet(chain: FaucetChain): Promise<FastifyInstance> {
  // amounts are strings: a JSON number would be a float before it is parsed
  const app = Fastify({
    logger: false,
    forceCloseConnections: true,
    ajv: { customOptions: { coerceTypes: false } },
  });
  installErrorHandling(app);
  await app.register(cors, { origin: true, methods: ['POST'] });
  const addEth = serialized(async (to: Address, wei: bigint) => {
    // read-modify-write of a balance: one at a time, or two grants to one address lose one
    const balance = await chain.publicClient.getBalance({ address: to });
    await chain.testClient.setBalance({ address: to, value: balance + wei });
  });

  app.post<{ Body: { address: string; usdc?: string; eth?: string } }>(
    '/fund',
    { schema: fundSchema },
    async (request) => {
      const to = getAddress(request.body.address);
      const usdc = request.body.usdc ?? DEFAULT_USDC;
      const eth = request.body.eth ?? DEFAULT_ETH;
      const units = parseUnits(usdc, USDC_DECIMALS);
      const wei = parseEther(eth);
      const [mintTx] = await Promise.all([
        units > 0n ? mintUsdc(chain, to, units) : null,
        wei > 0n ? addEth(to, wei) : null,
      ]);
      const [usdcHeld, weiHeld] = await Promise.all([
        usdcBalance(chain, to),
        chain.publicClient.getBalance({ address: to }),
      ]);
      return success(
        {
          address: to,
          usdc: formatUnits(units, USDC_DECIMALS),
          eth: formatEther(wei),
          usdcBalance: formatUnits(usdcHeld, USDC_DECIMALS),
          ethBalance: formatEther(weiHeld),
          mintTx,
        },
        request.url,
      );
    },
  );

  app.post<{ Body: { address: string; factory: string; factoryData: Hex } }>(
    '/deploy-smart-account',
    { schema: deploySchema },
    async (request) => {
      const account = getAddress(request.body.address);
      if (!isAddressEqual(getAddress(request.body.factory), chain.environment.SimpleFactory))
        throw validationError(
          'factory',
          `must be the Delegation Framework's SimpleFactory ${chain.environment.SimpleFactory}`,
        );
      let txHash: Hash | null = null;
      if (!(await chain.publicClient.getCode({ address: account }))) {
        // No bundler locally: the factory call a first user operation's initCode would make, sent as a plain transaction.
        txHash = await chain.deployer
          .sendTransaction({ to: chain.environment.SimpleFactory, data: request.body.factoryData })
          .catch((error: Error) => {
            throw validationError(
              'factoryData',
              `does not deploy ${account}: ${(error as BaseError).shortMessage ?? error.message}`,
            );
          });
        const receipt = await chain.publicClient.waitForTransactionReceipt({ hash: txHash });
        if (receipt.status !== 'success' || !(await chain.publicClient.getCode({ address: account })))
          throw validationError('factoryData', `does not deploy ${account} (transaction ${txHash})`);
      }
      return success({ address: account, deployed: txHash !== null, txHash }, request.url);
    },
  );
  return app;
}

function serialized<A extends unknown[]>(task: (...args: A) => Promise<void>): (...args: A) => Promise<void> {
  let previous: Promise<void> = Promise.resolve();
  return (...args) => {
    const run = previous.then(() => task(...args));
    previous = run.catch(() => undefined);
    return run;
  };
}
