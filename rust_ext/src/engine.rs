//! The hardened engine: the one `harden()` policy and the Python-facing `Engine` / `AST` classes.
//!
//! Threading model: an `Engine` keeps one fully configured `rhai::Engine` behind an `Arc` (it is
//! `Send + Sync` under Rhai's `sync` feature), built on first use and again after a registration.
//! Every compilation and evaluation releases the GIL and runs on an evaluation thread with a
//! large, known stack (`worker`), with a fresh `Scope`, under the guards of `guard` (deadline,
//! memory, stack); calls from many Python threads at once never share state. Python callbacks
//! (registered functions, print/debug sinks) run back on the calling thread, which re-attaches
//! to the interpreter only while they run. What a script leaves behind (its scope, its values)
//! is dropped on the evaluation thread; only checked, shallow plain data comes back.

use std::any::TypeId;
use std::cell::RefCell;
use std::collections::HashSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, RwLock};

use pyo3::exceptions::{PyException, PyValueError};
use pyo3::gc::{PyTraverseError, PyVisit};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};
use rhai::module_resolvers::DummyModuleResolver;
use rhai::{
    Dynamic, Engine, EvalAltResult, FnPtr, LexError, Position, Scope, Token, AST, FLOAT, INT,
};

use crate::convert::{check_plain, dynamic_to_py, py_to_dynamic, Unfit};
use crate::errors::{
    report, report_to_py, ErrorClass, ErrorReport, NotPlainDataError, RhaiError,
    TERMINATE_INTERRUPTED,
};
use crate::detached::{EvaluationState, LaterCell, PyDispatch, PyEvaluation, PyLater};
use crate::guard;
use crate::helpers::register_shared;
use crate::limits::{Limits, INLINE_ROOM};
use crate::worker;

pub use crate::guard::with_deadline;

/// Why a detached evaluation's host call failed after `Evaluation.cancel()`.
pub const TERMINATE_CANCELLED: &str = "Script cancelled: its caller stopped waiting for it";

/// Most parameters accepted by a function registered with a variadic Python callable.
pub const MAX_VARIADIC_ARITY: usize = 10;

// ---------------------------------------------------------------------------------------------
// The policy (pure Rust, unit-tested without Python)
// ---------------------------------------------------------------------------------------------

fn disabled(name: &str) -> Box<EvalAltResult> {
    Box::new(EvalAltResult::ErrorRuntime(
        format!("{name} is disabled in lev_nb scripts").into(),
        Position::NONE,
    ))
}

/// A stop that scripts cannot catch, with `message` as its text (see `errors::own_message`).
pub fn terminated(message: impl Into<String>) -> Box<EvalAltResult> {
    Box::new(EvalAltResult::ErrorTerminated(
        Dynamic::from(message.into()),
        Position::NONE,
    ))
}

/// The one sandbox policy applied to every engine (spec/rhai.md §1 and §5, plus lev_nb's
/// deadline, memory budget, stack floor, compile bounds and disabled `sleep`).
pub fn harden(engine: &mut Engine, limits: &Limits) {
    engine.set_max_operations(limits.max_operations);
    engine.set_max_string_size(limits.max_string_size);
    engine.set_max_array_size(limits.max_array_size);
    engine.set_max_map_size(limits.max_map_size);
    engine.set_max_call_levels(limits.max_call_levels);
    engine.set_max_expr_depths(limits.max_expr_depth, limits.max_function_expr_depth);
    engine.set_max_functions(limits.max_functions);
    // Refused while parsing, so a script using it never compiles.
    engine.disable_symbol("eval");
    // No module can ever be found: `import` fails.
    engine.set_module_resolver(DummyModuleResolver::new());
    // Output is muted unless the host installs its own sinks afterwards.
    engine.on_print(|_| {});
    engine.on_debug(|_, _, _| {});
    // `sleep` would block the thread without spending operations.
    engine.register_fn("sleep", |_: INT| -> Result<(), Box<EvalAltResult>> {
        Err(disabled("sleep"))
    });
    engine.register_fn("sleep", |_: FLOAT| -> Result<(), Box<EvalAltResult>> {
        Err(disabled("sleep"))
    });
    // Before every operation: the stack floor and the memory budget; every 1024: the clock.
    let timeout_ms = limits.timeout_ms;
    engine.on_progress(move |ops| guard::check(ops, timeout_ms));
    // While compiling, for every token: the same guards (the parser is otherwise unbounded in
    // time: some scripts take time quadratic in their length).
    #[allow(deprecated)] // "not deprecated, but volatile", says Rhai
    engine.on_parse_token(|token, _, _| {
        if guard::check_compile() {
            Token::LexError(Box::new(LexError::Runtime(
                guard::compile_abort().unwrap_or_default().to_string(),
            )))
        } else {
            token
        }
    });
}

/// Whether a limit error of the capped first attempt (see `worker`) may come from its caps
/// (operations, items, the calling thread's stack), so the script must run again past them. The
/// deadline, the compile budget, the memory budget and the size of the source are the same in
/// both attempts: running again would only take as long again.
fn caps_may_explain(report: &crate::errors::ErrorReport) -> bool {
    let text = &report.message;
    ![
        guard::TIMEOUT_PREFIX,
        guard::COMPILE_TIMEOUT_MESSAGE,
        guard::MEMORY_MESSAGE,
        "Script too large",
        "Number of functions",
    ]
    .iter()
    .any(|known| text.contains(known))
}

