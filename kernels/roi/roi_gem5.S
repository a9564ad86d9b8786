/* ROI markers for gem5: m5 pseudo-ops reset_stats / dump_stats (delay x0 = 0, period
 * x1 = 0), so the simulator's statistics cover only the kernel (SIGILL outside gem5). */
#include "roi_slot.inc"

        roi_routine roi_begin
        mov     x0, #0
        mov     x1, #0
        .inst   0xff400110
        roi_routine_end roi_begin

        roi_routine roi_end
        mov     x0, #0
        mov     x1, #0
        .inst   0xff410110
        roi_routine_end roi_end

        .section .note.GNU-stack, "", %progbits
