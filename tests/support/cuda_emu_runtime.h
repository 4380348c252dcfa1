// cuda_emu_runtime.h - run CUDA C kernels on the CPU, one fiber per CUDA thread (tests only).
//
// tests/support/cuda_emu.py pastes this file in front of a kernel source from
// tinyattn/backends/kernels/, compiles the lot with g++ into a shared library and launches
// the kernels through emu_launch(). The kernel text is the one NVRTC gets; only PTX inline asm
// (the float16 conversions) and `extern __shared__` arrays are rewritten by the harness.
//
// How a launch runs: it forks, so a kernel that crashes or hangs cannot take the test process
// with it (the argument buffers are MAP_SHARED, so the child's writes come back). The child
// runs the blocks one after another; in a block every CUDA thread is a ucontext fiber that
// runs until it reaches __syncthreads(), a warp shuffle, or its end. When no fiber can go on,
// the scheduler releases the waiting warps (shuffles) or the whole block (__syncthreads).
// Every load and store of the kernel code goes through __tsan_readN/__tsan_writeN: the harness
// compiles the kernels with g++ -fsanitize=thread but links no ThreadSanitizer runtime; the
// hooks below are ours. They find the buffer an address falls in (an argument, the dynamic
// shared memory, or the section where every `__shared__` array lives) and keep, per word of
// writable memory, the last writer and reader (block, thread, barrier interval).
// What it checks, each a failure with a message naming block and thread (and, for the
// checks of the hooks, the code address, which the harness turns into a source line):
//   * a race: two threads touch the same word, at least one of them writing and not both
//     with atomics, in the same barrier interval of one block (shared or global memory), or
//     from two different blocks (global memory: no barrier orders blocks). A missing
//     __syncthreads, or `+=` where atomicAdd is needed, is reported even though the fibers
//     here never actually interleave inside a barrier interval;
//   * a read of shared memory that no thread of the block has written since the block
//     started (shared memory, static and dynamic, is also filled with 0xff bytes, a NaN,
//     at the start of every block);
//   * an access before the start of an argument or of the dynamic shared memory (a negative
//     index), a write into a const argument;
//   * an index outside a fixed-size array (a `__shared__ float part[32]` or a register
//     array), by -fsanitize=bounds, as UBSan's report;
//   * a full-mask shuffle must be reached by all 32 lanes of the warp at the same source line
//     (a lane that exited, or that waits elsewhere, is a divergence bug on a GPU too);
//   * every live thread of the block must reach the same __syncthreads();
//   * a block that can make no progress is a deadlock;
//   * a read or write past the end of an argument buffer or of the dynamic shared memory
//     (the hooks, up to the guard page; a PROT_NONE guard page beyond: SIGSEGV is turned
//     into a message with the address);
//   * dynamic shared memory starts as NaN bytes (0xff), so reading a slot no thread wrote
//     shows up in the results;
//   * a load or store through a pointer less aligned than its type requires (a 16-byte vector
//     load from an address that is not a multiple of 16) stops the launch: the code is built
//     with -fsanitize=alignment, and UBSan's report goes back as the message (dynamic shared
//     memory is 16-byte aligned, as declared; an argument as its view lies in its device array:
//     element 0 of a fresh array at a multiple of 256 bytes, of a view that many bytes off);
//   * order = 1 runs blocks and threads in reverse order: a race that a missing barrier
//     allows changes the results between order 0 and order 1.
#pragma once
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <csetjmp>
#include <cstring>
#include <cstdlib>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

// ---- the CUDA C vocabulary the kernels use -------------------------------------------------

struct emu_uint3 {
    unsigned x, y, z;
};
static emu_uint3 threadIdx, blockIdx, blockDim, gridDim;

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static  // the harness gathers every function-level static (.bss._ZZ*) into
                           // one section, emu_shared_start ... emu_shared_stop (-fdata-sections)
#define EMU_RT __attribute__((no_sanitize_thread))  // runtime code: its accesses are not hooked
#define __align__(n) __attribute__((aligned(n)))

