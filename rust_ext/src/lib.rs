//! lev_nb._rhai: the Rhai scripting engine embedded in Python.
//!
//! * `engine`  - the one `harden()` policy and the `Engine` / `AST` classes
//! * `limits`  - every limit, its default and the range it may take
//! * `worker`  - the evaluation threads (known large stack; Python callbacks go back to the caller)
//! * `detached` - evaluations served by an event loop (`Engine.start`, `Dispatch`), and `Later` answers
//! * `guard`   - deadline, memory budget and stack floor checked while a script runs or compiles
//! * `convert` - Python <-> Rhai and JSON <-> Rhai values (and `Value`, one converted once), and what may go back to Python
//! * `helpers` - functions registered for every script
//! * `errors`  - `RhaiError` and its subclasses
//! * `paths`   - a path's real location, and many paths' modification times, in one call
//! * `record_files` - run-record files appended to and replaced, many with the interpreter lock released once

pub mod convert;
pub mod detached;
pub mod engine;
pub mod errors;
pub mod guard;
pub mod helpers;
pub mod limits;
pub mod paths;
pub mod record_files;
pub mod worker;

use pyo3::prelude::*;

/// Every allocation of the extension is counted per thread: the memory budget of a script.
#[global_allocator]
static ALLOCATOR: guard::CountingAlloc = guard::CountingAlloc;

#[pymodule]
fn _rhai(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("RHAI_VERSION", "1.27")?;
    m.add("MAX_VARIADIC_ARITY", engine::MAX_VARIADIC_ARITY)?;
    m.add("DEFAULT_LIMITS", limits::Limits::DEFAULT.to_dict(m.py())?)?;
    m.add("STACK_SIZE", worker::STACK_SIZE)?;
    m.add("MAX_NESTING", convert::MAX_NESTING)?;
    m.add_class::<engine::PyEngine>()?;
    m.add_class::<engine::PyAst>()?;
    m.add_class::<detached::PyDispatch>()?;
    m.add_class::<detached::PyEvaluation>()?;
    m.add_class::<detached::PyLater>()?;
    m.add_class::<convert::PyValue>()?;
    m.add_function(wrap_pyfunction!(record_files::append_batch, m)?)?;
    m.add_function(wrap_pyfunction!(record_files::replace_batch, m)?)?;
    m.add_function(wrap_pyfunction!(paths::real_path, m)?)?;
    m.add_function(wrap_pyfunction!(paths::mtimes, m)?)?;
    errors::add_to_module(m)?;
    Ok(())
}
