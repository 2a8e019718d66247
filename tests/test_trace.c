// SPDX-License-Identifier: MIT
/* The process-wide trace recorder (src/core/trace.c): nothing is recorded unless open and
 * recording; events serialize sorted by thread and start with a parent before a child that starts
 * with it, in exact microseconds; a full array drops and counts; threads record concurrently. */
#include "check.h"

#include <ddpc/alloc.h>
#include <ddpc/trace.h>

#include <pthread.h>
#include <string.h>

static void test_off_records_nothing(void)
{
    ddpc_trace_add(DDPC_TRACE_COMPUTE, "x", 1.0, 2.0, -1, NULL, 0); /* not open: ignored */
    CHECK(!ddpc_trace_on());
    CHECK_EQ_INT(ddpc_trace_open(4), DDPC_OK);
    ddpc_trace_add(DDPC_TRACE_COMPUTE, "x", 1.0, 2.0, -1, NULL, 0); /* open, not recording */
    char *s;
    size_t len, dropped;
    CHECK_EQ_INT(ddpc_trace_serialize(3, &s, &len, &dropped), DDPC_OK);
    CHECK(!strstr(s, "\"X\""));
    CHECK_STR_CONTAINS(s, "\"name\": \"rank 3\"");
    CHECK_EQ_INT((int)strlen(s), (int)len);
    ddpc_free(s);
    ddpc_trace_close();
}

static void test_sorted_nested_exact(void)
{
    CHECK_EQ_INT(ddpc_trace_open(8), DDPC_OK);
    ddpc_trace_record(true);
    CHECK(ddpc_trace_on());
    ddpc_trace_add(DDPC_TRACE_COMM, "all_reduce", 1.5, 1.6, -1, "all_reduce", 4096);
    ddpc_trace_add(DDPC_TRACE_COMPUTE, "forward", 1.0, 1.25, -1, NULL, 0);
    ddpc_trace_add(DDPC_TRACE_COMPUTE, "step", 1.0, 2.000001, 7, NULL, 0);
    ddpc_trace_record(false);
    ddpc_trace_add(DDPC_TRACE_COMPUTE, "late", 3.0, 4.0, -1, NULL, 0);
    char *s;
    size_t len, dropped;
    CHECK_EQ_INT(ddpc_trace_serialize(0, &s, &len, &dropped), DDPC_OK);
    CHECK_EQ_INT((int)dropped, 0);
    const char *step = strstr(s, "\"step\", \"ph\""), *fwd = strstr(s, "\"forward\"");
    const char *comm = strstr(s, "\"all_reduce\", \"ph\"");
    CHECK(step && fwd && comm && step < fwd && fwd < comm);
    CHECK(!strstr(s, "late"));
    CHECK_STR_CONTAINS(s, "\"ts\": 1000000.000, \"dur\": 1000001.000, \"args\": {\"step\": 7}");
    CHECK_STR_CONTAINS(s, "\"args\": {\"op\": \"all_reduce\", \"bytes\": 4096}");
    CHECK_STR_CONTAINS(s, "\"tid\": 2, \"args\": {\"name\": \"comm\"}");
    CHECK(s[0] == ',');
    ddpc_free(s);
    ddpc_trace_close();
}

static void test_full_drops(void)
{
    CHECK_EQ_INT(ddpc_trace_open(2), DDPC_OK);
    ddpc_trace_record(true);
    for (int i = 0; i < 5; i++)
        ddpc_trace_add(DDPC_TRACE_COMPUTE, "e", i, i + 0.5, -1, NULL, 0);
    char *s;
    size_t len, dropped;
    CHECK_EQ_INT(ddpc_trace_serialize(0, &s, &len, &dropped), DDPC_OK);
    CHECK_EQ_INT((int)dropped, 3);
    ddpc_free(s);
    ddpc_trace_close();
    CHECK(!ddpc_trace_on());
}

static void *loader_thread(void *arg)
{
    (void)arg;
    for (int i = 0; i < 1000; i++)
        ddpc_trace_add(DDPC_TRACE_LOADER, "batch", i, i + 0.5, -1, NULL, 0);
    return NULL;
}

static void test_threads(void)
{
    CHECK_EQ_INT(ddpc_trace_open(4000), DDPC_OK);
    ddpc_trace_record(true);
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&th[i], NULL, loader_thread, NULL);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    ddpc_trace_record(false);
    char *s;
    size_t len, dropped;
    CHECK_EQ_INT(ddpc_trace_serialize(1, &s, &len, &dropped), DDPC_OK);
    int n = 0, names = 0;
    for (const char *p = s; (p = strstr(p, "\"batch\"")); p++)
        n++;
    for (const char *p = s; (p = strstr(p, "\"name\": \"loader ")); p++)
        names++;
    CHECK_EQ_INT(n, 3000);
    CHECK_EQ_INT(names, 3);
    ddpc_free(s);
    ddpc_trace_close();
}

int main(void)
{
    RUN_TEST(test_off_records_nothing);
    RUN_TEST(test_sorted_nested_exact);
    RUN_TEST(test_full_drops);
    RUN_TEST(test_threads);
    return check_summary();
}
