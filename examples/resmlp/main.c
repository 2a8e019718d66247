// SPDX-License-Identifier: MIT
/* resmlp_train: a program outside ddpc's tree that registers its own model type ("resmlp") and
 * data type ("arrays") and hands them to ddpc's trainer, so a config's `model.type: resmlp` and
 * `data.type: arrays` train with DDP, ZeRO, checkpoints and resume like the built-ins.
 * usage: resmlp_train CONFIG [key=value ...]                train as `ddpc train` does
 *        resmlp_train --outputs WEIGHTS OUT CONFIG [k=v ...] the test split's first 32 samples
 *            and the model's probabilities on them: OUT.x.npy (32, D), OUT.probs.npy (32, C)
 *        resmlp_train --gradcheck                          backward against finite differences
 *        resmlp_train --plan NPROC CONFIG [key=value ...]  memory per rank, as `ddpc plan`
 */
#include "resmlp.h"

#include <ddpc/alloc.h>
#include <ddpc/train.h>
#include <ddpc/weights.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what)
{
    fprintf(stderr, "resmlp_train: %s: %s\n", what, ddpc_last_error());
    return 1;
}

/* CONFIG and its key=value overrides. */
static ddpc_status load_config(int argc, char **argv, ddpc_config **cfg)
{
    DDPC_TRY(ddpc_config_load(cfg, argv[0]));
    for (int i = 1; i < argc; i++)
        DDPC_TRY(ddpc_config_set(*cfg, argv[i], i));
    return DDPC_OK;
}

/* The memory plan of a job of nproc ranks, at every zero.stage, as `ddpc plan CONFIG --nproc`. */
static int plan(int nproc, int argc, char **argv)
{
    ddpc_config *cfg = NULL;
    ddpc_trainer *t = NULL;
    int rc = 0;
    if (load_config(argc, argv, &cfg) != DDPC_OK ||
        ddpc_trainer_create_plan(&t, cfg, "plan", nproc) != DDPC_OK ||
        ddpc_config_check_unused(cfg) != DDPC_OK ||
        ddpc_trainer_print_plan(t, stdout, false) != DDPC_OK)
        rc = fail("plan");
    ddpc_trainer_destroy(t);
    ddpc_config_destroy(cfg);
    return rc;
}

static int train(int argc, char **argv)
{
    ddpc_config *cfg = NULL;
    ddpc_trainer *t = NULL;
    int rc = 0;
    char name[256]; /* runs/<config file's name> by default, as ddpc train */
    const char *base = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    snprintf(name, sizeof name, "%.*s", (int)strcspn(base, "."), base);
    if (load_config(argc, argv, &cfg) != DDPC_OK || ddpc_trainer_create(&t, cfg, name) != DDPC_OK ||
        ddpc_config_check_unused(cfg) != DDPC_OK) {
        rc = fail("train");
    } else {
        setvbuf(stdout, NULL, _IOLBF, 0);
        ddpc_trainer_set_log(t, stdout);
        if (ddpc_trainer_run(t) != DDPC_OK)
            rc = fail("train");
    }
    ddpc_trainer_destroy(t);
    ddpc_config_destroy(cfg);
    return rc;
}

/* A float32 C-order .npy of shape (rows, cols). */
static int write_npy(const char *path, const float *v, int64_t rows, int64_t cols)
{
    char header[128];
    int len = snprintf(header, sizeof header,
                       "{'descr': '<f4', 'fortran_order': False, 'shape': (%lld, %lld), }",
                       (long long)rows, (long long)cols);
    int pad = 64 - (10 + len + 1) % 64; /* magic, version, length, header, '\n': 64-aligned */
    FILE *f = fopen(path, "wb");
    if (!f)
        return 1;
    unsigned short hlen = (unsigned short)(len + pad + 1);
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc(hlen & 0xff, f), fputc(hlen >> 8, f);
    fwrite(header, 1, (size_t)len, f);
    for (int i = 0; i < pad; i++)
        fputc(' ', f);
    fputc('\n', f);
    fwrite(v, sizeof *v, (size_t)(rows * cols), f);
    return fclose(f) != 0;
}

/* The model a config describes, with the data's input width and classes; *test its test split. */
static ddpc_status model_from_config(ddpc_config *cfg, ddpc_model **m, ddpc_data_splits *sp)
{
    int64_t seed;
    resmlp_config own = {0};
    DDPC_TRY(ddpc_config_int(cfg, "seed", 1337, 0, INT64_MAX, &seed));
    DDPC_TRY(arrays_factory(NULL, cfg, "data", (uint64_t)seed, sp));
    DDPC_TRY(resmlp_ops.read_config(cfg, "model", &own));
    int64_t shape[3];
    ddpc_dataset_sample_shape(sp->train, shape);
    ddpc_model_config common = ddpc_model_config_default();
    common.in_channels = shape[0], common.in_height = shape[1], common.in_width = shape[2];
    common.num_classes = ddpc_dataset_num_classes(sp->train);
    common.seed = (uint64_t)seed;
    return ddpc_model_create_custom(m, &resmlp_ops, &own, &common);
}

