import { describe, expect, test } from 'vitest';
import { failure, useHarness } from './gateway-harness.js';

/**
 * Instructions keep their place and parts, and tools their strictness, as Claude and Gemini are sent
 * them through /v1/chat/completions with the official client.
 */
const h = useHarness();

const conversation = [
  {
    role: 'system' as const,
    content: [
      { type: 'text' as const, text: 'Be terse.' },
      { type: 'text' as const, text: 'Answer in French.' },
    ],
  },
  { role: 'user' as const, content: 'Hi' },
  { role: 'assistant' as const, content: 'Bonjour.' },
  { role: 'developer' as const, content: 'From now on, answer in German.' },
  {
    role: 'user' as const,
    content: [
      { type: 'text' as const, text: 'Line one.' },
      { type: 'text' as const, text: 'Line two.' },
    ],
  },
];

describe('system messages and multi-part text', () => {
  test('Claude: leading instructions are system blocks, one per part; a later one stays in its place as tagged user text', async () => {
    await h.client.chat.completions.create({ model: 'anthropic/claude-sonnet-4.5', messages: conversation });
    const sent = h.anthropic.log.at(-1)!.body;
    expect(sent.system).toEqual([
      { type: 'text', text: 'Be terse.' },
      { type: 'text', text: 'Answer in French.' },
    ]);
    expect(sent.messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'Hi' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'Bonjour.' }] },
      {
        role: 'user',
        content: [
          { type: 'text', text: '<system>\nFrom now on, answer in German.\n</system>' },
          { type: 'text', text: 'Line one.' },
          { type: 'text', text: 'Line two.' },
        ],
      },
    ]);
  });

  test('Gemini: leading instructions are systemInstruction parts; a later one stays in its place as tagged user text', async () => {
    await h.client.chat.completions.create({ model: 'google/gemini-2.5-flash', messages: conversation });
    const sent = h.gemini.log.at(-1)!.body;
    expect(sent.systemInstruction).toEqual({ parts: [{ text: 'Be terse.' }, { text: 'Answer in French.' }] });
    expect(sent.contents).toEqual([
      { role: 'user', parts: [{ text: 'Hi' }] },
      { role: 'model', parts: [{ text: 'Bonjour.' }] },
      {
        role: 'user',
        parts: [
          { text: '<system>\nFrom now on, answer in German.\n</system>' },
          { text: 'Line one.' },
          { text: 'Line two.' },
        ],
      },
    ]);
  });

  test('Gemini: a tool result of several text parts keeps them apart by a blank line', async () => {
    await h.client.chat.completions.create({
      model: 'google/gemini-2.5-flash',
      messages: [
        { role: 'user', content: 'Weather?' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{}' } }],
        },
        {
          role: 'tool',
          tool_call_id: 'call_1',
          content: [
            { type: 'text', text: 'Oslo: -3' },
            { type: 'text', text: 'Bergen: 4' },
          ],
        },
      ],
    });
    const sent = h.gemini.log.at(-1)!.body;
    expect(sent.contents.at(-1)).toEqual({
      role: 'user',
      parts: [{ functionResponse: { name: 'weather', response: { output: 'Oslo: -3\n\nBergen: 4' } } }],
    });
  });
});

describe('strict tools', () => {
  const strictTool = (additionalProperties: boolean) => ({
    type: 'function' as const,
    function: {
      name: 'get_weather',
      strict: true,
      parameters: {
        type: 'object',
        properties: { city: { type: 'string' } },
        required: ['city'],
        additionalProperties,
      },
    },
  });

  test('Claude gets strict: true on the tool (strict tool use); a loose tool goes without it', async () => {
    h.anthropic.script({ toolCalls: [{ name: 'get_weather', arguments: { city: 'Oslo' } }] });
    const answer = await h.client.chat.completions.create({
      model: 'anthropic/claude-sonnet-4.5',
      messages: [{ role: 'user', content: 'Weather in Oslo?' }],
      tools: [
        strictTool(false),
        { type: 'function', function: { name: 'loose', strict: false, parameters: { type: 'object' } } },
      ],
    });
    expect(answer.choices[0]!.message.tool_calls?.[0]).toMatchObject({
      function: { name: 'get_weather', arguments: '{"city":"Oslo"}' },
    });
    const tools = h.anthropic.log.at(-1)!.body.tools;
    expect(tools[0]).toMatchObject({ name: 'get_weather', strict: true });
    expect(tools[1]).not.toHaveProperty('strict');
  });

  test("a strict tool whose schema Anthropic's structured outputs refuse is Anthropic's refusal, named", async () => {
    const error = await failure(
      h.client.chat.completions.create({
        model: 'anthropic/claude-sonnet-4.5',
        messages: [{ role: 'user', content: 'Weather in Oslo?' }],
        tools: [strictTool(true)],
      }),
    );
    expect(error.message).toContain("'additionalProperties' must be explicitly set to false");
  });
});
