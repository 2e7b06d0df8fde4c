/* chat_template.h — render a conversation as the prompt text a chat model was trained on.
 *
 *   none    the user turns as they are (multi-turn: turns and answers joined by blank lines)
 *   chatml  Qwen: "<|im_start|>role\n" text "<|im_end|>\n" per message; the generation prompt is
 *           "<|im_start|>assistant\n", and with thinking off (the Qwen3 switch,
 *           enable_thinking=False) an empty "<think>\n\n</think>\n\n" follows it. Earlier
 *           assistant answers lose any "...</think>" reasoning, as Qwen3's own template does.
 *   llama3  "<|begin_of_text|>" then "<|start_header_id|>role<|end_header_id|>\n\n" text
 *           "<|eot_id|>" per message (text trimmed, as the LLaMA-3 template does); the generation
 *           prompt is "<|start_header_id|>assistant<|end_header_id|>\n\n".
 * No default system message is added. The rendered text contains the special tokens as text;
 * encode it with allow_special set (prompt.h does). */
#ifndef DB_CHAT_TEMPLATE_H
#define DB_CHAT_TEMPLATE_H

#include <stddef.h>

#include "base/parse.h"
#include "text/tokenizer.h"

typedef enum { DB_CHAT_AUTO = -1, DB_CHAT_NONE = 0, DB_CHAT_CHATML = 1, DB_CHAT_LLAMA3 = 2 } db_chat_template;

typedef struct {
    const char *role; /* "system", "user", "assistant" */
    const char *text;
} db_chat_msg;

/* The names, in the enum's order (auto = -1 first): the one list db_chat_template_parse takes
 * and every command's help and messages give (DB_CHAT_TEMPLATE_NAMES: "auto, none, chatml,
 * llama3"; parse.h) */
#define DB_CHAT_TEMPLATES(X, SEP) X("auto") SEP() X("none") SEP() X("chatml") SEP() X("llama3")
#define DB_CHAT_TEMPLATE_NAMES DB_NAMES_TEXT(DB_CHAT_TEMPLATES)

/* one of DB_CHAT_TEMPLATES; DB_EINPUT naming the list for anything else */
int db_chat_template_parse(const char *name, db_chat_template *t, char *err, size_t errlen);
const char *db_chat_template_name(db_chat_template t);

/* The template a model uses, from its tokenizer's special tokens (<|im_start|> -> chatml,
 * <|start_header_id|> -> llama3) and, failing that, the target's config.json model_type
 * ("qwen2", "qwen3", ... -> chatml; "llama" -> llama3; may be NULL); else none. */
db_chat_template db_chat_template_detect(const db_tokenizer *tok, const char *model_type);

/* Render msgs[0..n) (+ the generation prompt when add_generation_prompt) into a malloc'd,
 * NUL-terminated *out of *len bytes. thinking: 1 = on (no empty block), 0 = off. A template of
 * DB_CHAT_AUTO is DB_EINPUT (detect first). */
int db_chat_render(db_chat_template t, const db_chat_msg *msgs, int n, int add_generation_prompt,
                   int thinking, char **out, size_t *len, char *err, size_t errlen);

#endif
