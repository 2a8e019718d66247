// SPDX-License-Identifier: MIT
/* Typed getters over the config tree: int, float, bool, string, choice and number lists.
 * Invariant: every call records its key (and default, as YAML text) as known before looking it
 * up; a value is marked used only when it converted and passed the range check, and *out is
 * written only on success. Numbers follow the YAML 1.2 core schema's decimal forms. */
#include "core/config_impl.h"

#include <ddpc/alloc.h>

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct {
    bool is_int;
    int64_t imin, imax;
    double fmin, fmax;
} num_spec;

static bool is_digit(char ch)
{
    return ch >= '0' && ch <= '9';
}

static size_t digits(const char **p)
{
    size_t n = 0;
    while (is_digit(**p)) {
        (*p)++;
        n++;
    }
    return n;
}

/* [-+]?[0-9]+ within int64. */
static bool parse_int(const char *s, int64_t *out)
{
    const char *p = s + (*s == '-' || *s == '+');
    if (!digits(&p) || *p)
        return false;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno == ERANGE || *end)
        return false;
    *out = (int64_t)v;
    return true;
}

/* [-+]?(digits[.digits*]|.digits)([eE][-+]?digits)?, finite. */
static bool parse_float(const char *s, double *out)
{
    const char *p = s + (*s == '-' || *s == '+');
    size_t n = digits(&p);
    if (*p == '.') {
        p++;
        n += digits(&p);
    }
    if (!n)
        return false;
    if (*p == 'e' || *p == 'E') {
        p++;
        p += (*p == '-' || *p == '+');
        if (!digits(&p))
            return false;
    }
    if (*p)
        return false;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (*end || !isfinite(v) || (errno == ERANGE && fabs(v) > 1.0))
        return false;
    *out = v;
    return true;
}

static bool parse_bool(const char *s, bool *out)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0 || strcasecmp(s, no[i]) == 0) {
            *out = strcasecmp(s, yes[i]) == 0;
            return true;
        }
    }
    return false;
}

/* Shortest "%.*g" that reads back exactly; YAML spellings for the non-finite. */
static void fmt_double(double v, char *buf, size_t cap)
{
    if (isnan(v)) {
        snprintf(buf, cap, ".nan");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, cap, "%s.inf", v < 0 ? "-" : "");
        return;
    }
    int prec = 1;
    for (; prec < 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    /* At least 6 digits so that 10 prints as "10", not "1e+01"; %g drops trailing zeros. */
    snprintf(buf, cap, "%.*g", prec < 6 ? 6 : prec, v);
}

static void fmt_num(const num_spec *sp, int64_t iv, double fv, char *buf, size_t cap)
{
    if (sp->is_int)
        snprintf(buf, cap, "%" PRId64, iv);
    else
        fmt_double(fv, buf, cap);
}

/* "an integer in [1, 10]" / "integers in [1, 10]"; "a number >= 0" when only one bound is set. */
static void num_what(const num_spec *sp, bool plural, char *buf, size_t cap)
{
    const char *noun = sp->is_int ? (plural ? "integers" : "an integer")
                                  : (plural ? "numbers" : "a number");
    char lo[40], hi[40];
    bool no_lo = sp->is_int ? sp->imin == INT64_MIN : sp->fmin <= -DBL_MAX;
    bool no_hi = sp->is_int ? sp->imax == INT64_MAX : sp->fmax >= DBL_MAX;
    fmt_num(sp, sp->imin, sp->fmin, lo, sizeof lo);
    fmt_num(sp, sp->imax, sp->fmax, hi, sizeof hi);
    if (no_lo && no_hi)
        snprintf(buf, cap, "%s", noun);
    else if (no_hi)
        snprintf(buf, cap, "%s >= %s", noun, lo);
    else if (no_lo)
        snprintf(buf, cap, "%s <= %s", noun, hi);
    else
        snprintf(buf, cap, "%s in [%s, %s]", noun, lo, hi);
}

/* "x.yaml:7: key 'k' [element i ]must be <what>, got 'text'". elem < 0: not a list element. */
static ddpc_status value_error(const ddpc__cfg_node *n, const char *key, ptrdiff_t elem,
                               const char *what)
{
    char where[320], el[40] = "";
    ddpc__cfg_where(n->origin, n->line, where, sizeof where);
    if (elem >= 0)
        snprintf(el, sizeof el, " element %td", elem);
    if (n->kind == DDPC__CFG_SCALAR)
        return ddpc_errorf(DDPC_EINVAL, "%s: key '%s'%s must be %s, got '%s'", where, key, el,
                           what, n->text);
    return ddpc_errorf(DDPC_EINVAL, "%s: key '%s'%s must be %s, got a %s", where, key, el, what,
                       n->kind == DDPC__CFG_MAP ? "mapping" : "sequence");
}

