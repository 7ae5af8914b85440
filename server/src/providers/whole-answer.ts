import type {
  ChoiceLogprobs,
  FinishReason,
  FunctionCall,
  ReasoningDetail,
  TokenLogprob,
  ToolCall,
} from './openai-types.js';
import { type ProviderCompletion, ProviderError, type ProviderStream, type StreamPart } from './types.js';

/**
 * A whole answer gathered from its stream, as a client that asked for one JSON body gets it. A
 * stream that fails throws its ProviderError carrying what the provider had counted (`usage`), which
 * is billed unless the provider reported the failure itself.
 */
export async function wholeAnswer(stream: ProviderStream): Promise<ProviderCompletion> {
  const answer = new GatheredAnswer();
  try {
    for await (const parts of stream) for (const part of parts) answer.add(part);
  } catch (error) {
    if (error instanceof ProviderError) error.options.usage ??= stream.usage();
    throw error;
  }
  return answer.completion(stream.usage());
}

class GatheredAnswer {
  private content = '';
  private refusal = '';
  private readonly toolCalls: ToolCall[] = [];
  private functionCall?: FunctionCall;
  private reasoning = '';
  /** By their index: a thinking block's text pieces joined, its signature set. */
  private readonly reasoningDetails: ReasoningDetail[] = [];
  private logprobs?: ChoiceLogprobs;
  private finishReason: FinishReason = 'stop';

  add(part: StreamPart): void {
    if (part.type === 'finish') {
      this.finishReason = part.finishReason;
      return;
    }
    this.content += part.content ?? '';
    this.refusal += part.refusal ?? '';
    this.reasoning += part.reasoning ?? '';
    for (const detail of part.reasoningDetails ?? []) {
      const gathered = this.reasoningDetails[detail.index];
      if (gathered?.type === 'reasoning.text' && detail.type === 'reasoning.text') {
        if (detail.text) gathered.text = (gathered.text ?? '') + detail.text;
        if (detail.signature) gathered.signature = detail.signature;
      } else this.reasoningDetails[detail.index] = { ...detail };
    }
    if (part.functionCall) {
      this.functionCall ??= { name: '', arguments: '' };
      const call = this.functionCall;
      if (part.functionCall.name) call.name = part.functionCall.name;
      call.arguments += part.functionCall.arguments ?? '';
    }
    for (const { index, id, function: fn, extra_content } of part.toolCalls ?? []) {
      const call = this.toolCalls[index] ?? {
        id: '',
        type: 'function',
        function: { name: '', arguments: '' },
      };
      this.toolCalls[index] = call;
      if (id) call.id = id;
      if (fn?.name) call.function.name = fn.name;
      call.function.arguments += fn?.arguments ?? '';
      if (extra_content) call.extra_content = extra_content;
    }
    if (part.logprobs) {
      const gathered = this.logprobs ?? { content: null, refusal: null };
      this.logprobs = {
        content: joined(gathered.content, part.logprobs.content),
        refusal: joined(gathered.refusal, part.logprobs.refusal),
      };
    }
  }

  completion(usage: ProviderCompletion['usage']): ProviderCompletion {
    const toolCalls = this.toolCalls.filter((call) => call !== undefined);
    return {
      // No content is null beside tool calls or a refusal, as OpenAI answers; an empty answer otherwise.
      content:
        this.content === '' && (toolCalls.length > 0 || this.functionCall || this.refusal !== '')
          ? null
          : this.content,
      ...(this.refusal !== '' && { refusal: this.refusal }),
      toolCalls,
      ...(this.functionCall && { functionCall: this.functionCall }),
      ...(this.reasoning !== '' && { reasoning: this.reasoning }),
      ...(this.reasoningDetails.length > 0 && {
        reasoningDetails: this.reasoningDetails.filter((detail) => detail !== undefined),
      }),
      finishReason: this.finishReason,
      usage,
      ...(this.logprobs && { logprobs: this.logprobs }),
    };
  }
}

/** `tokens` with `more` after them, appended in place (a list per answer, grown delta by delta). */
function joined(tokens: TokenLogprob[] | null, more: TokenLogprob[] | null): TokenLogprob[] | null {
  if (!more) return tokens;
  if (!tokens) return [...more];
  tokens.push(...more);
  return tokens;
}
