/**
 * OpenAI's legacy function calling (`functions`, `function_call`, the `function` role), which it
 * still serves: a request using it is made a tools request before any provider sees it, and the
 * answer comes back in the legacy shape, as OpenAI answers it (`message.function_call`, finish
 * reason `function_call`, one call at most).
 */
import type { ChatMessage, ChatRequest, FunctionCall, ToolChoice } from './openai-types.js';
import type { StreamPart } from './types.js';
import { UntranslatableRequestError } from './types.js';

/** Whether the answer to `request` takes the legacy shape. */
export function answersInFunctions(request: ChatRequest): boolean {
  return request.functions != null;
}

/**
 * `request` with its legacy fields made tools, in place: `functions` become function tools (the
 * field stays, it says the answer's shape), `function_call` the tool choice, an assistant's
 * `function_call` a tool call under an id of the gateway's, and a `function` message the result
 * of the latest such call of its name.
 */
export function toolsFromFunctions(request: ChatRequest): void {
  const { functions } = request;
  if (functions != null) {
    if (request.tools != null)
      throw new UntranslatableRequestError('functions', 'cannot be given with tools');
    request.tools = functions.map((fn) => ({ type: 'function', function: fn }));
    // A legacy answer holds one call.
    request.parallel_tool_calls = false;
  }
  if (request.function_call != null) {
    if (request.tool_choice != null)
      throw new UntranslatableRequestError('function_call', 'cannot be given with tool_choice');
    request.tool_choice = toolChoice(request.function_call);
  }
  const callIds = new Map<string, string>();
  request.messages = request.messages.map((message, i) => legacyMessage(message, `messages[${i}]`, callIds));
}

function toolChoice(choice: NonNullable<ChatRequest['function_call']>): ToolChoice {
  return typeof choice === 'string' ? choice : { type: 'function', function: { name: choice.name } };
}

function legacyMessage(message: ChatMessage, at: string, callIds: Map<string, string>): ChatMessage {
  const { function_call: call, ...rest } = message;
  if (call !== undefined) {
    if (message.role !== 'assistant')
      throw new UntranslatableRequestError(`${at}.function_call`, 'is only allowed for role "assistant"');
    if (message.tool_calls?.length)
      throw new UntranslatableRequestError(`${at}.function_call`, 'cannot be given with tool_calls');
    const id = `call_function_${callIds.size}`;
    callIds.set(call.name, id);
    return { ...rest, tool_calls: [{ id, type: 'function', function: call }] };
  }
  if (message.role !== 'function') return message;
  const id = message.name === undefined ? undefined : callIds.get(message.name);
  if (id === undefined)
    throw new UntranslatableRequestError(
      `${at}.name`,
      'must name the function_call of an earlier assistant message that this function message answers',
    );
  const { name: _name, ...result } = rest;
  return { ...result, role: 'tool', tool_call_id: id };
}

/** An answer's parts in the legacy shape: its (first and only) tool call as `function_call`. */
export function functionCallParts(parts: StreamPart[]): StreamPart[] {
  return parts.flatMap((part): StreamPart[] => {
    if (part.type === 'finish')
      return [part.finishReason === 'tool_calls' ? { type: 'finish', finishReason: 'function_call' } : part];
    if (part.toolCalls === undefined) return [part];
    const { toolCalls, ...rest } = part;
    const call = toolCalls.find((delta) => delta.index === 0)?.function;
    const functionCall: Partial<FunctionCall> = {
      ...(call?.name && { name: call.name }),
      ...(call?.arguments && { arguments: call.arguments }),
    };
    const legacy = { ...rest, ...(Object.keys(functionCall).length > 0 && { functionCall }) };
    return legacy.content ||
      legacy.refusal ||
      legacy.functionCall ||
      legacy.logprobs ||
      legacy.reasoningDetails
      ? [legacy]
      : [];
  });
}
