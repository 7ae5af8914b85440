/** Gemini (Google's generateContent API): requests, thinking budgets, the stream. */
export { geminiFamily } from './gemini.js';
