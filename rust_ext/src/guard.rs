//! The per-evaluation guards the engine checks while a script runs or compiles: the wall-clock
//! deadline, the memory budget, the native-stack floor, and the counting allocator behind the
//! memory budget.
//!
//! All state is thread-local: an evaluation runs on one worker thread (see `worker`), which
//! `enter`s the guard before running and leaves it afterwards. Rhai's progress hook calls `check`
//! before every operation; the parser's token hook calls `check_compile` for every token. A
//! violated guard stops the script with `ErrorTerminated` carrying the message (a limit error in
//! Python, which scripts cannot catch).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::{Duration, Instant};

use rhai::Dynamic;

// ---------------------------------------------------------------------------------------------
// Counting allocator: bytes held by allocations made on each thread
// ---------------------------------------------------------------------------------------------

/// What this thread knows about memory and the evaluation running on it, in one thread-local
/// (in a shared library every thread-local access is a call, and the progress hook reads both).
struct ThreadState {
    /// Bytes allocated minus bytes freed on this thread (may go negative when a thread frees
    /// what another allocated).
    live: Cell<isize>,
    /// `live` above which the evaluation running here is over its memory budget (the guard's
    /// base plus limit, kept apart so the check before every operation reads two words).
    ceiling: Cell<isize>,
    guard: Cell<Guard>,
}

thread_local! {
    /// Const-initialised without a destructor, so the allocator can use it at any time, thread
    /// teardown included.
    static STATE: ThreadState = const {
        ThreadState {
            live: Cell::new(0),
            ceiling: Cell::new(isize::MAX),
            guard: Cell::new(NO_GUARD),
        }
    };
}

#[inline]
fn account(delta: isize) {
    let _ = STATE.try_with(|s| s.live.set(s.live.get().wrapping_add(delta)));
}

#[inline]
fn with_guard<R>(f: impl FnOnce(&Cell<Guard>) -> R) -> R {
    STATE.with(|s| f(&s.guard))
}

/// The system allocator, counting the bytes each thread holds. A script's memory is what its
/// worker thread allocated since the evaluation began: strings, arrays, maps, closures and the
/// values they capture, scope variables, everything, whether or not Rhai's size limits see it.
pub struct CountingAlloc;

unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ptr = System.alloc(layout);
        if !ptr.is_null() {
            account(layout.size() as isize);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let ptr = System.alloc_zeroed(layout);
        if !ptr.is_null() {
            account(layout.size() as isize);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        account(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new = System.realloc(ptr, layout, new_size);
        if !new.is_null() {
            account(new_size as isize - layout.size() as isize);
        }
        new
    }
}

/// Move `bytes` of this thread's count to another thread's (`adopt_bytes` there): what a
/// Python callback allocated for a script belongs to the script's evaluation.
pub fn release_bytes(bytes: isize) {
    account(bytes.wrapping_neg());
}

/// Take over `bytes` another thread counted (see `release_bytes`).
pub fn adopt_bytes(bytes: isize) {
    account(bytes);
}

/// Bytes this thread holds (allocated minus freed) since it started.
pub fn live_bytes() -> isize {
    STATE.with(|s| s.live.get())
}

// ---------------------------------------------------------------------------------------------
// The guard of the evaluation running on this thread
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy)]
struct Guard {
    /// Wall-clock deadline.
    deadline: Option<Instant>,
    /// Bytes the thread held when the evaluation began.
    memory_base: isize,
    /// Most bytes the evaluation may hold (0 = no budget).
    memory_limit: isize,
    /// Lowest stack address an operation may start at (0 = not checked: not a worker thread).
    stack_floor: usize,
}

const NO_GUARD: Guard = Guard {
    deadline: None,
    memory_base: 0,
    memory_limit: 0,
    stack_floor: 0,
};

thread_local! {
    /// Set once compilation was stopped by a guard: the message, and every later token fails.
    static COMPILE_ABORT: Cell<Option<&'static str>> = const { Cell::new(None) };
    static TOKENS: Cell<u32> = const { Cell::new(0) };
}

