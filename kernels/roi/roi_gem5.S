/* ROI markers for gem5: m5 pseudo-ops reset_stats / dump_stats (delay x0 = 0, period
 * x1 = 0), so the simulator's statistics cover only the kernel. Each routine fills one
 * 32-byte slot so that every roi_<backend>.o has the same .text size and the binary's
 * addresses do not depend on the backend. */
#define SLOT 32
        .text
        .balign SLOT
        .global roi_begin
        .type   roi_begin, %function
roi_begin:
        mov     x0, #0
        mov     x1, #0
        .inst   0xff400110
        ret
        .if (. - roi_begin) > SLOT
        .error "roi_begin exceeds its slot"
        .endif
        .balign SLOT
        .size   roi_begin, SLOT

        .global roi_end
        .type   roi_end, %function
roi_end:
        mov     x0, #0
        mov     x1, #0
        .inst   0xff410110
        ret
        .if (. - roi_end) > SLOT
        .error "roi_end exceeds its slot"
        .endif
        .balign SLOT
        .size   roi_end, SLOT

        .section .note.GNU-stack, "", %progbits