/// A hardened engine with the shared helpers registered: what every script runs on.
pub fn hardened_engine(limits: &Limits) -> Engine {
    let mut engine = Engine::new();
    harden(&mut engine, limits);
    register_shared(&mut engine);
    engine
}

/// Compile `source` under the script-size limit and the compile budget (`max_compile_ms`, or the
/// deadline in force if sooner); a compilation stopped by a guard is a limit error, not a syntax
/// error.
pub fn compile_with(
    engine: &Engine,
    source: &str,
    limits: &Limits,
) -> Result<AST, Box<EvalAltResult>> {
    if source.len() > limits.max_script_size {
        return Err(terminated(format!(
            "Script too large: {} bytes, more than max_script_size ({} bytes)",
            source.len(),
            limits.max_script_size
        )));
    }
    // The compile budget holds even without a deadline (it never extends one in force).
    guard::with_deadline(Some(limits.max_compile_ms), || engine.compile(source)).map_err(|err| {
        match guard::compile_abort() {
            Some(message) => terminated(message),
            None => err.into(),
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Python callbacks (they run on the calling thread, see `worker::on_caller`)
// ---------------------------------------------------------------------------------------------

thread_local! {
    /// A Python BaseException that is not an Exception (KeyboardInterrupt, SystemExit) raised in
    /// a callback: it stops the script and is re-raised as itself once evaluation returns.
    pub static PENDING_INTERRUPT: RefCell<Option<PyErr>> = const { RefCell::new(None) };
}

fn runtime_error(message: String, pos: Position) -> Box<EvalAltResult> {
    Box::new(EvalAltResult::ErrorRuntime(message.into(), pos))
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

/// Text of a Python exception for a script: `str(exc)`, or the class name when that is empty.
fn exception_text(py: Python<'_>, err: &PyErr) -> String {
    let value = err.value(py);
    let text = value.str().map(|s| s.to_string()).unwrap_or_default();
    if text.is_empty() {
        err.get_type(py)
            .qualname()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "exception".to_string())
    } else {
        text
    }
}

/// What a Python host function answered: a value now, or a `Later` to wait for.
enum Answer {
    Now(Dynamic),
    Later(Arc<LaterCell>),
}

/// Call a Python callable with Rhai arguments, on the calling thread. Python exceptions and Rust
/// panics become Rhai runtime errors (catchable by `try`/`catch`); nothing unwinds through
/// Rhai's frames. A callable that returns a `Later` makes the script wait for its answer here,
/// on the evaluation thread (`detached`).
fn invoke_python(
    name: &str,
    func: &Py<PyAny>,
    args: &[&mut Dynamic],
    pos: Position,
) -> Result<Dynamic, Box<EvalAltResult>> {
    let answered = worker::try_on_caller(|| {
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            Python::attach(|py| -> Result<Answer, Box<EvalAltResult>> {
                let mut items = Vec::with_capacity(args.len());
                for arg in args.iter() {
                    let converted = dynamic_to_py(py, arg).map_err(|e| {
                        runtime_error(format!("{name}: {}", exception_text(py, &e)), pos)
                    })?;
                    items.push(converted);
                }
                let call = PyTuple::new(py, items).and_then(|t| func.bind(py).call1(t));
                match call {
                    Ok(value) => {
                        if let Ok(later) = value.cast::<PyLater>() {
                            return Ok(Answer::Later(later.get().cell.clone()));
                        }
                        py_to_dynamic(&value).map(Answer::Now).map_err(|e| {
                            runtime_error(
                                format!(
                                    "{name} returned an unusable value: {}",
                                    exception_text(py, &e)
                                ),
                                pos,
                            )
                        })
                    }
                    Err(err) if err.is_instance_of::<PyException>(py) => {
                        Err(runtime_error(exception_text(py, &err), pos))
                    }
                    Err(err) => {
                        PENDING_INTERRUPT.with(|p| *p.borrow_mut() = Some(err));
                        Err(Box::new(EvalAltResult::ErrorTerminated(
                            TERMINATE_INTERRUPTED.into(),
                            pos,
                        )))
                    }
                }
            })
        }));
        match outcome {
            Ok(result) => result,
            Err(payload) => Err(runtime_error(
                format!("{name} panicked: {}", panic_message(payload.as_ref())),
                pos,
            )),
        }
    });
    match answered {
        None => Err(terminated(TERMINATE_CANCELLED)),
        Some(Ok(Answer::Now(value))) => Ok(value),
        Some(Ok(Answer::Later(cell))) => cell.wait(name),
        Some(Err(err)) => Err(err),
    }
}

/// Forward printed text to a Python sink, on the calling thread; its failures are ignored
/// (printing cannot fail).
fn forward_output(sink: &Py<PyAny>, text: &str) {
    let _ = worker::try_on_caller(|| {
        let _ = catch_unwind(AssertUnwindSafe(|| {
            Python::attach(|py| {
                if let Err(err) = sink.bind(py).call1((text,)) {
                    err.write_unraisable(py, Some(sink.bind(py)));
                }
            })
        }));
    });
}

struct PythonFunction {
    name: String,
    func: Arc<Py<PyAny>>,
    arities: Vec<usize>,
}

#[derive(Default)]
struct Registry {
    on_print: Option<Arc<Py<PyAny>>>,
    on_debug: Option<Arc<Py<PyAny>>>,
    functions: Vec<PythonFunction>,
}

fn build_engine(limits: &Limits, registry: &Registry) -> Engine {
    let mut engine = hardened_engine(limits);
    if let Some(sink) = &registry.on_print {
        let sink = sink.clone();
        engine.on_print(move |s| forward_output(&sink, s));
    }
    if let Some(sink) = &registry.on_debug {
        let sink = sink.clone();
        engine.on_debug(move |s, _, _| forward_output(&sink, s));
    }
    for function in &registry.functions {
        for &arity in &function.arities {
            let name = function.name.clone();
            let func = function.func.clone();
            engine.register_raw_fn(
                function.name.clone(),
                vec![TypeId::of::<Dynamic>(); arity],
                move |ctx, args| invoke_python(&name, &func, args, ctx.call_position()),
            );
        }
    }
    engine
}

// ---------------------------------------------------------------------------------------------
// Running on an evaluation thread
// ---------------------------------------------------------------------------------------------

/// What an evaluation hands back to the calling thread: shallow, checked plain data, or the
/// finished description of what went wrong (everything else stays on the evaluation thread).
enum Outcome {
    Value(Dynamic),
    NotPlain(String),
    Failed(ErrorReport),
}

type EvalResult = Result<Dynamic, Box<EvalAltResult>>;

fn panicked(payload: &(dyn std::any::Any + Send)) -> Box<EvalAltResult> {
    runtime_error(
        format!("the Rhai engine panicked: {}", panic_message(payload)),
        Position::NONE,
    )
}

/// On the evaluation thread: check a result before it may leave.
fn settle(result: std::thread::Result<EvalResult>, limits: &Limits) -> Outcome {
    match result {
        Ok(Ok(value)) => match check_plain(&value, limits) {
            Ok(()) => Outcome::Value(value),
            Err(Unfit::NotPlain(message)) => Outcome::NotPlain(message),
            Err(Unfit::TooLarge(err)) => Outcome::Failed(report(&err, limits)),
        },
        Ok(Err(err)) => Outcome::Failed(report(&err, limits)),
        Err(payload) => Outcome::Failed(report(&panicked(payload.as_ref()), limits)),
    }
}

/// Run `job` on an evaluation thread as one evaluation of an engine with `limits`, under the
/// deadline (never later than the one of an evaluation this runs inside), with the memory budget
/// counted from its start.
///
/// The job never needs the GIL (Python work comes back here, `worker::on_caller`), so this thread
/// keeps it while it spins for the worker's answer and lets it go only to park: a provider script
/// that builds its request and calls back within microseconds used to cost two hand-offs of the
/// GIL per call (each, with other threads waiting, several context switches); one that runs
/// longer than a spin lets the other Python threads run as before.
fn on_evaluation_thread<R, F>(py: Python<'_>, limits: &Limits, job: F) -> PyResult<R>
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    let deadline = guard::combine_deadline(guard::current_deadline(), limits.timeout_ms);
    let memory = limits.max_memory;
    let park = || py.detach(std::thread::park);
    let ran = guard::with_deadline_at(deadline, || {
        worker::run_parking(move || guard::evaluation(deadline, memory, None, job), &park)
    });
    ran.map_err(RhaiError::new_err)
}

// ---------------------------------------------------------------------------------------------
// Python classes
// ---------------------------------------------------------------------------------------------

/// A compiled script. Immutable and shareable between threads.
#[pyclass(module = "lev_nb._rhai", name = "AST", frozen)]
pub struct PyAst {
    pub ast: Arc<AST>,
    /// The entry points (a function name; "" for the whole script) whose capped attempt on the
    /// calling thread fell short once: later runs go straight to an evaluation thread.
    past_caps: Mutex<HashSet<String>>,
}

/// Where to remember, for one entry point of a compiled script, that its first attempt on the
/// calling thread is not worth making.
#[derive(Clone, Copy)]
struct EntryPoint<'a> {
    ast: &'a PyAst,
    name: &'a str,
}

