//! Value conversion across the boundary.
//!
//! Two bridges live here:
//! * JSON <-> Rhai (`json_to_dynamic`, `dynamic_to_json`): pure Rust, serde-backed, following the
//!   rules of spec/rhai.md §0 (null -> (), u64 above i64::MAX -> FLOAT, char -> string, FnPtr fails).
//! * Python <-> Rhai (`py_to_dynamic`, `dynamic_to_py`): direct, without a JSON detour, so a call
//!   costs no serialisation.
//!
//! Python ints outside the i64 range become FLOAT, as a JSON number of that size would (§0).
//!
//! Every recursive walk here stops at `MAX_NESTING` levels, so none of them can exhaust a
//! thread's stack; `check_plain` decides, on the evaluation thread, whether a script's value may
//! be handed to Python at all (plain data, shallow enough, within the limits).

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use rhai::{Array, Blob, Dynamic, EvalAltResult, ImmutableString, Map, Position};

use crate::limits::Limits;

/// Deepest nesting accepted when converting containers or serialising JSON; also stops
/// self-referencing lists.
pub const MAX_NESTING: usize = 256;

// ---------------------------------------------------------------------------------------------
// Depth and size of a Rhai value
// ---------------------------------------------------------------------------------------------

/// Whether `value` nests containers (arrays, maps, shared cells) more than `max` levels deep.
/// Never recurses past `max + 1` levels.
pub fn deeper_than(value: &Dynamic, max: usize) -> bool {
    fn walk(value: &Dynamic, left: usize) -> bool {
        if value.is_shared() {
            return match value.read_lock::<Dynamic>() {
                Some(inner) if !inner.is_shared() => walk(&inner, left),
                _ => false,
            };
        }
        if let Some(array) = value.read_lock::<Array>() {
            return left == 0 || array.iter().any(|item| walk(item, left - 1));
        }
        if let Some(map) = value.read_lock::<Map>() {
            return left == 0 || map.values().any(|item| walk(item, left - 1));
        }
        false
    }
    walk(value, max)
}

/// Why a value may not go to Python.
pub enum Unfit {
    /// Not plain data, or nested deeper than `MAX_NESTING` (a `NotPlainDataError` message).
    NotPlain(String),
    /// Larger than the limits allow.
    TooLarge(Box<EvalAltResult>),
}

#[derive(Default)]
struct Totals {
    string_bytes: usize,
    array_items: usize,
    map_items: usize,
    bytes: usize,
}

fn too_large(what: &str) -> Unfit {
    Unfit::TooLarge(Box::new(EvalAltResult::ErrorDataTooLarge(
        what.to_string(),
        Position::NONE,
    )))
}