/// How often (in operations or tokens) the clock is read; a power of two minus one as a mask.
const DEADLINE_CHECK_MASK: u64 = 0x3FF;
/// How often the stack is looked at. Between two looks a script runs at most 16 operations, a
/// few levels deeper (each level is an operation): nothing the reserve cannot absorb. (Memory
/// is looked at before every operation: one operation can double what a script holds.)
const STACK_CHECK_MASK: u64 = 0xF;

/// The address of a local: where this thread's stack currently is (stacks grow down).
#[inline(always)]
pub fn stack_pointer() -> usize {
    let marker = 0u8;
    std::hint::black_box(&marker) as *const u8 as usize
}

/// Make this thread check its stack: an operation starting below `floor` stops the script.
pub fn set_stack_floor(floor: usize) {
    with_guard(|g| {
        let mut guard = g.get();
        guard.stack_floor = floor;
        g.set(guard);
    });
}

/// Deadline `timeout_ms` from now, never later than `outer` (the deadline of an evaluation this
/// one runs inside, if any).
pub fn combine_deadline(outer: Option<Instant>, timeout_ms: Option<u64>) -> Option<Instant> {
    let mine = timeout_ms.and_then(|ms| Instant::now().checked_add(Duration::from_millis(ms)));
    match (outer, mine) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The deadline in force on this thread (the evaluation running here, or the one whose Python
/// callbacks this thread is serving).
pub fn current_deadline() -> Option<Instant> {
    with_guard(|g| g.get().deadline)
}

/// Run `f` with the deadline in force on this thread set to `deadline` (restored afterwards),
/// so that evaluations started from inside `f` (Python callbacks) never outlive it.
pub fn with_deadline_at<R>(deadline: Option<Instant>, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Instant>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0;
            with_guard(|g| {
                let mut guard = g.get();
                guard.deadline = previous;
                g.set(guard);
            });
        }
    }
    let _restore = Restore(current_deadline());
    with_guard(|g| {
        let mut guard = g.get();
        guard.deadline = deadline;
        g.set(guard);
    });
    f()
}

/// Run `f` with a wall-clock deadline `timeout_ms` from now. A nested call never extends the
/// deadline of the evaluation it runs inside.
pub fn with_deadline<R>(timeout_ms: Option<u64>, f: impl FnOnce() -> R) -> R {
    with_deadline_at(combine_deadline(current_deadline(), timeout_ms), f)
}

/// Run `f` as one evaluation: under `deadline`, with a memory budget of `memory_limit` bytes
/// counted from now (0 = none), and with `stack_floor` (else this thread's own, if any).
pub fn evaluation<R>(
    deadline: Option<Instant>,
    memory_limit: usize,
    stack_floor: Option<usize>,
    f: impl FnOnce() -> R,
) -> R {
    struct Restore(Guard, isize);
    impl Drop for Restore {
        fn drop(&mut self) {
            let (previous, ceiling) = (self.0, self.1);
            STATE.with(|s| {
                s.guard.set(previous);
                s.ceiling.set(ceiling);
            });
            COMPILE_ABORT.with(|a| a.set(None));
        }
    }
    let (previous, previous_ceiling) = STATE.with(|s| (s.guard.get(), s.ceiling.get()));
    let _restore = Restore(previous, previous_ceiling);
    let base = live_bytes();
    let limit = memory_limit.min(isize::MAX as usize) as isize;
    STATE.with(|s| {
        s.guard.set(Guard {
            deadline,
            memory_base: base,
            memory_limit: limit,
            stack_floor: stack_floor.unwrap_or(previous.stack_floor),
        });
        s.ceiling.set(if limit > 0 {
            base.saturating_add(limit)
        } else {
            isize::MAX
        });
    });
    COMPILE_ABORT.with(|a| a.set(None));
    f()
}

pub const STACK_MESSAGE: &str =
    "Stack overflow: the script nests calls, expressions or data too deeply";
pub const MEMORY_MESSAGE: &str = "Script used more memory than its max_memory limit";
pub const TIMEOUT_PREFIX: &str = "Script timed out: wall-clock limit";
pub const COMPILE_TIMEOUT_MESSAGE: &str =
    "Script timed out while compiling: wall-clock limit (timeout_ms or max_compile_ms) exceeded";

