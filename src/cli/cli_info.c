/* cli_info.c — `dflash-bench info`: compiled backends, usable devices, CPU topology, as a
 * markdown list (default) or JSON (-o json). A GPU backend is compiled when its module was built
 * (--version lists it without loading it); usable when the module loads and finds a device. */
#include "config.h"
#include "base/json_build.h"
#include "backend.h"
#include "cli/cli.h"
#include "cli/cli_args.h"
#include "base/util.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* every cJSON result checked (util.h): out of memory is an error, not a listing without fields */

int db_cmd_info(int argc, char **argv, char *err, size_t errlen)
{
    const char *fmt = "md";
    int help = 0;
    const db_opt opts[] = {
        {"output", 'o', "FMT", "md (default) or json", NULL, DB_OPT_STR, &fmt},
    };
    const db_cmd_opts cmd = {"info",
                             "Compiled backends, usable devices and CPU topology.",
                             opts, (int)(sizeof opts / sizeof *opts), NULL};
    int rc = db_opts_parse(&cmd, argc, argv, &help, err, errlen);
    if (rc || help) return rc;
    if (strcmp(fmt, "md") != 0 && strcmp(fmt, "json") != 0)
        return db_fail(err, errlen, DB_EINPUT, "info: -o must be md or json, not '%s'", fmt);
    const db_cpu_info *ci = db_host_cpu();
    int oom_flag = 0, *oom = &oom_flag;
    cJSON *root = J(cJSON_CreateObject());
    J(cJSON_AddStringToObject(root, "version", DB_VERSION));
    J(cJSON_AddStringToObject(root, "git_commit", DB_GIT_COMMIT));
    J(cJSON_AddStringToObject(root, "compiler", DB_COMPILER));
    cJSON *cpu = J(cJSON_AddObjectToObject(root, "cpu"));
    J(cJSON_AddStringToObject(cpu, "model", ci->model));
    J(cJSON_AddNumberToObject(cpu, "packages", ci->packages));
    J(cJSON_AddNumberToObject(cpu, "cores", ci->cores));
    J(cJSON_AddNumberToObject(cpu, "threads", ci->pus));
    J(cJSON_AddNumberToObject(cpu, "numa_nodes", ci->numa_nodes));
    J(cJSON_AddNumberToObject(cpu, "l1d_bytes", (double)ci->l1d));
    J(cJSON_AddNumberToObject(cpu, "l2_bytes", (double)ci->l2));
    J(cJSON_AddNumberToObject(cpu, "l3_bytes", (double)ci->l3));
    J(cJSON_AddStringToObject(cpu, "topology_source", ci->source));
    cJSON *bes = J(cJSON_AddArrayToObject(root, "backends"));
    /* every backend built (a GPU one: its module), opened to see whether it is usable here */
    for (int i = 0; db_backend_names[i]; i++) {
        cJSON *b = J(cJSON_CreateObject());
        J(cJSON_AddStringToObject(b, "name", db_backend_names[i]));
        db_backend *be = NULL;
        char e2[768];
        db_backend_opts bo = {0};
        if (db_backend_create(db_backend_names[i], &bo, &be, e2, sizeof e2) == 0) {
            J(cJSON_AddBoolToObject(b, "usable", 1));
            J(cJSON_AddStringToObject(b, "device", be->device_name));
            J(cJSON_AddStringToObject(b, "simd", be->simd));
            J(cJSON_AddNumberToObject(b, "threads", be->threads));
            db_backend_destroy(be);
        } else {
            J(cJSON_AddBoolToObject(b, "usable", 0));
            J(cJSON_AddStringToObject(b, "error", e2));
        }
        JADD(bes, NULL, b);
    }
    if (oom_flag) {
        cJSON_Delete(root);
        return db_fail(err, errlen, DB_ERUNTIME, "out of memory listing the machine");
    }
    if (strcmp(fmt, "json") == 0) {
        char *s = cJSON_Print(root);
        if (!s) {
            cJSON_Delete(root);
            return db_fail(err, errlen, DB_ERUNTIME, "out of memory formatting the JSON");
        }
        printf("%s\n", s);
        free(s);
    } else {
        printf("# dflash-bench %s (%s)\n\n", DB_VERSION, DB_GIT_COMMIT);
        printf("| item | value |\n|---|---|\n");
        printf("| compiler | %s |\n| cpu | %s |\n| packages / cores / threads | %d / %d / %d |\n",
               DB_COMPILER, ci->model, ci->packages, ci->cores, ci->pus);
        printf("| numa nodes | %d |\n| L1d / L2 / L3 | %zu / %zu / %zu KiB |\n| topology source | %s |\n",
               ci->numa_nodes, ci->l1d / 1024, ci->l2 / 1024, ci->l3 / 1024, ci->source);
        const cJSON *b;
        cJSON_ArrayForEach(b, bes)
        {
            const cJSON *u = cJSON_GetObjectItem(b, "usable");
            const cJSON *d = cJSON_GetObjectItem(b, cJSON_IsTrue(u) ? "device" : "error");
            printf("| backend %s | %s%s |\n", cJSON_GetObjectItem(b, "name")->valuestring,
                   cJSON_IsTrue(u) ? "" : "unusable: ", d->valuestring);
        }
    }
    cJSON_Delete(root);
    return DB_OK;
}