static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }
static inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }

static inline float __int_as_float(int i) {
    float f;
    memcpy(&f, &i, 4);
    return f;
}
static inline int __float_as_int(float f) {
    int i;
    memcpy(&i, &f, 4);
    return i;
}
static inline double __longlong_as_double(long long i) {
    double d;
    memcpy(&d, &i, 8);
    return d;
}
static inline long long __double_as_longlong(double d) {
    long long i;
    memcpy(&i, &d, 8);
    return i;
}

static void emu_access(const void* p, size_t size, int write, int atomic, void* pc);

// Fibers run one at a time and switch only at barriers, so a plain add is atomic; the race
// check is told it was an atomic access.
template <typename T>
EMU_RT static T atomicAdd(T* p, T v) {
    emu_access(p, sizeof(T), 1, 1, __builtin_return_address(0));
    const T old = *p;
    *p = old + v;
    return old;
}

// What the harness puts in place of `cvt.f32.f16` and `cvt.rn.f16.f32` (round to nearest even).
static inline float emu_half_to_float(unsigned short h) {
    _Float16 x;
    memcpy(&x, &h, 2);
    return (float)x;
}
static inline unsigned short emu_float_to_half(float f) {
    const _Float16 x = (_Float16)f;
    unsigned short h;
    memcpy(&h, &x, 2);
    return h;
}

// cupy.ElementwiseKernel's float16 type, as far as the tinyattn kernels use it: (T)f, (float)h.
struct emu_float16 {
    unsigned short bits;
    emu_float16() = default;
    emu_float16(float f) : bits(emu_float_to_half(f)) {}
    emu_float16(double d) : bits(emu_float_to_half((float)d)) {}
    operator float() const { return emu_half_to_float(bits); }
};

// ---- fibers and the scheduler ---------------------------------------------------------------

enum { EMU_RUNNABLE, EMU_AT_SYNC, EMU_AT_SHFL, EMU_DONE };
enum { EMU_SHFL_XOR, EMU_SHFL_DOWN, EMU_SHFL_UP, EMU_SHFL_IDX };

struct EmuFiber {
    ucontext_t ctx;  // only to start the fiber on its stack
    jmp_buf at;      // where it waits (switches are _setjmp/_longjmp: no signal-mask syscalls)
    int started, state, line, mode, arg, width;
    unsigned mask;
    unsigned long long value, result;
};

static const size_t EMU_STACK = 256 * 1024;
static EmuFiber* emu_fibers;
static char* emu_stacks;
static int emu_n_threads;
static int emu_current = -1;
static jmp_buf emu_scheduler;
static void (*emu_thunk)(void**);
static void** emu_args;
static unsigned char* emu_dynamic_smem;  // what `extern __shared__ T name[]` becomes
static char emu_altstack[64 * 1024];     // where the fault handler runs
static char* emu_error;                  // MAP_SHARED: the child's message to the parent
static size_t emu_error_size;

EMU_RT static void emu_where(char* out, size_t n) {
    if (emu_current >= 0)
        snprintf(out, n, "block (%u, %u, %u) thread (%u, %u, %u)", blockIdx.x, blockIdx.y,
                 blockIdx.z, threadIdx.x, threadIdx.y, threadIdx.z);
    else
        snprintf(out, n, "block (%u, %u, %u)", blockIdx.x, blockIdx.y, blockIdx.z);
}

__attribute__((noreturn, format(printf, 1, 2))) EMU_RT static void emu_fail(const char* fmt, ...) {
    char where[128];
    emu_where(where, sizeof where);
    const int k = snprintf(emu_error, emu_error_size, "%s: ", where);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(emu_error + k, emu_error_size - k, fmt, ap);
    va_end(ap);
    _exit(3);
}


// ---- the memory checks: regions, shadow words, the hooks ------------------------------------

extern "C" __attribute__((visibility("hidden"))) unsigned char emu_shared_start[], emu_shared_stop[];

enum { EMU_CONST_ARG, EMU_GLOBAL, EMU_SHARED };