/// Which guard, if any, an operation starting now violates.
fn violated(check_clock: bool) -> Option<&'static str> {
    let guard = with_guard(Cell::get);
    if guard.stack_floor != 0 && stack_pointer() < guard.stack_floor {
        return Some(STACK_MESSAGE);
    }
    if guard.memory_limit > 0 && live_bytes().wrapping_sub(guard.memory_base) > guard.memory_limit {
        return Some(MEMORY_MESSAGE);
    }
    if check_clock && guard.deadline.is_some_and(|t| Instant::now() >= t) {
        return Some(TIMEOUT_PREFIX);
    }
    None
}

/// The progress hook: `Some(token)` stops the script. `timeout_ms` words the timeout message.
#[inline]
pub fn check(ops: u64, timeout_ms: Option<u64>) -> Option<Dynamic> {
    let (live, ceiling) = STATE.with(|s| (s.live.get(), s.ceiling.get()));
    if live > ceiling {
        return Some(Dynamic::from(MEMORY_MESSAGE.to_string()));
    }
    if ops & STACK_CHECK_MASK != 0 {
        return None;
    }
    let guard = with_guard(Cell::get);
    if guard.stack_floor != 0 && stack_pointer() < guard.stack_floor {
        return Some(Dynamic::from(STACK_MESSAGE.to_string()));
    }
    if ops & DEADLINE_CHECK_MASK == 0 && guard.deadline.is_some_and(|t| Instant::now() >= t) {
        return Some(Dynamic::from(timeout_message(timeout_ms)));
    }
    None
}

/// The message of a script stopped by its deadline.
pub fn timeout_message(timeout_ms: Option<u64>) -> String {
    match timeout_ms {
        Some(ms) => format!("{TIMEOUT_PREFIX} of {ms} ms exceeded"),
        None => format!("{TIMEOUT_PREFIX} of an enclosing evaluation exceeded"),
    }
}

/// The token hook: whether compilation must stop now (checked for every token; the parser
/// recurses once per nesting level, and each level reads at least one token).
pub fn check_compile() -> bool {
    if COMPILE_ABORT.with(Cell::get).is_some() {
        return true;
    }
    let count = TOKENS.with(|t| {
        let n = t.get().wrapping_add(1);
        t.set(n);
        n
    });
    let found = match violated(u64::from(count) & DEADLINE_CHECK_MASK == 0) {
        Some(TIMEOUT_PREFIX) => Some(COMPILE_TIMEOUT_MESSAGE),
        other => other,
    };
    if let Some(message) = found {
        COMPILE_ABORT.with(|a| a.set(Some(message)));
        return true;
    }
    false
}

/// The message of the guard that stopped the last compilation on this thread, if one did.
pub fn compile_abort() -> Option<&'static str> {
    COMPILE_ABORT.with(Cell::get)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_counted_per_thread() {
        let before = live_bytes();
        let block = vec![0u8; 1 << 20];
        assert!(live_bytes() - before >= 1 << 20);
        drop(block);
        assert!(live_bytes() - before < 1 << 10);
    }

    #[test]
    fn memory_budget_is_counted_from_the_start_of_the_evaluation() {
        let held = vec![0u8; 4 << 20];
        evaluation(None, 1 << 20, None, || {
            assert!(
                check(16, None).is_none(),
                "memory held before must not count"
            );
            let more = vec![1u8; 2 << 20];
            let stop = check(16, None).expect("over budget");
            assert_eq!(stop.to_string(), MEMORY_MESSAGE);
            drop(more);
            assert!(check(16, None).is_none());
        });
        drop(held);
    }

    #[test]
    fn nested_deadline_never_extends_the_outer_one() {
        with_deadline(Some(10), || {
            let outer = current_deadline().unwrap();
            with_deadline(Some(60_000), || assert_eq!(current_deadline(), Some(outer)));
        });
        assert_eq!(current_deadline(), None);
    }

    #[test]
    fn absurd_timeouts_do_not_overflow() {
        // Either no deadline (it cannot be represented) or one far away; never a panic.
        let far = combine_deadline(None, Some(u64::MAX));
        assert!(far.is_none_or(|t| t > Instant::now() + Duration::from_secs(3600)));
    }
}