/// Check, without converting, that `value` is plain data `dynamic_to_py` accepts, nested at
/// most `MAX_NESTING` levels, and within `limits`: strings, array/BLOB items and map properties
/// counted over the whole value as Rhai counts them, and its total size (map keys included)
/// within `max_memory`.
pub fn check_plain(value: &Dynamic, limits: &Limits) -> Result<(), Unfit> {
    fn walk(value: &Dynamic, depth: usize, totals: &mut Totals) -> Result<(), Unfit> {
        if depth > MAX_NESTING {
            return Err(Unfit::NotPlain(format!(
                "cannot convert a Rhai value to Python: nested deeper than {MAX_NESTING} levels"
            )));
        }
        totals.bytes += std::mem::size_of::<Dynamic>();
        if value.is_shared() {
            return match value.read_lock::<Dynamic>() {
                Some(inner) if !inner.is_shared() => walk(&inner, depth, totals),
                _ => Err(Unfit::NotPlain(
                    "cannot convert a Rhai value to Python: a shared value is locked".to_string(),
                )),
            };
        }
        if value.is_unit() || value.is_bool() || value.is_int() || value.is_float() {
            return Ok(());
        }
        if let Some(s) = value.read_lock::<ImmutableString>() {
            totals.string_bytes += s.len();
            totals.bytes += s.len();
            return Ok(());
        }
        if let Ok(c) = value.as_char() {
            totals.string_bytes += c.len_utf8();
            return Ok(());
        }
        if let Some(array) = value.read_lock::<Array>() {
            totals.array_items += array.len();
            for item in array.iter() {
                walk(item, depth + 1, totals)?;
            }
            return Ok(());
        }
        if let Some(map) = value.read_lock::<Map>() {
            totals.map_items += map.len();
            for (key, item) in map.iter() {
                totals.bytes += key.len();
                walk(item, depth + 1, totals)?;
            }
            return Ok(());
        }
        if let Some(blob) = value.read_lock::<Blob>() {
            totals.array_items += blob.len();
            totals.bytes += blob.len();
            return Ok(());
        }
        Err(Unfit::NotPlain(format!(
            "cannot convert a Rhai value of type '{}' to Python: it is not plain data",
            value.type_name()
        )))
    }
    let mut totals = Totals::default();
    walk(value, 0, &mut totals)?;
    if totals.string_bytes > limits.max_string_size {
        return Err(too_large("Length of string"));
    }
    if totals.array_items > limits.max_array_size {
        return Err(too_large("Size of array/BLOB"));
    }
    if totals.map_items > limits.max_map_size {
        return Err(too_large("Size of object map"));
    }
    if totals.bytes > limits.max_memory {
        return Err(too_large("Size of the result"));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// JSON <-> Rhai (no Python involved)
// ---------------------------------------------------------------------------------------------

/// Convert any JSON value into a Rhai value (§0 rules).
pub fn json_to_dynamic(value: &serde_json::Value) -> Result<Dynamic, String> {
    rhai::serde::to_dynamic(value).map_err(|e| e.to_string())
}

/// Convert a Rhai value into JSON. Fails for values that are not plain data (FnPtr, timestamp...)
/// and for data nested deeper than `MAX_NESTING` levels.
pub fn dynamic_to_json(value: &Dynamic) -> Result<serde_json::Value, String> {
    if deeper_than(value, MAX_NESTING) {
        return Err(format!("data nested deeper than {MAX_NESTING} levels"));
    }
    rhai::serde::from_dynamic::<serde_json::Value>(value).map_err(|e| e.to_string())
}

/// Parse JSON text (any JSON value, not only objects) into a Rhai value.
pub fn parse_json_text(text: &str) -> Result<Dynamic, String> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    json_to_dynamic(&value)
}

/// Serialise a Rhai value as compact JSON text.
pub fn to_json_text(value: &Dynamic) -> Result<String, String> {
    to_json_text_within(value, usize::MAX).map_err(|e| match e {
        JsonError::TooLong => "too long".to_string(),
        JsonError::Other(message) => message,
    })
}

/// Why `to_json_text_within` failed.
pub enum JsonError {
    /// The text would be longer than the limit (nothing longer was allocated).
    TooLong,
    Other(String),
}

/// A buffer that refuses to grow past `max` bytes.
struct Bounded {
    buf: Vec<u8>,
    max: usize,
}

impl std::io::Write for Bounded {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if self.buf.len().saturating_add(data.len()) > self.max {
            return Err(std::io::Error::other("too long"));
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Serialise a Rhai value as compact JSON text of at most `max` bytes.
pub fn to_json_text_within(value: &Dynamic, max: usize) -> Result<String, JsonError> {
    let json = dynamic_to_json(value).map_err(JsonError::Other)?;
    let mut out = Bounded {
        buf: Vec::new(),
        max,
    };
    match serde_json::to_writer(&mut out, &json) {
        Ok(()) => String::from_utf8(out.buf).map_err(|e| JsonError::Other(e.to_string())),
        Err(e) if e.is_io() => Err(JsonError::TooLong),
        Err(e) => Err(JsonError::Other(e.to_string())),
    }
}

// ---------------------------------------------------------------------------------------------
// Python <-> Rhai
// ---------------------------------------------------------------------------------------------

fn describe(obj: &Bound<'_, PyAny>) -> String {
    let type_name = obj
        .get_type()
        .qualname()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".to_string());
    let mut shown = obj
        .repr()
        .map(|r| r.to_string())
        .unwrap_or_else(|_| "<unprintable>".to_string());
    if shown.chars().count() > 80 {
        shown = shown.chars().take(77).collect::<String>() + "...";
    }
    format!("{shown} (type {type_name})")
}

/// Convert a Python value into a Rhai value.
///
/// Accepted: None, bool, int, float, str, list, tuple, dict with str keys, bytes (as a BLOB).
/// Anything else raises TypeError naming the value and its type.
/// A Python str as Rust text. A lone surrogate (a Python str may hold one, e.g. from a model's
/// output; UTF-8 cannot) becomes U+FFFD, one per surrogate, instead of failing the call.
fn rust_text(s: &Bound<'_, PyString>) -> PyResult<String> {
    if let Ok(text) = s.to_str() {
        return Ok(text.to_string());
    }
    let encoded = s.call_method1("encode", ("utf-8", "surrogatepass"))?;
    Ok(without_surrogates(encoded.cast::<PyBytes>()?.as_bytes()))
}

/// UTF-8 bytes in which surrogates are encoded as three bytes each (Python's `surrogatepass`),
/// decoded with each such surrogate (or any other invalid byte) replaced by U+FFFD.
pub fn without_surrogates(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    let mut rest = bytes;
    loop {
        match std::str::from_utf8(rest) {
            Ok(text) => {
                out.push_str(text);
                return out;
            }
            Err(err) => {
                let (good, bad) = rest.split_at(err.valid_up_to());
                out.push_str(std::str::from_utf8(good).unwrap_or_default());
                out.push('\u{FFFD}');
                let surrogate = bad.len() >= 3 && bad[0] == 0xED && (0xA0..=0xBF).contains(&bad[1]);
                let skip = if surrogate {
                    3
                } else {
                    err.error_len().unwrap_or(bad.len())
                };
                rest = &bad[skip..];
            }
        }
    }
}

pub fn py_to_dynamic(obj: &Bound<'_, PyAny>) -> PyResult<Dynamic> {
    py_to_dynamic_at(obj, 0)
}

fn py_to_dynamic_at(obj: &Bound<'_, PyAny>, depth: usize) -> PyResult<Dynamic> {
    if depth > MAX_NESTING {
        return Err(PyTypeError::new_err(format!(
            "cannot convert to a Rhai value: data nested deeper than {MAX_NESTING} levels (or self-referencing)"
        )));
    }
    if obj.is_none() {
        return Ok(Dynamic::UNIT);
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Dynamic::from(ImmutableString::from(rust_text(s)?)));
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Dynamic::from_bool(b.is_true()));
    }
    if obj.is_instance_of::<PyInt>() {
        return match obj.extract::<i64>() {
            Ok(v) => Ok(Dynamic::from_int(v)),
            // Beyond i64: a FLOAT, as serde_json/Rhai do for an oversized JSON number.
            Err(_) => match obj.extract::<f64>() {
                Ok(f) if f.is_finite() => Ok(Dynamic::from_float(f)),
                _ => Err(PyTypeError::new_err(format!(
                    "cannot convert {} to a Rhai value: the integer is too large even for a float",
                    describe(obj)
                ))),
            },
        };
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        return Ok(Dynamic::from_float(f.value()));
    }
    if let Ok(held) = obj.cast::<PyValue>() {
        let held = held.get();
        if depth + held.nesting > MAX_NESTING {
            return Err(PyTypeError::new_err(format!(
                "cannot convert to a Rhai value: data nested deeper than {MAX_NESTING} levels (a converted value inside)"
            )));
        }
        return Ok(held.value.clone());
    }
    if let Ok(list) = obj.cast::<PyList>() {
        let mut array = Array::with_capacity(list.len());
        for item in list.iter() {
            array.push(py_to_dynamic_at(&item, depth + 1)?);
        }
        return Ok(Dynamic::from_array(array));
    }
    if let Ok(tuple) = obj.cast::<PyTuple>() {
        let mut array = Array::with_capacity(tuple.len());
        for item in tuple.iter() {
            array.push(py_to_dynamic_at(&item, depth + 1)?);
        }
        return Ok(Dynamic::from_array(array));
    }
    if let Ok(dict) = obj.cast::<PyDict>() {
        let mut map = Map::new();
        for (key, value) in dict.iter() {
            let key = key.cast::<PyString>().map_err(|_| {
                PyTypeError::new_err(format!(
                    "cannot convert a dict to a Rhai map: key {} is not a str",
                    describe(&key)
                ))
            })?;
            map.insert(
                rust_text(key)?.into(),
                py_to_dynamic_at(&value, depth + 1)?,
            );
        }
        return Ok(Dynamic::from_map(map));
    }
    if let Ok(bytes) = obj.cast::<PyBytes>() {
        return Ok(Dynamic::from_blob(bytes.as_bytes().to_vec()));
    }
    Err(PyTypeError::new_err(format!(
        "cannot convert {} to a Rhai value (supported: None, bool, int, float, str, list, tuple, dict with str keys, bytes)",
        describe(obj)
    )))
}

/// A Python value converted to Rhai once, to be handed to scripts many times: wherever one sits
/// inside data being converted (a request's list of messages), its Rhai value is cloned natively
/// instead of being converted again. Strings inside are shared, not copied, by the clone.
#[pyclass(module = "lev_nb._rhai", name = "Value", frozen)]
pub struct PyValue {
    value: Dynamic,
    /// How many levels of containers the value nests, so data holding it stays within
    /// `MAX_NESTING` levels in all.
    nesting: usize,
}

/// Levels of arrays and maps in `value` (a converted value: never deeper than `MAX_NESTING`).
fn nesting(value: &Dynamic) -> usize {
    if let Some(array) = value.read_lock::<Array>() {
        return 1 + array.iter().map(nesting).max().unwrap_or(0);
    }
    if let Some(map) = value.read_lock::<Map>() {
        return 1 + map.values().map(nesting).max().unwrap_or(0);
    }
    0
}

#[pymethods]
impl PyValue {
    /// Convert `data` (what a script argument may be) now, once.
    #[new]
    fn new(data: &Bound<'_, PyAny>) -> PyResult<Self> {
        let value = py_to_dynamic(data)?;
        let nesting = nesting(&value);
        Ok(Self { value, nesting })
    }

    /// The value as Python data again (a fresh copy).
    fn to_python<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        dynamic_to_py(py, &self.value)
    }

    fn __repr__(&self) -> String {
        format!("<rhai Value: {}>", self.value.type_name())
    }
}

