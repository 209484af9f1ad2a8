//! lev_nb._rhai: the Rhai scripting engine embedded in Python.
use pyo3::prelude::*;

#[pymodule]
fn _rhai(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("RHAI_VERSION", "1.25")?;
    Ok(())
}