// Per word of writable memory: the last writer and the last reader (block + 1, 0: none;
// thread; barrier interval), whether the write was atomic, whether readers of two blocks, or
// two readers of one block in one interval, have been seen.
struct EmuShadow {
    unsigned w_block, w_epoch, r_block, r_epoch, r_multi;
    unsigned short w_tid, r_tid;
    unsigned char w_atomic, r_cross;
};

struct EmuRegion {
    uintptr_t map_lo, lo, hi;  // [map_lo, lo): its mapping's slack before it (an underrun)
    uintptr_t map_hi;          // [hi, map_hi): the slack after it, up to the guard page
    int kind, arg, shift;      // shift: log2 of the bytes per shadow word
    EmuShadow* shadow;
};

struct EmuArgInfo {  // what the harness tells emu_launch about each pointer argument
    void* ptr;
    size_t nbytes;
    void* map_base;
    int itemsize, is_const;
};

static EmuRegion emu_regions[64];
static int emu_n_regions;
static unsigned emu_epoch = 1;   // barrier intervals, numbered across the whole launch
static unsigned emu_block_epoch0;  // the first interval of the running block
static unsigned emu_block_id;      // its linear index + 1

EMU_RT static void emu_name_region(const EmuRegion& r, char* out, size_t n) {
    if (r.kind == EMU_SHARED)
        snprintf(out, n, "%s shared memory", r.arg ? "dynamic" : "static (__shared__)");
    else
        snprintf(out, n, "argument %d", r.arg);
}

// " [addr 0x...]" for a word of the static shared section (the harness names the array)
EMU_RT static const char* emu_symbol(const EmuRegion& r, size_t offset) {
    static char text[48];
    text[0] = 0;
    if (r.kind == EMU_SHARED && !r.arg) snprintf(text, sizeof text, " [addr %p]",
                                                 (void*)(r.lo + offset));
    return text;
}

EMU_RT static void emu_block_coords(unsigned id, char* out, size_t n) {
    const unsigned b = id - 1;
    snprintf(out, n, "(%u, %u, %u)", b % gridDim.x, b / gridDim.x % gridDim.y,
             b / gridDim.x / gridDim.y);
}

__attribute__((noreturn)) EMU_RT static void emu_race(const EmuRegion& r, size_t offset,
                                                      const char* what, unsigned o_block,
                                                      unsigned o_tid, const char* o_what,
                                                      void* pc) {
    char region[64], other[48];
    emu_name_region(r, region, sizeof region);
    emu_block_coords(o_block, other, sizeof other);
    emu_fail("race on %s, byte %zu%s: this thread %s it, thread %u of block %s %s it %s, with "
             "no __syncthreads (or atomic) between [pc %p]", region, offset, emu_symbol(r, offset),
             what, o_tid, other, o_what,
             o_block == emu_block_id ? "in the same barrier interval"
                                     : "(another block: no barrier orders blocks)", pc);
}

// Whether an access recorded as (block, tid, epoch) may race with one by the running thread.
EMU_RT static inline bool emu_unordered(unsigned block, unsigned tid, unsigned epoch) {
    if (!block || (block == emu_block_id && tid == (unsigned)emu_current)) return false;
    return block != emu_block_id || epoch == emu_epoch;
}

