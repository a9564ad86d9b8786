/*
 * roi_inscount.c - a DynamoRIO client that stands in for ArmIE's
 * libinscount_emulated.so inside the emulated AArch64 guest (issue 35).
 *
 * It counts the application's instructions between the ArmIE ROI markers
 * (kernels/roi/roi_armie.S: .inst 0x2520e020 begin, 0x2520e040 end) and at
 * exit prints ArmIE's line on stderr:
 *     <N> instructions executed of which <M> were emulated instructions
 * so analysis/backends/armie.py parses real output. ArmIE's M counts the SVE
 * instructions it emulated on a host without SVE; the guest CPU has SVE and
 * DynamoRIO runs them natively, so M here is the SVE-encoded instructions
 * ((enc & 0x1e000000) == 0x04000000, the rule of armie_clients/decode.c).
 *
 * ROI semantics follow the QEMU plugins (armie_clients/tbstats.h): the two
 * markers themselves are not counted, every instruction executed between
 * them is; several begin/end pairs are summed; a nested begin or an end
 * without a begin makes the ROI unbalanced and no count line is printed (a
 * missing line is an error for the parser, a wrong number would not be).
 *
 * The markers are unallocated encodings (SIGILL on every CPU): the client
 * removes them from the code it builds, so the program runs as if they were
 * NOPs, as it does under ArmIE.
 *
 * Batch mode (kernels/harness/harness.c, `--batch`): one process runs several
 * cells, executing the run mark hint #0x42 (0xd503285f, a NOP; the QEMU
 * plugins' TBS_RUN_MARK) before each run and after the last. Each mark after
 * the first ends a run: the client prints that run's count on stderr as
 *     run <k>: <N> instructions executed of which <M> were emulated instructions
 * (k = 0, 1, ...; or `run <k>: roi_inscount: ROI markers not balanced ...`)
 * and restarts its ROI from zero, so each line counts what that run alone
 * counts; nothing more is printed at exit (a run the process left without its
 * mark, a failed run, gets `run <k>: ... ended before its run mark`). A process
 * without the mark prints ArmIE's single line at exit, as before.
 * analysis/backends/armie_format.py splits the lines into per-run outputs.
 * Why batches: each drrun pays DynamoRIO's start-up and builds its code cache
 * again, most of a cell's 11 CPU seconds in the emulated guest.
 *
 * Options (ArmIE's sample client names):
 *   -noROI       count the whole program instead of the ROI
 *   -shared_libs count every module (default: the main executable only)
 *
 * Counting is inline: each segment of a block adds its instruction and SVE
 * counts to two globals with a load/add/store through two scratch registers
 * (drreg), about a dozen instructions. A clean call there (the first version)
 * saved and restored every register at each executed segment, on AArch64 the
 * SVE Z, P and FFR registers too, in system-mode TCG; only the rare markers
 * make clean calls.
 *
 * Single-threaded programs only: the counters are plain globals, updated
 * without atomics (the harness's kernels run one thread; MPI ranks are
 * processes).
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "dr_api.h"
#include "drmgr.h"
#include "drreg.h"

#define ROI_BEGIN 0x2520e020u
#define ROI_END 0x2520e040u
#define RUN_MARK 0xd503285fu /* hint #0x42 */
/* Note offsets of the three labels: ROI begin, ROI end, run mark. */
enum { NOTE_BEGIN, NOTE_END, NOTE_RUN, NOTES };

/* Every counted instruction and its SVE ones, next to each other: the inline update loads
 * the array's address once for both. */
static uint64 counters[2];
#define total counters[0]
#define sve counters[1]
static uint64 roi_total, roi_sve;     /* closed ROIs */
static uint64 begin_total, begin_sve; /* the counters at the open ROI's begin */
static uint64 begins, ends;
static bool in_roi, roi_error;
static uint64 run_marks; /* batch mode: run marks executed so far */
static bool whole_program, shared_libs;
static app_pc exe_start, exe_end;
static ptr_uint_t note_base; /* drmgr note values of the marker labels: NOTE_BEGIN, NOTE_END, NOTE_RUN after it */

static bool
is_sve(uint enc)
{
    return (enc & 0x1e000000u) == 0x04000000u;
}

/* The 32-bit encoding of an application instruction (0 when it cannot be read). */
static uint
encoding(instr_t *instr)
{
    uint enc = 0;
    app_pc pc = instr_get_app_pc(instr);
    if (pc == NULL || !dr_safe_read(pc, sizeof enc, &enc, NULL))
        return 0;
    return enc;
}

