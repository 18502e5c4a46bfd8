// The reference side of test_real_tokenizers.py: transformers.js's tokenizers
// (@huggingface/tokenizers, the tokenizer code of transformers.js v4) on a
// tokenizer.json and tokenizer_config.json.
//   node reference.mjs MODULES_DIR TOKENIZER_FOLDER TEXTS_JSON
// prints a JSON array, one {ids, decoded} per text: the ids without special
// tokens added, and their decode without clean-up (the exact text).
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const [modules, folder, textsFile] = process.argv.slice(2);
const require = createRequire(path.join(modules, "noop.js"));
const mod = await import(require.resolve("@huggingface/tokenizers"));  // its CommonJS build
const Tokenizer = mod.Tokenizer ?? mod.default.Tokenizer;
const read = (name) => JSON.parse(fs.readFileSync(path.join(folder, name), "utf8"));
const tokenizer = new Tokenizer(read("tokenizer.json"), read("tokenizer_config.json"));
const out = JSON.parse(fs.readFileSync(textsFile, "utf8")).map((text) => {
  const ids = tokenizer.encode(text, { add_special_tokens: false }).ids;
  return { ids, decoded: tokenizer.decode(ids, { clean_up_tokenization_spaces: false }) };
});
process.stdout.write(JSON.stringify(out));