/* def_text: the default as YAML text, or (yaml false) as a string to quote. Flags waiting for the
 * key's last name are applied first; only a bool getter (`is_bool`) reads a bare flag. */
static ddpc_status lookup(ddpc_config *c, const char *key, const char *def_text, bool yaml,
                          bool is_bool, ddpc__cfg_node **n)
{
    *n = NULL;
    if (!c || !key || !key[0])
        return ddpc_errorf(DDPC_EINVAL, "config getter: config and key must be given");
    DDPC_TRY(ddpc__cfg_note_known(c, key, def_text, yaml));
    DDPC_TRY(ddpc__cfg_bind_flags(c, key, is_bool));
    *n = ddpc__cfg_find(c, key);
    return DDPC_OK;
}

/* Converts scalar `n` under `sp`; false if not a scalar, malformed or out of range. */
static bool convert(const num_spec *sp, const ddpc__cfg_node *n, int64_t *iv, double *fv)
{
    if (n->kind != DDPC__CFG_SCALAR)
        return false;
    if (sp->is_int)
        return parse_int(n->text, iv) && *iv >= sp->imin && *iv <= sp->imax;
    return parse_float(n->text, fv) && *fv >= sp->fmin && *fv <= sp->fmax;
}

ddpc_status ddpc_config_int(ddpc_config *c, const char *key, int64_t def, int64_t min, int64_t max,
                            int64_t *out)
{
    num_spec sp = {.is_int = true, .imin = min, .imax = max};
    char dt[32], what[128];
    snprintf(dt, sizeof dt, "%" PRId64, def);
    ddpc__cfg_node *n;
    DDPC_TRY(lookup(c, key, dt, true, false, &n));
    int64_t v = def;
    if (n && !convert(&sp, n, &v, NULL)) {
        num_what(&sp, false, what, sizeof what);
        return value_error(n, key, -1, what);
    }
    if (n)
        n->used = true;
    *out = v;
    return DDPC_OK;
}

ddpc_status ddpc_config_float(ddpc_config *c, const char *key, double def, double min, double max,
                              double *out)
{
    num_spec sp = {.is_int = false, .fmin = min, .fmax = max};
    char dt[40], what[128];
    fmt_double(def, dt, sizeof dt);
    ddpc__cfg_node *n;
    DDPC_TRY(lookup(c, key, dt, true, false, &n));
    double v = def;
    if (n && !convert(&sp, n, NULL, &v)) {
        num_what(&sp, false, what, sizeof what);
        return value_error(n, key, -1, what);
    }
    if (n)
        n->used = true;
    *out = v;
    return DDPC_OK;
}

ddpc_status ddpc_config_bool(ddpc_config *c, const char *key, bool def, bool *out)
{
    ddpc__cfg_node *n;
    DDPC_TRY(lookup(c, key, def ? "true" : "false", true, true, &n));
    bool v = def;
    if (n && (n->kind != DDPC__CFG_SCALAR || !parse_bool(n->text, &v)))
        return value_error(n, key, -1, "a boolean (true/false, yes/no, on/off, 1/0)");
    if (n)
        n->used = true;
    *out = v;
    return DDPC_OK;
}

ddpc_status ddpc_config_string(ddpc_config *c, const char *key, const char *def, const char **out)
{
    ddpc__cfg_node *n;
    DDPC_TRY(lookup(c, key, def, false, false, &n));
    if (n && n->kind != DDPC__CFG_SCALAR)
        return value_error(n, key, -1, "a string");
    if (n)
        n->used = true;
    *out = !n ? def : ddpc__cfg_is_null(n) ? NULL : n->text;
    return DDPC_OK;
}

static const char *nth_choice(const void *ctx, size_t i)
{
    return ((const char *const *)ctx)[i];
}

const char *ddpc_config_nearest(const char *word, const char *const *choices)
{
    size_t count = 0;
    while (choices && choices[count])
        count++;
    return word ? ddpc__cfg_suggest(word, nth_choice, choices, count) : NULL;
}

