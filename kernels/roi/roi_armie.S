/* ROI markers for ArmIE: its instrumentation clients start and stop counting at these two
 * encodings (undefined elsewhere: SIGILL under QEMU and on hardware). */
#include "roi_slot.inc"

        roi_routine roi_begin
        .inst   0x2520e020
        roi_routine_end roi_begin

        roi_routine roi_end
        .inst   0x2520e040
        roi_routine_end roi_end

        .section .note.GNU-stack, "", %progbits
