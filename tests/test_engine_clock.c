// SPDX-License-Identifier: MIT
/* The step's phases in device time (src/parallel/engine_clock.c) against a fake device whose
 * marks carry made-up times and which passes them only when the test says: spans add up to the
 * times between their marks, only finished spans count and the rest come later in order, the
 * ring wraps without losing a span while the device keeps up, and a stalled device costs dropped
 * spans, never a recorded-over mark or a wait. Then through the engine on a stand-in device (the
 * CPU table with kind cuda and these marks): ddpc_engine_take_device_timing gives forward,
 * backward and optimizer time with cfg.timing, and false on the CPU or with timing off. On a GPU,
 * tests/gpu/train_checks.sh checks the real marks (CUDA events) through ddpc train. */
#include "check.h"

#include "parallel/engine_clock.h"

#include <ddpc/engine.h>
#include <ddpc/models.h>
#include <ddpc/optim.h>

#include <string.h>

/* The fake device: mark i records time t[i] (1 ms per mark made) and sequence seq[i]; it has
 * passed every mark up to sequence `passed`. */
static double fake_t[DDPC__CLOCK_MARKS];
static uint64_t fake_seq[DDPC__CLOCK_MARKS], fake_made, fake_passed;
static bool fake_follow; /* the device passes each mark as it is made */
static int fake_handle;

static void *fake_create(int n)
{
    CHECK_EQ_INT(n, DDPC__CLOCK_MARKS);
    memset(fake_seq, 0, sizeof fake_seq);
    fake_made = fake_passed = 0;
    return &fake_handle;
}

static void fake_destroy(void *marks)
{
    CHECK(marks == &fake_handle);
}

static void fake_mark(void *marks, int i)
{
    CHECK(marks == &fake_handle);
    fake_seq[i] = ++fake_made;
    fake_t[i] = 1e-3 * (double)fake_made;
    if (fake_follow)
        fake_passed = fake_made;
}

static bool fake_seconds(void *marks, int a, int b, double *s)
{
    CHECK(marks == &fake_handle);
    CHECK(fake_seq[a] != 0 && fake_seq[a] < fake_seq[b]);
    if (fake_seq[b] > fake_passed)
        return false;
    *s = fake_t[b] - fake_t[a];
    return true;
}

/* The device optimizer a device table must have (plain SGD is all the engine test runs). */
static void fake_sgd(float *params, const float *grads, float *buf, const uint8_t *mask, int64_t n,
                     const ddpc_sgd_coef *c)
{
    (void)buf, (void)mask;
    for (int64_t i = 0; i < n; i++)
        params[i] = fmaf(grads[i], c->neg_lr, params[i]);
}

static ddpc_kernel_table fake_table(void)
{
    ddpc_kernel_table k = *ddpc_kernel_table_cpu();
    k.kind = DDPC_DEVICE_CUDA;
    k.sgd_update = fake_sgd;
    k.marks_create = fake_create;
    k.marks_destroy = fake_destroy;
    k.mark = fake_mark;
    k.mark_seconds = fake_seconds;
    return k;
}

#define FWD offsetof(ddpc_engine_timing, forward_s)
#define BWD offsetof(ddpc_engine_timing, backward_s)
#define OPT offsetof(ddpc_engine_timing, optimizer_s)
#define NONE ((size_t)-1)

/* Every pending span's two marks are still the ones it was made from: no slot between them was
 * recorded over (consecutive laps take consecutive slots, one sequence number each). */
static bool spans_intact(const ddpc__clock *c)
{
    for (int i = 0; i < c->pending; i++) {
        const ddpc__clock_span *s = &c->span[(c->head + i) % DDPC__CLOCK_SPANS];
        uint64_t apart = (uint64_t)((s->b - s->a + DDPC__CLOCK_MARKS) % DDPC__CLOCK_MARKS);
        if (fake_seq[s->b] - fake_seq[s->a] != apart)
            return false;
    }
    return true;
}

/* One step's laps as the engine makes them: a pass (start, forward, backward), the update (start,
 * optimizer): 5 marks, 3 spans of 1 ms each. */
static void step_laps(ddpc__clock *c)
{
    ddpc__clock_lap(c, NONE);
    ddpc__clock_lap(c, FWD);
    ddpc__clock_lap(c, BWD);
    ddpc__clock_lap(c, NONE);
    ddpc__clock_lap(c, OPT);
}

static void test_off_without_marks(void)
{
    ddpc__clock c;
    ddpc__clock_init(&c, ddpc_kernel_table_cpu());
    CHECK(!ddpc__clock_on(&c));
    ddpc__clock_lap(&c, FWD); /* nothing to do */
    ddpc_engine_timing t = ddpc__clock_take(&c);
    CHECK(t.forward_s == 0.0);
    ddpc__clock_fini(&c);
}

static void test_finished_spans_only_in_order(void)
{
    ddpc_kernel_table k = fake_table();
    fake_follow = false;
    ddpc__clock c;
    ddpc__clock_init(&c, &k);
    CHECK(ddpc__clock_on(&c));
    step_laps(&c); /* marks 1-5 */
    step_laps(&c); /* marks 6-10 */
    CHECK_EQ_INT(c.pending, 6);
    ddpc_engine_timing t = ddpc__clock_take(&c);
    CHECK(t.forward_s == 0.0 && t.backward_s == 0.0 && t.optimizer_s == 0.0);
    fake_passed = 3; /* the first pass, not its update */
    t = ddpc__clock_take(&c);
    CHECK_NEAR(t.forward_s, 1e-3, 1e-12);
    CHECK_NEAR(t.backward_s, 1e-3, 1e-12);
    CHECK(t.optimizer_s == 0.0);
    fake_passed = 9; /* the update, the second forward; its backward (to mark 8) too */
    t = ddpc__clock_take(&c);
    CHECK_NEAR(t.forward_s, 1e-3, 1e-12);
    CHECK_NEAR(t.backward_s, 1e-3, 1e-12);
    CHECK_NEAR(t.optimizer_s, 1e-3, 1e-12);
    CHECK_EQ_INT(c.pending, 1);
    fake_passed = 10;
    t = ddpc__clock_take(&c);
    CHECK_NEAR(t.optimizer_s, 1e-3, 1e-12);
    CHECK_EQ_INT(c.pending, 0);
    CHECK_EQ_INT(c.dropped, 0);
    ddpc__clock_fini(&c);
}

