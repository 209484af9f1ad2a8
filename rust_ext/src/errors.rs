//! Rhai errors as Python exceptions.
//!
//! `RhaiError` is the base; `RhaiSyntaxError` (the script does not compile), `RhaiRuntimeError`
//! (a throw, a missing function, a type mismatch...) and `RhaiLimitError` (operations, deadline,
//! data size, stack depth: the errors a script cannot catch) derive from it. Every instance carries
//! `.message` (the script's own text, e.g. the thrown value), `.line` and `.position` (None when
//! unknown), and `.value` (the thrown value as Python data, for `throw`; else None).
//! `str(exc)` is Rhai's full description, positions included.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use rhai::{Dynamic, EvalAltResult, ParseErrorType, Position};

use crate::convert::{check_plain, dynamic_to_py};
use crate::engine::PENDING_INTERRUPT;
use crate::limits::Limits;

create_exception!(
    _rhai,
    RhaiError,
    PyException,
    "Any error raised by a Rhai script."
);
create_exception!(
    _rhai,
    RhaiSyntaxError,
    RhaiError,
    "The script does not compile."
);
create_exception!(
    _rhai,
    RhaiRuntimeError,
    RhaiError,
    "The script failed while running."
);
create_exception!(
    _rhai,
    RhaiLimitError,
    RhaiError,
    "The script hit a sandbox limit (operations, time, data size, stack depth)."
);

create_exception!(
    _rhai,
    NotPlainDataError,
    pyo3::exceptions::PyTypeError,
    "A script produced a value that is not plain data (function pointer, timestamp...)."
);

/// Termination token used when a Python callback raised a non-Exception BaseException. (Every
/// termination token is the message of the stop; only lev_nb's own hooks can terminate.)
pub const TERMINATE_INTERRUPTED: &str = "Script interrupted";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorClass {
    Syntax,
    Runtime,
    Limit,
}

/// Which exception class an evaluation error belongs to (decided by the innermost error).
pub fn classify(err: &EvalAltResult) -> ErrorClass {
    match err.unwrap_inner() {
        EvalAltResult::ErrorParsing(ParseErrorType::TooManyFunctions, _) => ErrorClass::Limit,
        EvalAltResult::ErrorParsing(..) => ErrorClass::Syntax,
        EvalAltResult::ErrorTooManyOperations(..)
        | EvalAltResult::ErrorTooManyVariables(..)
        | EvalAltResult::ErrorTooManyModules(..)
        | EvalAltResult::ErrorStackOverflow(..)
        | EvalAltResult::ErrorDataTooLarge(..)
        | EvalAltResult::ErrorTerminated(..) => ErrorClass::Limit,
        _ => ErrorClass::Runtime,
    }
}

fn position_suffix(pos: Position) -> String {
    match (pos.line(), pos.position()) {
        (Some(line), Some(col)) => format!(" (line {line}, position {col})"),
        (Some(line), None) => format!(" (line {line})"),
        _ => String::new(),
    }
}

/// The script's own message: the thrown value, or the error text without its position.
pub fn own_message(err: &EvalAltResult) -> String {
    let inner = err.unwrap_inner();
    match inner {
        EvalAltResult::ErrorRuntime(value, _) if value.is_unit() => "Runtime error".to_string(),
        EvalAltResult::ErrorRuntime(value, _) => value.to_string(),
        EvalAltResult::ErrorParsing(kind, _) => kind.to_string(),
        EvalAltResult::ErrorTerminated(token, _) => token.to_string(),
        other => {
            // Rhai's Display appends " (<position>)" when the position is known.
            let text = other.to_string();
            let pos = other.position();
            if pos.is_none() {
                text
            } else {
                let suffix = format!(" ({pos})");
                text.strip_suffix(&suffix)
                    .map(str::to_string)
                    .unwrap_or(text)
            }
        }
    }
}

/// Where the error happened: the innermost known position, else the outer one.
pub fn best_position(err: &EvalAltResult) -> Position {
    let inner = err.unwrap_inner().position();
    if inner.is_none() {
        err.position()
    } else {
        inner
    }
}