EMU_RT static void emu_check_word(const EmuRegion& r, size_t g, int write, int atomic,
                                  void* pc) {
    EmuShadow& s = r.shadow[g];
    const size_t offset = g << r.shift;
    if (r.kind == EMU_SHARED) {  // what an earlier block did is gone
        if (s.w_epoch < emu_block_epoch0) s.w_block = 0;
        if (s.r_epoch < emu_block_epoch0) s.r_block = 0;
        if (!write && !atomic && !s.w_block) {
            char region[64];
            emu_name_region(r, region, sizeof region);
            emu_fail("reads %s at byte %zu%s, which no thread of this block has written "
                     "(shared memory starts undefined) [pc %p]", region, offset,
                     emu_symbol(r, offset), pc);
        }
    }
    if (emu_unordered(s.w_block, s.w_tid, s.w_epoch) && !(atomic && s.w_atomic))
        emu_race(r, offset, write ? "writes" : "reads", s.w_block, s.w_tid,
                 s.w_atomic ? "wrote (atomically)" : "wrote", pc);
    const unsigned me = (unsigned)emu_current;
    if (write) {
        const bool readers = s.r_block && (s.r_cross || s.r_block != emu_block_id ||
                                           (s.r_epoch == emu_epoch &&
                                            (s.r_tid != me || s.r_multi == emu_epoch)));
        if (readers) emu_race(r, offset, "writes", s.r_block, s.r_tid, "read", pc);
        s.w_block = emu_block_id;
        s.w_tid = (unsigned short)me;
        s.w_epoch = emu_epoch;
        s.w_atomic = (unsigned char)atomic;
        return;
    }
    if (s.r_block && s.r_block != emu_block_id) s.r_cross = 1;
    else if (s.r_block && s.r_tid != me && s.r_epoch == emu_epoch) s.r_multi = emu_epoch;
    s.r_block = emu_block_id;
    s.r_tid = (unsigned short)me;
    s.r_epoch = emu_epoch;
}

EMU_RT static void emu_access(const void* p, size_t size, int write, int atomic, void* pc) {
    if (emu_current < 0) return;  // the runtime's own work
    const uintptr_t a = (uintptr_t)p;
    for (int k = 0; k < emu_n_regions; ++k) {
        const EmuRegion& r = emu_regions[k];
        if (a < r.map_lo || a >= r.map_hi) continue;
        char region[64];
        emu_name_region(r, region, sizeof region);
        if (a < r.lo)
            emu_fail("%s %zu bytes before the start of %s (a negative index?) [pc %p]",
                     write ? "writes" : "reads", (size_t)(r.lo - a), region, pc);
        if (a + size > r.hi)
            emu_fail("%s %zu bytes at byte %zu of %s, past its end (%zu bytes) [pc %p]",
                     write ? "writes" : "reads", size, (size_t)(a - r.lo), region,
                     (size_t)(r.hi - r.lo), pc);
        if (r.kind == EMU_CONST_ARG) {
            if (write) emu_fail("writes into %s, which is const [pc %p]", region, pc);
            return;
        }
        const size_t g1 = (a + size - 1 - r.lo) >> r.shift;
        for (size_t g = (a - r.lo) >> r.shift; g <= g1; ++g)
            emu_check_word(r, g, write, atomic, pc);
        return;
    }
}

EMU_RT static void emu_add_region(int kind, int arg, void* map_lo, void* lo, size_t nbytes,
                                  int itemsize) {
    if (!nbytes) return;
    if (emu_n_regions == (int)(sizeof emu_regions / sizeof emu_regions[0]))
        emu_fail("more than %d buffers", emu_n_regions);
    EmuRegion& r = emu_regions[emu_n_regions++];
    r.kind = kind;
    r.arg = arg;
    r.map_lo = (uintptr_t)map_lo;
    r.lo = (uintptr_t)lo;
    r.hi = r.lo + nbytes;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);  // the guard page after a mapping
    r.map_hi = kind == EMU_SHARED && arg == 0 ? r.hi : (r.hi + page - 1) / page * page;
    r.shift = itemsize >= 8 ? 3 : itemsize >= 4 ? 2 : itemsize >= 2 ? 1 : 0;
    r.shadow = kind == EMU_CONST_ARG ? nullptr
               : (EmuShadow*)calloc((nbytes >> r.shift) + 1, sizeof(EmuShadow));
}

#define EMU_HOOKS(N)                                                                        \
    extern "C" EMU_RT void __tsan_read##N(void* p) {                                        \
        emu_access(p, N, 0, 0, __builtin_return_address(0));                              \
    }                                                                                       \
    extern "C" EMU_RT void __tsan_write##N(void* p) {                                       \
        emu_access(p, N, 1, 0, __builtin_return_address(0));                               \
    }                                                                                       \
    extern "C" EMU_RT void __tsan_unaligned_read##N(void* p) {                              \
        emu_access(p, N, 0, 0, __builtin_return_address(0));                               \
    }                                                                                       \
    extern "C" EMU_RT void __tsan_unaligned_write##N(void* p) {                             \
        emu_access(p, N, 1, 0, __builtin_return_address(0));                               \
    }