static int outputs(int argc, char **argv)
{
    enum { N = 32 };
    const char *weights = argv[0], *out = argv[1];
    ddpc_config *cfg = NULL;
    ddpc_model *m = NULL;
    ddpc_data_splits sp = {0};
    int rc = 1;
    float x[N * 1024];
    int64_t idx[N];
    for (int i = 0; i < N; i++)
        idx[i] = i;
    if (load_config(argc - 2, argv + 2, &cfg) != DDPC_OK ||
        model_from_config(cfg, &m, &sp) != DDPC_OK || ddpc_weights_load(m, weights) != DDPC_OK) {
        fail("outputs");
        goto out;
    }
    int64_t shape[3];
    ddpc_dataset_sample_shape(sp.test, shape);
    int64_t d = shape[2], c = ddpc_dataset_num_classes(sp.test);
    ddpc_model_input in = {.n = N, .x = x};
    if (d > 1024 || ddpc_dataset_size(sp.test) < N ||
        ddpc_dataset_get_batch(sp.test, idx, N, x, NULL, NULL) != DDPC_OK ||
        ddpc_model_forward(m, &in, false, NULL) != DDPC_OK) {
        fail("outputs (at most 1024 features, at least 32 test samples)");
        goto out;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s.x.npy", out);
    rc = write_npy(path, x, N, d);
    snprintf(path, sizeof path, "%s.probs.npy", out);
    rc |= write_npy(path, ddpc_model_probs(m), N, c);
    if (rc)
        fprintf(stderr, "resmlp_train: cannot write %s\n", path);
out:
    ddpc_model_destroy(m);
    ddpc_dataset_destroy(sp.train);
    ddpc_dataset_destroy(sp.test);
    ddpc_config_destroy(cfg);
    return rc;
}

/* The mean loss on a batch. */
static float loss_of(ddpc_model *m, const ddpc_model_input *in)
{
    ddpc_model_output o;
    ddpc_model_forward(m, in, true, &o);
    return o.loss;
}

/* Every parameter's gradient against the central difference (L(p+e) - L(p-e)) / 2e, in float,
 * on a small model; fails on any entry off by more than 1e-3 + 2% of it. */
static int gradcheck(void)
{
    enum { N = 6, D = 5, H = 7, C = 3 };
    const float eps = 1e-2f;
    ddpc_dataset *ds = NULL;
    ddpc_model *m = NULL;
    ddpc_model_config common = ddpc_model_config_default();
    common.in_channels = 1, common.in_height = 1, common.in_width = D, common.num_classes = C;
    resmlp_config own = {.hidden = H};
    float x[N * D];
    int32_t y[N];
    int64_t idx[N] = {0, 1, 2, 3, 4, 5};
    if (arrays_create(&ds, N, D, C, 5, 0) != DDPC_OK ||
        ddpc_dataset_get_batch(ds, idx, N, x, NULL, y) != DDPC_OK ||
        ddpc_model_create_custom(&m, &resmlp_ops, &own, &common) != DDPC_OK)
        return fail("gradcheck");
    ddpc_model_input in = {.n = N, .x = x, .targets = y};
    ddpc_model_zero_grad(m);
    loss_of(m, &in);
    if (ddpc_model_backward(m, 1.0f) != DDPC_OK)
        return fail("gradcheck backward");
    float *p = ddpc_model_params(m);
    const float *g = ddpc_model_grads(m);
    double worst = 0;
    int bad = 0, checked = 0;
    for (size_t t = 0; t < ddpc_model_num_tensors(m); t++) {
        const ddpc_param *v = ddpc_model_tensor(m, t);
        for (size_t j = 0; j < v->numel; j++) {
            float *w = &p[v->offset + j], keep = *w;
            *w = keep + eps;
            float up = loss_of(m, &in);
            *w = keep - eps;
            float down = loss_of(m, &in);
            *w = keep;
            double fd = ((double)up - (double)down) / (2.0 * eps), an = g[v->offset + j];
            double err = fabs(fd - an);
            worst = err > worst ? err : worst;
            checked++;
            if (err > 1e-3 + 0.02 * fabs(fd)) {
                if (bad++ < 5)
                    printf("%s[%zu]: backward %.6f, finite difference %.6f\n", v->name, j, an, fd);
            }
        }
    }
    printf("gradcheck: %d of %d entries off, worst |error| %.2e: %s\n", bad, checked, worst,
           bad ? "FAIL" : "ok");
    ddpc_model_destroy(m);
    ddpc_dataset_destroy(ds);
    return bad != 0;
}

int main(int argc, char **argv)
{
    if (ddpc_model_register(&resmlp_ops) != DDPC_OK ||
        ddpc_data_register("arrays", arrays_factory, NULL) != DDPC_OK)
        return fail("register");
    if (argc == 2 && strcmp(argv[1], "--gradcheck") == 0)
        return gradcheck();
    if (argc >= 4 && strcmp(argv[1], "--plan") == 0 && atoi(argv[2]) >= 1)
        return plan(atoi(argv[2]), argc - 3, argv + 3);
    if (argc >= 5 && strcmp(argv[1], "--outputs") == 0)
        return outputs(argc - 2, argv + 2);
    if (argc >= 2 && argv[1][0] != '-')
        return train(argc - 1, argv + 1);
    fprintf(stderr, "usage: resmlp_train CONFIG [key=value ...]\n"
                    "       resmlp_train --outputs WEIGHTS OUT CONFIG [key=value ...]\n"
                    "       resmlp_train --gradcheck\n"
                    "       resmlp_train --plan NPROC CONFIG [key=value ...]\n");
    return 2;
}
