/* fuzz_csv.c — the CSV record reader under every table of a results directory: fields are
 * NUL-terminated copies, a record without its newline is marked incomplete. */
#include "fuzz.h"
#include "base/csv_io.h"

#include <string.h>

static volatile size_t sink; /* the field bytes are read into it */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512];
    db_csv_doc doc;
    if (db_csv_parse((const char *)data, size, &doc, err, sizeof err) == 0) {
        for (int i = 0; i < doc.n; i++)
            for (int j = 0; j < doc.rec[i].n; j++) sink += strlen(doc.rec[i].field[j]);
        /* only the last record can lack its newline */
        for (int i = 0; i + 1 < doc.n; i++)
            if (!doc.rec[i].complete) __builtin_trap();
        db_csv_col(&doc, "point_id");
        db_csv_doc_free(&doc);
    }
    return 0;
}
