// SPDX-License-Identifier: MIT
/* A program outside ddpc's tree that trains with the installed library through its public API
 * only: a Fashion-MNIST dataset (Debian's dataset-fashion-mnist, or synthetic images), a sampler
 * and a prefetching loader, an MLP, and the step engine with SGD. It prints the loss as it falls
 * and fails (exit 1) unless the last 50 steps' mean loss is below the first 50 steps'.
 * usage: train_mlp [FMNIST_DIR | synthetic] [STEPS]   (default /usr/share/datasets/fashion-mnist,
 * 300)
 */
#include <ddpc/data.h>
#include <ddpc/engine.h>
#include <ddpc/loader.h>
#include <ddpc/models.h>
#include <ddpc/nn.h>
#include <ddpc/sampler.h>
#include <ddpc/version.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW 50 /* steps averaged at each end to judge the loss */

/* Prints the library's message (one sentence naming the culprit) for a failed call; returns 1. */
static int fail(const char *what, ddpc_status s)
{
    fprintf(stderr, "train_mlp: %s: %s (%s)\n", what, ddpc_last_error(), ddpc_status_name(s));
    return 1;
}

static int train(ddpc_dataset *ds, long steps)
{
    ddpc_sampler *sampler = NULL;
    ddpc_loader *loader = NULL;
    ddpc_model *model = NULL;
    ddpc_engine *engine = NULL;
    ddpc_status s;
    int rc = 1;

    ddpc_sampler_config sc = ddpc_sampler_config_default();
    sc.size = ddpc_dataset_size(ds);
    sc.seed = 42;
    ddpc_loader_config lc = ddpc_loader_config_default();
    lc.batch_size = 64;
    lc.num_workers = 1;
    lc.drop_last = true;
    ddpc_model_config mc = ddpc_model_config_default();
    ddpc_mlp_config own = ddpc_mlp_config_default();
    mc.type_config = &own;
    strcpy(mc.type, "mlp");
    int64_t shape[3];
    ddpc_dataset_sample_shape(ds, shape);
    mc.in_channels = shape[0], mc.in_height = shape[1], mc.in_width = shape[2];
    mc.num_classes = ddpc_dataset_num_classes(ds);
    own.hidden[0] = 128, own.n_hidden = 1;
    ddpc_engine_config ec = ddpc_engine_config_default();
    ec.optim.lr = 0.05f;
    ec.optim.momentum = 0.9f;

    const ddpc_dataset *sets[1] = {ds};
    if ((s = ddpc_sampler_create(&sc, &sampler)) != DDPC_OK ||
        (s = ddpc_loader_create(sets, 1, sampler, &lc, &loader)) != DDPC_OK ||
        (s = ddpc_model_create(&model, &mc)) != DDPC_OK ||
        (s = ddpc_engine_create(model, NULL, 0, 1, &ec, &engine)) != DDPC_OK) {
        fail("setting up", s);
        goto out;
    }
    printf("model mlp with %zu parameters, %lld samples\n", ddpc_model_num_params(model),
           (long long)ddpc_dataset_size(ds));
    double first = 0, last = 0; /* mean loss of the first and of the last WINDOW steps */
    int64_t epoch = 0;
    const ddpc_batch *b = NULL;
    s = ddpc_loader_start_epoch(loader, epoch);
    for (long step = 0; s == DDPC_OK && step < steps; step++) {
        if ((s = ddpc_loader_next(loader, &b)) == DDPC_OK && !b) { /* end of an epoch */
            if ((s = ddpc_loader_start_epoch(loader, ++epoch)) == DDPC_OK)
                s = ddpc_loader_next(loader, &b);
        }
        if (s != DDPC_OK)
            break;
        ddpc_model_input in = {.n = b->n, .x = b->x, .targets = b->targets};
        ddpc_model_output o;
        ddpc_engine_step_info info;
        ddpc_engine_zero_grad(engine);
        if ((s = ddpc_engine_pass(engine, &in, 0, 1.0f, true, &o)) != DDPC_OK ||
            (s = ddpc_engine_update(engine, &info)) != DDPC_OK)
            break;
        first += step < WINDOW ? o.loss / WINDOW : 0.0;
        last += step >= steps - WINDOW ? o.loss / WINDOW : 0.0;
        if (step % 50 == 0 || step == steps - 1)
            printf("step %4ld  epoch %lld  loss %.4f  accuracy %.3f\n", step, (long long)epoch,
                   o.loss, (double)o.n_correct / (double)o.n_valid);
    }
    if (s != DDPC_OK) {
        fail("training", s);
        goto out;
    }
    printf("mean loss: first %d steps %.4f, last %d steps %.4f: %s\n", WINDOW, first, WINDOW, last,
           last < first ? "decreasing" : "NOT decreasing");
    rc = last < first ? 0 : 1;
out:
    ddpc_engine_destroy(engine);
    ddpc_model_destroy(model);
    ddpc_loader_destroy(loader);
    ddpc_sampler_destroy(sampler);
    return rc;
}

int main(int argc, char **argv)
{
    const char *source = argc > 1 ? argv[1] : "/usr/share/datasets/fashion-mnist";
    long steps = argc > 2 ? strtol(argv[2], NULL, 10) : 300;
    if (argc > 3 || steps < 2 * WINDOW) {
        fprintf(stderr, "usage: train_mlp [FMNIST_DIR | synthetic] [STEPS >= %d]\n", 2 * WINDOW);
        return 2;
    }
    /* The headers this program was compiled with, and the library it runs against. */
    printf("ddpc headers %s, library %s\n", DDPC_VERSION, ddpc_version());
    ddpc_dataset *ds = NULL;
    ddpc_status s = strcmp(source, "synthetic") == 0
                        ? ddpc_dataset_synthetic_images_create(&ds, 4096, 1, 28, 28, 10, 7, true)
                        : ddpc_dataset_fmnist_create(&ds, source, true);
    if (s != DDPC_OK)
        return fail("dataset", s);
    int rc = train(ds, steps);
    ddpc_dataset_destroy(ds);
    return rc;
}
