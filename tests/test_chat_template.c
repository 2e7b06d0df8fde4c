/* test_chat_template.c — the chat templates render the exact strings the models' own Jinja
 * templates give (Qwen3 chatml with the thinking switch, LLaMA-3, none), auto-detection, and
 * db_prompt_render = render + encode for a multi-turn sample. */
#include "text/chat_template.h"
#include "text/prompt.h"
#include "tap.h"
#include "test_util.h"
#include "base/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void expect(db_chat_template t, const db_chat_msg *m, int n, int gen, int thinking, const char *want,
                   const char *what)
{
    char *out = NULL, err[256];
    size_t len = 0;
    int rc = db_chat_render(t, m, n, gen, thinking, &out, &len, err, sizeof err);
    int ok = rc == 0 && strcmp(out, want) == 0 && len == strlen(want);
    tap_ok(ok, "%s", what);
    if (!ok) tap_diag("got: %s", rc ? err : out);
    free(out);
}

int main(void)
{
    db_json_init(); /* cJSON allocates through the fault-injecting wrappers */
    const db_chat_msg one[] = {{"user", "Hi"}};
    expect(DB_CHAT_CHATML, one, 1, 1, 0,
           "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
           "chatml, thinking off: empty think block after the generation prompt");
    expect(DB_CHAT_CHATML, one, 1, 1, 1, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
           "chatml, thinking on");
    expect(DB_CHAT_CHATML, one, 1, 0, 0, "<|im_start|>user\nHi<|im_end|>\n", "chatml without generation prompt");
    const db_chat_msg multi[] = {{"system", "Be brief."},
                                 {"user", "Q1"},
                                 {"assistant", "<think>\nworking\n</think>\n\nA1"},
                                 {"user", "Q2"}};
    expect(DB_CHAT_CHATML, multi, 4, 1, 0,
           "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n"
           "<|im_start|>user\nQ2<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
           "chatml multi-turn: earlier reasoning dropped, as Qwen3 does");
    expect(DB_CHAT_LLAMA3, one, 1, 1, 0,
           "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
           "<|start_header_id|>assistant<|end_header_id|>\n\n",
           "llama3");
    const db_chat_msg l3[] = {{"user", "  Q1\n"}, {"assistant", "A1"}, {"user", "Q2"}};
    expect(DB_CHAT_LLAMA3, l3, 3, 1, 1,
           "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nQ1<|eot_id|>"
           "<|start_header_id|>assistant<|end_header_id|>\n\nA1<|eot_id|>"
           "<|start_header_id|>user<|end_header_id|>\n\nQ2<|eot_id|>"
           "<|start_header_id|>assistant<|end_header_id|>\n\n",
           "llama3 multi-turn, content trimmed");
    expect(DB_CHAT_NONE, one, 1, 1, 0, "Hi", "none: the text as is");
    expect(DB_CHAT_NONE, l3, 3, 1, 0, "  Q1\n\n\nA1\n\nQ2", "none multi-turn: joined by blank lines");

    db_chat_template t;
    char err[256];
    /* one list: every name it gives parses back to its template, nothing else parses */
    static const char *const names[] = DB_NAMES_ARRAY(DB_CHAT_TEMPLATES);
    static const db_chat_template want[] = {DB_CHAT_AUTO, DB_CHAT_NONE, DB_CHAT_CHATML, DB_CHAT_LLAMA3};
    int round_trip = sizeof names / sizeof *names == sizeof want / sizeof *want;
    for (size_t i = 0; round_trip && i < sizeof want / sizeof *want; i++)
        round_trip = db_chat_template_parse(names[i], &t, err, sizeof err) == 0 && t == want[i] &&
                     strcmp(db_chat_template_name(want[i]), names[i]) == 0;
    tap_ok(round_trip && strcmp(DB_CHAT_TEMPLATE_NAMES, "auto, none, chatml, llama3") == 0,
           "the names " DB_CHAT_TEMPLATE_NAMES " parse to their templates and back");
    tap_ok(db_chat_template_parse("qwen", &t, err, sizeof err) == DB_EINPUT && strstr(err, DB_CHAT_TEMPLATE_NAMES),
           "a name off the list ('qwen') is refused naming the list: %s", err);
    tap_ok(db_chat_template_parse("jinja", &t, err, sizeof err) == DB_EINPUT && strstr(err, "unknown chat template"),
           "unknown template name: %s", err);

    db_tokenizer q, l;
    int have_q = db_tokenizer_load(&q, tu_data("tokenizer/tokenizer.json"), err, sizeof err) == 0;
    int have_l = db_tokenizer_load(&l, tu_data("tokenizer/tokenizer-llama3.json"), err, sizeof err) == 0;
    tap_ok(have_q && have_l, "fixture tokenizers load");
    if (have_q && have_l) {
        tap_ok(db_chat_template_detect(&q, NULL) == DB_CHAT_CHATML, "detect: <|im_start|> -> chatml");
        tap_ok(db_chat_template_detect(&l, "qwen3") == DB_CHAT_LLAMA3, "detect: tokens win over model_type");
        tap_ok(db_chat_template_detect(NULL, "qwen3") == DB_CHAT_CHATML && db_chat_template_detect(NULL, "llama") == DB_CHAT_LLAMA3 &&
                   db_chat_template_detect(NULL, NULL) == DB_CHAT_NONE,
               "detect from model_type");

        /* prompt = render + encode, multi-turn */
        char *turns[] = {"What is 2+2?", "And 3+3?"};
        db_sample s = {turns, 2, 1};
        const char *answers[] = {"4"};
        int *ids = NULL, n = 0, *want = NULL, nw = 0;
        const char *text = "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n"
                           "<|im_start|>user\nAnd 3+3?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";
        int rc = db_prompt_render(&q, DB_CHAT_AUTO, 0, &s, 1, answers, &ids, &n, err, sizeof err);
        db_tokenizer_encode(&q, text, strlen(text), 1, &want, &nw, err, sizeof err);
        int im_start = db_tokenizer_token_id(&q, "<|im_start|>");
        tap_ok(rc == 0 && n == nw && n > 0 && memcmp(ids, want, sizeof(int) * (size_t)n) == 0 && ids[0] == im_start,
               "prompt_render: turn 2 after the answer to turn 1 (%d ids)", n);
        free(ids);
        free(want);
        rc = db_prompt_render(&q, DB_CHAT_CHATML, 0, &s, 1, NULL, &ids, &n, err, sizeof err);
        tap_ok(rc == DB_EINPUT, "turn 2 without the earlier answers is bad input");
        rc = db_prompt_render(&q, DB_CHAT_CHATML, 0, &s, 2, answers, &ids, &n, err, sizeof err);
        tap_ok(rc == DB_EINPUT, "a turn past the sample is bad input");
        char *bad[] = {"caf\xC3"};
        db_sample sb = {bad, 1, 1};
        rc = db_prompt_render(&q, DB_CHAT_CHATML, 0, &sb, 0, NULL, &ids, &n, err, sizeof err);
        tap_ok(rc == DB_EINPUT && strstr(err, "invalid UTF-8"), "invalid UTF-8 in a prompt: %s", err);
        db_tokenizer_free(&q);
        db_tokenizer_free(&l);
    }
    return tap_done();
}
