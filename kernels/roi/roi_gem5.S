/* ROI markers for gem5 (SIGILL outside gem5). roi_begin: m5 work_begin, on which
 * gem5_scripts/se_sve.py switches from the atomic CPU to the O3 core, then reset_stats;
 * roi_end: dump_stats (the ROI's statistics block), then work_end (switch back). Each m5op
 * takes x0/x1 (work id and thread, or delay and period), all 0 here. Inside the ROI gem5
 * therefore also commits roi_end's first two movs and its dump_stats, which QEMU's hint
 * markers do not have: the documented difference of the cross-backend check. */
#include "roi_slot.inc"

        roi_routine roi_begin
        mov     x0, #0
        mov     x1, #0
        .inst   0xff5a0110              /* work_begin */
        mov     x0, #0
        mov     x1, #0
        .inst   0xff400110              /* reset_stats */
        roi_routine_end roi_begin

        roi_routine roi_end
        mov     x0, #0
        mov     x1, #0
        .inst   0xff410110              /* dump_stats */
        mov     x0, #0
        mov     x1, #0
        .inst   0xff5b0110              /* work_end */
        roi_routine_end roi_end

        .section .note.GNU-stack, "", %progbits
