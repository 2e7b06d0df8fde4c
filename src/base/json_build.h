/* json_build.h — building a cJSON document with every result checked, in a function (or file)
 * with `int *oom` in scope: J(x) passes x through and sets *oom when it is NULL; JADD(parent,
 * key, item) attaches item (key NULL: to the array parent) or frees it and sets *oom
 * (base/util.h db_json_ok / db_json_add). The builder looks at *oom once, at the end. */
#ifndef DB_JSON_BUILD_H
#define DB_JSON_BUILD_H

#include "base/util.h"

#define J(x) db_json_ok(oom, (x))
#define JADD(parent, key, item) db_json_add(oom, (parent), (key), (item))

#endif