EMU_HOOKS(1)
EMU_HOOKS(2)
EMU_HOOKS(4)
EMU_HOOKS(8)
EMU_HOOKS(16)
extern "C" EMU_RT void __tsan_read_range(void* p, size_t n) {
    emu_access(p, n, 0, 0, __builtin_return_address(0));
}
extern "C" EMU_RT void __tsan_write_range(void* p, size_t n) {
    emu_access(p, n, 1, 0, __builtin_return_address(0));
}
extern "C" EMU_RT void __tsan_init() {}
extern "C" EMU_RT void __tsan_func_entry(void*) {}
extern "C" EMU_RT void __tsan_func_exit() {}

EMU_RT static void emu_set_thread_index(int tid) {
    threadIdx.x = tid % blockDim.x;
    threadIdx.y = (tid / blockDim.x) % blockDim.y;
    threadIdx.z = tid / (blockDim.x * blockDim.y);
}

EMU_RT static void emu_yield(int state, int line) {
    EmuFiber& f = emu_fibers[emu_current];
    f.state = state;
    f.line = line;
    if (!_setjmp(f.at)) _longjmp(emu_scheduler, 1);
}

EMU_RT static void emu_syncthreads(int line) { emu_yield(EMU_AT_SYNC, line); }

template <typename T>
EMU_RT static T emu_shfl(int line, int mode, unsigned mask, T var, int arg, int width) {
    static_assert(sizeof(T) <= 8, "shuffle of a value wider than 8 bytes");
    if (width <= 0 || width > 32 || (width & (width - 1)))
        emu_fail("line %d: shuffle width %d is not a power of 2 in 1..32", line, width);
    EmuFiber& f = emu_fibers[emu_current];
    f.mode = mode;
    f.mask = mask;
    f.arg = arg;
    f.width = width;
    f.value = 0;
    memcpy(&f.value, &var, sizeof(T));
    emu_yield(EMU_AT_SHFL, line);
    T out;
    memcpy(&out, &emu_fibers[emu_current].result, sizeof(T));
    return out;
}

template <typename T>
static T emu_shfl_xor(int line, unsigned mask, T var, int lane_mask, int width = 32) {
    return emu_shfl(line, EMU_SHFL_XOR, mask, var, lane_mask, width);
}
template <typename T>
static T emu_shfl_down(int line, unsigned mask, T var, unsigned delta, int width = 32) {
    return emu_shfl(line, EMU_SHFL_DOWN, mask, var, (int)delta, width);
}
template <typename T>
static T emu_shfl_up(int line, unsigned mask, T var, unsigned delta, int width = 32) {
    return emu_shfl(line, EMU_SHFL_UP, mask, var, (int)delta, width);
}
template <typename T>
static T emu_shfl_idx(int line, unsigned mask, T var, int src, int width = 32) {
    return emu_shfl(line, EMU_SHFL_IDX, mask, var, src, width);
}

#define __syncthreads() emu_syncthreads(__LINE__)
#define __shfl_xor_sync(...) emu_shfl_xor(__LINE__, __VA_ARGS__)
#define __shfl_down_sync(...) emu_shfl_down(__LINE__, __VA_ARGS__)
#define __shfl_up_sync(...) emu_shfl_up(__LINE__, __VA_ARGS__)
#define __shfl_sync(...) emu_shfl_idx(__LINE__, __VA_ARGS__)

// A fiber runs the kernel once per block: after each run it waits, DONE, for the next block.
EMU_RT static void emu_fiber_main() {
    for (;;) {
        emu_thunk(emu_args);
        EmuFiber& f = emu_fibers[emu_current];
        f.state = EMU_DONE;
        if (!_setjmp(f.at)) _longjmp(emu_scheduler, 1);
    }
}

