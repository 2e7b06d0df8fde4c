/* chat_template.c — the none / chatml / llama3 chat templates (see chat_template.h). The
 * strings are the ones the models' Jinja templates produce, written out by hand. */
#include "text/chat_template.h"
#include "base/util.h"

#include <stdlib.h>
#include <string.h>

/* names[t + 1] names template t */
static const char *const names[] = DB_NAMES_ARRAY(DB_CHAT_TEMPLATES);
_Static_assert(sizeof names / sizeof *names == DB_CHAT_LLAMA3 + 2, "DB_CHAT_TEMPLATES: one name per template");

int db_chat_template_parse(const char *name, db_chat_template *t, char *err, size_t errlen)
{
    int i = db_name_index(name, names, (int)(sizeof names / sizeof *names));
    if (i < 0)
        return db_fail(err, errlen, DB_EINPUT, "unknown chat template '%s' (" DB_CHAT_TEMPLATE_NAMES ")", name);
    *t = (db_chat_template)(i - 1);
    return DB_OK;
}

const char *db_chat_template_name(db_chat_template t)
{
    return t >= DB_CHAT_AUTO && t <= DB_CHAT_LLAMA3 ? names[t + 1] : "?";
}

db_chat_template db_chat_template_detect(const db_tokenizer *tok, const char *model_type)
{
    if (tok && tok->s) {
        if (db_tokenizer_token_id(tok, "<|im_start|>") >= 0 && db_tokenizer_token_id(tok, "<|im_end|>") >= 0)
            return DB_CHAT_CHATML;
        if (db_tokenizer_token_id(tok, "<|start_header_id|>") >= 0 && db_tokenizer_token_id(tok, "<|eot_id|>") >= 0)
            return DB_CHAT_LLAMA3;
    }
    if (model_type) {
        if (strncmp(model_type, "qwen", 4) == 0) return DB_CHAT_CHATML;
        if (strcmp(model_type, "llama") == 0) return DB_CHAT_LLAMA3;
    }
    return DB_CHAT_NONE;
}

typedef struct {
    char *s;
    size_t n, cap;
    int oom;
} sbuf;

static void put(sbuf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 256;
        while (c < b->n + n + 1) c *= 2;
        char *ns = db_realloc(b->s, c);
        if (!ns) {
            b->oom = 1;
            return;
        }
        b->s = ns;
        b->cap = c;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

static void puts_(sbuf *b, const char *s) { put(b, s, strlen(s)); }

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/* Qwen3 keeps only what follows the last "</think>" of an earlier answer, minus leading newlines */
static const char *strip_reasoning(const char *text)
{
    const char *p = text, *q;
    while ((q = strstr(p, "</think>"))) p = q + 8;
    if (p != text)
        while (*p == '\n') p++;
    return p;
}

int db_chat_render(db_chat_template t, const db_chat_msg *msgs, int n, int add_generation_prompt,
                   int thinking, char **out, size_t *len, char *err, size_t errlen)
{
    *out = NULL;
    if (len) *len = 0;
    if (t == DB_CHAT_AUTO) return db_fail(err, errlen, DB_EINPUT, "chat template 'auto' must be resolved first");
    sbuf b = {0};
    put(&b, "", 0); /* an empty conversation still yields "" */
    if (t == DB_CHAT_LLAMA3) puts_(&b, "<|begin_of_text|>");
    for (int i = 0; i < n; i++) {
        const char *role = msgs[i].role ? msgs[i].role : "user", *text = msgs[i].text ? msgs[i].text : "";
        if (t == DB_CHAT_NONE) {
            if (i) puts_(&b, "\n\n");
            puts_(&b, text);
        } else if (t == DB_CHAT_CHATML) {
            if (strcmp(role, "assistant") == 0) text = strip_reasoning(text);
            puts_(&b, "<|im_start|>");
            puts_(&b, role);
            puts_(&b, "\n");
            puts_(&b, text);
            puts_(&b, "<|im_end|>\n");
        } else {
            size_t k = strlen(text);
            while (k && is_ws(text[k - 1])) k--;
            while (k && is_ws(*text)) text++, k--;
            puts_(&b, "<|start_header_id|>");
            puts_(&b, role);
            puts_(&b, "<|end_header_id|>\n\n");
            put(&b, text, k);
            puts_(&b, "<|eot_id|>");
        }
    }
    if (add_generation_prompt) {
        if (t == DB_CHAT_CHATML) {
            puts_(&b, "<|im_start|>assistant\n");
            if (!thinking) puts_(&b, "<think>\n\n</think>\n\n");
        } else if (t == DB_CHAT_LLAMA3)
            puts_(&b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    }
    if (b.oom) {
        free(b.s);
        return db_fail(err, errlen, DB_ERUNTIME, "out of memory rendering the chat template");
    }
    *out = b.s;
    if (len) *len = b.n;
    return DB_OK;
}
