import { formatUnits } from 'viem';
import type { LocalStackFacts, ProviderTarget } from './facts.js';

const EXAMPLE_MODEL = 'anthropic/claude-sonnet-5.5';

/** What `npm start` prints once the stack is up: where everything is, and a request to paste. */
export function stackBanner(facts: LocalStackFacts, factsPath: string, ownerUsdc: bigint): string {
  const owner = facts.testOwners[0];
  const lines = [
    '',
    `paygate local stack is up (chain ${facts.chainId}, new state at every start; Ctrl-C stops everything)`,
    '',
    `  Gateway      ${facts.gatewayUrl}`,
    `  Dashboard    ${facts.dashboardUrl ?? 'not built (npm run build -w web, then restart)'}`,
    `  GraphQL      ${facts.graphqlUrl}`,
    `  Chain RPC    ${facts.rpcUrl} (chain id ${facts.chainId})`,
    `  Faucet       ${facts.faucetUrl} (POST /fund {"address":"0x..."})`,
    providerLine('Anthropic', facts.providers.anthropic, 'ANTHROPIC'),
    providerLine('Gemini', facts.providers.gemini, 'GEMINI'),
    `  USDC         ${facts.usdc}`,
    `  Delegations  ${facts.delegationManager} (DelegationManager)`,
    `  Treasury     ${facts.treasury}`,
    `  Session key  ${facts.sessionKeyAddress}`,
    `  Facts (JSON) ${factsPath}`,
    '',
    `Funded test owners (anvil's public dev keys: never use them on a real chain). Each owner and its smart`,
    `account hold ${formatUnits(ownerUsdc, 6)} USDC:`,
    ...facts.testOwners.map(
      (o, i) => `  ${i + 1}. owner ${o.address}  key ${o.privateKey}\n     smart account ${o.smartAccount}`,
    ),
  ];
  if (owner) lines.push('', 'Try it:', ...example(facts.gatewayUrl, facts.rpcUrl, owner.privateKey));
  return `${lines.join('\n')}\n`;
}

/** Where a provider family's requests go, and how to change it. */
function providerLine(label: string, target: ProviderTarget, prefix: string): string {
  const how = target.simulated
    ? `simulator; set ${prefix}_API_KEY for the real API`
    : `from ${prefix}_API_KEY / ${prefix}_BASE_URL`;
  return `  ${label.padEnd(12)} ${target.baseUrl} (${how})`;
}

/** Names the chain's RPC too: pasted elsewhere, the command may not find this stack's facts file (DATA_DIR). */
function example(gatewayUrl: string, rpcUrl: string, ownerKey: string): string[] {
  const body = JSON.stringify({ model: EXAMPLE_MODEL, messages: [{ role: 'user', content: 'Hello there' }] });
  return [
    "  # 1. authorize a session (signs a delegation for the owner's smart account) and keep the token",
    `  TOKEN=$(npm run -s authorize -- --gateway ${gatewayUrl} --rpc ${rpcUrl} --owner-key ${ownerKey} | node -pe 'JSON.parse(require("fs").readFileSync(0)).token')`,
    '',
    '  # 2. call the gateway with it',
    `  curl -s ${gatewayUrl}/v1/chat/completions -H "authorization: Bearer $TOKEN" \\`,
    `    -H 'content-type: application/json' -d '${body}'`,
    '',
    '  # or with the openai client (npm install openai), as an ES module:',
    `  import OpenAI from 'openai';`,
    `  const client = new OpenAI({ baseURL: '${gatewayUrl}/v1', apiKey: process.env.TOKEN });`,
    `  const reply = await client.chat.completions.create({ model: '${EXAMPLE_MODEL}', messages: [{ role: 'user', content: 'Hello there' }] });`,
    '  console.log(reply.choices[0].message.content);',
    '',
  ];
}