impl EntryPoint<'_> {
    fn past_caps(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.ast
            .past_caps
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn worth_trying(&self) -> bool {
        !self.past_caps().contains(self.name)
    }

    fn remember_past_caps(&self) {
        self.past_caps().insert(self.name.to_string());
    }
}

#[pymethods]
impl PyAst {
    /// `(name, arity)` of every function the script defines, sorted by name then arity.
    #[getter]
    fn functions(&self) -> Vec<(String, usize)> {
        let mut found: Vec<(String, usize)> = self
            .ast
            .iter_functions()
            .map(|f| (f.name.to_string(), f.params.len()))
            .collect();
        found.sort();
        found
    }

    fn __repr__(&self) -> String {
        format!(
            "<rhai AST with {} function(s)>",
            self.ast.iter_functions().count()
        )
    }
}

/// The configured Rhai engines of a `PyEngine`.
struct Built {
    /// With the real limits: what runs on an evaluation thread.
    full: Engine,
    /// With the capped limits of a first attempt on the calling thread (`Limits::inline`);
    /// only for an engine without Python callbacks, whose scripts are pure.
    inline: Option<Engine>,
}

/// A hardened Rhai engine. Compiles and runs scripts; safe to share between threads.
#[pyclass(module = "lev_nb._rhai", name = "Engine", frozen, subclass)]
pub struct PyEngine {
    limits: Limits,
    inline_limits: Limits,
    registry: Mutex<Registry>,
    engine: RwLock<Option<Arc<Built>>>,
}

