//! Evaluation threads with a known, large native stack.
//!
//! Rhai's parser and evaluator, its operators on nested values, and dropping nested values all
//! recurse on the native stack; a Python thread has whatever stack its platform gives it (8 MiB
//! on Linux, 512 KiB for secondary threads on macOS). So every compilation and evaluation runs on
//! a worker thread with a `STACK_SIZE` stack, whose lowest `RESERVE` bytes the evaluator never
//! enters (the progress hook stops a script whose operations start below that floor, see
//! `guard`): the reserve is left for what recurses without passing the hook, like dropping,
//! cloning or hashing a nested value. `limits` sizes the limits against these numbers.
//!
//! Python code never runs on a worker. A registered Python function, a print/debug sink, the
//! conversions around them: all are handed back to the calling thread, which waits for its
//! worker anyway, so callbacks see the caller's thread-locals, context and signal handling as
//! before (`on_caller`).
//!
//! An engine without Python callbacks may instead run a first, capped attempt on the calling
//! thread itself when that thread's own stack has room for the worst case of the caps (see
//! `inline_floor` and `Limits::inline`): such a script is a pure function of its inputs, so an
//! attempt that hits a cap is simply run again here, with the real limits.
//!
//! Each calling thread keeps its own idle workers (a companion, plus one more per level of
//! evaluations nested through callbacks). A hand-off is a store to an atomic and an unpark; each
//! side spins for a few microseconds before parking, so a call that takes microseconds costs
//! about a microsecond more, not two context switches. Each place a side waits remembers whether
//! its last wait outlasted the spin (`Patience`): then the next wait there parks at once, so a
//! provider script waiting on the network, or a worker idle between model calls, burns no
//! processor time spinning. A forked child never uses its parent's workers (they do not exist
//! there).

use std::cell::{Cell, RefCell, UnsafeCell};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use crate::guard;

/// Native stack of every evaluation thread. Reserved address space, committed only as used.
pub const STACK_SIZE: usize = 1 << 30;
/// Bottom part of that stack the evaluator never enters (see the module documentation).
pub const RESERVE: usize = 768 << 20;
/// Most idle workers a calling thread keeps.
const MAX_IDLE: usize = 2;

// States of a slot, the rendezvous between a calling thread and its worker.
const IDLE: u32 = 0;
const JOB: u32 = 1; // caller -> worker: run the task
const RUNNING: u32 = 2;
const CALLBACK: u32 = 3; // worker -> caller: run the task (Python work) for me
const CALLBACK_DONE: u32 = 4; // caller -> worker
const DONE: u32 = 5; // worker -> caller: the job is finished
const EXIT: u32 = 6;

/// How long each side spins before parking: a caller waiting for a short script or a callback,
/// a worker waiting for the next call of a loop.
const CALLER_SPIN: Duration = Duration::from_micros(50);
const CALLBACK_SPIN: Duration = Duration::from_micros(20);
const IDLE_SPIN: Duration = Duration::from_micros(100);

type Task = NonNull<dyn FnMut()>;

struct Slot {
    state: AtomicU32,
    /// The closure to run: the job (for the worker) or a callback (for the caller). Written
    /// before the state is released, read after it is acquired.
    task: UnsafeCell<Option<Task>>,
    /// Who waits for this job: told when a callback is due and when the job is done.
    caller: UnsafeCell<Option<Caller>>,
    /// For a detached job: set when its caller gives up on it, so later callbacks are declined
    /// here, without waiting for a loop that may no longer be there.
    declined: UnsafeCell<Option<Arc<AtomicBool>>>,
    worker: OnceLock<Thread>,
    pid: u32,
    /// How each of the three waits on this slot went last time (see `Patience`).
    caller_waits: Patience,
    callback_waits: Patience,
    idle_waits: Patience,
}

// The slot's cells are only touched by the side the state hands them to.
unsafe impl Send for Slot {}
unsafe impl Sync for Slot {}

impl Slot {
    fn wake_worker(&self) {
        if let Some(worker) = self.worker.get() {
            worker.unpark();
        }
    }
}

/// Wakes an event loop that serves detached evaluations (`start`): called on the worker, it
/// must not block and must not need the GIL.
pub type Wake = Arc<dyn Fn() + Send + Sync>;

/// Who waits for a worker: a parked thread (`run`) or an event loop (`start`).
#[derive(Clone)]
enum Caller {
    Thread(Thread),
    Loop(Wake),
}