// The lane a shuffle reads (CUDA's rules: a lane whose source falls outside its own group of
// `width` lanes, on the side the mode forbids, gets its own value back).
EMU_RT static int emu_shfl_source(const EmuFiber& f, int lane) {
    const int group = lane & ~(f.width - 1), in_group = lane - group;
    switch (f.mode) {
        case EMU_SHFL_XOR: {
            const int src = lane ^ f.arg;
            return (src & ~(f.width - 1)) > group || src > 31 ? lane : src;
        }
        case EMU_SHFL_DOWN:
            return in_group + f.arg >= f.width ? lane : lane + f.arg;
        case EMU_SHFL_UP:
            return in_group - f.arg < 0 ? lane : lane - f.arg;
        default:
            return group + (f.arg & (f.width - 1));
    }
}

// Release every warp whose live lanes all wait at one shuffle; true if any was released.
EMU_RT static bool emu_release_shuffles() {
    bool released = false;
    for (int w0 = 0; w0 < emu_n_threads; w0 += 32) {
        const int n = min(32, emu_n_threads - w0);
        EmuFiber* lanes = emu_fibers + w0;
        int first = -1, at_sync = -1;
        for (int l = 0; l < n; ++l) {
            if (lanes[l].state == EMU_AT_SHFL && first < 0) first = l;
            if (lanes[l].state == EMU_AT_SYNC && at_sync < 0) at_sync = l;
        }
        if (first < 0) continue;
        emu_current = w0 + first;
        emu_set_thread_index(emu_current);
        const EmuFiber& f0 = lanes[first];
        if (at_sync >= 0)
            emu_fail("divergent warp: lane %d waits at a shuffle (line %d) while lane %d waits "
                     "at __syncthreads (line %d)", first, f0.line, at_sync, lanes[at_sync].line);
        for (int l = 0; l < 32; ++l) {
            if (!(f0.mask >> l & 1u)) continue;
            if (l >= n)
                emu_fail("line %d: the shuffle mask 0x%08x names lane %d, which does not exist "
                         "(blockDim %u)", f0.line, f0.mask, l, blockDim.x * blockDim.y * blockDim.z);
            if (lanes[l].state == EMU_DONE)
                emu_fail("line %d: the shuffle mask 0x%08x names lane %d, which has already "
                         "returned (lanes must not exit before a full-mask shuffle)",
                         f0.line, f0.mask, l);
        }
        for (int l = 0; l < n; ++l) {
            const EmuFiber& f = lanes[l];
            if (f.state != EMU_AT_SHFL) continue;
            if (f.line != f0.line || f.mask != f0.mask || f.width != f0.width ||
                f.mode != f0.mode)
                emu_fail("divergent warp: lanes %d and %d wait at different shuffles (lines %d "
                         "and %d, masks 0x%08x and 0x%08x, widths %d and %d)", first, l, f0.line,
                         f.line, f0.mask, f.mask, f0.width, f.width);
            if (!(f.mask >> l & 1u))
                emu_fail("line %d: lane %d calls a shuffle whose mask 0x%08x leaves it out",
                         f.line, l, f.mask);
        }
        for (int l = 0; l < n; ++l) {
            EmuFiber& f = lanes[l];
            if (f.state != EMU_AT_SHFL) continue;
            const int src = emu_shfl_source(f, l);
            if (src >= n || lanes[src].state != EMU_AT_SHFL)
                emu_fail("line %d: lane %d reads lane %d, which is not in the shuffle", f.line,
                         l, src);
            f.result = lanes[src].value;
        }
        for (int l = 0; l < n; ++l)
            if (lanes[l].state == EMU_AT_SHFL) lanes[l].state = EMU_RUNNABLE;
        released = true;
    }
    emu_current = -1;
    return released;
}