static void test_ring_wraps_while_the_device_keeps_up(void)
{
    ddpc_kernel_table k = fake_table();
    fake_follow = true;
    ddpc__clock c;
    ddpc__clock_init(&c, &k);
    const int steps = 4 * DDPC__CLOCK_MARKS / 5 + 3;
    for (int s = 0; s < steps; s++) {
        step_laps(&c);
        CHECK(spans_intact(&c));
    }
    ddpc_engine_timing t = ddpc__clock_take(&c);
    CHECK_NEAR(t.forward_s, 1e-3 * steps, 1e-9);
    CHECK_NEAR(t.backward_s, 1e-3 * steps, 1e-9);
    CHECK_NEAR(t.optimizer_s, 1e-3 * steps, 1e-9);
    CHECK_EQ_INT(c.dropped, 0);
    ddpc__clock_fini(&c);
}

static void test_stalled_device_drops_never_overwrites(void)
{
    ddpc_kernel_table k = fake_table();
    fake_follow = false;
    ddpc__clock c;
    ddpc__clock_init(&c, &k);
    const int steps = 3 * DDPC__CLOCK_MARKS / 5;
    for (int s = 0; s < steps; s++) {
        step_laps(&c);
        CHECK(spans_intact(&c));
        CHECK(c.pending <= DDPC__CLOCK_SPANS);
    }
    CHECK(c.dropped > 0);
    CHECK_EQ_INT(c.dropped + (uint64_t)c.pending, 3 * (uint64_t)steps);
    const int left = c.pending;
    fake_passed = fake_made; /* the device catches up: what is left is read, 1 ms a span */
    ddpc_engine_timing t = ddpc__clock_take(&c);
    CHECK_NEAR(t.forward_s + t.backward_s + t.optimizer_s, 1e-3 * left, 1e-9);
    CHECK_EQ_INT(c.pending, 0);
    ddpc__clock_fini(&c);
}

/* A small MLP on `k` and one SGD step over it, with cfg.timing as given. */
static ddpc_engine_timing engine_step(const ddpc_kernel_table *k, bool timing, bool *device)
{
    ddpc_model_config mc = ddpc_model_config_default();
    ddpc_mlp_config own = ddpc_mlp_config_default();
    mc.type_config = &own;
    strcpy(mc.type, "mlp");
    mc.in_channels = 1, mc.in_height = 4, mc.in_width = 4, mc.num_classes = 3;
    own.hidden[0] = 8, own.n_hidden = 1;
    mc.backend = k;
    ddpc_model *m = NULL;
    CHECK_EQ_INT(ddpc_model_create(&m, &mc), DDPC_OK);
    ddpc_engine_config ec = ddpc_engine_config_default();
    ec.optim.type = DDPC_OPTIM_SGD;
    ec.timing = timing;
    ddpc_engine *e = NULL;
    CHECK_EQ_INT(ddpc_engine_create(m, NULL, 0, 1, &ec, &e), DDPC_OK);
    float x[4 * 16] = {0.5f, -1.0f, 0.25f};
    int32_t y[4] = {0, 1, 2, 1};
    ddpc_model_input in = {.n = 4, .x = x, .targets = y};
    ddpc_model_output out;
    ddpc_engine_step_info info;
    ddpc_engine_zero_grad(e);
    CHECK_EQ_INT(ddpc_engine_pass(e, &in, 0, 1.0f, true, &out), DDPC_OK);
    CHECK_EQ_INT(ddpc_engine_update(e, &info), DDPC_OK);
    ddpc_engine_timing t = {0};
    *device = ddpc_engine_take_device_timing(e, &t);
    ddpc_engine_destroy(e);
    ddpc_model_destroy(m);
    return t;
}

static void test_engine(void)
{
    bool device = true;
    (void)engine_step(ddpc_kernel_table_cpu(), true, &device);
    CHECK(!device); /* the CPU has no marks: its phases are the host's own */
    ddpc_kernel_table k = fake_table();
    fake_follow = true;
    (void)engine_step(&k, false, &device);
    CHECK(!device); /* timing off: no marks made */
    ddpc_engine_timing t = engine_step(&k, true, &device);
    CHECK(device);
    /* 1 ms per mark: a pass marks its start, its forward's and its backward's end; the update its
     * start, the gradients' arrival and the optimizer's end. */
    CHECK_NEAR(t.forward_s, 1e-3, 1e-12);
    CHECK_NEAR(t.backward_s, 1e-3, 1e-12);
    CHECK_NEAR(t.comm_wait_s, 1e-3, 1e-12);
    CHECK_NEAR(t.optimizer_s, 1e-3, 1e-12);
}

int main(void)
{
    RUN_TEST(test_off_without_marks);
    RUN_TEST(test_finished_spans_only_in_order);
    RUN_TEST(test_ring_wraps_while_the_device_keeps_up);
    RUN_TEST(test_stalled_device_drops_never_overwrites);
    RUN_TEST(test_engine);
    return check_summary();
}
