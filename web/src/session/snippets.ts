/** Ready-to-run calls of the gateway with the `openai` clients, for the token just issued. */
export function clientSnippets(baseUrl: string, token: string, model: string) {
  return [
    {
      language: 'TypeScript',
      code: `import OpenAI from 'openai';

const client = new OpenAI({
  baseURL: '${baseUrl}',
  apiKey: '${token}',
});

const completion = await client.chat.completions.create({
  model: '${model}',
  messages: [{ role: 'user', content: 'Hello!' }],
});
console.log(completion.choices[0].message.content);`,
    },
    {
      language: 'Python',
      code: `from openai import OpenAI

client = OpenAI(
    base_url="${baseUrl}",
    api_key="${token}",
)

completion = client.chat.completions.create(
    model="${model}",
    messages=[{"role": "user", "content": "Hello!"}],
)
print(completion.choices[0].message.content)`,
    },
    {
      language: 'curl',
      code: `curl ${baseUrl}/chat/completions \\
  -H "Authorization: Bearer ${token}" \\
  -H "Content-Type: application/json" \\
  -d '{"model": "${model}", "messages": [{"role": "user", "content": "Hello!"}]}'`,
    },
  ];
}
