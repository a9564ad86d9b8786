/* ROI markers for the QEMU plugins: hint #0x40 / #0x41 are NOPs on hardware (and in gem5)
 * that the plugins watch for. */
#include "roi_slot.inc"

        roi_routine roi_begin
        hint    #0x40
        roi_routine_end roi_begin

        roi_routine roi_end
        hint    #0x41
        roi_routine_end roi_end

        .section .note.GNU-stack, "", %progbits