impl Caller {
    fn wake(&self) {
        match self {
            Caller::Thread(thread) => thread.unpark(),
            Caller::Loop(wake) => wake(),
        }
    }
}

/// Erase the lifetime of a closure borrowed for the duration of a hand-off: the lender does not
/// return before the borrower has signalled that it finished with it.
unsafe fn erase<'a>(task: &'a mut (dyn FnMut() + 'a)) -> Task {
    let ptr: *mut (dyn FnMut() + 'a) = task;
    NonNull::new_unchecked(std::mem::transmute::<
        *mut (dyn FnMut() + 'a),
        *mut dyn FnMut(),
    >(ptr))
}

/// Whether the last wait at one place outlasted its spin. Spinning pays when the other side
/// answers within microseconds (a validator, a hook); when it answers in milliseconds (a script
/// waiting on HTTP, the next model call) every spin is processor time thrown away, so after one
/// long wait the next one parks at once, and after a short one it spins again.
struct Patience(AtomicBool);

impl Patience {
    fn new() -> Self {
        Patience(AtomicBool::new(false))
    }
}

/// Wait until `state` satisfies `ready`: spin a little, then yield the processor until `spin` has
/// passed (the other side is often runnable on this very processor: spinning alone would keep
/// it from running), then `park` (every hand-off stores the state, then unparks the other side,
/// so no wake-up is lost). Skips the yielding when `patience` says the last wait here was long.
fn wait(state: &AtomicU32, ready: impl Fn(u32) -> bool, spin: Duration, patience: &Patience) -> u32 {
    wait_parking(state, ready, spin, patience, &thread::park)
}

/// [`wait`], parking with `park` (which must return after an unpark, or spuriously).
fn wait_parking(
    state: &AtomicU32,
    ready: impl Fn(u32) -> bool,
    spin: Duration,
    patience: &Patience,
    park: &dyn Fn(),
) -> u32 {
    let budget = if patience.0.load(Ordering::Relaxed) { Duration::ZERO } else { spin };
    let mut start: Option<Instant> = None;
    let mut spins: u32 = 0;
    loop {
        let now = state.load(Ordering::Acquire);
        if ready(now) {
            let long = start.is_some_and(|began| began.elapsed() >= spin);
            patience.0.store(long, Ordering::Relaxed);
            return now;
        }
        spins = spins.wrapping_add(1);
        if spins < 32 {
            std::hint::spin_loop();
            continue;
        }
        let began = *start.get_or_insert_with(Instant::now);
        if began.elapsed() < budget {
            thread::yield_now();
        } else {
            park();
        }
    }
}

thread_local! {
    /// On a worker: its slot, for `on_caller`.
    static CURRENT: Cell<*const Slot> = const { Cell::new(std::ptr::null()) };
    /// On a calling thread: its idle workers, the most recently used last.
    static IDLE_WORKERS: RefCell<Vec<Worker>> = const { RefCell::new(Vec::new()) };
}

/// After a job this long, hand the stack pages it may have touched back to the system (a deep
/// value can take hundreds of MiB of stack to drop, and an idle worker would keep them).
const TRIM_AFTER: Duration = Duration::from_millis(20);
/// The top of a worker's stack an idle worker keeps (what every job touches anyway).
const KEEP_STACK: usize = 64 << 10;

thread_local! {
    /// How many times this worker handed stack pages back (for the tests).
    static TRIMS: Cell<u32> = const { Cell::new(0) };
}

/// Release the pages of this thread's stack below the current frame's kept part, if the last job
/// touched any. `low` is the stack's lowest usable address (0: unknown).
///
/// A job that waited long (a provider script on the network) mostly stayed near the top: stacks
/// are touched from the top down, a page at a time (Rust and C probe each page of a large
/// frame), so when the page just below the kept part is not resident nothing deeper is either.
/// Asking is one `mincore` of one page; the `madvise` it saves covered the whole 1 GiB stack and
/// made the kernel flush the process's address translations on every core, once per model call.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim_stack(low: usize) {
    let page = 4096;
    let high = guard::stack_pointer().saturating_sub(KEEP_STACK) & !(page - 1);
    let low = (low + page - 1) & !(page - 1);
    if low == 0 || high <= low {
        return;
    }
    let mut resident = 0u8;
    // SAFETY: one page of this thread's own stack mapping, queried into one byte.
    let asked = unsafe { libc::mincore((high - page) as *mut libc::c_void, page, &mut resident) };
    if asked == 0 && resident & 1 == 0 {
        return;
    }
    // SAFETY: the range lies in this thread's own stack, below every live frame; MADV_DONTNEED
    // on private anonymous memory only drops the pages (they read back as zeros).
    unsafe {
        libc::madvise(low as *mut libc::c_void, high - low, libc::MADV_DONTNEED);
    }
    TRIMS.with(|t| t.set(t.get() + 1));
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim_stack(_low: usize) {}

fn worker_main(slot: Arc<Slot>) {
    guard::set_stack_floor(guard::stack_pointer().saturating_sub(STACK_SIZE - RESERVE));
    CURRENT.with(|c| c.set(Arc::as_ptr(&slot)));
    let stack_low = query_stack().0; // asked once: it costs a system call, and never changes
    let mut ran_long = false;
    loop {
        if ran_long {
            trim_stack(stack_low);
        }
        if wait(&slot.state, |s| s == JOB || s == EXIT, IDLE_SPIN, &slot.idle_waits) == EXIT {
            return;
        }
        let started = Instant::now();
        slot.state.store(RUNNING, Ordering::Relaxed);
        // SAFETY: JOB hands the task and caller cells to this thread (the caller cell stays
        // set for `on_caller` until the next job).
        let task = unsafe { (*slot.task.get()).take() };
        let caller = unsafe { (*slot.caller.get()).clone() };
        if let Some(task) = task {
            // SAFETY: the caller keeps the closure alive until it sees DONE; it never panics
            // (`run` wraps it in catch_unwind).
            unsafe { (*task.as_ptr())() };
        }
        ran_long = started.elapsed() >= TRIM_AFTER;
        slot.state.store(DONE, Ordering::Release);
        if let Some(caller) = caller {
            caller.wake();
        }
    }
}

/// A worker thread, owned by the calling thread that keeps it idle; dropping it ends the thread.
struct Worker {
    slot: Arc<Slot>,
}

impl Drop for Worker {
    fn drop(&mut self) {
        if self.slot.pid == std::process::id() {
            self.slot.state.store(EXIT, Ordering::Release);
            self.slot.wake_worker();
        }
    }
}

fn spawn() -> Result<Worker, String> {
    let slot = Arc::new(Slot {
        state: AtomicU32::new(IDLE),
        task: UnsafeCell::new(None),
        caller: UnsafeCell::new(None),
        declined: UnsafeCell::new(None),
        worker: OnceLock::new(),
        pid: std::process::id(),
        caller_waits: Patience::new(),
        callback_waits: Patience::new(),
        idle_waits: Patience::new(),
    });
    let theirs = slot.clone();
    let handle = thread::Builder::new()
        .name("lev-rhai".into())
        .stack_size(STACK_SIZE)
        .spawn(move || worker_main(theirs))
        .map_err(|e| {
            format!(
                "cannot start a Rhai evaluation thread with a {} MiB stack: {e}",
                STACK_SIZE >> 20
            )
        })?;
    let _ = slot.worker.set(handle.thread().clone());
    Ok(Worker { slot })
}

fn acquire() -> Result<Worker, String> {
    let pid = std::process::id();
    let idle = IDLE_WORKERS
        .try_with(|workers| {
            let mut workers = workers.borrow_mut();
            // Workers inherited through fork() do not exist in this process.
            workers.retain(|w| w.slot.pid == pid);
            workers.pop()
        })
        .ok()
        .flatten();
    match idle {
        Some(worker) => Ok(worker),
        None => spawn(),
    }
}

fn release(worker: Worker) {
    let _ = IDLE_WORKERS.try_with(|workers| {
        let mut workers = workers.borrow_mut();
        if workers.len() < MAX_IDLE {
            workers.push(worker);
        }
        // Otherwise `worker` is dropped here and its thread ends.
    });
}

/// Run `job` on a worker thread and return its result; meanwhile run on this thread whatever
/// the worker hands back with `on_caller`. A panic in `job` is resumed here. Fails only when no
/// worker thread can be started.
pub fn run<R, F>(job: F) -> Result<R, String>
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    run_parking(job, &thread::park)
}

/// [`run`], where this thread parks with `park` whenever it waits longer than a spin: the caller
/// of a Python-facing evaluation keeps the GIL through the spin and lets it go only to park, so
/// a script that answers (or calls back) within microseconds costs no GIL hand-off at all.
pub fn run_parking<R, F>(job: F, park: &dyn Fn()) -> Result<R, String>
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    let worker = acquire()?;
    let slot = &*worker.slot;
    let mut job = Some(job);
    let mut out: Option<thread::Result<R>> = None;
    {
        let mut task = || {
            if let Some(job) = job.take() {
                out = Some(catch_unwind(AssertUnwindSafe(job)));
            }
        };
        // SAFETY: the slot is IDLE (this thread owns the worker), so both cells are ours; the
        // worker takes them after seeing JOB, and `task` outlives the loop below, which returns
        // only once the worker has stored DONE.
        unsafe {
            *slot.task.get() = Some(erase(&mut task));
            *slot.caller.get() = Some(Caller::Thread(thread::current()));
        }
        slot.state.store(JOB, Ordering::Release);
        slot.wake_worker();
        loop {
            let state = wait_parking(
                &slot.state,
                |s| s == CALLBACK || s == DONE,
                CALLER_SPIN,
                &slot.caller_waits,
                park,
            );
            if state == DONE {
                break;
            }
            // SAFETY: CALLBACK hands the task cell to this thread until CALLBACK_DONE.
            if let Some(callback) = unsafe { (*slot.task.get()).take() } {
                // SAFETY: the worker waits for CALLBACK_DONE, keeping the closure alive; the
                // closure catches its own panics (`on_caller`).
                unsafe { (*callback.as_ptr())() };
            }
            slot.state.store(CALLBACK_DONE, Ordering::Release);
            slot.wake_worker();
        }
        slot.state.store(IDLE, Ordering::Relaxed);
    }
    release(worker);
    match out {
        Some(Ok(value)) => Ok(value),
        Some(Err(payload)) => resume_unwind(payload),
        None => Err("the Rhai evaluation thread did not run the job".to_string()),
    }
}

