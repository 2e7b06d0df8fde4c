/* fuzz_chat_template.c — chat-template rendering and prompt building. The input is messages
 * split at FUZZ_SEP (at most 8); each message's first byte picks its role (system, user,
 * assistant); the first byte of the whole input picks add_generation_prompt and thinking.
 * Every template renders the conversation; then the user messages as the turns of a sample
 * (the assistant messages as the answers between them) go through db_prompt_render with the
 * embedded model's tokenizer and each template, encoding the rendered text. */
#include "fuzz.h"
#include "text/chat_template.h"
#include "text/prompt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef FUZZ_TOKENIZER
#define FUZZ_TOKENIZER "models/tiny-qwen3/tokenizer.json"
#endif

static db_tokenizer tok;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int loaded;
    char err[512];
    if (!loaded) {
        const char *p = getenv("DB_FUZZ_TOKENIZER");
        if (db_tokenizer_load(&tok, p && *p ? p : FUZZ_TOKENIZER, err, sizeof err) != 0) {
            fprintf(stderr, "fuzz_chat_template: %s\n", err);
            abort();
        }
        loaded = 1;
    }
    if (size < 1) return 0;
    int gen = data[0] & 1, thinking = (data[0] >> 1) & 1;
    fuzz_part part[8];
    int n = fuzz_split(data + 1, size - 1, part, 8);
    static const char *const roles[3] = {"system", "user", "assistant"};
    db_chat_msg msg[8];
    char *text[8], *turns[8];
    const char *answers[8];
    int nturns = 0, nanswers = 0;
    for (int k = 0; k < n; k++) {
        int r = part[k].n ? part[k].p[0] % 3 : 1;
        text[k] = fuzz_str(part[k].n ? part[k].p + 1 : part[k].p, part[k].n ? part[k].n - 1 : 0);
        msg[k] = (db_chat_msg){roles[r], text[k]};
        if (r == 1) turns[nturns++] = text[k];
        else if (r == 2 && nanswers < nturns) answers[nanswers++] = text[k];
    }
    static const db_chat_template tmpl[3] = {DB_CHAT_NONE, DB_CHAT_CHATML, DB_CHAT_LLAMA3};
    for (int t = 0; t < 3; t++) {
        char *out = NULL;
        size_t len = 0;
        if (db_chat_render(tmpl[t], msg, n, gen, thinking, &out, &len, err, sizeof err) == 0) {
            if (strlen(out) > len) __builtin_trap();
            free(out);
        }
    }
    if (nturns > 0) {
        db_sample s = {.turns = turns, .n_turns = nturns, .line = 1};
        int turn = nanswers < nturns ? nanswers : nturns - 1;
        for (int t = 0; t < 3; t++) {
            int *ids = NULL, nid = 0;
            if (db_prompt_render(&tok, tmpl[t], thinking, &s, turn, answers, &ids, &nid, err, sizeof err) == 0 &&
                nid < 0)
                __builtin_trap();
            free(ids);
        }
    }
    for (int k = 0; k < n; k++) free(text[k]);
    return 0;
}
