/** Claude (Anthropic's Messages API): requests, thinking, prompt caching, the stream. */
export { anthropicFamily } from './anthropic.js';