EMU_RT static bool emu_release_barrier() {
    int first = -1;
    for (int t = 0; t < emu_n_threads; ++t) {
        const EmuFiber& f = emu_fibers[t];
        if (f.state == EMU_DONE) continue;
        emu_current = t;
        emu_set_thread_index(t);
        if (f.state != EMU_AT_SYNC) emu_fail("deadlock: this thread cannot go on");
        if (first < 0) first = t;
        if (f.line != emu_fibers[first].line)
            emu_fail("threads wait at different __syncthreads (line %d here, line %d in thread "
                     "%d of the block)", f.line, emu_fibers[first].line, first);
    }
    emu_current = -1;
    if (first < 0) return false;
    for (int t = 0; t < emu_n_threads; ++t)
        if (emu_fibers[t].state == EMU_AT_SYNC) emu_fibers[t].state = EMU_RUNNABLE;
    ++emu_epoch;  // a new barrier interval
    return true;
}

EMU_RT static void emu_run_block(int reverse) {
    for (int t = 0; t < emu_n_threads; ++t) emu_fibers[t].state = EMU_RUNNABLE;
    for (;;) {
        for (int k = 0; k < emu_n_threads; ++k) {
            const int t = reverse ? emu_n_threads - 1 - k : k;
            if (emu_fibers[t].state != EMU_RUNNABLE) continue;
            emu_current = t;
            emu_set_thread_index(t);
            EmuFiber& f = emu_fibers[t];
            if (!_setjmp(emu_scheduler)) {
                if (f.started) _longjmp(f.at, 1);
                f.started = 1;
                setcontext(&f.ctx);
            }
            emu_current = -1;
        }
        if (emu_release_shuffles()) continue;
        if (!emu_release_barrier()) return;  // every thread has returned
    }
}

// Memory between two PROT_NONE pages: bytes [ptr, ptr + size) are usable, ptr % align ==
// offset % align, and the end lies less than `align` bytes before the second page (touching
// it when the alignment allows). The slack before ptr and after its end is where the hooks
// report an underrun or an overrun; the guard pages stop anything further.
EMU_RT static unsigned char* emu_guarded(size_t size, size_t align, size_t offset, void** base,
                                         size_t* total) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t body = size + align;  // room to move the start down to its alignment
    *total = page + (body + page - 1) / page * page + page;
    unsigned char* p = (unsigned char*)mmap(nullptr, *total, PROT_READ | PROT_WRITE,
                                            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    mprotect(p, page, PROT_NONE);
    mprotect(p + *total - page, page, PROT_NONE);
    *base = p;
    const uintptr_t latest = (uintptr_t)(p + *total - page - size);
    return (unsigned char*)(latest - (latest - offset % align) % align);
}

// UBSan (the harness compiles with -fsanitize=alignment) calls this before it stops the child:
// say which thread it was, after its report on stderr.
extern "C" __attribute__((weak)) void __sanitizer_set_death_callback(void (*)(void));
static void emu_on_ubsan_death() {
    char where[128];
    emu_where(where, sizeof where);
    fprintf(stderr, "in %s\n", where);
}

EMU_RT static void emu_on_fault(int sig, siginfo_t* info, void*) {
    char where[128];
    emu_where(where, sizeof where);
    snprintf(emu_error, emu_error_size, "%s: %s at address 0x%llx", where,
             sig == SIGSEGV ? "SIGSEGV" : "SIGBUS",
             (unsigned long long)(uintptr_t)info->si_addr);
    _exit(4);
}

