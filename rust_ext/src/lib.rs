//! lev_nb._rhai: the Rhai scripting engine embedded in Python.
//!
//! * `engine`  - the one `harden()` policy and the `Engine` / `AST` classes
//! * `convert` - Python <-> Rhai and JSON <-> Rhai values
//! * `helpers` - functions registered for every script
//! * `errors`  - `RhaiError` and its subclasses

pub mod convert;
pub mod engine;
pub mod errors;
pub mod helpers;

use pyo3::prelude::*;

#[pymodule]
fn _rhai(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("RHAI_VERSION", "1.27")?;
    m.add("MAX_VARIADIC_ARITY", engine::MAX_VARIADIC_ARITY)?;
    m.add("DEFAULT_LIMITS", engine::Limits::DEFAULT.to_dict(m.py())?)?;
    m.add_class::<engine::PyEngine>()?;
    m.add_class::<engine::PyAst>()?;
    errors::add_to_module(m)?;
    Ok(())
}