/// Run `f` on the thread waiting for this worker (the caller of `run`) and return its result;
/// on any other thread, just run `f`. Used for everything that touches Python.
pub fn on_caller<T>(f: impl FnOnce() -> T) -> T {
    try_on_caller(f).expect("the calling thread ran no callback")
}

/// [`on_caller`], or None when the caller declined to run `f`: an event loop serving a detached
/// evaluation it has given up on (`Detached::serve`).
pub fn try_on_caller<T>(f: impl FnOnce() -> T) -> Option<T> {
    let slot = CURRENT.with(Cell::get);
    if slot.is_null() {
        return Some(f());
    }
    // SAFETY: a worker's slot lives as long as the worker thread.
    let slot = unsafe { &*slot };
    // SAFETY: while RUNNING the declined cell is only read (set before JOB, cleared after DONE).
    if unsafe { (*slot.declined.get()).as_ref() }.is_some_and(|d| d.load(Ordering::Acquire)) {
        return None;
    }
    let mut f = Some(f);
    let mut out: Option<thread::Result<T>> = None;
    let mut allocated: isize = 0;
    {
        let mut task = || {
            if let Some(f) = f.take() {
                // What the callback leaves allocated (the values it hands to the script) counts
                // against the script's memory budget, not the calling thread's.
                let before = guard::live_bytes();
                out = Some(catch_unwind(AssertUnwindSafe(f)));
                allocated = guard::live_bytes().wrapping_sub(before);
                guard::release_bytes(allocated);
            }
        };
        // SAFETY: while RUNNING the task cell belongs to the worker; the caller takes it after
        // seeing CALLBACK and hands it back with CALLBACK_DONE, before `task` goes out of scope.
        let caller = unsafe {
            *slot.task.get() = Some(erase(&mut task));
            (*slot.caller.get()).clone()
        };
        slot.state.store(CALLBACK, Ordering::Release);
        if let Some(caller) = caller {
            caller.wake();
        }
        wait(&slot.state, |s| s == CALLBACK_DONE, CALLBACK_SPIN, &slot.callback_waits);
        slot.state.store(RUNNING, Ordering::Relaxed);
    }
    guard::adopt_bytes(allocated);
    match out {
        Some(Ok(value)) => Some(value),
        Some(Err(payload)) => resume_unwind(payload),
        None => None,
    }
}