EMU_RT static int emu_run_grid(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, size_t smem, int reverse, const EmuArgInfo* infos,
                        int n_infos) {
    gridDim = {gx, gy, gz};
    blockDim = {bx, by, bz};
    emu_n_threads = (int)(bx * by * bz);
    if (emu_n_threads < 1 || emu_n_threads > 1024) emu_fail("blockDim of %d threads", emu_n_threads);
    stack_t ss = {};
    ss.ss_sp = emu_altstack;
    ss.ss_size = sizeof emu_altstack;
    sigaltstack(&ss, nullptr);
    struct sigaction sa = {};
    sa.sa_sigaction = emu_on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigaction(SIGSEGV, &sa, nullptr);
    sigaction(SIGBUS, &sa, nullptr);

    emu_fibers = new EmuFiber[emu_n_threads];
    emu_stacks = (char*)mmap(nullptr, (size_t)emu_n_threads * EMU_STACK, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    void* smem_base;
    size_t smem_total;
    emu_dynamic_smem = emu_guarded(smem, 16, 0, &smem_base, &smem_total);
    const size_t n_static = (size_t)(emu_shared_stop - emu_shared_start);
    emu_add_region(EMU_SHARED, 0, emu_shared_start, emu_shared_start, n_static, 4);
    emu_add_region(EMU_SHARED, 1, (unsigned char*)smem_base + sysconf(_SC_PAGESIZE),
                   emu_dynamic_smem, smem, 4);
    for (int k = 0; k < n_infos; ++k)
        emu_add_region(infos[k].is_const ? EMU_CONST_ARG : EMU_GLOBAL, k, infos[k].map_base,
                       infos[k].ptr, infos[k].nbytes, infos[k].itemsize);
    for (int t = 0; t < emu_n_threads; ++t) {  // started on their first block
        EmuFiber& f = emu_fibers[t];
        f.started = 0;
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = emu_stacks + (size_t)t * EMU_STACK;
        f.ctx.uc_stack.ss_size = EMU_STACK;
        f.ctx.uc_link = nullptr;
        makecontext(&f.ctx, emu_fiber_main, 0);
    }
    const unsigned long long n_blocks = (unsigned long long)gx * gy * gz;
    for (unsigned long long k = 0; k < n_blocks; ++k) {
        const unsigned long long b = reverse ? n_blocks - 1 - k : k;
        blockIdx = {(unsigned)(b % gx), (unsigned)(b / gx % gy), (unsigned)(b / gx / gy)};
        emu_block_id = (unsigned)b + 1;
        emu_block_epoch0 = ++emu_epoch;
        memset(emu_dynamic_smem, 0xff, smem);  // shared memory starts undefined: NaN bytes
        memset(emu_shared_start, 0xff, n_static);
        emu_run_block(reverse);
    }
    return 0;
}

// Launch `thunk(args)` on a (gx, gy, gz) grid of (bx, by, bz) blocks in a forked child.
// Returns 0, or: 1 UBSan found a misaligned access (its report in `error`), 3 a check failed,
// 4 a memory fault, 128 + signal (e.g. 142: timed out); `error` (MAP_SHARED, from emu_alloc)
// then holds the message.
extern "C" int emu_launch(void (*thunk)(void**), void** args, unsigned gx, unsigned gy,
                          unsigned gz, unsigned bx, unsigned by, unsigned bz, size_t smem,
                          int reverse, int timeout_s, char* error, size_t error_size,
                          const EmuArgInfo* infos, int n_infos) {
    error[0] = 0;
    FILE* report = tmpfile();  // the child's stderr: where UBSan writes (misaligned access)
    const pid_t pid = fork();
    if (pid < 0) {
        if (report) fclose(report);
        return -1;
    }
    if (pid == 0) {
        if (report) dup2(fileno(report), 2);
        if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(emu_on_ubsan_death);
        emu_error = error;
        emu_error_size = error_size;
        emu_thunk = thunk;
        emu_args = args;
        alarm((unsigned)timeout_s);
        _exit(emu_run_grid(gx, gy, gz, bx, by, bz, smem, reverse, infos, n_infos));
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
    }
    const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (report) {
        if (rc && !error[0]) {  // no message of ours: pass on what the child wrote to stderr
            rewind(report);
            const size_t n = fread(error, 1, error_size - 1, report);
            error[n] = 0;
        }
        fclose(report);
    }
    return rc;
}

// Shared memory for argument buffers and messages: [result, result + size) ends at a guard page.
extern "C" void* emu_alloc(size_t size, size_t align, size_t offset, void** base,
                          size_t* total) {
    return emu_guarded(size, align, offset, base, total);
}

extern "C" void emu_free(void* base, size_t total) { munmap(base, total); }
