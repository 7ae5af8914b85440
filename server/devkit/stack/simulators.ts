import {
  startAnthropicSimulator,
  startGeminiSimulator,
  startOpenAICompatibleSimulator,
} from '../simulators/index.js';

/** Base URLs of the provider simulators of a local stack, which answer every request with their default behaviour. */
export interface ProviderSimulators {
  anthropic: string;
  gemini: string;
  openai: string;
  close(): Promise<void>;
}

export async function startProviderSimulators(): Promise<ProviderSimulators> {
  const started = await Promise.allSettled([
    startAnthropicSimulator(),
    startGeminiSimulator(),
    startOpenAICompatibleSimulator(),
  ]);
  const running = started.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
  const close = async () => {
    await Promise.all(running.map((simulator) => simulator.close()));
  };
  const failed = started.find((result) => result.status === 'rejected');
  const [anthropic, gemini, openai] = running;
  if (failed || !anthropic || !gemini || !openai) {
    await close();
    throw failed?.reason;
  }
  return { anthropic: anthropic.url, gemini: gemini.url, openai: openai.url, close };
}