impl PyEngine {
    /// The configured engines, built on first use after a registration (so registering several
    /// functions costs one build, not one per function).
    fn current(&self) -> Arc<Built> {
        if let Some(built) = self
            .engine
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .as_ref()
        {
            return built.clone();
        }
        // Lock order everywhere: registry, then engine.
        let registry = self.lock_registry();
        let mut slot = self
            .engine
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(built) = slot.as_ref() {
            return built.clone();
        }
        let pure = registry.functions.is_empty()
            && registry.on_print.is_none()
            && registry.on_debug.is_none();
        let fresh = Arc::new(Built {
            full: build_engine(&self.limits, &registry),
            inline: pure.then(|| build_engine(&self.inline_limits, &registry)),
        });
        *slot = Some(fresh.clone());
        fresh
    }

    /// Forget the built engines; the next evaluation rebuilds them from the registry.
    fn invalidate(&self) {
        *self
            .engine
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = None;
    }

    fn lock_registry(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.registry
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Run `job(engine, limits)` and return what it settled to. A pure engine first tries on the
    /// calling thread under the capped limits, when this thread's stack has room for them (no
    /// hop: what most short scripts cost); an attempt that fails on a limit proves nothing about
    /// the real limits, so the job runs again on an evaluation thread, as every other job does.
    /// `entry` remembers, per entry point of a compiled script, that the attempt is not worth
    /// making.
    /// The inputs are copied for the attempt before it starts, so neither copy counts against
    /// the memory budget (as the inputs never did).
    fn settle_job<I, R, J>(
        &self,
        py: Python<'_>,
        entry: Option<EntryPoint<'_>>,
        inputs: I,
        job: J,
    ) -> PyResult<Result<R, ErrorReport>>
    where
        I: Clone + Send,
        J: Fn(&Engine, &Limits, I) -> Result<R, ErrorReport> + Sync,
        R: Send,
    {
        // This reference outlives the evaluation, so the engines (and the Python callables
        // they hold) are never dropped on an evaluation thread.
        let built = self.current();
        let limits = &self.limits;
        if let Some(inline) = &built.inline {
            let wanted = entry.is_none_or(|e| e.worth_trying());
            let floor = wanted
                .then(|| worker::inline_floor(self.inline_limits.reserve(), INLINE_ROOM))
                .flatten();
            if let Some(floor) = floor {
                let deadline =
                    guard::combine_deadline(guard::current_deadline(), limits.timeout_ms);
                let inline_limits = &self.inline_limits;
                let job = &job;
                let copy = inputs.clone();
                let first = py.detach(move || {
                    guard::evaluation(deadline, limits.max_memory, Some(floor), || {
                        job(inline, inline_limits, copy)
                    })
                });
                match first {
                    Err(report)
                        if report.class == ErrorClass::Limit && caps_may_explain(&report) =>
                    {
                        if let Some(entry) = entry {
                            entry.remember_past_caps();
                        }
                    }
                    done => return Ok(done),
                }
            }
        }
        let full: &Engine = &built.full;
        let job = &job;
        on_evaluation_thread(py, limits, move || job(full, limits, inputs))
    }

    /// Run a script with `inputs` (its scope or its arguments), then convert its checked
    /// outcome. What the script may grow is dropped where it ran.
    fn execute<I, F>(
        &self,
        py: Python<'_>,
        entry: Option<EntryPoint<'_>>,
        inputs: I,
        work: F,
    ) -> PyResult<Py<PyAny>>
    where
        I: Clone + Send,
        F: Fn(&Engine, &Limits, I) -> EvalResult + Sync,
    {
        let limits = &self.limits;
        let settled = self.settle_job(py, entry, inputs, |engine, run_limits, inputs| {
            let result = catch_unwind(AssertUnwindSafe(|| work(engine, run_limits, inputs)));
            match settle(result, limits) {
                Outcome::Failed(failure) => Err(failure),
                other => Ok(other),
            }
        })?;
        match settled {
            Ok(outcome) => outcome_to_py(py, outcome),
            Err(failure) => Err(report_to_py(py, failure)),
        }
    }
}

/// An evaluation's outcome as Python sees it: the value, or the exception `call` raises.
fn outcome_to_py(py: Python<'_>, outcome: Outcome) -> PyResult<Py<PyAny>> {
    match outcome {
        Outcome::Value(value) => match dynamic_to_py(py, &value) {
            Ok(converted) => Ok(converted.unbind()),
            Err(err) => Err(NotPlainDataError::new_err(exception_text(py, &err))),
        },
        Outcome::NotPlain(message) => Err(NotPlainDataError::new_err(message)),
        Outcome::Failed(failure) => Err(report_to_py(py, failure)),
    }
}

fn scope_from(variables: Option<&Bound<'_, PyDict>>) -> PyResult<Scope<'static>> {
    let mut scope = Scope::new();
    if let Some(vars) = variables {
        for (key, value) in vars.iter() {
            let name = key.cast::<PyString>()?.to_str()?.to_string();
            scope.push_dynamic(name, py_to_dynamic(&value)?);
        }
    }
    Ok(scope)
}

#[pymethods]
impl PyEngine {
    /// Limits are keyword arguments, each defaulting to `Limits::DEFAULT`; `max_operations = 0`
    /// or `timeout_ms = None` lifts that bound. A limit out of its range raises ValueError.
    #[new]
    #[pyo3(signature = (*, on_print = None, on_debug = None, **limits))]
    fn new(
        on_print: Option<Py<PyAny>>,
        on_debug: Option<Py<PyAny>>,
        limits: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let limits = Limits::from_kwargs(limits)?;
        let registry = Registry {
            on_print: on_print.map(Arc::new),
            on_debug: on_debug.map(Arc::new),
            functions: Vec::new(),
        };
        Ok(PyEngine {
            inline_limits: limits.inline(),
            limits,
            registry: Mutex::new(registry),
            engine: RwLock::new(None),
        })
    }

    /// The limits in force, as a dict of the constructor's keyword arguments.
    #[getter]
    fn limits<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.limits.to_dict(py)
    }

    /// Compile a script with this (hardened) engine, under its deadline and memory budget.
    fn compile(&self, py: Python<'_>, source: &str) -> PyResult<PyAst> {
        let limits = &self.limits;
        let compiled = self.settle_job(py, None, (), |engine, _, ()| {
            match catch_unwind(AssertUnwindSafe(|| compile_with(engine, source, limits))) {
                Ok(Ok(ast)) => Ok(ast),
                Ok(Err(err)) => Err(report(&err, limits)),
                Err(payload) => Err(report(&panicked(payload.as_ref()), limits)),
            }
        })?;
        match compiled {
            Ok(ast) => Ok(PyAst {
                ast: Arc::new(ast),
                past_caps: Mutex::new(HashSet::new()),
            }),
            Err(failure) => Err(report_to_py(py, failure)),
        }
    }

    /// Compile and run a script; keyword arguments become variables in its scope.
    #[pyo3(signature = (source, **variables))]
    fn eval(
        &self,
        py: Python<'_>,
        source: &str,
        variables: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let scope = scope_from(variables)?;
        self.execute(py, None, scope, move |engine, limits, mut scope| {
            let ast = compile_with(engine, source, limits)?;
            engine.eval_ast_with_scope::<Dynamic>(&mut scope, &ast)
        })
    }

    /// Run a compiled script; keyword arguments become variables in its scope.
    #[pyo3(signature = (ast, **variables))]
    fn run(
        &self,
        py: Python<'_>,
        ast: &Bound<'_, PyAst>,
        variables: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let scope = scope_from(variables)?;
        let compiled = ast.get();
        let script = compiled.ast.clone();
        self.execute(
            py,
            Some(EntryPoint {
                ast: compiled,
                name: "",
            }),
            scope,
            move |engine, _, mut scope| engine.eval_ast_with_scope::<Dynamic>(&mut scope, &script),
        )
    }

    /// Call a function defined by a compiled script with positional arguments. As with Rhai's
    /// `call_fn` (and the upstream), the script's top-level statements run first.
    #[pyo3(signature = (ast, fn_name, *args))]
    fn call(
        &self,
        py: Python<'_>,
        ast: &Bound<'_, PyAst>,
        fn_name: &str,
        args: &Bound<'_, PyTuple>,
    ) -> PyResult<Py<PyAny>> {
        let mut converted = Vec::with_capacity(args.len());
        for arg in args.iter() {
            converted.push(py_to_dynamic(&arg)?);
        }
        let compiled = ast.get();
        let script = compiled.ast.clone();
        self.execute(
            py,
            Some(EntryPoint {
                ast: compiled,
                name: fn_name,
            }),
            converted,
            move |engine, _, args| {
                let mut scope = Scope::new();
                engine.call_fn::<Dynamic>(&mut scope, &script, fn_name, args)
            },
        )
    }

    /// Start calling a function of a compiled script on an evaluation thread whose caller is
    /// `dispatch` (see `detached`): returns at once with the `Evaluation`, which carries `tag`.
    /// The limits, deadline and checks are those of `call`.
    #[pyo3(signature = (dispatch, tag, ast, fn_name, *args))]
    fn start(
        &self,
        dispatch: &Bound<'_, PyDispatch>,
        tag: Py<PyAny>,
        ast: &Bound<'_, PyAst>,
        fn_name: &str,
        args: &Bound<'_, PyTuple>,
    ) -> PyResult<PyEvaluation> {
        let mut converted = Vec::with_capacity(args.len());
        for arg in args.iter() {
            converted.push(py_to_dynamic(&arg)?);
        }
        let built = self.current();
        let limits = self.limits.clone();
        let deadline = guard::combine_deadline(guard::current_deadline(), limits.timeout_ms);
        let outcome: Arc<Mutex<Option<Outcome>>> = Arc::new(Mutex::new(None));
        let job = {
            let outcome = outcome.clone();
            let limits = limits.clone();
            let script = ast.get().ast.clone();
            let name = fn_name.to_string();
            let mut args = Some(converted);
            Box::new(move || {
                let Some(args) = args.take() else { return };
                let settled = guard::evaluation(deadline, limits.max_memory, None, || {
                    let ran = catch_unwind(AssertUnwindSafe(|| {
                        let mut scope = Scope::new();
                        built.full.call_fn::<Dynamic>(&mut scope, &script, &name, args)
                    }));
                    settle(ran, &limits)
                });
                *outcome.lock().unwrap_or_else(|p| p.into_inner()) = Some(settled);
            })
        };
        let finish = Box::new(move |py: Python<'_>| -> PyResult<Py<PyAny>> {
            let settled = outcome.lock().unwrap_or_else(|p| p.into_inner()).take();
            match settled {
                Some(outcome) => outcome_to_py(py, outcome),
                None => Err(RhaiError::new_err("the Rhai evaluation thread did not run the job")),
            }
        });
        let state = Arc::new(EvaluationState {
            detached: Mutex::new(None),
            finish: Mutex::new(Some(finish)),
            tag,
            deadline,
            cancelled: Arc::new(AtomicBool::new(false)),
        });
        let wake = dispatch.get().wake_for(&state);
        {
            let mut slot = state.detached.lock().unwrap_or_else(|p| p.into_inner());
            let started = worker::start(job, wake, state.cancelled.clone());
            *slot = Some(started.map_err(RhaiError::new_err)?);
        }
        Ok(PyEvaluation { state })
    }

