//! Every limit of the sandbox: the defaults, the range each may take, and why (spec/rhai.md §1).
//!
//! The ranges come from the evaluation thread's stack (`worker`): a script cannot nest calls or
//! expressions past the evaluator's part of it (the progress hook stops it), and whatever
//! recurses without passing that hook (dropping, cloning, hashing a nested value) must fit in the
//! reserve below it. How deep data can nest follows from the limits: an array or map level counts
//! towards `max_array_size` or `max_map_size` (Rhai counts nested containers), and each level of
//! a chain of closures or curried function pointers costs at least one operation and
//! `CHAIN_BYTES_PER_LEVEL` bytes of memory. `Limits::validate` refuses limits whose deepest data
//! would not fit the reserve, and any value outside its range, with a `ValueError`.

use std::fmt::Write as _;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyString};

use crate::worker::{RESERVE, STACK_SIZE};

/// Every limit of the sandbox; `Limits::DEFAULT` (also `Default`) holds the default numbers.
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    /// Operation budget (0 = unlimited, as in Rhai).
    pub max_operations: u64,
    /// Longest string, in bytes (strings inside one array or map count together).
    pub max_string_size: usize,
    /// Most elements in an array or BLOB (nested arrays count together).
    pub max_array_size: usize,
    /// Most properties in an object map (nested maps count together).
    pub max_map_size: usize,
    /// Deepest function-call nesting (recursion depth).
    pub max_call_levels: usize,
    /// Deepest expression nesting at global level.
    pub max_expr_depth: usize,
    /// Deepest expression nesting inside functions.
    pub max_function_expr_depth: usize,
    /// Wall-clock deadline per evaluation and compilation, backing the operation budget (None =
    /// no deadline).
    pub timeout_ms: Option<u64>,
    /// Most bytes an evaluation may hold at once: every allocation counts, including what Rhai's
    /// size limits do not see (closures, map keys, many variables).
    pub max_memory: usize,
    /// Longest script source, in bytes.
    pub max_script_size: usize,
    /// Most functions a script may define.
    pub max_functions: usize,
    /// Wall-clock budget of one compilation, in ms, whatever `timeout_ms` says (even None): the
    /// parser's time grows faster than the script, so compiling is always bounded.
    pub max_compile_ms: u64,
}

/// Stack one level of nested data may take in what recurses without passing the progress hook
/// (drop, clone, hash, size checks, formatting): about 240 bytes measured, doubled.
pub const BYTES_PER_DATA_LEVEL: usize = 512;
/// Fewest bytes of memory one level of a closure or curried-function chain holds (72 measured
/// for a curry, 122 for a closure).
pub const CHAIN_BYTES_PER_LEVEL: usize = 64;
/// Deepest data the reserve of the evaluation stack can take.
pub const MAX_DATA_DEPTH: u64 = (RESERVE / BYTES_PER_DATA_LEVEL) as u64;
/// Stack one script call level may take (14 KiB measured for a call through `map`), rounded up.
pub const BYTES_PER_CALL_LEVEL: usize = 16 << 10;

const MIB: u64 = 1 << 20;

/// Caps of a first attempt on the calling thread (see `worker`): operations, and items in
/// arrays and maps. They keep the deepest data the attempt can build within a few hundred KiB
/// of stack, while most short scripts (a validator, a hook) finish well inside them.
pub const INLINE_MAX_OPERATIONS: u64 = 3_000;
pub const INLINE_MAX_ITEMS: usize = 1_000;
/// Stack the evaluator may use on the calling thread, above the reserve, during that attempt.
pub const INLINE_ROOM: usize = 1 << 20;

/// One limit: its keyword, the range it may take, and what that range means.
struct Range {
    name: &'static str,
    min: u64,
    max: u64,
    why: &'static str,
}

