// Makes this folder's test tokenizer and its reference encodings (README.md says how to run it):
// 1. learns a small byte-level BPE vocabulary (all 256 bytes, then merges of the most frequent
//    adjacent pair) on text pre-split with Kimi-K2's pattern, so that every multi-byte token is
//    two lower-ranked tokens merged, as in a real tiktoken vocabulary;
// 2. writes it as tiktoken.model (base64 token, rank) and a tokenizer_config.json with Kimi's
//    special tokens at the ids after the ranks (tokenization_kimi.py's layout: 256 reserved ids,
//    the unnamed ones <|reserved_token_ID|>);
// 3. encodes every case with the js-tiktoken package (its Tiktoken class: the same ranks,
//    special tokens and pattern) into cases.json.
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const repo = join(here, "../../..");
// js-tiktoken lives outside the repository: NODE_PATH-like lookup from KIMI_REF_DIR.
const require = createRequire(join(process.env.KIMI_REF_DIR ?? "/tmp/kimi-ref", "package.json"));
const { Tiktoken } = require("js-tiktoken/lite");
const refDir = process.env.KIMI_REF_DIR ?? "/tmp/kimi-ref";
const jsTiktokenVersion = JSON.parse(
    readFileSync(join(refDir, "node_modules/js-tiktoken/package.json"), "utf8")).version;

// Kimi-K2's pat_str (tokenization_kimi.py) written for JavaScript: the `v` flag gives real class
// intersection (`&&`); \p{Han} is the Script property (Rust regex's reading, not Script
// Extensions); \s and \S are the White_Space property as in Rust regex (JavaScript's own \s adds
// U+FEFF and drops U+0085); Node 20 has no (?i:...) groups, so the contractions spell out their
// case variants (Unicode simple case folding: s also matches U+017F LONG S).
const letterUpper = "[[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]&&[^\\p{sc=Han}]]";
const letterLower = "[[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]&&[^\\p{sc=Han}]]";
const contraction = "(?:'[sS\\u017F]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?";
const ws = "\\p{White_Space}";
const notWs = "\\P{White_Space}";
const kimiPattern = [
  "[\\p{sc=Han}]+",
  `[^\\r\\n\\p{L}\\p{N}]?${letterUpper}*${letterLower}+${contraction}`,
  `[^\\r\\n\\p{L}\\p{N}]?${letterUpper}+${letterLower}*${contraction}`,
  "\\p{N}{1,3}",
  ` ?[^${ws}\\p{L}\\p{N}]+[\\r\\n]*`,
  `${ws}*[\\r\\n]+`,
  `${ws}+(?!${notWs})`,
  `${ws}+`,
].join("|");
const splitter = new RegExp(kimiPattern, "vg");

// js-tiktoken compiles pat_str with the "u" flag, which has no class intersection: hand it the
// "v" regex above by compiling that one pattern with "vg".
const NativeRegExp = RegExp;
let patternCompilations = 0;
globalThis.RegExp = new Proxy(NativeRegExp, {
  construct(target, [source, flags]) {
    if (source !== kimiPattern) return new target(source, flags);
    ++patternCompilations;
    return new target(source, "vg");
  },
});

const encoder = new TextEncoder();
const bytesKey = (bytes) => Array.from(bytes).join(",");

function pieceCounts(corpus) {
  const counts = new Map();
  for (const match of corpus.matchAll(splitter)) {
    counts.set(match[0], (counts.get(match[0]) ?? 0) + 1);
  }
  return counts;
}

// Plain BPE training: the most frequent adjacent pair (ties: the smaller key) is merged
// everywhere; it becomes a new token unless those bytes are a token already.
function learnRanks(corpus, totalRanks) {
  const ranks = new Map();  // bytesKey -> rank
  const tokens = [];         // rank -> Uint8Array
  const add = (bytes) => {
    ranks.set(bytesKey(bytes), tokens.length);
    tokens.push(bytes);
  };
  for (let b = 0; b < 256; ++b) add(Uint8Array.of(b));
  const words = [...pieceCounts(corpus)].map(([piece, count]) => ({
    parts: Array.from(encoder.encode(piece), (b) => Uint8Array.of(b)),
    count,
  }));
  while (tokens.length < totalRanks) {
    const pairCounts = new Map();
    for (const word of words) {
      for (let i = 0; i + 1 < word.parts.length; ++i) {
        const key = bytesKey(word.parts[i]) + "|" + bytesKey(word.parts[i + 1]);
        pairCounts.set(key, (pairCounts.get(key) ?? 0) + word.count);
      }
    }
    let best = null;
    for (const [key, count] of pairCounts) {
      if (!best || count > best[1] || (count === best[1] && key < best[0])) best = [key, count];
    }
    if (!best) break;
    const [left, right] = best[0].split("|");
    for (const word of words) {
      for (let i = 0; i + 1 < word.parts.length; ++i) {
        if (bytesKey(word.parts[i]) === left && bytesKey(word.parts[i + 1]) === right) {
          const merged = new Uint8Array([...word.parts[i], ...word.parts[i + 1]]);
          word.parts.splice(i, 2, merged);
        }
      }
    }
    const merged = new Uint8Array([...left.split(","), ...right.split(",")].map(Number));
    if (!ranks.has(bytesKey(merged))) add(merged);
  }
  return tokens;
}

