/* ROI markers for ArmIE: the instrumentation clients start and stop counting at these two
 * encodings. Each routine fills one 32-byte slot so that every roi_<backend>.o has the same
 * .text size and the binary's addresses do not depend on the backend. */
#define SLOT 32
        .text
        .balign SLOT
        .global roi_begin
        .type   roi_begin, %function
roi_begin:
        .inst   0x2520e020
        ret
        .if (. - roi_begin) > SLOT
        .error "roi_begin exceeds its slot"
        .endif
        .balign SLOT
        .size   roi_begin, SLOT

        .global roi_end
        .type   roi_end, %function
roi_end:
        .inst   0x2520e040
        ret
        .if (. - roi_end) > SLOT
        .error "roi_end exceeds its slot"
        .endif
        .balign SLOT
        .size   roi_end, SLOT

        .section .note.GNU-stack, "", %progbits