const RANGES: [Range; 10] = [
    Range {
        name: "max_operations",
        min: 0,
        max: 1_000_000_000_000,
        why: "0 means unlimited",
    },
    Range {
        name: "max_string_size",
        min: 1,
        max: 64 * MIB,
        why: "bytes; one operation may allocate a few times this before the check",
    },
    Range {
        name: "max_array_size",
        min: 1,
        max: 500_000,
        why: "nested arrays count together, so this also bounds how deep arrays nest",
    },
    Range {
        name: "max_map_size",
        min: 1,
        max: 500_000,
        why: "nested maps count together, so this also bounds how deep maps nest",
    },
    Range {
        name: "max_call_levels",
        min: 0,
        // Half of what fits the evaluator's part of the stack.
        max: ((STACK_SIZE - RESERVE) / BYTES_PER_CALL_LEVEL / 2) as u64,
        why: "the evaluation stack holds about this many script calls; 0 forbids calls",
    },
    Range {
        name: "max_expr_depth",
        min: 1,
        max: 4096,
        why: "deeper expressions make deeper compiled scripts, which a Python thread drops",
    },
    Range {
        name: "max_function_expr_depth",
        min: 1,
        max: 4096,
        why: "deeper expressions make deeper compiled scripts, which a Python thread drops",
    },
    Range {
        name: "timeout_ms",
        min: 0,
        max: 7 * 24 * 3600 * 1000,
        why: "milliseconds; None means no deadline",
    },
    Range {
        name: "max_memory",
        min: MIB,
        max: 16 << 30,
        why: "bytes",
    },
    Range {
        name: "max_script_size",
        min: 1,
        max: 64 * MIB,
        why: "bytes of source",
    },
];

const FUNCTIONS_RANGE: Range = Range {
    name: "max_functions",
    min: 0,
    max: 100_000,
    why: "compiling many functions takes time that grows faster than their number",
};

const COMPILE_RANGE: Range = Range {
    name: "max_compile_ms",
    min: 1,
    max: 600_000,
    why: "milliseconds one compilation may take; compiling is never unbounded",
};

impl Limits {
    /// The default of every limit: the upstream numbers of spec/rhai.md §1 plus lev_nb's
    /// wall-clock deadline, memory budget and compile bounds. The one statement of these
    /// numbers: the `Engine` constructor's defaults and the module's `DEFAULT_LIMITS` are read
    /// from it.
    pub const DEFAULT: Limits = Limits {
        max_operations: 100_000,
        max_string_size: 1_000_000,
        max_array_size: 10_000,
        max_map_size: 10_000,
        max_call_levels: 64,
        max_expr_depth: 128,
        max_function_expr_depth: 128,
        timeout_ms: Some(10_000),
        max_memory: 64 << 20,
        max_script_size: 1 << 20,
        max_functions: 1_000,
        max_compile_ms: 5_000,
    };