static bool
is_marker_label(instr_t *instr, ptr_uint_t *which)
{
    if (!instr_is_label(instr))
        return false;
    ptr_uint_t note = (ptr_uint_t)instr_get_note(instr);
    if (note < note_base || note >= note_base + NOTES)
        return false;
    *which = note - note_base;
    return true;
}

/* An instruction the application executes: labels (ours, and any a library adds) are not,
 * though DynamoRIO creates them as application instructions. */
static bool
executed(instr_t *instr)
{
    return instr_is_app(instr) && !instr_is_label(instr);
}

static bool
counted(void *tag)
{
    app_pc pc = dr_fragment_app_pc(tag);
    return shared_libs || (pc >= exe_start && pc < exe_end);
}

/* Before `where`: total += n; sve += m (m == 0: no store to sve). Two scratch registers from
 * drreg (it spills and restores the application's values); add takes n and m as 12-bit
 * immediates, and a block holds far fewer instructions than 4096. */
static void
insert_add(void *drcontext, instrlist_t *bb, instr_t *where, uint n, uint m)
{
    reg_id_t base, value;
    if (drreg_reserve_register(drcontext, bb, where, NULL, &base) != DRREG_SUCCESS ||
        drreg_reserve_register(drcontext, bb, where, NULL, &value) != DRREG_SUCCESS)
        DR_ASSERT_MSG(false, "roi_inscount: no scratch register");
    instrlist_insert_mov_immed_ptrsz(drcontext, (ptr_int_t)counters, opnd_create_reg(base), bb,
                                     where, NULL, NULL);
    for (int i = 0; i < 2; i++) {
        uint k = i == 0 ? n : m;
        if (k == 0)
            continue;
        DR_ASSERT(k < 4096);
        opnd_t slot = OPND_CREATE_MEMPTR(base, i * (int)sizeof(uint64));
        instrlist_meta_preinsert(bb, where, XINST_CREATE_load(drcontext, opnd_create_reg(value), slot));
        instrlist_meta_preinsert(bb, where, XINST_CREATE_add(drcontext, opnd_create_reg(value),
                                                             OPND_CREATE_INT((int)k)));
        instrlist_meta_preinsert(bb, where, XINST_CREATE_store(drcontext, slot, opnd_create_reg(value)));
    }
    if (drreg_unreserve_register(drcontext, bb, where, base) != DRREG_SUCCESS ||
        drreg_unreserve_register(drcontext, bb, where, value) != DRREG_SUCCESS)
        DR_ASSERT(false);
}

/* The ROI state of one run (or of a whole single-run process). */
static void
roi_reset(void)
{
    roi_total = roi_sve = begins = ends = 0;
    in_roi = roi_error = false;
}

/* Print the ROI count gathered since the last reset, ArmIE's line; `prefix` names the run in a
 * batch ("" for a single-run process, whose output stays ArmIE's). */
static void
report(const char *prefix, const char *unfinished)
{
    if (unfinished != NULL) {
        dr_fprintf(STDERR, "%sroi_inscount: %s (begins %llu, ends %llu): no count\n", prefix,
                   unfinished, (unsigned long long)begins, (unsigned long long)ends);
    } else if (roi_error || in_roi || begins == 0 || begins != ends) {
        dr_fprintf(STDERR,
                   "%sroi_inscount: ROI markers not balanced (begins %llu, ends %llu): no count\n",
                   prefix, (unsigned long long)begins, (unsigned long long)ends);
    } else {
        dr_fprintf(STDERR, "%s%llu instructions executed of which %llu were emulated instructions\n",
                   prefix, (unsigned long long)roi_total, (unsigned long long)roi_sve);
    }
}

static void
run_prefix(char *buf, size_t len, uint64 run)
{
    dr_snprintf(buf, len, "run %llu: ", (unsigned long long)run);
    buf[len - 1] = '\0';
}

static void
mark(uint which)
{
    if (which == NOTE_RUN) {
        if (whole_program)
            return; /* -noROI: one whole-process count at exit, batch or not */
        /* The first mark opens the first run (nothing before it is a run's); each later one
         * closes the run before it. */
        if (run_marks > 0) {
            char prefix[32];
            run_prefix(prefix, sizeof prefix, run_marks - 1);
            report(prefix, NULL);
        }
        run_marks++;
        roi_reset();
        return;
    }
    if (which == NOTE_BEGIN) {
        begins++;
        if (in_roi)
            roi_error = true;
        in_roi = true;
        begin_total = total;
        begin_sve = sve;
    } else {
        ends++;
        if (!in_roi) {
            roi_error = true;
            return;
        }
        in_roi = false;
        roi_total += total - begin_total;
        roi_sve += sve - begin_sve;
    }
}

/* Replace each ROI marker by a label the insertion pass turns into a mark() call: executed
 * natively the marker would raise SIGILL. A run mark gets a label before it. */
