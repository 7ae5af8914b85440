/**
 * JSON Schema of the OpenAI chat completion request, as far as the gateway acts on it.
 * Unknown fields are accepted and ignored, as OpenAI clients send them. Optional scalars may be
 * null (the OpenAI spec marks them nullable). Rules a schema cannot say well live in
 * `chat-request-rules.ts`.
 */
const nullable = (schema: Record<string, unknown>) => ({
  ...schema,
  type: [schema.type as string, 'null'],
});

/** A prompt cache breakpoint (see providers/anthropic/prompt-cache.ts). */
const cacheControl = {
  type: 'object',
  required: ['type'],
  properties: { type: { const: 'ephemeral' }, ttl: { type: 'string', enum: ['5m', '1h'] } },
};

const textPart = {
  type: 'object',
  required: ['type', 'text'],
  properties: { type: { const: 'text' }, text: { type: 'string' }, cache_control: cacheControl },
};

const imagePart = {
  type: 'object',
  required: ['type', 'image_url'],
  properties: {
    type: { const: 'image_url' },
    image_url: {
      type: 'object',
      required: ['url'],
      properties: {
        url: { type: 'string', minLength: 1 },
        detail: { type: 'string', enum: ['auto', 'low', 'high'] },
      },
    },
    cache_control: cacheControl,
  },
};

const filePart = {
  type: 'object',
  required: ['type', 'file'],
  properties: {
    type: { const: 'file' },
    file: {
      type: 'object',
      properties: {
        file_data: { type: 'string', minLength: 1 },
        file_id: { type: 'string' },
        filename: { type: 'string' },
      },
    },
    cache_control: cacheControl,
  },
};

const audioPart = {
  type: 'object',
  required: ['type', 'input_audio'],
  properties: {
    type: { const: 'input_audio' },
    input_audio: {
      type: 'object',
      required: ['data', 'format'],
      properties: {
        data: { type: 'string', minLength: 1 },
        format: { type: 'string', enum: ['wav', 'mp3'] },
      },
    },
  },
};

const contentPart = {
  type: 'object',
  required: ['type'],
  properties: { type: { type: 'string', enum: ['text', 'image_url', 'file', 'input_audio'] } },
  allOf: [
    { if: { properties: { type: { const: 'text' } } }, then: textPart },
    { if: { properties: { type: { const: 'image_url' } } }, then: imagePart },
    { if: { properties: { type: { const: 'file' } } }, then: filePart },
    { if: { properties: { type: { const: 'input_audio' } } }, then: audioPart },
  ],
};

const toolCall = {
  type: 'object',
  required: ['id', 'type', 'function'],
  properties: {
    id: { type: 'string', minLength: 1 },
    type: { const: 'function' },
    function: {
      type: 'object',
      required: ['name', 'arguments'],
      properties: { name: { type: 'string', minLength: 1 }, arguments: { type: 'string' } },
    },
    // Given back as the answer carried it (Gemini's thought signature, see providers/gemini/gemini.ts).
    extra_content: {
      type: 'object',
      properties: {
        google: { type: 'object', properties: { thought_signature: { type: 'string', minLength: 1 } } },
      },
    },
  },
};

/** A legacy assistant message's call (see providers/legacy-functions.ts). */
const functionCall = {
  type: 'object',
  required: ['name', 'arguments'],
  properties: { name: { type: 'string', minLength: 1 }, arguments: { type: 'string' } },
};

const message = {
  type: 'object',
  required: ['role'],
  properties: {
    role: { type: 'string', enum: ['system', 'developer', 'user', 'assistant', 'tool', 'function'] },
    content: { type: ['string', 'array', 'null'], items: contentPart },
    name: { type: 'string' },
    tool_calls: { type: 'array', items: toolCall },
    tool_call_id: { type: 'string', minLength: 1 },
    function_call: functionCall,
    cache_control: cacheControl,
    // Claude's thinking, given back as an answer carried it (see providers/anthropic/anthropic.ts).
    reasoning_details: {
      type: 'array',
      items: {
        type: 'object',
        required: ['type', 'index'],
        properties: {
          type: { type: 'string', enum: ['reasoning.text', 'reasoning.encrypted', 'reasoning.summary'] },
          text: { type: 'string' },
          signature: { type: 'string' },
          data: { type: 'string' },
          format: { type: 'string' },
          index: { type: 'integer', minimum: 0 },
        },
      },
    },
  },
};

/** OpenAI's rule for the names of tools and response formats. */
const openAIName = {
  type: 'string',
  pattern: '^[a-zA-Z0-9_-]{1,64}$',
  description: 'must be 1 to 64 letters, digits, underscores or dashes',
};