// ---------------------------------------------------------------------------------------------
// Detached evaluations: the caller is an event loop
// ---------------------------------------------------------------------------------------------

/// Most idle workers kept for detached evaluations (shared by the whole process).
const MAX_IDLE_DETACHED: usize = 256;

static DETACHED_IDLE: std::sync::Mutex<Vec<Worker>> = std::sync::Mutex::new(Vec::new());

/// An evaluation running on a worker whose caller is an event loop rather than a waiting thread:
/// the worker calls the loop's `Wake` when a callback is due and when the job is done, and the
/// loop answers with [`Detached::serve`]. Thousands can be in flight from one loop thread,
/// and none holds a thread of the caller's while its script waits (on a `Later`, say).
///
/// The owner must keep this value until `serve` has reported the end: the worker runs the job
/// in place. Whoever owns it is reachable from the `Wake` while the job runs (the worker holds
/// the wake), so it cannot be dropped early by accident.
pub struct Detached {
    worker: Option<Worker>,
    job: Option<Box<dyn FnMut() + Send>>,
}

/// What [`Detached::serve`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Served {
    /// The worker is busy: nothing to do.
    Busy,
    /// A callback was due and has been run (or declined).
    Callback,
    /// The job has ended; its worker went back to the pool.
    Finished,
}