    /// Register a Python callable as the Rhai function `name`, once per arity in `arities`.
    fn register_fn(&self, name: &str, func: Py<PyAny>, arities: Vec<usize>) -> PyResult<()> {
        if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
            return Err(PyValueError::new_err(format!(
                "cannot register {name:?}: a Rhai function name is letters, digits and '_'"
            )));
        }
        if FnPtr::new(name).is_err() {
            return Err(PyValueError::new_err(format!(
                "cannot register {name:?}: it is not a valid Rhai function name (a keyword?)"
            )));
        }
        if let Some(bad) = arities.iter().find(|&&a| a > MAX_VARIADIC_ARITY.max(16)) {
            return Err(PyValueError::new_err(format!(
                "cannot register {name:?} with {bad} parameters: at most 16 are supported"
            )));
        }
        let mut registry = self.lock_registry();
        // A new registration of the same name replaces the old one.
        registry.functions.retain(|f| f.name != name);
        registry.functions.push(PythonFunction {
            name: name.to_string(),
            func: Arc::new(func),
            arities,
        });
        self.invalidate();
        Ok(())
    }

    /// Names of the Python functions registered so far.
    #[getter]
    fn registered(&self) -> Vec<String> {
        self.lock_registry()
            .functions
            .iter()
            .map(|f| f.name.clone())
            .collect()
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        // Never block inside the collector: a busy registry is simply not reported this round.
        if let Ok(registry) = self.registry.try_lock() {
            for sink in registry.on_print.iter().chain(registry.on_debug.iter()) {
                visit.call(&**sink)?;
            }
            for function in &registry.functions {
                visit.call(&*function.func)?;
            }
        }
        Ok(())
    }

    fn __clear__(&self) {
        let mut registry = self.lock_registry();
        *registry = Registry::default();
        self.invalidate();
    }

    fn __repr__(&self) -> String {
        let timeout = match self.limits.timeout_ms {
            Some(ms) => ms.to_string(),
            None => "None".to_string(),
        };
        format!(
            "<lev_nb Rhai Engine max_operations={} timeout_ms={timeout}>",
            self.limits.max_operations
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn harden_applies_the_upstream_numbers() {
        let engine = hardened_engine(&Limits::default());
        assert_eq!(engine.max_operations(), 100_000);
        assert_eq!(engine.max_string_size(), 1_000_000);
        assert_eq!(engine.max_array_size(), 10_000);
        assert_eq!(engine.max_map_size(), 10_000);
        assert_eq!(engine.max_call_levels(), 64);
        assert_eq!(engine.max_expr_depth(), 128);
        assert_eq!(engine.max_function_expr_depth(), 128);
    }

    #[test]
    fn per_kind_budget_is_honoured() {
        let limits = Limits {
            max_operations: 500_000,
            ..Limits::default()
        };
        assert_eq!(hardened_engine(&limits).max_operations(), 500_000);
    }

    #[test]
    fn eval_is_refused_at_compile_time() {
        let engine = hardened_engine(&Limits::default());
        let err = engine.compile(r#"eval("1+1")"#).unwrap_err();
        assert!(err.to_string().contains("eval"), "{err}");
    }

    #[test]
    fn import_fails() {
        let engine = hardened_engine(&Limits::default());
        assert!(engine.run(r#"import "m" as m;"#).is_err());
    }

    #[test]
    fn sleep_is_disabled() {
        let engine = hardened_engine(&Limits::default());
        for src in ["sleep(1000)", "sleep(1e9)"] {
            let err = engine.run(src).unwrap_err();
            assert!(err.to_string().contains("sleep is disabled"), "{err}");
        }
    }

    #[test]
    fn operation_budget_stops_loops_and_is_uncatchable() {
        let engine = hardened_engine(&Limits::default());
        let err = engine.run("try { loop {} } catch (e) { }").unwrap_err();
        assert!(
            matches!(*err, EvalAltResult::ErrorTooManyOperations(..)),
            "{err}"
        );
    }

    #[test]
    fn deadline_stops_an_unbudgeted_loop() {
        let limits = Limits {
            max_operations: 0,
            timeout_ms: Some(50),
            ..Limits::default()
        };
        let engine = hardened_engine(&limits);
        let err = with_deadline(limits.timeout_ms, || engine.run("loop {}")).unwrap_err();
        assert!(matches!(*err, EvalAltResult::ErrorTerminated(..)), "{err}");
    }

    #[test]
    fn recursion_is_bounded() {
        let engine = hardened_engine(&Limits::default());
        let err = engine.run("fn f(n) { f(n + 1) } f(0)").unwrap_err();
        assert!(
            matches!(err.unwrap_inner(), EvalAltResult::ErrorStackOverflow(..)),
            "{err}"
        );
    }

    #[test]
    fn no_file_access_exists() {
        let engine = hardened_engine(&Limits::default());
        let err = engine.run(r#"open_file("/etc/passwd")"#).unwrap_err();
        assert!(
            matches!(*err, EvalAltResult::ErrorFunctionNotFound(..)),
            "{err}"
        );
    }

    // --- on an evaluation thread, under the guards -------------------------------------------

    /// Compile and run `source` the way `Engine.eval` does (on a worker, under the guards) and
    /// describe the outcome there: nothing deep comes back to the test thread's small stack.
    fn outcome(limits: &Limits, source: &str) -> Result<String, String> {
        let engine = hardened_engine(limits);
        let deadline = guard::combine_deadline(None, limits.timeout_ms);
        worker::run(|| {
            guard::evaluation(deadline, limits.max_memory, None, || {
                compile_with(&engine, source, limits)
                    .and_then(|ast| engine.eval_ast::<Dynamic>(&ast))
                    .map(|value| match check_plain(&value, limits) {
                        Ok(()) => value.to_string(),
                        Err(Unfit::NotPlain(message)) => format!("not plain: {message}"),
                        Err(Unfit::TooLarge(err)) => format!("too large: {err}"),
                    })
                    .map_err(|err| crate::errors::describe(&err))
            })
        })
        .unwrap()
    }

    #[test]
    fn deep_values_are_safe_on_an_evaluation_thread() {
        let limits = Limits::default();
        let source = "let a = []; for i in 0..1500 { a = [a]; } \
                      let b = a; [a == a, `${a}`.len(), b.len(), switch a { 1 => 1, _ => 2 }]";
        assert_eq!(outcome(&limits, source).unwrap(), "[true, 3002, 1, 2]");
        let build = "let a = []; for i in 0..300 { a = [a]; } ";
        let back = outcome(&limits, &format!("{build}a")).unwrap();
        assert!(
            back.starts_with("not plain") && back.contains("nested deeper"),
            "{back}"
        );
        let json = outcome(&limits, &format!("{build}to_json(a)")).unwrap_err();
        assert!(json.contains("nested deeper"), "{json}");
    }

    #[test]
    fn a_long_closure_chain_is_dropped_safely() {
        let limits = Limits {
            max_operations: 0,
            ..Limits::default()
        };
        let source = "let a = 0; for i in 0..20000 { let b = a; a = || b; } 1";
        assert_eq!(outcome(&limits, source).unwrap(), "1");
    }

    #[test]
    fn the_stack_guard_stops_deep_recursion() {
        let limits = Limits {
            max_operations: 0,
            timeout_ms: Some(60_000),
            max_call_levels: 8192,
            max_function_expr_depth: 4096,
            ..Limits::default()
        };
        let nest = format!("{}f(n - 1){}", "n + (".repeat(1000), ")".repeat(1000));
        let source = format!("fn f(n) {{ if n == 0 {{ 0 }} else {{ {nest} }} }} f(8000)");
        let err = outcome(&limits, &source).unwrap_err();
        assert!(err.contains("Stack overflow"), "{err}");
    }

    #[test]
    fn the_memory_budget_covers_closures_and_map_keys() {
        let limits = Limits {
            max_memory: 4 << 20,
            ..Limits::default()
        };
        let pad = r#"let s = ""; s.pad(500000, "x"); "#;
        for tail in [
            "let fs = []; for i in 0..20 { let t = s; t += i; fs.push(|| t); } 0",
            "let m = #{}; for i in 0..20 { m[s + i] = i; } 0",
        ] {
            let err = outcome(&limits, &format!("{pad}{tail}")).unwrap_err();
            assert!(err.contains(guard::MEMORY_MESSAGE), "{err}");
        }
    }

    #[test]
    fn only_the_first_attempts_caps_send_a_script_round_again() {
        let report = |message: &str| crate::errors::ErrorReport {
            class: crate::errors::ErrorClass::Limit,
            display: message.to_string(),
            message: message.to_string(),
            line: None,
            position: None,
            thrown: None,
        };
        assert!(caps_may_explain(&report("Too many operations")));
        assert!(caps_may_explain(&report(guard::STACK_MESSAGE)));
        // The same in both attempts: running again would only take as long again.
        for final_limit in [
            guard::COMPILE_TIMEOUT_MESSAGE.to_string(),
            guard::timeout_message(Some(50)),
            guard::MEMORY_MESSAGE.to_string(),
        ] {
            assert!(!caps_may_explain(&report(&final_limit)), "{final_limit}");
        }
    }

    #[test]
    fn compile_bounds_are_limit_errors() {
        let limits = Limits {
            timeout_ms: Some(100),
            ..Limits::default()
        };
        let lets: String = (0..60_000).map(|i| format!("let v{i}=0;")).collect();
        let err = outcome(&limits, &lets).unwrap_err();
        assert!(err.contains(guard::COMPILE_TIMEOUT_MESSAGE), "{err}");
        let big = "1;".repeat(600_000);
        let err = outcome(&limits, &big).unwrap_err();
        assert!(err.contains("max_script_size"), "{err}");
        // Without a deadline, the compile budget still bounds a script of many functions.
        let unbounded = Limits {
            timeout_ms: None,
            max_functions: 100_000,
            max_compile_ms: 50,
            ..Limits::default()
        };
        let many: String = (0..40_000).map(|i| format!("fn f{i}(x){{x}}\n")).collect();
        let err = outcome(&unbounded, &many).unwrap_err();
        assert!(err.contains(guard::COMPILE_TIMEOUT_MESSAGE), "{err}");
        let fns: String = (0..1001).map(|i| format!("fn f{i}() {{ 0 }}\n")).collect();
        let engine = hardened_engine(&Limits::default());
        let err: Box<EvalAltResult> = engine.compile(&fns).unwrap_err().into();
        assert_eq!(
            crate::errors::classify(&err),
            crate::errors::ErrorClass::Limit
        );
    }

    #[test]
    fn helpers_check_sizes_before_allocating() {
        let limits = Limits::default();
        let pad = r#"let s = ""; s.pad(999000, "x"); "#;
        for tail in [
            "let a = []; a.pad(10000, 1); join(a, s)",
            r#"let r = ""; r.pad(1000, "y"); s.replace("x", r); s"#,
            r#"s.replace('x', "yz"); s"#,
        ] {
            let err = outcome(&limits, &format!("{pad}{tail}")).unwrap_err();
            assert!(err.contains("Length of string too large"), "{tail}: {err}");
        }
        let err = outcome(&limits, &format!("{pad}split(s, \"\")")).unwrap_err();
        assert!(err.contains("Size of array/BLOB too large"), "{err}");
        // The checked replacements still replace as the standard ones do.
        let same = outcome(
            &limits,
            r#"let t = "abcabc"; t.replace("b", "XY"); t.replace('c', 'z'); t.replace("", "-"); t"#,
        );
        assert_eq!(same.unwrap(), "-a-X-Y-z-a-X-Y-z-");
    }

    /// A small xorshift generator: scripts from pieces that stressed the engine, random limits;
    /// every outcome must be a value or an error (a crash ends the test binary).
    #[test]
    fn random_scripts_end_in_a_value_or_an_error() {
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        let pieces = [
            "for i in 0..N { a = [a]; }",
            "for i in 0..N { a = #{x: a}; }",
            "for i in 0..N { let b = a; a = || b; }",
            "let d = down(N);",
            "s.pad(N, \"xy\");",
            "s.replace(\"x\", s);",
            "a = [a, a] == [a, a];",
            "a = `${a}`;",
            "a = to_json(a);",
            "a = parse_json(to_json([a]));",
            "a = join([a, s], s);",
            "a = split(s, \"\");",
            "m[s + N] = a;",
            "print(a);",
        ];
        let sizes = ["0", "1", "10", "300"];
        let prelude = "fn down(n) { if n <= 0 { 0 } else { 1 + down(n - 1) } } \
                       let a = []; let s = \"s\"; let m = #{};\n";
        for _ in 0..80 {
            let mut source = prelude.to_string();
            for _ in 0..next(6) {
                let piece = pieces[next(pieces.len())].replace('N', sizes[next(sizes.len())]);
                source.push_str(&piece);
                source.push('\n');
            }
            source.push_str(["a", "s", "m", "a == a"][next(4)]);
            let limits = Limits {
                max_operations: [0, 1000, 100_000][next(3)],
                max_string_size: [10, 1_000_000][next(2)],
                max_array_size: [5, 10_000][next(2)],
                max_call_levels: [0, 64, 2000][next(3)],
                max_memory: [1 << 20, 64 << 20][next(2)],
                timeout_ms: Some(2_000),
                ..Limits::default()
            };
            limits.validate().unwrap();
            let _ = outcome(&limits, &source);
        }
    }
}
