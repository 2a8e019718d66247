// SPDX-License-Identifier: MIT
/* Private to src/data: an image folder's listing, as torchvision's find_classes and make_dataset
 * build it. Invariant: classes are sorted by name, files by (class, name), and every class has at
 * least one file; the listing owns every string. */
#ifndef DDPC_DATA_IMAGEFOLDER_IMPL_H
#define DDPC_DATA_IMAGEFOLDER_IMPL_H

#include <ddpc/status.h>

#include <stdint.h>

typedef struct {
    char **classes; /* (n_classes) folder names */
    int64_t n_classes;
    char **paths;    /* (n) "root/class/file" */
    uint8_t *labels; /* (n) class of each file */
    int64_t n;
    int64_t skipped; /* visible entries of class folders that are not image files */
} ddpc__image_list;

/* Lists root. DDPC_EIO when root or a class folder cannot be read; DDPC_EFORMAT naming the folder
 * when root has no class folder, over 256 classes, or a class folder has no image file. On error
 * *l is left empty (freed). */
ddpc_status ddpc__image_list_read(const char *root, ddpc__image_list *l);

/* Frees what the listing owns; a zeroed listing is a no-op. */
void ddpc__image_list_free(ddpc__image_list *l);

#endif