    /// The limits as a dict keyed by the `Engine` constructor's keyword arguments.
    pub fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("max_operations", self.max_operations)?;
        d.set_item("max_string_size", self.max_string_size)?;
        d.set_item("max_array_size", self.max_array_size)?;
        d.set_item("max_map_size", self.max_map_size)?;
        d.set_item("max_call_levels", self.max_call_levels)?;
        d.set_item("max_expr_depth", self.max_expr_depth)?;
        d.set_item("max_function_expr_depth", self.max_function_expr_depth)?;
        d.set_item("timeout_ms", self.timeout_ms)?;
        d.set_item("max_memory", self.max_memory)?;
        d.set_item("max_script_size", self.max_script_size)?;
        d.set_item("max_functions", self.max_functions)?;
        d.set_item("max_compile_ms", self.max_compile_ms)?;
        Ok(d)
    }

    /// The keyword arguments `Engine` takes for limits.
    pub fn names() -> Vec<&'static str> {
        RANGES
            .iter()
            .map(|r| r.name)
            .chain([FUNCTIONS_RANGE.name, COMPILE_RANGE.name])
            .collect()
    }

    /// Read the limits given as keyword arguments (the others keep their default). A value that
    /// is not an int raises TypeError; one out of its range, or limits whose deepest data would
    /// not fit the evaluation stack, raise ValueError saying why.
    pub fn from_kwargs(kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Limits> {
        let mut limits = Limits::DEFAULT;
        let Some(kwargs) = kwargs else {
            return Ok(limits);
        };
        for (key, value) in kwargs.iter() {
            let name = key.cast::<PyString>()?.to_str()?.to_string();
            let range = RANGES
                .iter()
                .chain([&FUNCTIONS_RANGE, &COMPILE_RANGE])
                .find(|r| r.name == name)
                .ok_or_else(|| {
                    PyTypeError::new_err(format!(
                        "Engine() got an unexpected keyword argument {name:?} (the limits are {})",
                        Limits::names().join(", ")
                    ))
                })?;
            if name == "timeout_ms" && value.is_none() {
                limits.timeout_ms = None;
                continue;
            }
            let number = int_in_range(range, &value)?;
            let size = usize::try_from(number).unwrap_or(usize::MAX);
            match range.name {
                "max_operations" => limits.max_operations = number,
                "max_string_size" => limits.max_string_size = size,
                "max_array_size" => limits.max_array_size = size,
                "max_map_size" => limits.max_map_size = size,
                "max_call_levels" => limits.max_call_levels = size,
                "max_expr_depth" => limits.max_expr_depth = size,
                "max_function_expr_depth" => limits.max_function_expr_depth = size,
                "timeout_ms" => limits.timeout_ms = Some(number),
                "max_memory" => limits.max_memory = size,
                "max_script_size" => limits.max_script_size = size,
                "max_functions" => limits.max_functions = size,
                "max_compile_ms" => limits.max_compile_ms = number,
                _ => unreachable!("every range has a field"),
            }
        }
        limits.validate().map_err(PyValueError::new_err)?;
        Ok(limits)
    }

    /// The capped limits of a first attempt on the calling thread (see `worker`).
    pub fn inline(&self) -> Limits {
        Limits {
            max_operations: match self.max_operations {
                0 => INLINE_MAX_OPERATIONS,
                n => n.min(INLINE_MAX_OPERATIONS),
            },
            max_array_size: self.max_array_size.min(INLINE_MAX_ITEMS),
            max_map_size: self.max_map_size.min(INLINE_MAX_ITEMS),
            ..self.clone()
        }
    }

    /// Stack kept free below the evaluator for what recurses without passing the progress hook
    /// (see the module documentation), with 256 KiB to spare.
    pub fn reserve(&self) -> usize {
        (self.data_depth_bound() as usize).saturating_mul(BYTES_PER_DATA_LEVEL) + (256 << 10)
    }

    /// How deep data can nest under these limits (see the module documentation).
    pub fn data_depth_bound(&self) -> u64 {
        let by_memory = (self.max_memory / CHAIN_BYTES_PER_LEVEL) as u64;
        let chains = if self.max_operations > 0 {
            by_memory.min(self.max_operations)
        } else {
            by_memory
        };
        self.max_array_size as u64 + self.max_map_size as u64 + 1 + chains
    }

    /// Check the ranges and that the deepest data these limits allow fits the stack reserve.
    pub fn validate(&self) -> Result<(), String> {
        let values = [
            ("max_operations", self.max_operations),
            ("max_string_size", self.max_string_size as u64),
            ("max_array_size", self.max_array_size as u64),
            ("max_map_size", self.max_map_size as u64),
            ("max_call_levels", self.max_call_levels as u64),
            ("max_expr_depth", self.max_expr_depth as u64),
            (
                "max_function_expr_depth",
                self.max_function_expr_depth as u64,
            ),
            ("timeout_ms", self.timeout_ms.unwrap_or(0)),
            ("max_memory", self.max_memory as u64),
            ("max_script_size", self.max_script_size as u64),
            ("max_functions", self.max_functions as u64),
            ("max_compile_ms", self.max_compile_ms),
        ];
        for (name, value) in values {
            let range = RANGES
                .iter()
                .chain([&FUNCTIONS_RANGE, &COMPILE_RANGE])
                .find(|r| r.name == name)
                .expect("every field has a range");
            if value < range.min || value > range.max {
                return Err(out_of_range(range, &value.to_string()));
            }
        }
        let depth = self.data_depth_bound();
        if depth > MAX_DATA_DEPTH {
            let mut message = String::new();
            let _ = write!(
                message,
                "these limits let data nest {depth} levels deep (max_array_size + max_map_size + \
                 min(max_operations, max_memory / {CHAIN_BYTES_PER_LEVEL})), more than the \
                 {MAX_DATA_DEPTH} levels the evaluation stack can safely unwind; lower \
                 max_memory, max_operations (0 is unlimited), max_array_size or max_map_size"
            );
            return Err(message);
        }
        Ok(())
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

fn out_of_range(range: &Range, shown: &str) -> String {
    format!(
        "{} must be an int from {} to {} ({}), got {shown}",
        range.name, range.min, range.max, range.why
    )
}

fn int_in_range(range: &Range, value: &Bound<'_, PyAny>) -> PyResult<u64> {
    if value.is_instance_of::<PyBool>() || !value.is_instance_of::<PyInt>() {
        let type_name = value
            .get_type()
            .qualname()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "?".to_string());
        let extra = if range.name == "timeout_ms" {
            " or None"
        } else {
            ""
        };
        return Err(PyTypeError::new_err(format!(
            "{} must be an int{extra}, got {type_name}",
            range.name
        )));
    }
    let shown = value.str().map(|s| s.to_string()).unwrap_or_default();
    match value.extract::<i128>() {
        Ok(n) if n >= i128::from(range.min) && n <= i128::from(range.max) => Ok(n as u64),
        _ => Err(PyValueError::new_err(out_of_range(range, &shown))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        Limits::DEFAULT.validate().unwrap();
        let unbudgeted = Limits {
            max_operations: 0,
            timeout_ms: None,
            ..Limits::DEFAULT
        };
        unbudgeted.validate().unwrap();
    }

    #[test]
    fn call_levels_beyond_the_stack_are_refused() {
        let deep = Limits {
            max_call_levels: 100_000,
            ..Limits::DEFAULT
        };
        let err = deep.validate().unwrap_err();
        assert!(err.contains("max_call_levels"), "{err}");
    }

    #[test]
    fn data_that_could_nest_past_the_reserve_is_refused() {
        let deep = Limits {
            max_operations: 0,
            max_memory: 4 << 30,
            ..Limits::DEFAULT
        };
        let err = deep.validate().unwrap_err();
        assert!(err.contains("nest"), "{err}");
        // With an operation budget the same memory is fine: chains cost an operation a level.
        let budgeted = Limits {
            max_operations: 1_000_000,
            ..deep
        };
        budgeted.validate().unwrap();
    }

    #[test]
    fn the_inline_caps_fit_a_python_thread() {
        // A 4 MiB stack left on the calling thread is enough for the capped attempt.
        let inline = Limits::DEFAULT.inline();
        assert!(
            inline.reserve() + INLINE_ROOM <= 4 << 20,
            "{}",
            inline.reserve()
        );
        let unbudgeted = Limits {
            max_operations: 0,
            ..Limits::DEFAULT
        };
        assert_eq!(unbudgeted.inline().max_operations, INLINE_MAX_OPERATIONS);
    }

    #[test]
    fn zero_sizes_are_refused() {
        for limits in [
            Limits {
                max_string_size: 0,
                ..Limits::DEFAULT
            },
            Limits {
                max_expr_depth: 0,
                ..Limits::DEFAULT
            },
        ] {
            assert!(limits.validate().is_err());
        }
    }
}
