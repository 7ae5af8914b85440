/** Any OpenAI-compatible upstream the catalog lists. */
export { openAICompatibleFamily } from './openai-compatible.js';
