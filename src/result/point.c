/* point.c — the one function of a point's samples that is not a report of them. */
#include "result/point.h"

#include <stdlib.h>

void db_point_raw_free(db_point_raw *p)
{
    free(p->wall_s);
    free(p->rep_start_s);
    free(p->reqs);
    p->rep_start_s = NULL;
    p->wall_s = NULL;
    p->reqs = NULL;
}
