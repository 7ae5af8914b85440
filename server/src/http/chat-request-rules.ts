import type { Catalog, CatalogModel } from '../catalog/catalog.js';
import type { ChatMessage, ChatRequest } from '../providers/openai-types.js';
import { ApiError, validationError } from './errors.js';

/**
 * Rules of the chat request that JSON Schema cannot express well: which fields each role needs,
 * tool references, how deep the schemas given nest, the token budget, and the model. Runs after
 * schema validation.
 */
export function resolveChatRequest(
  request: ChatRequest,
  catalog: Catalog,
  defaultModel: string,
): { request: ChatRequest; model: CatalogModel } {
  request.messages.forEach(checkMessage);
  checkToolResults(request.messages);
  checkTools(request);
  checkResponseFormat(request);
  const modelId = request.model ?? defaultModel;
  const model = catalog.find(modelId);
  if (!model) {
    throw new ApiError(
      400,
      'unsupported_model',
      `model "${modelId}" is not served here; GET /v1/models lists the models (named <provider>/<model>)`,
      { field: 'model' },
    );
  }
  const maxTokens = request.max_completion_tokens ?? request.max_tokens;
  if (maxTokens != null && maxTokens > model.maxOutputTokens) {
    const field = request.max_completion_tokens != null ? 'max_completion_tokens' : 'max_tokens';
    throw validationError(field, `must be <= ${model.maxOutputTokens} for ${model.id}`);
  }
  return { request, model };
}

function checkMessage(message: ChatMessage, i: number): void {
  const at = `messages[${i}]`;
  const { role, content } = message;
  if (role === 'tool') {
    if (!message.tool_call_id) throw validationError(`${at}.tool_call_id`, 'is required for role "tool"');
    if (content == null) throw validationError(`${at}.content`, 'is required for role "tool"');
  }
  if (role !== 'assistant' && message.tool_calls !== undefined)
    throw validationError(`${at}.tool_calls`, 'is only allowed for role "assistant"');
  if (role !== 'tool' && message.tool_call_id !== undefined)
    throw validationError(`${at}.tool_call_id`, 'is only allowed for role "tool"');
  if ((role === 'user' || role === 'system' || role === 'developer') && content == null)
    throw validationError(`${at}.content`, `is required for role "${role}"`);
  if (role === 'assistant' && content == null && !message.tool_calls?.length)
    throw validationError(`${at}.content`, 'is required for role "assistant" unless tool_calls are given');
  if (Array.isArray(content)) {
    if (content.length === 0) throw validationError(`${at}.content`, 'must not be an empty array');
    if (role !== 'user') {
      const image = content.findIndex((part) => part.type !== 'text');
      if (image !== -1)
        throw validationError(`${at}.content[${image}].type`, `must be "text" for role "${role}"`);
    }
  }
}

/** Providers refuse a tool result that answers no call; say so before anything is paid for. */
function checkToolResults(messages: ChatMessage[]): void {
  const calls = new Set<string>();
  messages.forEach((message, i) => {
    for (const call of message.tool_calls ?? []) calls.add(call.id);
    if (message.role === 'tool' && message.tool_call_id && !calls.has(message.tool_call_id))
      throw validationError(
        `messages[${i}].tool_call_id`,
        `"${message.tool_call_id}" answers no tool call of an earlier assistant message`,
      );
  });
}

/**
 * Tool parameters and a response format's schema are forwarded as given: nesting deep enough to
 * overflow the serializer's stack would fail the upstream call, so it is refused here (no real JSON
 * Schema nests this deep).
 */
const MAX_PARAMETERS_DEPTH = 64;

function checkTools(request: ChatRequest): void {
  const names = new Set<string>();
  request.tools?.forEach((tool, i) => {
    if (nestingExceeds(tool.function.parameters, MAX_PARAMETERS_DEPTH))
      throw validationError(
        `tools[${i}].function.parameters`,
        `must nest at most ${MAX_PARAMETERS_DEPTH} levels deep`,
      );
    if (names.has(tool.function.name))
      throw validationError(`tools[${i}].function.name`, `"${tool.function.name}" is defined twice`);
    names.add(tool.function.name);
  });
  const choice = request.tool_choice;
  if (choice == null || choice === 'none' || choice === 'auto') return;
  if (names.size === 0) throw validationError('tool_choice', 'needs tools to choose from');
  if (typeof choice === 'object' && !names.has(choice.function.name))
    throw validationError('tool_choice.function.name', `"${choice.function.name}" is not one of the tools`);
}

function checkResponseFormat(request: ChatRequest): void {
  const format = request.response_format;
  if (format?.type === 'json_schema' && nestingExceeds(format.json_schema.schema, MAX_PARAMETERS_DEPTH))
    throw validationError(
      'response_format.json_schema.schema',
      `must nest at most ${MAX_PARAMETERS_DEPTH} levels deep`,
    );
}

/** Whether `value` nests deeper than `limit` arrays/objects; iterative, so any depth is safe to check. */
function nestingExceeds(value: unknown, limit: number): boolean {
  const pending: Array<[unknown, number]> = [[value, 0]];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [item, depth] = next;
    if (item === null || typeof item !== 'object') continue;
    if (depth >= limit) return true;
    for (const child of Object.values(item)) pending.push([child, depth + 1]);
  }
  return false;
}