/// Start `job` on a pooled worker; `wake` is called from the worker whenever the evaluation
/// needs its caller (see [`Detached`]); once `declined` is set, the job's callbacks are declined
/// on the worker itself. `job` must not panic (wrap it in `catch_unwind`).
pub fn start(
    job: Box<dyn FnMut() + Send>,
    wake: Wake,
    declined: Arc<AtomicBool>,
) -> Result<Detached, String> {
    let pid = std::process::id();
    let idle = {
        let mut pool = DETACHED_IDLE
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        pool.retain(|w| w.slot.pid == pid);
        pool.pop()
    };
    let worker = match idle {
        Some(worker) => worker,
        None => spawn()?,
    };
    let mut detached = Detached {
        worker: Some(worker),
        job: Some(job),
    };
    let slot = &*detached.worker.as_ref().expect("just set").slot;
    let job = detached.job.as_mut().expect("just set");
    // SAFETY: the slot is IDLE (no job: it came from the pool or is new), so both cells are
    // ours; the boxed job stays where it is until `serve` has seen DONE (see `Detached`).
    unsafe {
        *slot.task.get() = Some(erase(&mut **job));
        *slot.caller.get() = Some(Caller::Loop(wake));
        *slot.declined.get() = Some(declined);
    }
    slot.state.store(JOB, Ordering::Release);
    slot.wake_worker();
    Ok(detached)
}

impl Detached {
    /// Do what the worker waits for, on the loop's thread: run a due callback (or, with
    /// `decline`, hand it back unrun: the script sees an error), or take the finished job's
    /// worker back to the pool.
    pub fn serve(&mut self, decline: bool) -> Served {
        let Some(worker) = self.worker.as_ref() else {
            return Served::Finished;
        };
        let slot = &*worker.slot;
        match slot.state.load(Ordering::Acquire) {
            CALLBACK => {
                // SAFETY: CALLBACK hands the task cell to this side until CALLBACK_DONE.
                if let Some(callback) = unsafe { (*slot.task.get()).take() } {
                    if !decline {
                        // SAFETY: the worker waits for CALLBACK_DONE, keeping the closure
                        // alive; the closure catches its own panics (`try_on_caller`).
                        unsafe { (*callback.as_ptr())() };
                    }
                }
                slot.state.store(CALLBACK_DONE, Ordering::Release);
                slot.wake_worker();
                Served::Callback
            }
            DONE => {
                // SAFETY: DONE hands both cells back; dropping the wake here breaks the
                // owner <-> wake cycle that kept the owner alive while the job ran.
                unsafe {
                    *slot.caller.get() = None;
                    *slot.task.get() = None;
                    *slot.declined.get() = None;
                }
                slot.state.store(IDLE, Ordering::Relaxed);
                self.job = None;
                let worker = self.worker.take().expect("checked above");
                let mut pool = DETACHED_IDLE
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                if pool.len() < MAX_IDLE_DETACHED {
                    pool.push(worker);
                }
                Served::Finished
            }
            _ => Served::Busy,
        }
    }

    /// Whether the job has ended and its worker gone back (see `serve`).
    pub fn finished(&self) -> bool {
        self.worker.is_none()
    }
}