/// Full description for `str(exc)`: Rhai's Display, with a clearer text for the deadline.
pub fn describe(err: &EvalAltResult) -> String {
    match err.unwrap_inner() {
        EvalAltResult::ErrorTerminated(..) => {
            format!(
                "{}{}",
                own_message(err),
                position_suffix(best_position(err))
            )
        }
        _ => err.to_string(),
    }
}

/// Everything Python needs to know about an error, worked out on the evaluation thread (where
/// formatting a nested thrown value is safe): the class, `str(exc)`, `.message`, the position,
/// and the thrown value when it is plain data within the limits.
pub struct ErrorReport {
    pub class: ErrorClass,
    pub display: String,
    pub message: String,
    pub line: Option<usize>,
    pub position: Option<usize>,
    pub thrown: Option<Dynamic>,
}

/// Describe `err` for Python.
pub fn report(err: &EvalAltResult, limits: &Limits) -> ErrorReport {
    let pos = best_position(err);
    let thrown = match err.unwrap_inner() {
        EvalAltResult::ErrorRuntime(value, _) if check_plain(value, limits).is_ok() => {
            Some(value.clone())
        }
        _ => None,
    };
    ErrorReport {
        class: classify(err),
        display: describe(err),
        message: own_message(err),
        line: pos.line(),
        position: pos.position(),
        thrown,
    }
}

fn build(py: Python<'_>, report: ErrorReport) -> PyResult<PyErr> {
    let exc = match report.class {
        ErrorClass::Syntax => RhaiSyntaxError::new_err(report.display),
        ErrorClass::Runtime => RhaiRuntimeError::new_err(report.display),
        ErrorClass::Limit => RhaiLimitError::new_err(report.display),
    };
    let value = exc.value(py);
    value.setattr("message", report.message)?;
    value.setattr("line", report.line)?;
    value.setattr("position", report.position)?;
    let thrown = report
        .thrown
        .and_then(|v| dynamic_to_py(py, &v).ok().map(Bound::unbind));
    value.setattr("value", thrown)?;
    Ok(exc)
}

/// The matching Python exception. A KeyboardInterrupt (or other BaseException) raised by a
/// callback during the evaluation is re-raised as itself.
pub fn report_to_py(py: Python<'_>, report: ErrorReport) -> PyErr {
    if let Some(pending) = PENDING_INTERRUPT.with(|p| p.borrow_mut().take()) {
        return pending;
    }
    build(py, report).unwrap_or_else(|e| e)
}

/// Give the exception classes their documented attributes (None until an instance sets them).
pub fn add_to_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let base = py.get_type::<RhaiError>();
    for attr in ["message", "line", "position", "value"] {
        base.setattr(attr, py.None())?;
    }
    m.add("RhaiError", base)?;
    m.add("RhaiSyntaxError", py.get_type::<RhaiSyntaxError>())?;
    m.add("RhaiRuntimeError", py.get_type::<RhaiRuntimeError>())?;
    m.add("RhaiLimitError", py.get_type::<RhaiLimitError>())?;
    m.add("NotPlainDataError", py.get_type::<NotPlainDataError>())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::hardened_engine;

    fn error_of(src: &str) -> Box<EvalAltResult> {
        let engine = hardened_engine(&Limits::default());
        match engine.compile(src) {
            Err(e) => e.into(),
            Ok(ast) => engine.eval_ast::<rhai::Dynamic>(&ast).unwrap_err(),
        }
    }

    #[test]
    fn throw_keeps_the_script_message_and_line() {
        let err = error_of("let x = 1;\nthrow \"boom\"");
        assert_eq!(classify(&err), ErrorClass::Runtime);
        assert_eq!(own_message(&err), "boom");
        assert_eq!(best_position(&err).line(), Some(2));
    }

    #[test]
    fn limits_are_classified_as_limits() {
        for src in [
            "loop {}",
            "let s = \"\"; s.pad(1000001, 'x'); s",
            "let a = []; a.pad(10001, 0); a.len()",
            "fn f(n) { f(n+1) } f(0)",
        ] {
            assert_eq!(classify(&error_of(src)), ErrorClass::Limit, "{src}");
        }
    }

    #[test]
    fn syntax_errors_are_syntax() {
        let err = error_of("let = ;");
        assert_eq!(classify(&err), ErrorClass::Syntax);
        assert_eq!(best_position(&err).line(), Some(1));
    }
}