// The special tokens of Kimi-K2's tokenizer_config.json, by offset past the ranks.
const kimiSpecials = {
  0: "[BOS]", 1: "[EOS]", 2: "<|im_end|>", 3: "<|im_user|>", 4: "<|im_assistant|>",
  6: "<|start_header_id|>", 7: "<|end_header_id|>", 9: "[EOT]", 10: "<|im_system|>",
  11: "<|tool_calls_section_begin|>", 12: "<|tool_calls_section_end|>",
  13: "<|tool_call_begin|>", 14: "<|tool_call_argument_begin|>", 15: "<|tool_call_end|>",
  17: "<|im_middle|>", 18: "<|media_start|>", 19: "<|media_content|>", 20: "<|media_end|>",
  21: "<|media_pad|>", 22: "<think>", 23: "</think>", 254: "[UNK]", 255: "[PAD]",
};
const reservedCount = 256;

function specialTokens(rankCount) {
  const specials = {};
  for (let offset = 0; offset < reservedCount; ++offset) {
    const id = rankCount + offset;
    specials[kimiSpecials[offset] ?? `<|reserved_token_${id}|>`] = id;
  }
  return specials;
}

function tokenizerConfig(rankCount) {
  const decoder = {};
  for (const [offset, content] of Object.entries(kimiSpecials)) {
    decoder[String(rankCount + Number(offset))] = {
      content, lstrip: false, normalized: false, rstrip: false, single_word: false, special: true,
    };
  }
  return {
    added_tokens_decoder: decoder, bos_token: "[BOS]", eos_token: "[EOS]", pad_token: "[PAD]",
    unk_token: "[UNK]", model_max_length: 1048576, tokenizer_class: "TikTokenTokenizer",
  };
}

function readCorpus() {
  const files = ["README.md", "docs/ARCHITECTURE.md", "docs/DESIGN.md",
                 "tests/data/kimi-tokenizer/corpus.txt"];
  const deepseekCases = JSON.parse(readFileSync(join(repo, "tests/data/tokenizer/cases.json")));
  return files.map((f) => readFileSync(join(repo, f), "utf8")).join("\n") +
         deepseekCases.cases.map((c) => c.text).join("\n");
}

