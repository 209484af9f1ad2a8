//! Evaluations served by an event loop, and host functions that answer later.
//!
//! `Engine.start` runs a function of a compiled script on a pooled evaluation thread whose
//! caller is a `Dispatch` rather than a waiting Python thread (`worker::start`). When the script
//! calls a Python function, or ends, the worker puts its evaluation on the dispatch's ready list
//! and writes one byte to the dispatch's pipe (only when the list was empty): an asyncio loop
//! watching `Dispatch.fileno()` wakes once for however many evaluations became ready, and
//! serves each with `Evaluation.step()` on its own thread, the GIL already held.
//!
//! A Python host function may return a `Later` instead of a value: the script then waits, on
//! its worker and without the GIL, until some Python code calls `Later.resolve(value)` (an HTTP
//! answer arriving on the loop, say). With both, a provider script waiting on the network holds
//! no Python thread, and a thousand of them cost the loop a wake-up each time they need it.

use std::os::fd::RawFd;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, Thread};
use std::time::Instant;

use pyo3::exceptions::{PyOSError, PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use rhai::{Dynamic, EvalAltResult, Position};

use crate::engine::{terminated, PENDING_INTERRUPT};
use crate::guard;
use crate::worker::{self, Detached, Served};

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

type EvalResult = Result<Dynamic, Box<EvalAltResult>>;

// ---------------------------------------------------------------------------------------------
// Later: an answer that comes after the host function returned
// ---------------------------------------------------------------------------------------------

const WAITING: u32 = 0;
const ANSWERED: u32 = 1;

/// Where a `Later`'s answer meets the script waiting for it.
pub struct LaterCell {
    state: AtomicU32,
    /// The answer and the bytes counted for it on the answering thread (`guard::release_bytes`).
    answer: Mutex<Option<(EvalResult, isize)>>,
    waiter: Mutex<Option<Thread>>,
}

impl LaterCell {
    fn new() -> Self {
        LaterCell {
            state: AtomicU32::new(WAITING),
            answer: Mutex::new(None),
            waiter: Mutex::new(None),
        }
    }

    /// Store the answer and wake the script; false when it was answered before.
    fn answer(&self, value: EvalResult, allocated: isize) -> bool {
        {
            let mut answer = lock(&self.answer);
            if self.state.load(Ordering::Acquire) == ANSWERED {
                return false;
            }
            *answer = Some((value, allocated));
            self.state.store(ANSWERED, Ordering::Release);
        }
        if let Some(waiter) = lock(&self.waiter).take() {
            waiter.unpark();
        }
        true
    }

    /// On the script's thread: wait for the answer, no later than the evaluation's deadline.
    pub fn wait(&self, name: &str) -> EvalResult {
        *lock(&self.waiter) = Some(thread::current());
        let deadline = guard::current_deadline();
        while self.state.load(Ordering::Acquire) != ANSWERED {
            match deadline {
                Some(at) => {
                    let now = Instant::now();
                    if now >= at {
                        return Err(terminated(format!(
                            "{} while {name} was still waiting for its answer",
                            guard::TIMEOUT_PREFIX
                        )));
                    }
                    thread::park_timeout(at - now);
                }
                None => thread::park(),
            }
        }
        let (value, allocated) = lock(&self.answer)
            .take()
            .unwrap_or_else(|| (Ok(Dynamic::UNIT), 0));
        guard::adopt_bytes(allocated);
        value
    }
}

/// A host function's answer still to come: return one from a registered Python function and the
/// script waits, without the GIL, until `resolve` or `fail` is called (from any thread). A
/// `Later` dropped unanswered fails the call; so does the evaluation's deadline.
#[pyclass(module = "lev_nb._rhai", name = "Later", frozen)]
pub struct PyLater {
    pub cell: Arc<LaterCell>,
}

#[pymethods]
impl PyLater {
    #[new]
    fn new() -> Self {
        PyLater {
            cell: Arc::new(LaterCell::new()),
        }
    }

    /// Answer with `value` (plain data, as a host function returns); False when already
    /// answered. A value that is not plain data fails the call and raises TypeError here.
    fn resolve(&self, value: &Bound<'_, PyAny>) -> PyResult<bool> {
        let before = guard::live_bytes();
        let converted = crate::convert::py_to_dynamic(value);
        let allocated = guard::live_bytes().wrapping_sub(before);
        guard::release_bytes(allocated);
        match converted {
            Ok(dynamic) => Ok(self.cell.answer(Ok(dynamic), allocated)),
            Err(err) => {
                let message = format!("the host function answered with an unusable value: {err}");
                self.cell.answer(Err(runtime(message.clone())), 0);
                Err(PyTypeError::new_err(message))
            }
        }
    }

    /// Fail the call with `message`: a runtime error the script can catch. False when already
    /// answered.
    fn fail(&self, message: &str) -> bool {
        self.cell.answer(Err(runtime(message.to_string())), 0)
    }

    /// Whether it has been answered.
    #[getter]
    fn answered(&self) -> bool {
        self.cell.state.load(Ordering::Acquire) == ANSWERED
    }
}

impl Drop for PyLater {
    fn drop(&mut self) {
        self.cell.answer(
            Err(runtime("the host function never answered".to_string())),
            0,
        );
    }
}

fn runtime(message: String) -> Box<EvalAltResult> {
    Box::new(EvalAltResult::ErrorRuntime(message.into(), Position::NONE))
}

// ---------------------------------------------------------------------------------------------
// Dispatch: the ready list and the pipe a loop watches
// ---------------------------------------------------------------------------------------------

struct Ready {
    list: Mutex<Vec<Arc<EvaluationState>>>,
    /// A byte is in the pipe (or about to be) that the loop has not read yet.
    signalled: AtomicBool,
    read_fd: RawFd,
    write_fd: RawFd,
}

impl Ready {
    /// On a worker: queue `evaluation` and wake the loop unless a wake-up is already pending.
    fn post(&self, evaluation: Arc<EvaluationState>) {
        lock(&self.list).push(evaluation);
        if !self.signalled.swap(true, Ordering::SeqCst) {
            let byte = [1u8];
            // SAFETY: a plain write of one byte to our own non-blocking pipe; a full pipe
            // (EAGAIN) already holds a wake-up.
            unsafe {
                libc::write(self.write_fd, byte.as_ptr().cast(), 1);
            }
        }
    }

    /// On the loop: empty the pipe, then take everything queued.
    ///
    /// The order matters. The pipe is emptied first and `signalled` cleared after, so a post
    /// that finds `signalled` set always has its byte still to come or in the pipe: cleared
    /// first, a post could set it and write between the clearing and the emptying, its byte
    /// read here, and every later post would find it set and write nothing, its evaluation
    /// never served. Whatever is posted before the list is taken is served now; a post after
    /// it finds `signalled` clear and writes.
    fn take(&self) -> Vec<Arc<EvaluationState>> {
        let mut buffer = [0u8; 256];
        loop {
            // SAFETY: reading into a local buffer from our own non-blocking pipe.
            let read = unsafe { libc::read(self.read_fd, buffer.as_mut_ptr().cast(), buffer.len()) };
            if read <= 0 {
                break;
            }
        }
        self.signalled.store(false, Ordering::SeqCst);
        std::mem::take(&mut *lock(&self.list))
    }
}

impl Drop for Ready {
    fn drop(&mut self) {
        // SAFETY: the descriptors are ours and used by nothing else once the last holder goes.
        unsafe {
            libc::close(self.read_fd);
            libc::close(self.write_fd);
        }
    }
}

fn nonblocking_pipe() -> PyResult<(RawFd, RawFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe() fills the two descriptors; fcntl only sets flags on them.
    unsafe {
        if libc::pipe(fds.as_mut_ptr()) != 0 {
            return Err(PyOSError::new_err(std::io::Error::last_os_error().to_string()));
        }
        for fd in fds {
            libc::fcntl(fd, libc::F_SETFL, libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK);
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
    }
    Ok((fds[0], fds[1]))
}

/// The ready list of the evaluations one event loop serves: watch `fileno()` for reading, and
/// when it is readable call `ready()` and `step()` each evaluation it returns.
#[pyclass(module = "lev_nb._rhai", name = "Dispatch", frozen)]
pub struct PyDispatch {
    ready: Arc<Ready>,
}

#[pymethods]
impl PyDispatch {
    #[new]
    fn new() -> PyResult<Self> {
        let (read_fd, write_fd) = nonblocking_pipe()?;
        Ok(PyDispatch {
            ready: Arc::new(Ready {
                list: Mutex::new(Vec::new()),
                signalled: AtomicBool::new(false),
                read_fd,
                write_fd,
            }),
        })
    }

    /// The descriptor to watch for reading.
    fn fileno(&self) -> RawFd {
        self.ready.read_fd
    }

    /// The evaluations that need their loop now (a callback due, or ended), in the order they
    /// asked; empties the pipe.
    fn ready(&self) -> Vec<PyEvaluation> {
        self.ready
            .take()
            .into_iter()
            .map(|state| PyEvaluation { state })
            .collect()
    }
}

impl PyDispatch {
    /// A wake for `state`: queue it on this dispatch's ready list.
    pub fn wake_for(&self, state: &Arc<EvaluationState>) -> worker::Wake {
        let ready = self.ready.clone();
        let state = state.clone();
        Arc::new(move || ready.post(state.clone()))
    }
}

// ---------------------------------------------------------------------------------------------
// Evaluation: one detached evaluation, seen from the loop
// ---------------------------------------------------------------------------------------------

/// Converts an ended evaluation's outcome for Python (made by the engine, which knows it).
pub type Finish = Box<dyn FnOnce(Python<'_>) -> PyResult<Py<PyAny>> + Send>;

/// What the engine side keeps of a detached evaluation (see `engine::PyEngine::start`).
pub struct EvaluationState {
    pub detached: Mutex<Option<Detached>>,
    /// The outcome, converted to Python once the job has ended.
    pub finish: Mutex<Option<Finish>>,
    pub tag: Py<PyAny>,
    pub deadline: Option<Instant>,
    /// Set by `cancel()`; the worker declines callbacks from then on (`worker::start`).
    pub cancelled: Arc<AtomicBool>,
}

/// A detached evaluation (`Engine.start`): its `tag`, `step()` to serve it when its dispatch
/// says so, `result()` once `step()` said it ended, `cancel()` to make every later callback
/// fail (the script stops at its next host call).
///
/// The tag is not shown to Python's garbage collector: the running worker holds the evaluation
/// too, unseen, so a tag must not hold its own evaluation.
#[pyclass(module = "lev_nb._rhai", name = "Evaluation", frozen)]
pub struct PyEvaluation {
    pub state: Arc<EvaluationState>,
}

#[pymethods]
impl PyEvaluation {
    /// What the caller of `Engine.start` attached.
    #[getter]
    fn tag(&self, py: Python<'_>) -> Py<PyAny> {
        self.state.tag.clone_ref(py)
    }

    /// Serve the evaluation on this thread: run its due callback, or collect its end. True once
    /// it has ended (then call `result()`). A KeyboardInterrupt raised in a callback stops the
    /// script and is raised here.
    fn step(&self) -> PyResult<bool> {
        let decline = self.state.cancelled.load(Ordering::Acquire);
        let served = {
            let mut detached = lock(&self.state.detached);
            match detached.as_mut() {
                None => Served::Busy,
                Some(detached) => guard::with_deadline_at(self.state.deadline, || {
                    catch_unwind(AssertUnwindSafe(|| detached.serve(decline)))
                })
                .map_err(|_| PyRuntimeError::new_err("serving a Rhai evaluation panicked"))?,
            }
        };
        if let Some(interrupt) = PENDING_INTERRUPT.with(|p| p.borrow_mut().take()) {
            return Err(interrupt);
        }
        Ok(served == Served::Finished)
    }

    /// The ended evaluation's value; raises what `Engine.call` would have raised. Once only.
    fn result(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        if !lock(&self.state.detached).as_ref().is_some_and(Detached::finished) {
            return Err(PyRuntimeError::new_err("the evaluation has not ended"));
        }
        match lock(&self.state.finish).take() {
            Some(finish) => finish(py),
            None => Err(PyRuntimeError::new_err("the evaluation's result was taken already")),
        }
    }

    /// Refuse every callback from now on: the script stops at its next host call.
    fn cancel(&self) {
        self.state.cancelled.store(true, Ordering::Release);
    }
}