static ddpc_status choice_error(const ddpc__cfg_node *n, const char *key, const char *text,
                                const char *const *choices, size_t count)
{
    char what[512] = "one of ", hint[160] = "";
    size_t len = strlen(what);
    for (size_t i = 0; i < count && len < sizeof what; i++)
        len += (size_t)snprintf(what + len, sizeof what - len, "%s%s", i ? ", " : "", choices[i]);
    const char *near = text ? ddpc__cfg_suggest(text, nth_choice, choices, count) : NULL;
    if (near)
        snprintf(hint, sizeof hint, " (did you mean '%s'?)", near);
    char where[320];
    ddpc__cfg_where(n->origin, n->line, where, sizeof where);
    return ddpc_errorf(DDPC_EINVAL, "%s: key '%s' must be %s, got '%s'%s", where, key, what,
                       text ? text : n->text, hint);
}

ddpc_status ddpc_config_choice(ddpc_config *c, const char *key, const char *def,
                               const char *const *choices, int *out)
{
    if (!choices || !choices[0])
        return ddpc_errorf(DDPC_EINVAL, "config key '%s': no choices given", key ? key : "");
    size_t count = 0;
    int def_idx = -1;
    for (; choices[count]; count++) {
        if (def && strcmp(def, choices[count]) == 0)
            def_idx = (int)count;
    }
    if (def && def_idx < 0)
        return ddpc_errorf(DDPC_EINVAL, "config key '%s': default '%s' is not one of its choices",
                           key ? key : "", def);
    const char *s;
    DDPC_TRY(ddpc_config_string(c, key, def, &s));
    ddpc__cfg_node *n = ddpc__cfg_find(c, key);
    if (!n) {
        *out = def_idx;
        return DDPC_OK;
    }
    for (size_t i = 0; s && i < count; i++) {
        if (strcmp(s, choices[i]) == 0) {
            *out = (int)i;
            return DDPC_OK;
        }
    }
    n->used = false;
    return choice_error(n, key, s, choices, count);
}

ddpc_status ddpc_config_choice_alias(ddpc_config *c, const char *key, const char *def,
                                     const char *const *choices, const ddpc_config_alias *aliases,
                                     int *out)
{
    const char *s = NULL;
    DDPC_TRY(ddpc_config_string(c, key, def, &s));
    ddpc__cfg_node *n = ddpc__cfg_find(c, key);
    for (const ddpc_config_alias *a = aliases; n && s && a && a->spelling; a++) {
        if (strcmp(s, a->spelling) != 0)
            continue;
        if (!a->canonical) {
            char where[320];
            ddpc__cfg_where(n->origin, n->line, where, sizeof where);
            n->used = false; /* as a value that failed its choice */
            return ddpc_errorf(DDPC_EINVAL, "%s: key '%s' cannot be '%s': %s", where, key, s,
                               a->why ? a->why : "that spelling is not supported");
        }
        char *canon = ddpc__cfg_strndup(a->canonical, strlen(a->canonical));
        if (!canon || !ddpc__cfg_keep(c, n->text)) {
            ddpc_free(canon);
            return ddpc_errorf(DDPC_ENOMEM, "out of memory rewriting key '%s'", key);
        }
        n->text = canon; /* the old text now lives with the origins, for earlier borrowers */
        break;
    }
    return ddpc_config_choice(c, key, def, choices, out);
}

static size_t list_len(const ddpc__cfg_node *n)
{
    return n->kind == DDPC__CFG_SEQ ? n->len : 1;
}

static ddpc__cfg_node *list_elem(ddpc__cfg_node *n, size_t i)
{
    return n->kind == DDPC__CFG_SEQ ? n->kids[i] : n;
}

/* Looks up and validates a number list; *np = NULL when absent. Marks nothing. */
static ddpc_status check_list(ddpc_config *c, const char *key, const char *def_text,
                              const num_spec *sp, size_t cap, ddpc__cfg_node **np)
{
    char what[160], one[128];
    DDPC_TRY(lookup(c, key, def_text, true, false, np));
    ddpc__cfg_node *n = *np;
    if (!n)
        return DDPC_OK;
    if (n->kind == DDPC__CFG_MAP) {
        num_what(sp, true, one, sizeof one);
        snprintf(what, sizeof what, "a list of %s", one);
        return value_error(n, key, -1, what);
    }
    if (list_len(n) > cap) {
        char where[320];
        ddpc__cfg_where(n->origin, n->line, where, sizeof where);
        return ddpc_errorf(DDPC_EINVAL, "%s: key '%s' must have at most %zu elements, got %zu",
                           where, key, cap, list_len(n));
    }
    for (size_t i = 0; i < list_len(n); i++) {
        int64_t iv;
        double fv;
        if (!convert(sp, list_elem(n, i), &iv, &fv)) {
            num_what(sp, false, one, sizeof one);
            return value_error(list_elem(n, i), key,
                               n->kind == DDPC__CFG_SEQ ? (ptrdiff_t)i : -1, one);
        }
    }
    return DDPC_OK;
}