// The cases: DeepSeek-V3's tokenizer cases (tests/data/tokenizer) and the groups below, and
// some joined with special tokens.
function caseTexts() {
  const deepseek = JSON.parse(readFileSync(join(repo, "tests/data/tokenizer/cases.json")));
  const texts = deepseek.cases.map((c) => ({ id: `ds_${c.id}`, text: c.text }));
  const groups = {
    han: ["中文", "我们今天去北京", "大语言模型的推理服务", "漢字と仮名が混ざった文章です",
          "繁體中文與简体中文", "他说：“你好！”", "数字123和汉字", "中文English混合Text",
          "一二三四五六七八九十", "你好，世界。", "《红楼梦》第一回", "「引用」『二重』",
          "α中β文γ", "模型（MoE）的专家", "请用中文回答：为什么？", "𠀀𠀁𪚥 rare Han",
          "々〆〇 iteration marks", "ㄅㄆㄇ bopomofo", "한국어 문장입니다", "カタカナとひらがな"],
    emoji: ["😀", "👍🏽 thumbs", "👨‍👩‍👧‍👦 family", "🇯🇵🇨🇳 flags", "1️⃣ keycap", "❤️‍🔥",
            "I ❤️ Unicode 🎉🎉🎉", "😀😃😄😁", "emoji🙂inside", "🤖: beep", "⭐️⭐️",
            "🏳️‍🌈", "👩🏾‍💻 coder", "🐍 + 🦀 = ❓"],
    digits: ["0", "12", "123", "1234", "12345678901234567890", "3.14159", "1,234,567",
             "v1.2.3-rc4", "2026-12-06T10:20:30Z", "0x7fff_ffff", "１２３ fullwidth",
             "٣٤٥ arabic-indic", "१२३ devanagari", "⅓ ½ ¾", "10^9+7", "-42", "1e-10",
             "IPv4 192.168.0.1", "$1,000.00", "50%", "#123456", "a1b2c3d4"],
    code: ["def f(x):\n    return x * 2\n", "int main() { return 0; }",
           "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}",
           "const x = {a: 1, 'b': [2, 3]};", "SELECT * FROM users WHERE id = 42;",
           "#include <vector>\n#include <string>\n", "if (a && b || !c) { x->y = z; }",
           "std::vector<std::string> names{\"a\", \"b\"};", "print(f\"{name!r:>10}\")",
           "fn main() -> Result<(), Box<dyn Error>> { Ok(()) }", "<div class=\"x\">Hi</div>",
           "{\"key\": \"value\", \"n\": [1, 2, 3]}", "git commit -m 'fix: parse \\n'",
           "a = b ** 2 // 3 % 4", "λx.x", "x := y; // comment", "/* block */ /** doc */",
           "@decorator\nclass Foo(Bar):\n    pass", "$ echo $HOME && ls -la | grep .cpp",
           "  - item: value\n    other: 2\n"],
    whitespace: ["   ", "\t\t", "a  b   c    d", "  leading", "trailing   ", "\n\n\n",
                 "a\n\nb\n\n\nc", "\r\n\r\n", "line\r\nnext", " \n \n ", "\t \t\n",
                 "word \n", "x\u00a0y", "a\u3000b ideographic space", "end\n", "   \n\n   x",
                 "\u2003em\u2002en", "tab\tseparated\tvalues", "\n \n", "a \t\n b"],
    case_mix: ["HelloWorld", "XMLHttpRequest", "iPhone", "ALLCAPS", "camelCaseName",
               "snake_case_name", "SCREAMING_SNAKE", "McDonald's", "ÉCOLE école", "ǅungla",
               "ΑΒΓ αβγ", "Straße STRASSE", "İstanbul ıi", "OpenAI GPT-4o", "DeepSeekV3",
               "ÀÉÎÕÜ àéîõü", "ПРИВЕТ мир", "kimiK2Thinking"],
    contractions: ["it's", "IT'S", "don't", "DON'T", "we're", "They've", "I'm", "you'll",
                   "she'd", "It'S mixed", "o'clock", "rock'n'roll", "'s alone", "ab'cd",
                   "it\u2019s curly", "it'\u017f long s", "We'RE", "'ll'"],
    cjk_punctuation: ["、。", "，；：？！", "“引号”", "‘单引号’", "【标题】", "〔注〕",
                      "……", "——", "～", "・中黒", "《》〈〉", "（括号）", "中文。English.",
                      "句号。\n换行", "！！！", "「」『』"],
    newlines: ["a\nb", "a\n\nb", "\n", "\n\n", "\r", "\r\r\n", "x\n\n\n\ny", "  \n",
               ".\n\n", "!!\n", "end.\r\n", "text\n  indented\n    more",
               "\n\n\n\n\n\n\n\n", "a \n\n b"],
    other: ["", "a", "Ω", "naïve café", "e\u0301 combining", "\u0301 lone mark",
            "ﬁ ligature", "Ⅻ roman", "ｈｅｌｌｏ fullwidth", "مرحبا بالعالم", "שלום",
            "नमस्ते", "สวัสดี", "ሰላም", "🀄 mahjong", "\u200b zero width", "a\u200db",
            "control\u0001char", "nul\u0000byte", "tab\u000bvt"],
  };
  for (const [group, list] of Object.entries(groups)) {
    list.forEach((text, i) => texts.push({ id: `${group}_${i}`, text }));
  }
  const specials = ["<|im_user|>user<|im_middle|>", "<|im_end|>", "<think>", "</think>",
                    "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0" +
                        "<|tool_call_argument_begin|>{}<|tool_call_end|>" +
                        "<|tool_calls_section_end|>",
                    "[BOS]", "<|reserved_token_3100|>", "<|im_end"];
  specials.forEach((special, i) => {
    const text = groups.han[i] + special + groups.case_mix[i] + " " + groups.digits[i];
    texts.push({ id: `special_${i}`, text });
  });
  return texts;
}

const tokens = learnRanks(readCorpus(), Number(process.env.KIMI_RANKS ?? 3000));
const base64 = (bytes) => Buffer.from(bytes).toString("base64");
writeFileSync(join(here, "tiktoken.model"),
              tokens.map((bytes, rank) => `${base64(bytes)} ${rank}\n`).join(""));
writeFileSync(join(here, "tokenizer_config.json"),
              JSON.stringify(tokenizerConfig(tokens.length), null, 2) + "\n");

const tiktoken = new Tiktoken({
  pat_str: kimiPattern,
  special_tokens: specialTokens(tokens.length),
  bpe_ranks: "! 0 " + tokens.map(base64).join(" "),
});
const texts = caseTexts();
const cases = texts.map(({ id, text }) => {
  const ids = tiktoken.encode(text, "all");
  if (tiktoken.decode(ids) !== text) throw new Error(`case ${id} does not decode back`);
  return { id, text, ids };
});
if (patternCompilations === 0) throw new Error("js-tiktoken did not compile the pattern with v");
writeFileSync(join(here, "cases.json"), JSON.stringify({
  meta: {
    tokenizer: "tiktoken.model + tokenizer_config.json in this folder",
    encoded_by: `js-tiktoken ${jsTiktokenVersion} (Tiktoken, allowedSpecial "all") with Kimi-K2's ` +
                "pattern as make_reference.mjs spells it for JavaScript",
    pattern_js: kimiPattern,
  },
  cases,
}, null, 1) + "\n");
console.log(`${tokens.length} ranks, ${cases.length} cases`);
