/* Multi-task setup: every `tasks.<i>.*` key is read here (docs/config.md lists the same keys),
 * each task's datasets are loaded once — tasks naming the same dataset share it, a label_map makes
 * a relabelled view over it — and per task a distributed sampler and loader feed the combined
 * loader. Invariant: after ddpc__tasks_load, t->train/val/test are task 0's (borrowed). */
#include "train/trainer_tasks.h"

#include <ddpc/alloc.h>

#include <stdio.h>
#include <string.h>

static const char *const task_data_types[] = {"fmnist", "synthetic_images", NULL};
static const char *const combined_modes[] = {"max_size_cycle", "min_size", "max_size", "sequential",
                                             NULL};

/* "tasks.<i>.<suffix>" into buf. */
static const char *task_key(char *buf, size_t cap, int i, const char *suffix)
{
    snprintf(buf, cap, "tasks.%d.%s", i, suffix);
    return buf;
}

bool ddpc__tasks_declared(const ddpc_config *c)
{
    return ddpc_config_has(c, "tasks");
}

static ddpc_status own(struct ddpc__trainer_tasks *mt, ddpc_dataset *d)
{
    if (mt->n_owned == (int)(sizeof mt->owned / sizeof mt->owned[0])) {
        ddpc_dataset_destroy(d);
        return ddpc_errorf(DDPC_EINTERNAL, "tasks: too many datasets");
    }
    mt->owned[mt->n_owned++] = d;
    return DDPC_OK;
}

/* A dataset other tasks may share: same type, path, size and classes. */
typedef struct {
    int type;
    const char *path;
    int64_t size, classes;
    ddpc_dataset *train, *test;
} base_data;

static ddpc_status load_base(ddpc_trainer *t, base_data *b)
{
    struct ddpc__trainer_tasks *mt = t->tasks;
    if (b->type == 0) {
        DDPC_TRY(ddpc_dataset_fmnist_create(&b->train, b->path, true));
        DDPC_TRY(own(mt, b->train));
        DDPC_TRY(ddpc_dataset_fmnist_create(&b->test, b->path, false));
        return own(mt, b->test);
    }
    /* As the single task's synthetic_images: the test split is a quarter, labelled by the same
     * seed's map, with pixels of its own. */
    DDPC_TRY(ddpc_dataset_synthetic_images_create(&b->train, b->size, 1, 28, 28, b->classes,
                                                  t->set.seed, true));
    DDPC_TRY(own(mt, b->train));
    DDPC_TRY(ddpc_dataset_synthetic_images_create(&b->test, b->size / 4 + 1, 1, 28, 28, b->classes,
                                                  t->set.seed, false));
    return own(mt, b->test);
}

/* tasks.<i>.data.*: the task's train and test datasets (maybe shared with an earlier task). */
static ddpc_status load_task_data(ddpc_trainer *t, int i, base_data *bases, int *n_bases)
{
    ddpc_config *c = t->cfg;
    ddpc__task *k = &t->tasks->task[i];
    char key[96];
    base_data want = {0};
    DDPC_TRY(ddpc_config_choice(c, task_key(key, sizeof key, i, "data.type"), "fmnist",
                                task_data_types, &want.type));
    k->data_type = task_data_types[want.type];
    if (want.type == 0) {
        DDPC_TRY(ddpc_config_string(c, task_key(key, sizeof key, i, "data.path"), DDPC__FMNIST_DIR,
                                    &want.path));
    } else {
        DDPC_TRY(ddpc_config_int(c, task_key(key, sizeof key, i, "data.size"), 1024, 1, INT64_MAX,
                                 &want.size));
        DDPC_TRY(ddpc_config_int(c, task_key(key, sizeof key, i, "data.classes"), 10, 2, 256,
                                 &want.classes));
    }
    base_data *b = NULL;
    for (int j = 0; j < *n_bases && !b; j++)
        if (bases[j].type == want.type && bases[j].size == want.size &&
            bases[j].classes == want.classes &&
            (want.type != 0 || strcmp(bases[j].path, want.path) == 0))
            b = &bases[j];
    if (!b) {
        b = &bases[(*n_bases)++];
        *b = want;
        DDPC_TRY(load_base(t, b));
    }
    k->train = b->train;
    k->test = b->test;
    task_key(key, sizeof key, i, "data.label_map");
    if (!ddpc_config_has(c, key))
        return DDPC_OK;
    int64_t map[256];
    size_t n_map;
    DDPC_TRY(ddpc_config_int_list(c, key, NULL, 0, 0, 255, map, 256, &n_map));
    ddpc_dataset *v = NULL;
    if (ddpc_dataset_relabel_create(&v, b->train, map, (int64_t)n_map) != DDPC_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s", ddpc_last_error());
        return ddpc_errorf(DDPC_EINVAL, "key '%s': %s", key, why);
    }
    DDPC_TRY(own(t->tasks, v));
    k->train = v;
    DDPC_TRY(ddpc_dataset_relabel_create(&v, b->test, map, (int64_t)n_map));
    DDPC_TRY(own(t->tasks, v));
    k->test = v;
    return DDPC_OK;
}