/* "[1, 2, 3]" for the dump; truncated lists still end in ']'. */
static void fmt_list(const num_spec *sp, const int64_t *iv, const double *fv, size_t n,
                     char *buf, size_t cap)
{
    size_t len = (size_t)snprintf(buf, cap, "[");
    for (size_t i = 0; i < n && len + 48 < cap; i++) {
        char one[40];
        fmt_num(sp, iv ? iv[i] : 0, fv ? fv[i] : 0.0, one, sizeof one);
        len += (size_t)snprintf(buf + len, cap - len, "%s%s", i ? ", " : "", one);
    }
    snprintf(buf + len, cap - len, "]");
}

/* Shared body of the list getters: exactly one of iv/fv (out and def) is used, per sp->is_int. */
static ddpc_status get_list(ddpc_config *c, const char *key, const num_spec *sp, const void *def,
                            size_t n_def, void *out, size_t cap, size_t *n_out)
{
    size_t elem = sp->is_int ? sizeof(int64_t) : sizeof(double);
    if (n_def > cap || (n_def && !def) || (cap && !out) || !n_out)
        return ddpc_errorf(DDPC_EINVAL, "config key '%s': bad list arguments", key ? key : "");
    char dt[1024];
    fmt_list(sp, sp->is_int ? def : NULL, sp->is_int ? NULL : def, n_def, dt, sizeof dt);
    ddpc__cfg_node *n;
    DDPC_TRY(check_list(c, key, dt, sp, cap, &n));
    if (!n) {
        if (n_def)
            memcpy(out, def, n_def * elem);
        *n_out = n_def;
        return DDPC_OK;
    }
    for (size_t i = 0; i < list_len(n); i++) {
        if (sp->is_int)
            convert(sp, list_elem(n, i), (int64_t *)out + i, NULL);
        else
            convert(sp, list_elem(n, i), NULL, (double *)out + i);
        list_elem(n, i)->used = true;
    }
    n->used = true;
    *n_out = list_len(n);
    return DDPC_OK;
}

ddpc_status ddpc_config_int_list(ddpc_config *c, const char *key, const int64_t *def, size_t n_def,
                                 int64_t min, int64_t max, int64_t *out, size_t cap,
                                 size_t *n_out)
{
    num_spec sp = {.is_int = true, .imin = min, .imax = max};
    return get_list(c, key, &sp, def, n_def, out, cap, n_out);
}

ddpc_status ddpc_config_float_list(ddpc_config *c, const char *key, const double *def,
                                   size_t n_def, double min, double max, double *out, size_t cap,
                                   size_t *n_out)
{
    num_spec sp = {.is_int = false, .fmin = min, .fmax = max};
    return get_list(c, key, &sp, def, n_def, out, cap, n_out);
}

ddpc_status ddpc_config_string_list(ddpc_config *c, const char *key, const char **out, size_t cap,
                                    size_t *n_out)
{
    if ((cap && !out) || !n_out)
        return ddpc_errorf(DDPC_EINVAL, "config key '%s': bad list arguments", key ? key : "");
    ddpc__cfg_node *n;
    DDPC_TRY(lookup(c, key, "[]", true, false, &n));
    if (!n || (n->kind == DDPC__CFG_SCALAR && ddpc__cfg_is_null(n))) {
        if (n)
            n->used = true;
        *n_out = 0;
        return DDPC_OK;
    }
    if (n->kind == DDPC__CFG_MAP)
        return value_error(n, key, -1, "a list of strings");
    if (list_len(n) > cap) {
        char where[320];
        ddpc__cfg_where(n->origin, n->line, where, sizeof where);
        return ddpc_errorf(DDPC_EINVAL, "%s: key '%s' must have at most %zu elements, got %zu",
                           where, key, cap, list_len(n));
    }
    for (size_t i = 0; i < list_len(n); i++) {
        ddpc__cfg_node *e = list_elem(n, i);
        if (e->kind != DDPC__CFG_SCALAR || ddpc__cfg_is_null(e))
            return value_error(e, key, n->kind == DDPC__CFG_SEQ ? (ptrdiff_t)i : -1, "a string");
    }
    for (size_t i = 0; i < list_len(n); i++) {
        out[i] = list_elem(n, i)->text;
        list_elem(n, i)->used = true;
    }
    n->used = true;
    *n_out = list_len(n);
    return DDPC_OK;
}

const char *ddpc_config_key(char *key, size_t cap, const char *prefix, const char *name)
{
    snprintf(key, cap, "%s.%s", prefix, name);
    return key;
}