impl Drop for Detached {
    fn drop(&mut self) {
        if self.worker.is_some() {
            // Dropped while its worker may still run the job (a process shutting down): leave
            // the job and the worker be rather than free what the worker may still touch.
            std::mem::forget(self.job.take());
            std::mem::forget(self.worker.take());
        }
    }
}

/// Whether this thread is an evaluation thread.
pub fn on_worker() -> bool {
    !CURRENT.with(Cell::get).is_null()
}

thread_local! {
    /// The lowest usable address of this thread's stack: None until asked, Some(0) if unknown.
    static STACK_LOW: Cell<Option<usize>> = const { Cell::new(None) };
}

/// The lowest address of this thread's stack (above its guard page) and its top, if the
/// platform says (else zeros).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn query_stack() -> (usize, usize) {
    // SAFETY: plain queries about the current thread into a zeroed attribute object.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return (0, 0);
        }
        let mut addr: *mut libc::c_void = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let mut guard: libc::size_t = 0;
        let ok = libc::pthread_attr_getstack(&attr, &mut addr, &mut size) == 0
            && libc::pthread_attr_getguardsize(&attr, &mut guard) == 0;
        libc::pthread_attr_destroy(&mut attr);
        if !ok || addr.is_null() {
            return (0, 0);
        }
        (addr as usize + guard, addr as usize + size)
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn query_stack() -> (usize, usize) {
    (0, 0)
}

/// The lowest address of this calling thread's stack we count on. The main thread's stack is
/// reported as its whole rlimit; never count on more than 8 MiB, the common default.
fn query_stack_low() -> usize {
    let (low, top) = query_stack();
    if low == 0 {
        0
    } else {
        low.max(top.saturating_sub(8 << 20))
    }
}

