/* cli_tokenize.c — `dflash-bench tokenize`: text on stdin -> comma-separated token ids on
 * stdout, or with --decode ids on stdin -> text. The text is taken byte for byte (a trailing
 * newline is part of it: use printf '%s', not echo, for an exact prompt). */
#include "text/chat_template.h"
#include "bench/prompt_set.h"
#include "cli/cli.h"
#include "cli/cli_args.h"
#include "engine/session.h"
#include "text/tokenizer.h"
#include "base/util.h"
#include "model/gguf_model.h"

#include <cjson/cJSON.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int db_cmd_tokenize(int argc, char **argv, char *err, size_t errlen)
{
    const char *path = NULL, *tmpl_name = "none";
    int decode = 0, no_special = 0, thinking = 0, help = 0;
    const db_opt opts[] = {
        {"tokenizer", 0, "FILE", "tokenizer.json, a model directory holding one, or a GGUF model", NULL, DB_OPT_STR, &path},
        {"decode", 0, NULL, "read ids (commas or whitespace), write the text", NULL, DB_OPT_FLAG, &decode},
        {"no-special", 0, NULL, "special tokens in the text stay plain text", NULL, DB_OPT_FLAG, &no_special},
        {"chat-template", 0, "NAME", "wrap the text as one user turn (default none): " DB_CHAT_TEMPLATE_NAMES, NULL, DB_OPT_STR, &tmpl_name},
        {"thinking", 0, NULL, "chatml: leave thinking on (no empty <think> block)", NULL, DB_OPT_FLAG, &thinking},
    };
    const db_cmd_opts cmd = {"tokenize",
                             "Encode stdin to token ids (comma separated), or decode ids to text.",
                             opts, (int)(sizeof opts / sizeof *opts), NULL};
    int rc = db_opts_parse(&cmd, argc, argv, &help, err, errlen);
    if (rc || help) return rc;
    if (!path) return db_fail(err, errlen, DB_EINPUT, "--tokenizer FILE is required");
    db_chat_template tmpl;
    if ((rc = db_chat_template_parse(tmpl_name, &tmpl, err, errlen))) return rc;
    db_tokenizer tok;
    if ((rc = db_prompt_tokenizer_load(&tok, path, err, errlen))) return rc;
    char *in = NULL, *text = NULL;
    size_t len = 0;
    int *ids = NULL, n = 0;
    rc = db_read_stream(stdin, "stdin", DB_MAX_TEXT_BYTES, &in, &len, err, errlen);
    if (!rc && decode) {
        rc = db_parse_ids(in, &ids, &n, err, errlen);
        size_t tl = 0;
        if (!rc) rc = db_tokenizer_decode(&tok, ids, n, 0, &text, &tl, err, errlen);
        if (!rc) fwrite(text, 1, tl, stdout);
    } else if (!rc) {
        if (tmpl == DB_CHAT_AUTO) tmpl = db_chat_template_detect(&tok, NULL);
        if (tmpl != DB_CHAT_NONE) {
            db_chat_msg m = {"user", in};
            if (strlen(in) != len) rc = db_fail(err, errlen, DB_EINPUT, "tokenize: NUL byte in a templated prompt");
            if (!rc) rc = db_chat_render(tmpl, &m, 1, 1, thinking, &text, &len, err, errlen);
        }
        if (!rc) rc = db_tokenizer_encode(&tok, text ? text : in, len, !no_special, &ids, &n, err, errlen);
        for (int i = 0; !rc && i < n; i++) printf("%s%d", i ? "," : "", ids[i]);
        if (!rc) printf("\n");
    }
    free(in);
    free(text);
    free(ids);
    db_tokenizer_free(&tok);
    return rc;
}

