/**
 * `npm run authorize -- --gateway URL --owner-key 0x... (or OWNER_PRIVATE_KEY) [--rpc URL] [--cap USDC] [--expires-in 24h] [--fund USDC]`
 *
 * Authorizes a session for the owner's HybridDeleGator smart account (deploy salt 0x, as the dashboard derives it)
 * and prints `{"token", "wallet", ...}` as JSON on stdout; everything else goes to stderr. On the local chain (id
 * 31337) it first deploys and funds the account through the dev faucet.
 */
import './chain/no-analytics.js';
import { parseArgs } from 'node:util';
import { type AuthorizeRequest, authorizeOwner, CliError } from './stack/authorize-owner.js';

const USAGE = `usage: npm run authorize -- --gateway URL --owner-key 0x<64 hex> [--rpc URL] [--cap USDC] [--expires-in 24h] [--fund USDC]
  --gateway     the gateway's base URL, e.g. http://127.0.0.1:8080
  --owner-key   the private key owning the smart account (it signs the delegation; it never leaves this process);
                or OWNER_PRIVATE_KEY in the environment, which other users cannot read from the process list
  --rpc         a JSON-RPC URL of the gateway's chain (default on the local stack: its anvil, from data/local-stack.json)
  --cap         most USDC the gateway may ever transfer under this session (default 100)
  --expires-in  session lifetime: 90s, 30m, 24h, 7d (default 24h)
  --fund        local chain only: USDC minted to the smart account first (default 100; 0 for none)`;

function parse(argv: string[]): AuthorizeRequest {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        gateway: { type: 'string' },
        'owner-key': { type: 'string' },
        rpc: { type: 'string' },
        cap: { type: 'string', default: '100' },
        'expires-in': { type: 'string', default: '24h' },
        fund: { type: 'string', default: '100' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
    }));
  } catch (error) {
    throw new CliError(`${(error as Error).message}\n${USAGE}`);
  }
  if (values.help) {
    console.error(USAGE);
    process.exit(0);
  }
  const need = (name: string): string => {
    const value = values[name];
    if (typeof value !== 'string' || value === '') throw new CliError(`--${name} is required\n${USAGE}`);
    return value;
  };
  const ownerKey = values['owner-key'] ?? process.env.OWNER_PRIVATE_KEY;
  if (typeof ownerKey !== 'string' || ownerKey === '')
    throw new CliError(`--owner-key (or OWNER_PRIVATE_KEY) is required\n${USAGE}`);
  return {
    gatewayUrl: need('gateway'),
    ownerKey,
    rpcUrl: typeof values.rpc === 'string' ? values.rpc : undefined,
    cap: need('cap'),
    expiresIn: need('expires-in'),
    fund: need('fund'),
  };
}

async function main(): Promise<void> {
  const request = parse(process.argv.slice(2));
  const result = await authorizeOwner(request, (message) => console.error(message));
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

main().catch((error: unknown) => {
  console.error(error instanceof CliError ? `authorize: ${error.message}` : error);
  process.exit(1);
});
