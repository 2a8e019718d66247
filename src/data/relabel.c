// SPDX-License-Identifier: MIT
/* Relabelled views: an images dataset that borrows another's pixels and carries its own labels,
 * label = map[base label]. Invariant: the view owns only its labels; its pixels are always read
 * from the base, which must outlive it (ddpc_dataset_destroy never touches the base). */
#include "data/dataset_impl.h"

#include <ddpc/alloc.h>

ddpc_status ddpc_dataset_relabel_create(ddpc_dataset **out, const ddpc_dataset *base,
                                        const int64_t *map, int64_t map_len)
{
    *out = NULL;
    if (!base || base->kind != DDPC_DATASET_IMAGES)
        return ddpc_errorf(DDPC_EINVAL, "label_map: only an images dataset can be relabelled");
    if (!base->labels) /* from callbacks (its labels are the program's) or float targets */
        return ddpc_errorf(DDPC_EINVAL, "label_map: only a dataset with class labels held by "
                                        "ddpc can be relabelled (a dataset from callbacks maps "
                                        "the labels in its callbacks)");
    if (!map || map_len != base->classes)
        return ddpc_errorf(DDPC_EINVAL,
                           "label_map has %lld entries; it needs one per class of "
                           "the dataset (%lld)",
                           (long long)map_len, (long long)base->classes);
    int64_t classes = 0;
    for (int64_t k = 0; k < map_len; k++) {
        if (map[k] < 0 || map[k] > 255)
            return ddpc_errorf(DDPC_EINVAL, "label_map entry %lld must be in [0, 255], got %lld",
                               (long long)k, (long long)map[k]);
        classes = map[k] + 1 > classes ? map[k] + 1 : classes;
    }
    if (classes < 2)
        return ddpc_errorf(DDPC_EINVAL, "label_map maps every class to 0: a task needs at least "
                                        "2 classes");
    ddpc_dataset *d = ddpc__dataset_alloc(DDPC_DATASET_IMAGES);
    if (d)
        d->labels = ddpc_malloc(base->n > 0 ? (size_t)base->n : 1);
    if (!d || !d->labels) {
        ddpc_dataset_destroy(d);
        return ddpc_errorf(DDPC_ENOMEM, "label_map: out of memory for %lld labels",
                           (long long)base->n);
    }
    for (int64_t i = 0; i < base->n; i++)
        d->labels[i] = (uint8_t)map[base->labels[i]];
    d->base = base;
    d->n = base->n;
    d->classes = classes;
    for (int i = 0; i < 3; i++)
        d->shape[i] = base->shape[i];
    *out = d;
    return DDPC_OK;
}
