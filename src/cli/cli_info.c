/* cli_info.c — `dflash-bench info`: compiled backends, usable devices, CPU topology, as a
 * markdown list (default) or JSON (-o json). */
#include "config.h"
#include "backend.h"
#include "cli/cli.h"
#include "cli/cli_args.h"
#include "base/util.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "version", DB_VERSION);
    cJSON_AddStringToObject(root, "git_commit", DB_GIT_COMMIT);
    cJSON_AddStringToObject(root, "compiler", DB_COMPILER);
    cJSON *cpu = cJSON_AddObjectToObject(root, "cpu");
    cJSON_AddStringToObject(cpu, "model", ci->model);
    cJSON_AddNumberToObject(cpu, "packages", ci->packages);
    cJSON_AddNumberToObject(cpu, "cores", ci->cores);
    cJSON_AddNumberToObject(cpu, "threads", ci->pus);
    cJSON_AddNumberToObject(cpu, "numa_nodes", ci->numa_nodes);
    cJSON_AddNumberToObject(cpu, "l1d_bytes", (double)ci->l1d);
    cJSON_AddNumberToObject(cpu, "l2_bytes", (double)ci->l2);
    cJSON_AddNumberToObject(cpu, "l3_bytes", (double)ci->l3);
    cJSON_AddStringToObject(cpu, "topology_source", ci->source);
    cJSON *bes = cJSON_AddArrayToObject(root, "backends");
    for (int i = 0; db_backends[i]; i++) {
        cJSON *b = cJSON_CreateObject();
        cJSON_AddStringToObject(b, "name", db_backends[i]->name);
        db_backend *be = NULL;
        char e2[256];
        db_backend_opts bo = {0};
        if (db_backend_create(db_backends[i]->name, &bo, &be, e2, sizeof e2) == 0) {
            cJSON_AddBoolToObject(b, "usable", 1);
            cJSON_AddStringToObject(b, "device", be->device_name);
            cJSON_AddStringToObject(b, "simd", be->simd);
            cJSON_AddNumberToObject(b, "threads", be->threads);
            db_backend_destroy(be);
        } else {
            cJSON_AddBoolToObject(b, "usable", 0);
            cJSON_AddStringToObject(b, "error", e2);
        }
        cJSON_AddItemToArray(bes, b);
    }
    if (strcmp(fmt, "json") == 0) {
        char *s = cJSON_Print(root);
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
