import type OpenAI from 'openai';
import { describe, expect, test } from 'vitest';
import { PDF } from '../support/documents.js';
import { failure, useHarness } from './gateway-harness.js';

/**
 * Files (`file` parts with `file_data`, as the Vercel AI SDK and LangChain send PDFs) and audio
 * (`input_audio`) through the gateway with the official client, to each provider family.
 */
const h = useHarness();

const TEXT = Buffer.from('Minutes of the meeting: nothing decided.').toString('base64');
/** One second of silence: 16 kHz, 16-bit, mono (its header aside). */
const WAV = Buffer.alloc(32_000).toString('base64');

const pdfPart = {
  type: 'file' as const,
  file: { file_data: `data:application/pdf;base64,${PDF}`, filename: 'report.pdf' },
};
const ask = (model: string, ...parts: OpenAI.Chat.ChatCompletionContentPart[]) =>
  h.client.chat.completions.create({
    model,
    messages: [{ role: 'user', content: [{ type: 'text', text: 'Summarize.' }, ...parts] }],
  });

describe('Claude', () => {
  test('a PDF is a base64 document block titled by its filename, billed by its pages', async () => {
    const answer = await ask('anthropic/claude-sonnet-4.5', pdfPart);
    expect(h.anthropic.log.at(-1)!.body.messages[0].content).toEqual([
      { type: 'text', text: 'Summarize.' },
      {
        type: 'document',
        source: { type: 'base64', media_type: 'application/pdf', data: PDF },
        title: 'report.pdf',
      },
    ]);
    // The simulator bills 3,100 tokens a page, as Anthropic about does (text and an image per page).
    expect(answer.usage?.prompt_tokens).toBe(1 + 2 * 3_100);
  });

  test('a text file is a text document, its text decoded', async () => {
    await ask('anthropic/claude-sonnet-4.5', {
      type: 'file',
      file: { file_data: `data:text/plain;base64,${TEXT}` },
    });
    expect(h.anthropic.log.at(-1)!.body.messages[0].content[1]).toEqual({
      type: 'document',
      source: { type: 'text', media_type: 'text/plain', data: 'Minutes of the meeting: nothing decided.' },
    });
  });

  test.each<[string, OpenAI.Chat.ChatCompletionContentPart, string, string]>([
    [
      'audio',
      { type: 'input_audio', input_audio: { data: WAV, format: 'wav' } },
      'messages[0].content[1]',
      'Anthropic models take no audio',
    ],
    [
      'a file of a type Claude does not read',
      { type: 'file', file: { file_data: `data:application/zip;base64,${TEXT}` } },
      'messages[0].content[1].file.file_data',
      'application/pdf or text/plain',
    ],
  ])('%s is a 400 naming the part, nothing sent', async (_name, part, field, says) => {
    const error = await failure(ask('anthropic/claude-sonnet-4.5', part));
    expect(error.status).toBe(400);
    expect(JSON.stringify(error.error)).toContain(field);
    expect(error.message).toContain(says);
    expect(h.anthropic.log).toHaveLength(0);
  });
});

describe('Gemini', () => {
  test('a PDF and WAV audio go as inlineData of their types, billed as Gemini bills them', async () => {
    const answer = await ask('google/gemini-2.5-flash', pdfPart, {
      type: 'input_audio',
      input_audio: { data: WAV, format: 'wav' },
    });
    expect(h.gemini.log.at(-1)!.body.contents[0].parts).toEqual([
      { text: 'Summarize.' },
      { inlineData: { mimeType: 'application/pdf', data: PDF } },
      { inlineData: { mimeType: 'audio/wav', data: WAV } },
    ]);
    // 258 tokens a page, 32 a second of audio.
    expect(answer.usage?.prompt_tokens).toBe(1 + 2 * 258 + 32);
  });

  test('MP3 audio is audio/mp3', async () => {
    await ask('google/gemini-2.5-flash', { type: 'input_audio', input_audio: { data: WAV, format: 'mp3' } });
    expect(h.gemini.log.at(-1)!.body.contents[0].parts[1]).toEqual({
      inlineData: { mimeType: 'audio/mp3', data: WAV },
    });
  });
});

describe('every family', () => {
  test('an OpenAI-compatible upstream gets file and audio parts as given', async () => {
    await ask('local/llama-3.1-8b', pdfPart, {
      type: 'input_audio',
      input_audio: { data: WAV, format: 'mp3' },
    });
    expect(h.local.log.at(-1)!.body.messages[0].content.slice(1)).toEqual([
      pdfPart,
      { type: 'input_audio', input_audio: { data: WAV, format: 'mp3' } },
    ]);
  });

  test.each(['anthropic/claude-sonnet-4.5', 'google/gemini-2.5-flash', 'local/llama-3.1-8b'])(
    'a file_id (of the Files API) cannot be served: a 400 naming it, for %s',
    async (model) => {
      const error = await failure(ask(model, { type: 'file', file: { file_id: 'file-abc123' } }));
      expect(error.status).toBe(400);
      expect(JSON.stringify(error.error)).toContain('messages[0].content[1].file.file_id');
      expect(h.anthropic.log.length + h.gemini.log.length + h.local.log.length).toBe(0);
    },
  );
});
