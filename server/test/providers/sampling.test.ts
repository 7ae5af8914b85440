import { describe, expect, test } from 'vitest';
import { loadCatalog } from '../../src/catalog/catalog.js';
import { useHarness } from './gateway-harness.js';

const h = useHarness();

const sampled = { temperature: 0.7, top_p: 0.9, top_k: 40, seed: 7, frequency_penalty: 0.5 };
const ask = (model: string, extra: object = {}) =>
  h.client.chat.completions.create({
    model,
    messages: [{ role: 'user', content: 'Hello there.' }],
    max_tokens: 64,
    ...extra,
  } as Parameters<typeof h.client.chat.completions.create>[0] & { stream?: false });

/** What the real Messages API answers to `body` (the simulator, called as the gateway would). */
async function messagesApi(body: object) {
  const response = await fetch(`${h.anthropic.url}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': 'k', 'anthropic-version': '2023-06-01' },
    body: JSON.stringify({ max_tokens: 16, messages: [{ role: 'user', content: 'Hi' }], ...body }),
  });
  return { status: response.status, body: await response.json() };
}

describe('every shipped model answers through the gateway', () => {
  test.each(loadCatalog().models.map((model) => [model.id, model.providerModel]))(
    '%s reaches its provider as %s',
    async (id, providerModel) => {
      const answer = await ask(id);
      expect(answer.model).toBe(id);
      expect(answer.choices[0]!.message.content).toContain('Hello there.');
      const sent = id.startsWith('anthropic/')
        ? h.anthropic.log.at(-1)!.body.model
        : h.gemini.log.at(-1)!.path;
      expect(sent).toContain(providerModel);
    },
  );
});

describe('a model is sent only the sampling parameters its catalog entry takes', () => {
  test('Claude Sonnet 5.5 takes none: temperature, top_p and top_k are left out, and the answer comes', async () => {
    const answer = await ask('anthropic/claude-sonnet-5.5', sampled);
    expect(answer.choices[0]!.finish_reason).toBe('stop');
    const body = h.anthropic.log.at(-1)!.body;
    for (const field of ['temperature', 'top_p', 'top_k', 'seed', 'frequency_penalty'])
      expect(body).not.toHaveProperty(field);
  });

  test.each([
    ['temperature', { temperature: 0.7 }],
    ['top_p', { top_p: 0.9 }],
    ['top_k', { top_k: 40 }],
  ])(
    'the Messages API refuses %s of Claude Sonnet 5.5 (what forwarding it would get)',
    async (field, body) => {
      const refused = await messagesApi({ model: 'claude-sonnet-5-5', ...body });
      expect(refused.status).toBe(400);
      expect(refused.body).toMatchObject({
        type: 'error',
        error: { type: 'invalid_request_error', message: `\`${field}\` is deprecated for this model.` },
      });
      expect(await messagesApi({ model: 'claude-sonnet-5-5', temperature: 1 })).toMatchObject({
        status: 200,
      });
    },
  );

  test('a Claude model taking temperature or top_p gets the temperature alone (capped at 1) and top_k', async () => {
    await ask('anthropic/claude-sonnet-4.5', sampled);
    expect(h.anthropic.log.at(-1)!.body).toMatchObject({ temperature: 0.7, top_k: 40 });
    expect(h.anthropic.log.at(-1)!.body).not.toHaveProperty('top_p');
    await ask('anthropic/claude-sonnet-4.5', { top_p: 0.9 });
    expect(h.anthropic.log.at(-1)!.body).toMatchObject({ top_p: 0.9 });
    const both = await messagesApi({ model: 'claude-sonnet-4-5', temperature: 0.7, top_p: 0.9 });
    expect(both.status).toBe(400);
    expect(both.body.error.message).toBe(
      '`temperature` and `top_p` cannot both be specified for this model. Please use only one.',
    );
  });

  test('Gemini 3.8 Flash takes temperature, top_p, top_k and seed; 3.5 Flash-Lite (which ignores the others) only seed', async () => {
    await ask('google/gemini-3.8-flash', sampled);
    expect(h.gemini.log.at(-1)!.body.generationConfig).toMatchObject({
      temperature: 0.7,
      topP: 0.9,
      topK: 40,
      seed: 7,
    });
    await ask('google/gemini-3.5-flash-lite', sampled);
    const config = h.gemini.log.at(-1)!.body.generationConfig;
    expect(config).toMatchObject({ seed: 7 });
    for (const field of ['temperature', 'topP', 'topK', 'frequencyPenalty'])
      expect(config).not.toHaveProperty(field);
  });

  test('the rule holds for streams too', async () => {
    const stream = await h.client.chat.completions.create({
      model: 'anthropic/claude-haiku-5.5',
      messages: [{ role: 'user', content: 'Hi' }],
      temperature: 0.2,
      stream: true,
    });
    for await (const _chunk of stream);
    expect(h.anthropic.log.at(-1)!.body).not.toHaveProperty('temperature');
  });
});