const functionTool = {
  type: 'object',
  required: ['type', 'function'],
  properties: {
    type: { const: 'function' },
    function: {
      type: 'object',
      required: ['name'],
      properties: {
        name: openAIName,
        description: { type: 'string' },
        parameters: { type: 'object' },
        strict: { type: ['boolean', 'null'] },
      },
    },
    cache_control: cacheControl,
  },
};

/** A legacy `functions` entry: a function tool's `function`. */
const legacyFunction = {
  type: 'object',
  required: ['name'],
  properties: {
    name: openAIName,
    description: { type: 'string' },
    parameters: { type: 'object' },
  },
};

const legacyFunctionCall = {
  description: 'must be "none", "auto" or {"name":...}',
  anyOf: [
    { type: 'string', enum: ['none', 'auto'] },
    {
      type: 'object',
      required: ['name'],
      properties: { name: { type: 'string', minLength: 1 } },
    },
    { type: 'null' },
  ],
};

const toolChoice = {
  description: 'must be "none", "auto", "required" or {"type":"function","function":{"name":...}}',
  anyOf: [
    { type: 'string', enum: ['none', 'auto', 'required'] },
    {
      type: 'object',
      required: ['type', 'function'],
      properties: {
        type: { const: 'function' },
        function: {
          type: 'object',
          required: ['name'],
          properties: { name: { type: 'string', minLength: 1 } },
        },
      },
    },
    { type: 'null' },
  ],
};

/** What `type: "json_schema"` (Structured Outputs) adds to a response format. */
const jsonSchemaFormat = {
  type: 'object',
  required: ['json_schema'],
  properties: {
    json_schema: {
      type: 'object',
      required: ['name'],
      properties: {
        name: openAIName,
        description: { type: 'string' },
        schema: { type: 'object' },
        strict: { type: ['boolean', 'null'] },
      },
    },
  },
};

const responseFormat = nullable({
  type: 'object',
  required: ['type'],
  properties: { type: { type: 'string', enum: ['text', 'json_object', 'json_schema'] } },
  allOf: [
    {
      if: { type: 'object', required: ['type'], properties: { type: { const: 'json_schema' } } },
      then: jsonSchemaFormat,
    },
  ],
});

const stop = {
  description: 'must be a string or an array of at most 4 strings',
  anyOf: [{ type: 'string' }, { type: 'array', items: { type: 'string' }, maxItems: 4 }, { type: 'null' }],
};

export const chatRequestSchema = {
  type: 'object',
  required: ['messages'],
  properties: {
    model: { type: 'string', minLength: 1 },
    messages: { type: 'array', minItems: 1, items: message },
    stream: nullable({ type: 'boolean' }),
    stream_options: nullable({ type: 'object', properties: { include_usage: { type: 'boolean' } } }),
    temperature: nullable({ type: 'number', minimum: 0, maximum: 2 }),
    top_p: nullable({ type: 'number', minimum: 0, maximum: 1 }),
    top_k: nullable({ type: 'integer', minimum: 1 }),
    frequency_penalty: nullable({ type: 'number', minimum: -2, maximum: 2 }),
    presence_penalty: nullable({ type: 'number', minimum: -2, maximum: 2 }),
    max_tokens: nullable({ type: 'integer', minimum: 1 }),
    max_completion_tokens: nullable({ type: 'integer', minimum: 1 }),
    n: nullable({
      type: 'integer',
      minimum: 1,
      maximum: 1,
      description: 'must be 1: the gateway returns one choice per request',
    }),
    stop,
    response_format: responseFormat,
    tools: nullable({ type: 'array', items: functionTool }),
    tool_choice: toolChoice,
    // Legacy function calling, made tools (see providers/legacy-functions.ts).
    functions: nullable({ type: 'array', items: legacyFunction, minItems: 1 }),
    function_call: legacyFunctionCall,
    parallel_tool_calls: nullable({ type: 'boolean' }),
    seed: nullable({ type: 'integer' }),
    user: nullable({ type: 'string' }),
    // Passed to OpenAI-compatible upstreams; a thinking budget for Gemini (see providers/gemini/gemini.ts)
    // and Claude (see providers/anthropic/claude-thinking.ts).
    reasoning_effort: nullable({
      type: 'string',
      enum: ['none', 'minimal', 'low', 'medium', 'high', 'xhigh'],
    }),
    verbosity: nullable({ type: 'string', enum: ['low', 'medium', 'high'] }),
    logit_bias: nullable({
      type: 'object',
      propertyNames: { pattern: '^[0-9]+$', description: 'must be keyed by token ids (digits)' },
      additionalProperties: { type: 'number', minimum: -100, maximum: 100 },
    }),
    // OpenAI-compatible upstreams give them; the other families refuse a request for them.
    logprobs: nullable({ type: 'boolean' }),
    top_logprobs: nullable({ type: 'integer', minimum: 0, maximum: 20 }),
    prompt_cache_key: nullable({ type: 'string' }),
    safety_identifier: nullable({ type: 'string' }),
  },
} as const;
