import { randomUUID } from 'node:crypto';
import type { ChatCompletion, ChatCompletionChunk, ChunkDelta } from './openai-types.js';
import type { ProviderCompletion, StreamPart, TokenUsage } from './types.js';
import { toOpenAIUsage } from './usage.js';

/** What every answer to one request shares: its id, creation second, and the model as the client named it. */
export interface AnswerIdentity {
  id: string;
  created: number;
  model: string;
}

export function answerIdentity(model: string): AnswerIdentity {
  return { id: `chatcmpl-${randomUUID()}`, created: Math.floor(Date.now() / 1000), model };
}

export function chatCompletion(
  identity: AnswerIdentity,
  completion: ProviderCompletion,
  cost: unknown,
): ChatCompletion {
  return {
    ...identity,
    object: 'chat.completion',
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: completion.content,
          ...(completion.toolCalls.length > 0 && { tool_calls: completion.toolCalls }),
          refusal: null,
        },
        finish_reason: completion.finishReason,
        logprobs: null,
      },
    ],
    usage: toOpenAIUsage(completion.usage, cost),
  };
}

/** `chat.completion.chunk`s of one stream: the role opens it, usage closes it. */
export function openingChunk(identity: AnswerIdentity): ChatCompletionChunk {
  return chunk(identity, { role: 'assistant', content: '' }, null);
}

export function partChunk(identity: AnswerIdentity, part: StreamPart): ChatCompletionChunk {
  if (part.type === 'finish') return chunk(identity, {}, part.finishReason);
  return chunk(
    identity,
    {
      ...(part.content !== undefined && { content: part.content }),
      ...(part.toolCalls !== undefined && { tool_calls: part.toolCalls }),
    },
    null,
  );
}

export function usageChunk(identity: AnswerIdentity, usage: TokenUsage, cost: unknown): ChatCompletionChunk {
  return { ...identity, object: 'chat.completion.chunk', choices: [], usage: toOpenAIUsage(usage, cost) };
}

function chunk(
  identity: AnswerIdentity,
  delta: ChunkDelta,
  finishReason: ChatCompletionChunk['choices'][number]['finish_reason'],
): ChatCompletionChunk {
  return {
    ...identity,
    object: 'chat.completion.chunk',
    choices: [{ index: 0, delta, finish_reason: finishReason, logprobs: null }],
  };
}