/// Convert a Rhai value into a Python value.
///
/// () -> None, bool, INT -> int, FLOAT -> float, string/char -> str, array -> list, map -> dict,
/// BLOB -> bytes. Other values (function pointers, timestamps, custom types) raise TypeError.
pub fn dynamic_to_py<'py>(py: Python<'py>, value: &Dynamic) -> PyResult<Bound<'py, PyAny>> {
    dynamic_to_py_at(py, value, 0)
}

fn dynamic_to_py_at<'py>(
    py: Python<'py>,
    value: &Dynamic,
    depth: usize,
) -> PyResult<Bound<'py, PyAny>> {
    if depth > MAX_NESTING {
        return Err(PyTypeError::new_err(format!(
            "cannot convert a Rhai value to Python: nested deeper than {MAX_NESTING} levels"
        )));
    }
    if value.is_unit() {
        return Ok(py.None().into_bound(py));
    }
    if let Ok(b) = value.as_bool() {
        return Ok(PyBool::new(py, b).to_owned().into_any());
    }
    if let Ok(i) = value.as_int() {
        return Ok(i.into_pyobject(py)?.into_any());
    }
    if let Ok(f) = value.as_float() {
        return Ok(PyFloat::new(py, f).into_any());
    }
    if let Some(s) = value.read_lock::<ImmutableString>() {
        return Ok(PyString::new(py, s.as_str()).into_any());
    }
    if let Ok(c) = value.as_char() {
        let mut buf = [0u8; 4];
        return Ok(PyString::new(py, c.encode_utf8(&mut buf)).into_any());
    }
    if let Some(array) = value.read_lock::<Array>() {
        let list = PyList::empty(py);
        for item in array.iter() {
            list.append(dynamic_to_py_at(py, item, depth + 1)?)?;
        }
        return Ok(list.into_any());
    }
    if let Some(map) = value.read_lock::<Map>() {
        let dict = PyDict::new(py);
        for (key, item) in map.iter() {
            dict.set_item(key.as_str(), dynamic_to_py_at(py, item, depth + 1)?)?;
        }
        return Ok(dict.into_any());
    }
    if let Some(blob) = value.read_lock::<Blob>() {
        return Ok(PyBytes::new(py, &blob).into_any());
    }
    Err(PyTypeError::new_err(format!(
        "cannot convert a Rhai value of type '{}' to Python: it is not plain data",
        value.type_name()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lone_surrogates_become_replacement_characters() {
        // "a", U+D800 as surrogatepass encodes it, "b", then a stray continuation byte.
        assert_eq!(
            without_surrogates(b"a\xED\xA0\x80b\x80"),
            "a\u{FFFD}b\u{FFFD}"
        );
        assert_eq!(without_surrogates("plain é".as_bytes()), "plain é");
    }

    #[test]
    fn json_null_becomes_unit_and_back() {
        let d = json_to_dynamic(&json!(null)).unwrap();
        assert!(d.is_unit());
        assert_eq!(dynamic_to_json(&Dynamic::UNIT).unwrap(), json!(null));
    }

    #[test]
    fn json_numbers_follow_the_pins() {
        assert_eq!(json_to_dynamic(&json!(42)).unwrap().as_int().unwrap(), 42);
        assert_eq!(json_to_dynamic(&json!(-7)).unwrap().as_int().unwrap(), -7);
        assert_eq!(
            json_to_dynamic(&json!(1.5)).unwrap().as_float().unwrap(),
            1.5
        );
        // A u64 above i64::MAX cannot be an INT: it becomes a FLOAT.
        let big = json_to_dynamic(&json!(u64::MAX)).unwrap();
        assert!(big.as_int().is_err());
        assert_eq!(big.as_float().unwrap(), u64::MAX as f64);
    }

    #[test]
    fn json_containers_round_trip() {
        let doc =
            json!({"a": [1, 2.5, "x", true, null], "b": {"c": {}}, "s": "a\u{202f}b\u{200b}c"});
        let d = json_to_dynamic(&doc).unwrap();
        assert!(d.is_map());
        assert_eq!(dynamic_to_json(&d).unwrap(), doc);
    }

    #[test]
    fn top_level_scalars_and_arrays_parse() {
        assert!(parse_json_text("[1,2]").unwrap().is_array());
        assert_eq!(parse_json_text("3").unwrap().as_int().unwrap(), 3);
        assert!(parse_json_text("\"s\"").unwrap().is_string());
        assert!(parse_json_text("not json").is_err());
    }

    #[test]
    fn char_serialises_as_string() {
        assert_eq!(
            dynamic_to_json(&Dynamic::from_char('x')).unwrap(),
            json!("x")
        );
    }

    #[test]
    fn function_pointer_is_not_plain_data() {
        let f = rhai::FnPtr::new("f").unwrap();
        assert!(dynamic_to_json(&Dynamic::from(f)).is_err());
    }

    #[test]
    fn to_json_text_is_valid_json_without_rust_escapes() {
        let mut map = Map::new();
        map.insert("s".into(), Dynamic::from("a\u{202f}b\u{200b}c".to_string()));
        let text = to_json_text(&Dynamic::from_map(map)).unwrap();
        assert!(!text.contains("\\u{"));
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back["s"], json!("a\u{202f}b\u{200b}c"));
    }
}
