//! A path's real location, and many paths' modification times, in one call with the interpreter
//! lock released.
//!
//! Python's `os.path.realpath` follows a path one component at a time, an `lstat` each, and each
//! `lstat` hands the interpreter lock to another thread and waits to get it back. Confining a path
//! to a run's workdir does it for every file a tool touches, and every run starts with one. The C
//! library's `realpath` does the same walk in one call. It only answers for a path that exists;
//! `lev_nb.workspace.real_path` falls back to Python's own walk otherwise. Likewise the engine
//! looks at every run's inbox folder each second: one call for all of them, not a `stat` each.

use pyo3::prelude::*;

/// The absolute path `path` names with every symlink followed and `.`/`..` resolved, or None
/// when that cannot be said here (a part of it does not exist, a symlink loop, not UTF-8).
#[pyfunction]
pub fn real_path(py: Python<'_>, path: String) -> Option<String> {
    py.detach(move || std::fs::canonicalize(&path).ok().and_then(|real| real.to_str().map(str::to_owned)))
}

fn mtime_ns(path: &str) -> Option<i128> {
    let modified = std::fs::metadata(path).ok()?.modified().ok()?;
    Some(match modified.duration_since(std::time::UNIX_EPOCH) {
        Ok(after) => after.as_nanos() as i128,
        Err(before) => -(before.duration().as_nanos() as i128),
    })
}

/// Up to this many paths are looked at with the interpreter lock held: a run reads its own inbox
/// at every step, one `stat` of a microsecond or two, and letting go of the lock for it meant
/// waiting to take it back behind every other thread.
const HELD_STATS: usize = 4;

/// Each path's modification time in nanoseconds since the epoch (None: it cannot be read), as
/// `os.stat(path).st_mtime_ns` gives it; for more than a few paths, with the interpreter lock
/// released once for all of them.
#[pyfunction]
pub fn mtimes(py: Python<'_>, paths: Vec<String>) -> Vec<Option<i128>> {
    if paths.len() <= HELD_STATS {
        return paths.iter().map(|path| mtime_ns(path)).collect();
    }
    py.detach(move || paths.iter().map(|path| mtime_ns(path)).collect())
}