static dr_emit_flags_t
event_app2app(void *drcontext, void *tag, instrlist_t *bb, bool for_trace, bool translating)
{
    instr_t *instr, *next;
    for (instr = instrlist_first_app(bb); instr != NULL; instr = next) {
        next = instr_get_next_app(instr);
        uint enc = encoding(instr);
        if (enc != ROI_BEGIN && enc != ROI_END && enc != RUN_MARK)
            continue;
        instr_t *label = INSTR_CREATE_label(drcontext);
        int note = enc == ROI_BEGIN ? NOTE_BEGIN : enc == ROI_END ? NOTE_END : NOTE_RUN;
        instr_set_note(label, (void *)(note_base + note));
        instrlist_preinsert(bb, instr, label);
        if (enc == RUN_MARK)
            continue; /* a NOP: it stays, executed and counted as under the QEMU plugins */
        instrlist_remove(bb, instr);
        instr_destroy(drcontext, instr);
    }
    return DR_EMIT_DEFAULT;
}

/* A segment is a run of application instructions between the block's ends and marker
 * labels: one inline add at its first instruction counts all of it. A marker's mark() runs
 * after the segment before it was added and before the one after it is. */
static dr_emit_flags_t
event_insert(void *drcontext, void *tag, instrlist_t *bb, instr_t *instr, bool for_trace,
             bool translating, void *user_data)
{
    ptr_uint_t which;
    drmgr_disable_auto_predication(drcontext, bb);
    if (!counted(tag))
        return DR_EMIT_DEFAULT;
    if (is_marker_label(instr, &which)) {
        dr_insert_clean_call(drcontext, bb, instr, (void *)mark, false, 1,
                             OPND_CREATE_INT32((int)which));
        return DR_EMIT_DEFAULT;
    }
    if (!executed(instr))
        return DR_EMIT_DEFAULT;
    instr_t *prev;
    for (prev = instr_get_prev(instr); prev != NULL; prev = instr_get_prev(prev)) {
        if (is_marker_label(prev, &which) || executed(prev))
            break;
    }
    if (prev != NULL && executed(prev))
        return DR_EMIT_DEFAULT; /* not the first instruction of its segment */
    uint n = 0, m = 0;
    for (instr_t *in = instr; in != NULL; in = instr_get_next(in)) {
        if (is_marker_label(in, &which))
            break;
        if (!executed(in))
            continue;
        n++;
        if (is_sve(encoding(in)))
            m++;
    }
    insert_add(drcontext, bb, instr, n, m);
    return DR_EMIT_DEFAULT;
}

static void
event_exit(void)
{
    if (whole_program) {
        dr_fprintf(STDERR, "%llu instructions executed of which %llu were emulated instructions\n",
                   (unsigned long long)total, (unsigned long long)sve);
    } else if (run_marks == 0) {
        report("", NULL);
    } else if (begins > 0) {
        /* The process ended inside a run (a run that failed exits the batch): no count. */
        char prefix[32];
        run_prefix(prefix, sizeof prefix, run_marks - 1);
        report(prefix, "the process ended before its run mark");
    }
    drmgr_unregister_bb_app2app_event(event_app2app);
    drmgr_unregister_bb_insertion_event(event_insert);
    drreg_exit();
    drmgr_exit();
}

DR_EXPORT void
dr_client_main(client_id_t id, int argc, const char *argv[])
{
    dr_set_client_name("roi_inscount (ArmIE libinscount_emulated.so stand-in)", "issue 35");
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-noROI") == 0)
            whole_program = true;
        else if (strcmp(argv[i], "-shared_libs") == 0)
            shared_libs = true;
        else {
            dr_fprintf(STDERR, "roi_inscount: unknown option '%s' (known: -noROI -shared_libs)\n",
                       argv[i]);
            dr_abort();
        }
    }
    module_data_t *exe = dr_get_main_module();
    DR_ASSERT(exe != NULL);
    exe_start = exe->start;
    exe_end = exe->end;
    dr_free_module_data(exe);
    /* Two spill slots: the inline add's two scratch registers. */
    drreg_options_t ops = { sizeof(ops), 2, false };
    if (!drmgr_init() || drreg_init(&ops) != DRREG_SUCCESS)
        DR_ASSERT(false);
    note_base = drmgr_reserve_note_range(NOTES);
    DR_ASSERT(note_base != DRMGR_NOTE_NONE);
    if (!drmgr_register_bb_app2app_event(event_app2app, NULL) ||
        !drmgr_register_bb_instrumentation_event(NULL, event_insert, NULL))
        DR_ASSERT(false);
    drmgr_register_exit_event(event_exit);
}
