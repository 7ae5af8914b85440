import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { parseUnits } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { anvilDevKeys, usdcBalance } from '../../devkit/chain/index.js';
import { type LocalStack, startLocalStack } from '../../devkit/stack/local-stack.js';
import { repoRoot } from '../../devkit/stack/paths.js';

const serverDir = fileURLToPath(new URL('../..', import.meta.url));
// Not a test owner of the stack: the CLI has to deploy and fund its smart account itself.
const ownerKey = anvilDevKeys[9]?.privateKey as string;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a command to its end; a non-zero exit is a result, not an error. */
function run(command: string, args: string[], env: Record<string, string>, cwd = serverDir): Promise<Run> {
  return new Promise((resolve) => {
    execFile(command, args, { cwd, env: { ...process.env, ...env } }, (error, stdout, stderr) => {
      resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr });
    });
  });
}

/** The CLI without npm in between (the error cases). */
const cli = (args: string[], env: Record<string, string> = {}) =>
  run(process.execPath, ['--import', 'tsx', 'devkit/authorize-cli.ts', ...args], env);

describe('npm run authorize against the local stack', () => {
  let stack: LocalStack;
  let emptyDataDir: string;
  beforeAll(async () => {
    [stack, emptyDataDir] = await Promise.all([
      startLocalStack({ port: 0, tempDataDir: true, testOwners: 1 }),
      mkdtemp(join(tmpdir(), 'paygate-cli-')),
    ]);
  });
  afterAll(async () => {
    await stack?.stop();
    await rm(emptyDataDir, { recursive: true, force: true });
  });

  test('deploys and funds the smart account, prints a token the openai client pays with', async () => {
    // the command `npm start` prints, from the repository root; the RPC comes from the stack's local-stack.json
    const args = [
      'run',
      '-s',
      'authorize',
      '--',
      '--gateway',
      stack.gatewayUrl,
      '--owner-key',
      ownerKey,
      '--cap',
      '50',
    ];
    const result = await run('npm', args, { DATA_DIR: stack.dataDir }, repoRoot);
    expect(result.stderr).toContain('deployed smart account');
    expect(result.code).toBe(0);
    const printed = JSON.parse(result.stdout);
    expect(Object.keys(printed).sort()).toEqual(['expiresAt', 'sessionId', 'token', 'wallet']);
    const wallet = printed.wallet as `0x${string}`;
    expect(await stack.chain.publicClient.getCode({ address: wallet })).toMatch(/^0x.{10,}/);
    expect(await usdcBalance(stack.chain, wallet)).toBe(parseUnits('100', 6));
    expect(Date.parse(printed.expiresAt) - Date.now()).toBeGreaterThan(23 * 3600_000);

    const client = new OpenAI({ baseURL: `${stack.gatewayUrl}/v1`, apiKey: printed.token, maxRetries: 0 });
    const ask = () =>
      client.chat.completions
        .create({
          model: 'anthropic/claude-sonnet-5.5',
          messages: [{ role: 'user', content: 'hello there' }],
        })
        .withResponse();
    const first = await ask();
    expect(first.response.status).toBe(200);
    expect(first.data.choices[0]?.message.content).toBe('echo: hello there');

    // the second request pays the first: USDC moves from the smart account to the stack's treasury
    const treasuryBefore = await usdcBalance(stack.chain, stack.treasury);
    const second = await ask();
    expect(second.response.status).toBe(200);
    const settled = BigInt(second.response.headers.get('x-settlement-amount') ?? '0');
    expect(settled).toBeGreaterThan(0n);
    expect(await usdcBalance(stack.chain, stack.treasury)).toBe(treasuryBefore + settled);
    expect(await usdcBalance(stack.chain, wallet)).toBe(parseUnits('100', 6) - settled);
  });

  test('a bad owner key, a gateway that is down, a wrong chain and a missing RPC exit 1 with a clear message', async () => {
    const wrongChainRpc = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ jsonrpc: '2.0', id: 1, result: '0x2105' }));
      });
    });
    wrongChainRpc.listen(0, '127.0.0.1');
    await once(wrongChainRpc, 'listening');
    const wrongRpcUrl = `http://127.0.0.1:${(wrongChainRpc.address() as AddressInfo).port}`;
    const noFacts = { DATA_DIR: emptyDataDir };
    try {
      const [badKey, badEnvKey, noKey, notAKey, down, wrongChain, noRpc, noGateway] = await Promise.all([
        cli(['--gateway', stack.gatewayUrl, '--owner-key', '0x1234'], noFacts),
        cli(['--gateway', stack.gatewayUrl], { ...noFacts, OWNER_PRIVATE_KEY: '0x1234' }),
        cli(['--gateway', stack.gatewayUrl], { ...noFacts, OWNER_PRIVATE_KEY: '' }),
        cli(['--gateway', stack.gatewayUrl, '--owner-key', `0x${'00'.repeat(32)}`], noFacts),
        cli(['--gateway', 'http://127.0.0.1:9', '--owner-key', ownerKey], noFacts),
        cli(['--gateway', stack.gatewayUrl, '--owner-key', ownerKey, '--rpc', wrongRpcUrl], noFacts),
        cli(['--gateway', stack.gatewayUrl, '--owner-key', ownerKey], noFacts),
        cli(['--owner-key', ownerKey], noFacts),
      ]);
      const expectations: Array<[Run, RegExp]> = [
        [badKey, /--owner-key must be a 0x-prefixed 32-byte hex private key/],
        // The key may come from the environment instead (out of the process list).
        [badEnvKey, /--owner-key must be a 0x-prefixed 32-byte hex private key/],
        [noKey, /--owner-key \(or OWNER_PRIVATE_KEY\) is required/],
        [notAKey, /--owner-key is not a valid secp256k1 private key/],
        [down, /the gateway at http:\/\/127\.0\.0\.1:9 is not reachable/],
        [wrongChain, /wrong chain: .* is chain 8453, but the gateway settles on chain 31337/],
        [noRpc, /--rpc is required/],
        [noGateway, /--gateway is required/],
      ];
      for (const [result, message] of expectations) {
        expect(result.code, result.stderr).toBe(1);
        expect(result.stderr).toMatch(message);
        expect(result.stderr).not.toMatch(/\n\s+at /); // a message, not a stack trace
        expect(result.stdout).toBe('');
      }
    } finally {
      wrongChainRpc.close();
    }
  });
});
