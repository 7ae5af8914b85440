/** Provider simulators for tests, the local stack and benchmarks: real HTTP servers on 127.0.0.1. */
export { type AnthropicReply, type AnthropicStep, startAnthropicSimulator } from './anthropic.js';
export { type GeminiReply, type GeminiStep, startGeminiSimulator } from './gemini.js';
export { type OpenAIReply, type OpenAIStep, startOpenAICompatibleSimulator } from './openai-compatible.js';
export type {
  LoggedRequest,
  ScriptedHttpError,
  ScriptedToolCall,
  Simulator,
  SimulatorOptions,
} from './simulator-server.js';