static ddpc_status read_name(ddpc_trainer *t, int i)
{
    char key[96];
    const char *name;
    DDPC_TRY(ddpc_config_string(t->cfg, task_key(key, sizeof key, i, "name"), NULL, &name));
    size_t len = name ? strlen(name) : 0;
    if (len == 0 || len >= DDPC__TASK_NAME_MAX ||
        strspn(name, "abcdefghijklmnopqrstuvwxyz"
                     "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                     "0123456789_-.") != len)
        return ddpc_errorf(DDPC_EINVAL,
                           "key '%s' must be 1 to %d letters, digits, '_', '-' or "
                           "'.', got '%s'",
                           key, DDPC__TASK_NAME_MAX - 1, name ? name : "");
    for (int j = 0; j < i; j++)
        if (strcmp(t->tasks->task[j].name, name) == 0)
            return ddpc_errorf(DDPC_EINVAL, "key '%s': '%s' is already the name of tasks.%d", key,
                               name, j);
    snprintf(t->tasks->task[i].name, DDPC__TASK_NAME_MAX, "%s", name);
    return DDPC_OK;
}

static ddpc_status read_task(ddpc_trainer *t, int i, base_data *bases, int *n_bases)
{
    ddpc_config *c = t->cfg;
    ddpc__task *k = &t->tasks->task[i];
    char key[96];
    double w;
    DDPC_TRY(read_name(t, i));
    DDPC_TRY(load_task_data(t, i, bases, n_bases));
    DDPC_TRY(ddpc_config_int(c, task_key(key, sizeof key, i, "batch_size"), t->set.batch_size, 1,
                             1 << 20, &k->batch_size));
    DDPC_TRY(ddpc_config_int(c, task_key(key, sizeof key, i, "eval_batch_size"),
                             t->set.eval_batch_size, 1, 1 << 20, &k->eval_batch_size));
    DDPC_TRY(ddpc_config_float(c, task_key(key, sizeof key, i, "loss_weight"), 1.0, 0.0, 1e6, &w));
    k->loss_weight = (float)w;
    int64_t classes = ddpc_dataset_num_classes(k->train);
    DDPC_TRY(ddpc_config_int(c, task_key(key, sizeof key, i, "num_classes"), classes, classes, 256,
                             &k->num_classes));
    return DDPC_OK;
}

ddpc_status ddpc__tasks_load(ddpc_trainer *t)
{
    ddpc_config *c = t->cfg;
    size_t n = ddpc_config_seq_len(c, "tasks");
    if (n == 0 || n > DDPC_MODEL_MAX_HEADS)
        return ddpc_errorf(DDPC_EINVAL,
                           "key 'tasks' must be a list of 1 to %d task mappings, got "
                           "%zu",
                           DDPC_MODEL_MAX_HEADS, n);
    t->tasks = ddpc_calloc(1, sizeof *t->tasks);
    if (!t->tasks)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory for %zu tasks", n);
    int mode;
    DDPC_TRY(ddpc_config_choice(c, "data.combined_mode", "max_size_cycle", combined_modes, &mode));
    t->tasks->mode = (ddpc_combined_mode)mode; /* the table follows the enum's order */
    base_data bases[DDPC_MODEL_MAX_HEADS];
    int n_bases = 0;
    for (int i = 0; i < (int)n; i++) {
        t->tasks->n = i + 1; /* destroy sees every task begun */
        DDPC_TRY(read_task(t, i, bases, &n_bases));
    }
    t->train = t->tasks->task[0].train;
    t->test = t->val = t->tasks->task[0].test;
    return DDPC_OK;
}

ddpc_status ddpc__tasks_model_heads(ddpc_trainer *t, ddpc_model_config *mc)
{
    const struct ddpc__trainer_tasks *mt = t->tasks;
    int64_t shape0[3];
    ddpc_dataset_sample_shape(mt->task[0].train, shape0);
    for (int i = 0; i < mt->n; i++) {
        int64_t shape[3];
        ddpc_dataset_sample_shape(mt->task[i].train, shape);
        if (memcmp(shape, shape0, sizeof shape) != 0)
            return ddpc_errorf(DDPC_EINVAL,
                               "tasks.%d ('%s') has samples of shape (%lld, %lld, "
                               "%lld), tasks.0 of (%lld, %lld, %lld): the trunk is shared",
                               i, mt->task[i].name, (long long)shape[0], (long long)shape[1],
                               (long long)shape[2], (long long)shape0[0], (long long)shape0[1],
                               (long long)shape0[2]);
        mc->head_classes[i] = mt->task[i].num_classes;
    }
    mc->n_heads = (size_t)mt->n;
    return DDPC_OK;
}

static ddpc_status build_loader(ddpc_trainer *t, int i)
{
    ddpc__task *k = &t->tasks->task[i];
    ddpc_sampler_config sc = ddpc_sampler_config_default();
    sc.kind = DDPC_SAMPLER_DISTRIBUTED;
    sc.rank = t->rank;
    sc.world = t->world;
    /* A distinct shuffle per task, so tasks over one dataset do not visit it in lockstep. */
    sc.seed = t->set.seed + (uint64_t)i * 0x9E3779B97F4A7C15ull;
    sc.shuffle = t->set.shuffle;
    sc.size = ddpc_dataset_size(k->train);
    DDPC_TRY(ddpc_sampler_create(&sc, &k->sampler));
    ddpc_loader_config lc = ddpc_loader_config_default();
    lc.batch_size = k->batch_size;
    lc.num_workers = t->set.num_workers;
    lc.prefetch_factor = t->set.prefetch_factor;
    lc.drop_last = true; /* every rank runs the same steps */
    const ddpc_dataset *ds[1] = {k->train};
    DDPC_TRY(ddpc_loader_create(ds, 1, k->sampler, &lc, &k->loader));
    if (ddpc_loader_len(k->loader) == 0)
        return ddpc_errorf(DDPC_EINVAL,
                           "tasks.%d ('%s'): batch_size %lld on each of %d ranks is "
                           "more than its %lld training samples",
                           i, k->name, (long long)k->batch_size, t->world,
                           (long long)ddpc_dataset_size(k->train));
    return DDPC_OK;
}

ddpc_status ddpc__tasks_build_loaders(ddpc_trainer *t, int64_t *per_epoch)
{
    struct ddpc__trainer_tasks *mt = t->tasks;
    ddpc_loader *loaders[DDPC_MODEL_MAX_HEADS];
    const char *names[DDPC_MODEL_MAX_HEADS];
    for (int i = 0; i < mt->n; i++) {
        DDPC_TRY(build_loader(t, i));
        loaders[i] = mt->task[i].loader;
        names[i] = mt->task[i].name;
    }
    DDPC_TRY(ddpc_combined_create(loaders, names, mt->n, mt->mode, &mt->combined));
    *per_epoch = ddpc_combined_len(mt->combined) / t->set.accum_steps;
    if (*per_epoch == 0)
        return ddpc_errorf(DDPC_EINVAL,
                           "an epoch of %lld combined steps (data.combined_mode %s) "
                           "is shorter than optim.grad_accum_steps %lld",
                           (long long)ddpc_combined_len(mt->combined),
                           ddpc_combined_mode_name(mt->mode), (long long)t->set.accum_steps);
    return DDPC_OK;
}

int64_t ddpc__tasks_max_batch(const ddpc_trainer *t)
{
    int64_t m = 1;
    for (int i = 0; i < t->tasks->n; i++) {
        const ddpc__task *k = &t->tasks->task[i];
        m = k->batch_size > m ? k->batch_size : m;
        m = k->eval_batch_size > m ? k->eval_batch_size : m;
    }
    return m;
}

void ddpc__tasks_destroy(ddpc_trainer *t)
{
    struct ddpc__trainer_tasks *mt = t->tasks;
    if (!mt)
        return;
    ddpc_combined_destroy(mt->combined);
    for (int i = 0; i < mt->n; i++) {
        ddpc_loader_destroy(mt->task[i].loader);
        ddpc_sampler_destroy(mt->task[i].sampler);
    }
    for (int i = mt->n_owned - 1; i >= 0; i--)
        ddpc_dataset_destroy(mt->owned[i]);
    ddpc_free(mt);
    t->tasks = NULL;
    t->train = t->val = t->test = NULL;
}
