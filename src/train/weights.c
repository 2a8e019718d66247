/* Model tensors <-> safetensors. Load validates the whole file against the model before it
 * copies anything, so a mismatched file leaves the parameters untouched. */
#include <ddpc/alloc.h>
#include <ddpc/safetensors.h>
#include <ddpc/weights.h>

#include <string.h>

ddpc_status ddpc_weights_save(const ddpc_model *m, const float *buffer, const char *path)
{
    size_t n = ddpc_model_num_tensors(m);
    ddpc_st_tensor *ts = ddpc_calloc(n, sizeof *ts);
    if (!ts)
        return ddpc_errorf(DDPC_ENOMEM, "out of memory saving '%s'", path);
    for (size_t i = 0; i < n; i++) {
        const ddpc_param *p = ddpc_model_tensor(m, i);
        ts[i].name = p->name;
        ts[i].ndim = p->ndim;
        for (int d = 0; d < p->ndim; d++)
            ts[i].shape[d] = p->shape[d];
        ts[i].data = buffer + p->offset;
    }
    const char *keys[] = {"format", "model"};
    const char *values[] = {"pt", ddpc_model_config_of(m)->type};
    ddpc_status s = ddpc_safetensors_write(path, ts, n, keys, values, 2);
    ddpc_free(ts);
    return s;
}

static ddpc_status check_tensor(const ddpc_param *p, const ddpc_st_info *info, const char *path)
{
    if (strcmp(info->dtype, "F32") != 0)
        return ddpc_errorf(DDPC_EFORMAT, "%s: tensor '%s' has dtype %s, expected F32", path,
                           p->name, info->dtype);
    bool same = info->ndim == p->ndim;
    for (int d = 0; same && d < p->ndim; d++)
        same = info->shape[d] == p->shape[d];
    if (!same)
        return ddpc_errorf(DDPC_EFORMAT, "%s: tensor '%s' has a different shape than the model's",
                           path, p->name);
    return DDPC_OK;
}

ddpc_status ddpc_weights_load(ddpc_model *m, const char *path)
{
    ddpc_safetensors *f = NULL;
    DDPC_TRY(ddpc_safetensors_open(&f, path));
    size_t n = ddpc_model_num_tensors(m);
    ddpc_status s = DDPC_OK;
    if (ddpc_safetensors_count(f) != n)
        s = ddpc_errorf(DDPC_EFORMAT, "%s: holds %zu tensors but the model has %zu", path,
                        ddpc_safetensors_count(f), n);
    ddpc_st_info info;
    for (size_t i = 0; i < n && s == DDPC_OK; i++) {
        const ddpc_param *p = ddpc_model_tensor(m, i);
        s = ddpc_safetensors_find(f, p->name, &info);
        if (s == DDPC_OK)
            s = check_tensor(p, &info, path);
    }
    for (size_t i = 0; i < n && s == DDPC_OK; i++) {
        const ddpc_param *p = ddpc_model_tensor(m, i);
        ddpc_safetensors_find(f, p->name, &info);
        memcpy(ddpc_model_params(m) + p->offset, info.data, p->numel * sizeof(float));
    }
    ddpc_safetensors_close(f);
    return s;
}
