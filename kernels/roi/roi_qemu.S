/* ROI markers for the QEMU plugins: hint #0x40 / #0x41 are NOPs on hardware that the
 * plugins watch for. Each routine fills one 32-byte slot so that every roi_<backend>.o has
 * the same .text size and the binary's addresses do not depend on the backend. */
#define SLOT 32
        .text
        .balign SLOT
        .global roi_begin
        .type   roi_begin, %function
roi_begin:
        hint    #0x40
        ret
        .if (. - roi_begin) > SLOT
        .error "roi_begin exceeds its slot"
        .endif
        .balign SLOT
        .size   roi_begin, SLOT

        .global roi_end
        .type   roi_end, %function
roi_end:
        hint    #0x41
        ret
        .if (. - roi_end) > SLOT
        .error "roi_end exceeds its slot"
        .endif
        .balign SLOT
        .size   roi_end, SLOT

        .section .note.GNU-stack, "", %progbits
