import type { Catalog, CatalogModel } from '../catalog/catalog.js';
import { toolsFromFunctions } from '../providers/legacy-functions.js';
import { MAX_FORWARDED_NESTING, nestingExceeds } from '../providers/nesting.js';
import type { ChatMessage, ChatRequest } from '../providers/openai-types.js';
import { UntranslatableRequestError } from '../providers/types.js';
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
  legacyFunctionsAsTools(request);
  request.messages.forEach(checkMessage);
  checkToolResults(request.messages);
  checkTools(request);
  checkResponseFormat(request);
  checkNesting(request);
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
    content.forEach((part, j) => {
      if (part.type !== 'file') return;
      // An id of OpenAI's Files API names a file in the operator's account, not one the client gave.
      if (part.file.file_id !== undefined)
        throw validationError(
          `${at}.content[${j}].file.file_id`,
          'cannot be served: send the file inline as file_data (a data URL)',
        );
      if (part.file.file_data === undefined)
        throw validationError(`${at}.content[${j}].file.file_data`, 'is required (a data URL)');
    });
    if (role !== 'user') {
      const image = content.findIndex((part) => part.type !== 'text');
      if (image !== -1)
        throw validationError(`${at}.content[${image}].type`, `must be "text" for role "${role}"`);
    }
  }
}

/** Legacy function calling, checked as the tools it is made. */
function legacyFunctionsAsTools(request: ChatRequest): void {
  try {
    toolsFromFunctions(request);
  } catch (error) {
    if (error instanceof UntranslatableRequestError) throw validationError(error.field, error.message);
    throw error;
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

function checkTools(request: ChatRequest): void {
  const names = new Set<string>();
  request.tools?.forEach((tool, i) => {
    if (nestingExceeds(tool.function.parameters, MAX_FORWARDED_NESTING))
      throw validationError(
        `tools[${i}].function.parameters`,
        `must nest at most ${MAX_FORWARDED_NESTING} levels deep`,
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
  if (format?.type === 'json_schema' && nestingExceeds(format.json_schema.schema, MAX_FORWARDED_NESTING))
    throw validationError(
      'response_format.json_schema.schema',
      `must nest at most ${MAX_FORWARDED_NESTING} levels deep`,
    );
}

/**
 * Any other part of the request forwarded as given (a response format's or tool choice's other
 * keys, a tool call's `extra_content`, ...) may not nest deeper either: named by its top-level field.
 * The fields the gateway itself reads nest a few levels above what they carry.
 */
function checkNesting(request: ChatRequest): void {
  for (const [field, value] of Object.entries(request))
    if (nestingExceeds(value, MAX_FORWARDED_NESTING + FIELD_LEVELS))
      throw validationError(field, `must nest at most ${MAX_FORWARDED_NESTING} levels deep`);
}

/** `messages[i].tool_calls[j].extra_content`: the deepest place the gateway forwards a client's JSON. */
const FIELD_LEVELS = 4;
