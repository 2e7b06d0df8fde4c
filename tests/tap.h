/* tap.h — minimal TAP producer for the C tests (meson runs them with protocol: 'tap').
 *   tap_ok(cond, fmt, ...)   one test point
 *   tap_skip_all(reason)     "1..0 # SKIP reason" and exit 0
 *   tap_skip(reason)         one test point skipped ("ok N # SKIP reason")
 *   return tap_done();       plan line and exit status */
#ifndef DB_TAP_H
#define DB_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int tap_n, tap_failed;

__attribute__((format(printf, 2, 3))) static int tap_ok(int cond, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s %d - ", cond ? "ok" : "not ok", ++tap_n);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    if (!cond) tap_failed++;
    return cond;
}

__attribute__((format(printf, 1, 2), unused)) static void tap_diag(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("# ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
}

__attribute__((unused)) static void tap_skip_all(const char *reason)
{
    printf("1..0 # SKIP %s\n", reason);
    exit(0);
}

__attribute__((unused)) static void tap_skip(const char *reason)
{
    printf("ok %d # SKIP %s\n", ++tap_n, reason);
    fflush(stdout);
}

static int tap_done(void)
{
    printf("1..%d\n", tap_n);
    return tap_failed ? 1 : 0;
}

#endif