/// Where a capped attempt may run on this thread: `Some(floor)` when the stack below the
/// current frame holds `reserve` bytes for what recurses without the progress hook plus `room`
/// for the evaluator, which the stack guard then keeps above `floor`. None on a worker, or when
/// this thread's stack is unknown or too small.
pub fn inline_floor(reserve: usize, room: usize) -> Option<usize> {
    if on_worker() {
        return None;
    }
    let low = match STACK_LOW.with(Cell::get) {
        Some(low) => low,
        None => {
            let low = query_stack_low();
            STACK_LOW.with(|c| c.set(Some(low)));
            low
        }
    };
    if low == 0 {
        return None;
    }
    let floor = low.checked_add(reserve)?;
    (guard::stack_pointer() > floor.checked_add(room)?).then_some(floor)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Recurse `n` levels of about 1 KiB of stack each.
    fn down(n: u64) -> u64 {
        let pad = std::hint::black_box([0u8; 1000]);
        if n == 0 {
            pad[0] as u64
        } else {
            down(n - 1) + 1 + pad[1] as u64
        }
    }

    #[test]
    fn job_runs_on_a_worker_and_callbacks_on_the_caller() {
        let me = thread::current().id();
        let (ran_on, called_on) = run(|| {
            let worker = thread::current().id();
            let called = on_caller(|| thread::current().id());
            (worker, called)
        })
        .unwrap();
        assert_ne!(ran_on, me);
        assert_eq!(called_on, me);
        assert!(!on_worker());
    }

    #[test]
    fn nested_runs_use_another_worker() {
        let depth = run(|| on_caller(|| run(|| on_caller(|| 41)).unwrap()) + 1).unwrap();
        assert_eq!(depth, 42);
    }

    #[test]
    fn a_deep_recursion_fits_the_worker_stack() {
        // About 100 MiB of frames: far beyond a Python thread's stack.
        assert_eq!(run(|| down(100_000)).unwrap(), 100_000);
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn a_long_deep_job_hands_its_stack_back_and_a_long_shallow_one_costs_nothing() {
        fn resident(address: usize) -> bool {
            let mut found = 0u8;
            let page = address & !4095;
            unsafe { libc::mincore(page as *mut libc::c_void, 4096, &mut found) == 0 && found & 1 == 1 }
        }
        let trims = || run(|| TRIMS.with(Cell::get)).unwrap();
        // On this thread's own worker (the same one for every call below).
        let before = trims();
        run(|| thread::sleep(TRIM_AFTER * 2)).unwrap(); // long, shallow: a provider script waiting
        assert_eq!(trims(), before, "nothing deep was touched: nothing to hand back");
        let deep = run(|| {
            down(20_000); // about 20 MiB of frames
            thread::sleep(TRIM_AFTER * 2);
            guard::stack_pointer() - (10 << 20)
        })
        .unwrap();
        assert_eq!(trims(), before + 1);
        assert!(!run(move || resident(deep)).unwrap(), "the deep pages went back to the system");
    }

    #[test]
    fn inline_room_is_known_on_ordinary_threads_only() {
        // A test thread has a 2 MiB stack or more: room for 64 KiB + 64 KiB, not for 1 GiB.
        assert!(inline_floor(64 << 10, 64 << 10).is_some());
        assert!(inline_floor(1 << 30, 0).is_none());
        assert_eq!(run(|| inline_floor(64 << 10, 64 << 10)).unwrap(), None);
    }

    #[test]
    fn panics_come_back_to_the_caller() {
        let caught = std::panic::catch_unwind(|| run(|| panic!("boom")));
        assert!(caught.is_err());
        assert_eq!(run(|| 7).unwrap(), 7, "the worker survives");
    }

    #[test]
    fn many_calls_from_many_threads() {
        let threads: Vec<_> = (0..8)
            .map(|k| {
                thread::spawn(move || (0..200).map(|i| run(move || i * k).unwrap()).sum::<u64>())
            })
            .collect();
        for (k, t) in threads.into_iter().enumerate() {
            assert_eq!(t.join().unwrap(), (0..200).sum::<u64>() * k as u64);
        }
    }

    #[test]
    fn a_long_wait_makes_the_next_one_park_and_a_short_one_spin_again() {
        let patience = Patience::new();
        let state = Arc::new(AtomicU32::new(IDLE));
        // Ready at once: nothing learned.
        state.store(DONE, Ordering::Release);
        assert_eq!(wait(&state, |s| s == DONE, CALLER_SPIN, &patience), DONE);
        assert!(!patience.0.load(Ordering::Relaxed));
        // The other side answers after 5 ms, far beyond the spin: the next wait parks at once.
        state.store(IDLE, Ordering::Release);
        let me = thread::current();
        let other = {
            let state = state.clone();
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(5));
                state.store(DONE, Ordering::Release);
                me.unpark();
            })
        };
        assert_eq!(wait(&state, |s| s == DONE, CALLER_SPIN, &patience), DONE);
        other.join().unwrap();
        assert!(patience.0.load(Ordering::Relaxed));
        // A wait that ends at once after that spins again next time.
        assert_eq!(wait(&state, |s| s == DONE, CALLER_SPIN, &patience), DONE);
        assert!(!patience.0.load(Ordering::Relaxed));
    }

    #[test]
    fn a_detached_job_is_served_by_whoever_its_wake_tells() {
        use std::sync::mpsc;
        let (tx, rx) = mpsc::channel::<()>();
        let tx = std::sync::Mutex::new(tx);
        let wake: Wake = Arc::new(move || {
            let _ = tx.lock().unwrap().send(());
        });
        let me = thread::current().id();
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let theirs = seen.clone();
        let given_up = Arc::new(AtomicBool::new(false));
        let mut detached = start(
            Box::new(move || {
                let first = on_caller(|| thread::current().id());
                let declined = try_on_caller(|| 1);
                let refused_here = try_on_caller(|| 2);
                theirs.lock().unwrap().push((first, declined, refused_here));
            }),
            wake,
            given_up.clone(),
        )
        .unwrap();
        let mut served = Vec::new();
        while !detached.finished() {
            rx.recv().unwrap();
            // The second callback is declined: the job sees None, not a panic.
            let decline = served.len() == 1;
            // From the second callback on the caller gives up: the third never reaches it.
            given_up.store(decline, Ordering::Release);
            served.push(detached.serve(decline));
        }
        assert_eq!(served, vec![Served::Callback, Served::Callback, Served::Finished]);
        assert_eq!(*seen.lock().unwrap(), vec![(me, None, None)]);
    }

    #[test]
    fn calls_with_slow_callbacks_still_finish() {
        // Every callback outlasts the spins: each wait after the first parks at once, and no
        // wake-up may be lost on the way.
        let total: u64 = (0..20)
            .map(|i| {
                run(move || {
                    on_caller(|| thread::sleep(Duration::from_millis(1)));
                    i
                })
                .unwrap()
            })
            .sum();
        assert_eq!(total, (0..20).sum::<u64>());
    }
}
