// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Compares libibverbs' pure functions in pfnic's libibverbs.so.1 with
 * rdma-core's: the rate conversions over every input they can meet, and the
 * description strings of every enum value (and some beyond). Both libraries
 * are loaded side by side with dlopen; any difference is printed and fails.
 *
 * usage: compare_rdma_core PFNIC-LIBIBVERBS RDMA-CORE-LIBIBVERBS
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef int (*int_fn)(int);
typedef const char *(*str_fn)(int);

static void *ours, *theirs;
static int failures;

static void *sym(void *lib, const char *name, const char *which)
{
    void *f = dlsym(lib, name);

    if (!f) {
        printf("%s: no %s\n", which, name);
        failures++;
    }
    return f;
}

static void compare_int(const char *name, int lo, int hi)
{
    int_fn a = sym(ours, name, "pfnic"), b = sym(theirs, name, "rdma-core");
    int bad = 0;

    if (!a || !b)
        return;
    for (int i = lo; i <= hi; i++) {
        if (a(i) != b(i) && bad++ < 5)
            printf("%s(%d): pfnic %d, rdma-core %d\n", name, i, a(i), b(i));
    }
    failures += bad;
}

static void compare_str(const char *name, int lo, int hi)
{
    str_fn a = sym(ours, name, "pfnic"), b = sym(theirs, name, "rdma-core");
    int bad = 0;

    if (!a || !b)
        return;
    for (int i = lo; i <= hi; i++) {
        if (strcmp(a(i), b(i)) && bad++ < 5)
            printf("%s(%d): pfnic \"%s\", rdma-core \"%s\"\n", name, i, a(i),
                   b(i));
    }
    failures += bad;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s PFNIC-LIB RDMA-CORE-LIB\n", argv[0]);
        return 2;
    }
    ours = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    theirs = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    if (!ours || !theirs || ours == theirs) {
        fprintf(stderr, "cannot load both libraries: %s\n", dlerror());
        return 2;
    }
    compare_int("ibv_rate_to_mult", -2, 64);
    compare_int("mult_to_ibv_rate", -2, 200);
    compare_int("ibv_rate_to_mbps", -2, 64);
    compare_int("mbps_to_ibv_rate", -2, 1400000);
    compare_str("ibv_wc_status_str", -2, 40);
    compare_str("ibv_event_type_str", -2, 40);
    compare_str("ibv_node_type_str", -2, 20);
    compare_str("ibv_port_state_str", -2, 20);
    if (failures) {
        printf("%d differences from rdma-core\n", failures);
        return 1;
    }
    return 0;
}
