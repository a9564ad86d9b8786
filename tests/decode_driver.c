/*
 * decode_driver.c - host test driver for the clients' shared decoder
 * (armie_clients/decode.c): reads hex words on stdin and prints, per word,
 * what each client makes of it:
 *   <word> <class> <sve 0|1> <memclass>:<bytes> [<memclass>:<bytes>] | -
 * (inscount's class and SVE flag, memory's accesses at <vl bits>).
 * Build: gcc -O2 -std=gnu11 -Iarmie_clients -o decode_driver \
 *            tests/decode_driver.c armie_clients/decode.c
 */
#include <stdio.h>
#include <stdlib.h>

#include "decode.h"

int main(int argc, char **argv)
{
    unsigned long w;
    unsigned long long vl = argc == 2 ? strtoull(argv[1], NULL, 10) : 0;

    if (vl == 0 || vl % 128 || !decode_init()) {
        fprintf(stderr, "usage: decode_driver <vl bits, a multiple of 128>\n");
        return 2;
    }
    while (scanf("%lx", &w) == 1) {
        uint32_t insn = (uint32_t)w;
        struct mem_access acc[2];
        int n = decode_mem(insn, vl, acc);

        printf("%08x %s %d", insn, insn_class_names[decode_class(insn)],
               decode_is_sve(insn) ? 1 : 0);
        if (!n) {
            printf(" -");
        }
        for (int i = 0; i < n; i++) {
            printf(" %s:%llu", mem_class_names[acc[i].cls],
                   (unsigned long long)acc[i].bytes);
        }
        printf("\n");
    }
    return 0;
}
