// The client side of test_openai_client.py: OpenAI's official Node client
// (the npm package openai) asking pdlab serve for a chat completion, whole and
// streamed, greedy.
//   node openai_client.mjs MODULES_DIR PORT MESSAGES_JSON MAX_TOKENS
// prints one JSON object: {whole: {...}, streamed: {...}}, each with the
// answer's role, content, finish_reason and usage.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const [modules, port, messagesFile, maxTokens] = process.argv.slice(2);
const require = createRequire(path.join(modules, "noop.js"));
const OpenAI = require("openai");
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "none", maxRetries: 0 });
const request = {
  model: "pdlab",
  messages: JSON.parse(fs.readFileSync(messagesFile, "utf8")),
  max_tokens: Number(maxTokens),
  temperature: 0,
};

const whole = await client.chat.completions.create(request);
const choice = whole.choices[0];

const streamed = { role: null, content: "", finish_reason: null, usage: null, chunks: 0 };
const stream = await client.chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
for await (const chunk of stream) {
  streamed.chunks += 1;
  if (chunk.usage) streamed.usage = chunk.usage;
  for (const c of chunk.choices) {
    if (c.delta?.role && streamed.role === null) streamed.role = c.delta.role;
    if (c.delta?.content) streamed.content += c.delta.content;
    if (c.finish_reason) streamed.finish_reason = c.finish_reason;
  }
}
process.stdout.write(JSON.stringify({
  whole: { object: whole.object, role: choice.message.role, content: choice.message.content,
           finish_reason: choice.finish_reason, usage: whole.usage },
  streamed,
}));
